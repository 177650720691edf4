import Foundation
import Testing

@testable import TernKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``Tern/register(activityToken:for:)`` and ``Tern/register(pushToken:kind:)`` against a fake server that keeps the
/// devices' tokens: the calls return at once, and `run()` sets each token once the device is registered, again after a
/// registration the server was told of, retries what failed for a while, gives up on what the server refused, and
/// forgets the activities the app ended (or that ended on their own, as the server forgets them). The integration
/// suite does the same against a real server.
struct DeviceTokenTests {
    private let configuration: TernConfiguration = {
        var configuration = TernConfiguration(serverURL: URL(string: "http://127.0.0.1:8080")!, appID: "demo", appKey: "tak_x")
        configuration.registrationBackoff = RetryBackoff(initial: 0.01, maximum: 0.02)
        return configuration
    }()

    /// A Tern on `server`, running until the test ends, on a clock the test moves, keeping the errors it reports.
    private final class Device: Sendable {
        let tern: Tern
        private let clock: Locked<Date>
        private let reported = Locked<[TernError]>([])
        private let runner: Task<Void, Never>
        private let listener: Task<Void, Never>

        init(_ server: FakeTokenServer, configuration: TernConfiguration, identities: MemoryIdentityStore = MemoryIdentityStore()) {
            let clock = Locked(Date(timeIntervalSince1970: 1_800_000_000))
            self.clock = clock
            tern = Tern(
                configuration: configuration, identityStore: identities, stateStore: MemoryStateStore(), httpTransport: server,
                now: { clock.withLock { $0 } })
            runner = Task { [tern] in await tern.run() }
            listener = Task { [tern, reported] in
                for await event in tern.events {
                    if case .error(let error) = event { reported.withLock { $0.append(error) } }
                }
            }
        }

        /// The errors reported so far, in order.
        var errors: [TernError] { reported.withLock { $0 } }

        func advance(_ seconds: TimeInterval) {
            clock.withLock { $0 += seconds }
        }

        deinit {
            listener.cancel()
            runner.cancel()
        }
    }

    @Test func anActivitysTokenGivenBeforeRegisteringIsSetAfterItAfterTheKindsTokens() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let activity = randomToken()
        let voip = randomToken()
        device.tern.register(activityToken: activity, for: "match-7")
        device.tern.register(pushToken: voip, kind: .voip)
        let id = try await device.tern.registerNow(facts()).deviceID
        try await waitUntil("the activity's token is set") { server.activities(of: id) == ["match-7": activity] }
        #expect(server.pushTokens(of: id) == ["voip": voip])
        // Nothing before the registration (there was no device to send them for), then the kinds, then the activities.
        #expect(server.puts().map(\.path) == ["devices/\(id)", "devices/\(id)/push-tokens/voip", "devices/\(id)/activities/match-7"])
    }

    @Test func aNewTokenForTheSameActivityReplacesIt() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let id = try await device.tern.registerNow(facts()).deviceID
        let first = randomToken()
        device.tern.register(activityToken: first, for: "match-7")
        try await waitUntil("the first token is set") { server.activities(of: id) == ["match-7": first] }
        // ActivityKit's pushTokenUpdates gives another.
        let second = randomToken()
        device.tern.register(activityToken: second, for: "match-7")
        try await waitUntil("the second token replaces it") { server.activities(of: id) == ["match-7": second] }
        #expect(server.puts(of: "match-7").map(\.token) == [first, second])
    }

    @Test func aRegistrationTheServerWasToldOfSetsTheActivitiesAgainAndAnUpToDateOneDoesNot() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let facts = facts()
        let id = try await device.tern.registerNow(facts).deviceID
        let token = randomToken()
        device.tern.register(activityToken: token, for: "match-7")
        try await waitUntil("the token is set") { server.puts(of: "match-7").count == 1 }
        // Nothing changed: the server was not told, and nothing is set again. Once a later activity is set, this one
        // would have been set before it (the oldest go first).
        #expect(try await device.tern.registerNow(facts).outcome == .upToDate)
        device.advance(1)
        device.tern.register(activityToken: randomToken(), for: "match-8")
        try await waitUntil("the later activity is set") { server.puts(of: "match-8").count == 1 }
        #expect(server.puts(of: "match-7").count == 1)
        // The server was told (it may have deleted the device and made it again, without its activities).
        server.forgetTokens(of: id)
        #expect(try await device.tern.registerNow(facts, force: true).outcome == .sent)
        try await waitUntil("the activities are set again") { server.activities(of: id).count == 2 }
        #expect(server.activities(of: id)["match-7"] == token)
    }

    @Test func aDeviceMadeAgainUnderANewIdGetsItsActivitiesThere() async throws {
        let server = FakeTokenServer()
        let identities = MemoryIdentityStore()
        let device = Device(server, configuration: configuration, identities: identities)
        let old = try await device.tern.registerNow(facts()).deviceID
        let token = randomToken()
        device.tern.register(activityToken: token, for: "match-7")
        try await waitUntil("the token is set") { server.activities(of: old) == ["match-7": token] }
        // The keychain lost the secret: the server refuses it, and the device registers under a new id.
        server.refuseSecret(of: old)
        let registration = try await device.tern.registerNow(facts(), force: true)
        #expect(registration.outcome == .newDevice(previousDeviceID: old))
        try await waitUntil("the token is set for the new device") { server.activities(of: registration.deviceID) == ["match-7": token] }
    }

    @Test func aTemporaryFailureIsRetriedAndARefusalIsNot() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let id = try await device.tern.registerNow(facts()).deviceID
        server.failNextActivityPut(.status(503, #"{"error":"unavailable","message":"try again"}"#))
        let token = randomToken()
        device.tern.register(activityToken: token, for: "match-7")
        try await waitUntil("the token is set on the retry") { server.activities(of: id) == ["match-7": token] }
        #expect(server.puts(of: "match-7").count == 2)
        #expect(device.errors.map(\.status) == [503])
        // A token the server refuses as it is (this fake refuses an empty one): reported, and not sent again. The next
        // activity would wait behind it.
        device.advance(1)
        device.tern.register(activityToken: Data(), for: "match-8")
        try await waitUntil("the refusal is reported") { device.errors.count >= 2 }
        #expect(device.errors[1].field == "token" && device.errors[1].status == 400)
        device.advance(1)
        device.tern.register(activityToken: randomToken(), for: "match-9")
        try await waitUntil("the next activity is set") { server.puts(of: "match-9").count == 1 }
        #expect(server.puts(of: "match-8").count == 1)
        #expect(device.errors.count == 2)
    }

    @Test func anEndedActivityIsRemovedAndNotSetAgainByTheNextRegistration() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let id = try await device.tern.registerNow(facts()).deviceID
        device.tern.register(activityToken: randomToken(), for: "match-7")
        try await waitUntil("the token is set") { server.activities(of: id).keys.contains("match-7") }
        #expect(try await device.tern.endActivity("match-7"))
        #expect(server.activities(of: id).isEmpty)
        #expect(try await !device.tern.endActivity("match-7"), "the server has none any more")
        _ = try await device.tern.registerNow(facts(), force: true)
        device.advance(1)
        let later = randomToken()
        device.tern.register(activityToken: later, for: "match-8")
        try await waitUntil("the later activity is set") { server.puts(of: "match-8").count == 1 }
        #expect(server.activities(of: id) == ["match-8": later])
        #expect(server.puts(of: "match-7").count == 1)
    }

    /// The app ends the activity while its token is being set: the removal reaches the server first (and finds
    /// nothing), then the token arrives. It must not stay there.
    @Test func anActivityEndedWhileItsTokenIsBeingSetIsRemovedAfterIt() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let id = try await device.tern.registerNow(facts()).deviceID
        server.holdNextActivityPut()
        device.tern.register(activityToken: randomToken(), for: "match-7")
        try await waitUntil("the token is being set") { server.isHolding }
        #expect(try await !device.tern.endActivity("match-7"))
        #expect(server.deletes(of: "match-7") == 1)
        server.release()
        try await waitUntil("the late token is removed") { server.deletes(of: "match-7") == 2 && server.activities(of: id).isEmpty }
    }

    @Test func atMost16ActivitiesAreKeptAndTheOldestGoes() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        for number in 0...16 {
            device.tern.register(activityToken: randomToken(), for: "match-\(number)")
            device.advance(1)
        }
        let id = try await device.tern.registerNow(facts()).deviceID
        try await waitUntil("16 activities are set") { server.activities(of: id).count == 16 }
        // The oldest go first: match-0 would have been the first.
        #expect(server.puts().dropFirst().map(\.path) == (1...16).map { "devices/\(id)/activities/match-\($0)" })
    }

    @Test func anActivityIsForgotten12HoursAfterTheServerSaysItStarted() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let id = try await device.tern.registerNow(facts()).deviceID
        // An activity that ran before the app launched again: the server counts from its start, 11 hours ago.
        server.startedAgo = 11 * 3600
        device.tern.register(activityToken: randomToken(), for: "match-7")
        try await waitUntil("the token is set") { server.activities(of: id)["match-7"] != nil }
        server.startedAgo = 0
        device.tern.register(activityToken: randomToken(), for: "match-8")
        try await waitUntil("the token is set") { server.activities(of: id)["match-8"] != nil }
        // An hour later the server forgot the first; a registration it is told of sets the second again, not the first.
        device.advance(3600)
        server.forgetTokens(of: id)
        _ = try await device.tern.registerNow(facts(), force: true)
        try await waitUntil("the running activity is set again") { server.puts(of: "match-8").count == 2 }
        let fresh = randomToken()
        device.tern.register(activityToken: fresh, for: "match-9")
        try await waitUntil("a new activity is set") { server.puts(of: "match-9").count == 1 }
        #expect(server.puts(of: "match-7").count == 1)
        #expect(server.activities(of: id).keys.sorted() == ["match-8", "match-9"])
    }

    @Test func anActivityIdTheServerWouldRefuseIsReportedAndNotSent() async throws {
        let server = FakeTokenServer()
        let device = Device(server, configuration: configuration)
        let id = try await device.tern.registerNow(facts()).deviceID
        device.tern.register(activityToken: randomToken(), for: "match 7")
        try await waitUntil("the bad id is reported") { !device.errors.isEmpty }
        #expect(device.errors.map(\.kind) == [.invalidArgument] && device.errors[0].message.contains("match 7"))
        let ended = await #expect(throws: TernError.self) { try await device.tern.endActivity("a/b") }
        #expect(ended?.kind == .invalidArgument)
        device.tern.register(activityToken: randomToken(), for: "match-8")
        try await waitUntil("a valid activity is set") { server.activities(of: id).keys.contains("match-8") }
        #expect(server.puts().map(\.path) == ["devices/\(id)", "devices/\(id)/activities/match-8"])
    }
}

/// A server that keeps devices, their tokens of other kinds and their activities' tokens, as Tern does, and keeps
/// every PUT. Its next activity PUT can fail as scripted, or be held until released.
final class FakeTokenServer: HTTPTransport, @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    struct Put: Equatable {
        /// After `/v1/apps/demo/`.
        var path: String
        var token: Data?
    }

    private let lock = NSLock()
    private var devices: [String: (secret: String, kinds: [String: Data], activities: [String: (token: Data, started: Date)])] = [:]
    private var refused: Set<String> = []
    private var _puts: [Put] = []
    private var _deletes: [String] = []
    private var failures: [ScriptedHTTP.Answer] = []
    private var holdNext = false
    private var held: CheckedContinuation<Void, Never>?
    private var _startedAgo: TimeInterval = 0

    /// How long before its first PUT the server says a new activity started.
    var startedAgo: TimeInterval {
        get { lock.withLock { _startedAgo } }
        set { lock.withLock { _startedAgo = newValue } }
    }
    var isHolding: Bool { lock.withLock { held != nil } }

    func puts() -> [Put] { lock.withLock { _puts } }
    func puts(of activity: String) -> [Put] { puts().filter { $0.path.hasSuffix("/activities/\(activity)") } }
    func deletes(of activity: String) -> Int { lock.withLock { _deletes.filter { $0.hasSuffix("/activities/\(activity)") }.count } }
    func activities(of deviceID: String) -> [String: Data] { lock.withLock { devices[deviceID]?.activities.mapValues(\.token) ?? [:] } }
    func pushTokens(of deviceID: String) -> [String: Data] { lock.withLock { devices[deviceID]?.kinds ?? [:] } }
    func forgetTokens(of deviceID: String) { lock.withLock { devices[deviceID]?.kinds = [:]; devices[deviceID]?.activities = [:] } }
    func refuseSecret(of deviceID: String) { lock.withLock { _ = refused.insert(deviceID) } }
    func failNextActivityPut(_ answer: ScriptedHTTP.Answer) { lock.withLock { failures.append(answer) } }
    func holdNextActivityPut() { lock.withLock { holdNext = true } }

    func release() {
        let held = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { self.held = nil }
            return self.held
        }
        held?.resume()
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let path = request.url!.path.replacingOccurrences(of: "/v1/apps/demo/", with: "")
        let parts = path.split(separator: "/").map(String.init)
        let method = request.httpMethod ?? "GET"
        let token = request.httpBody.flatMap { try? JSONDecoder().decode([String: String].self, from: $0) }?["token"]
            .flatMap { hex in Data(hex: hex) }
        let isActivityPut = method == "PUT" && parts.count == 4 && parts[2] == "activities"
        let (failure, hold) = lock.withLock { () -> (ScriptedHTTP.Answer?, Bool) in
            if method == "PUT" { _puts.append(Put(path: path, token: parts.count == 2 ? nil : token)) }
            if method == "DELETE" { _deletes.append(path) }
            guard isActivityPut else { return (nil, false) }
            defer { holdNext = false }
            return (failures.isEmpty ? nil : failures.removeFirst(), holdNext)
        }
        if hold { await withCheckedContinuation { continuation in lock.withLock { held = continuation } } }
        switch failure {
        case .status(let status, let body, _)?: return answer(request, status, body)
        case .unreachable?: throw URLError(.cannotConnectToHost)
        case nil: break
        }
        if parts == ["inbox"] { return answer(request, 200, #"{"messages":[],"unread":0}"#) }
        guard parts.count >= 2, parts[0] == "devices" else { return answer(request, 404, #"{"error":"notFound","message":"no route"}"#) }
        let id = parts[1]
        let secret = request.value(forHTTPHeaderField: "X-Tern-Device-Secret")
        return lock.withLock { () -> (Data, HTTPURLResponse) in
            if parts.count == 2, method == "PUT" {
                if refused.contains(id) {
                    return answer(request, 403, #"{"error":"forbidden","field":"X-Tern-Device-Secret","message":"not this device's secret"}"#)
                }
                guard devices[id] == nil else { return answer(request, 200, #"{"active":true,"deviceId":"\#(id)","tags":[]}"#) }
                let made = "tds_\(UUID().uuidString)"
                devices[id] = (made, [:], [:])
                return answer(request, 200, #"{"active":true,"deviceId":"\#(id)","tags":[],"deviceSecret":"\#(made)"}"#)
            }
            guard let device = devices[id] else { return answer(request, 404, #"{"error":"notFound","message":"no device \#(id)"}"#) }
            guard secret == device.secret else { return answer(request, 403, #"{"error":"forbidden","field":"X-Tern-Device-Secret","message":"no"}"#) }
            switch (method, parts.count == 4 ? parts[2] : "") {
            case ("PUT", "push-tokens"):
                devices[id]?.kinds[parts[3]] = token
                return answer(request, 200, #"{"kind":"\#(parts[3])","token":"\#(RegistrationFacts.hex(token ?? Data()))","active":true}"#)
            case ("PUT", "activities"):
                guard let token, !token.isEmpty else { return answer(request, 400, #"{"error":"badRequest","field":"token","message":"not hex"}"#) }
                let now = Date()
                let started = devices[id]?.activities[parts[3]]?.started ?? now.addingTimeInterval(-_startedAgo)
                devices[id]?.activities[parts[3]] = (token, started)
                let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
                return answer(
                    request, 200,
                    #"{"activityId":"\#(parts[3])","token":"\#(RegistrationFacts.hex(token))","startedAt":"\#(format.format(started))","registeredAt":"\#(format.format(now))","expiresAt":"\#(format.format(started.addingTimeInterval(12 * 3600)))"}"#
                )
            case ("DELETE", "activities"):
                guard devices[id]?.activities.removeValue(forKey: parts[3]) != nil else {
                    return answer(request, 404, #"{"error":"notFound","message":"no token for activity \#(parts[3])"}"#)
                }
                return answer(request, 204, "")
            default:
                return answer(request, 404, #"{"error":"notFound","message":"no route"}"#)
            }
        }
    }

    private func answer(_ request: URLRequest, _ status: Int, _ body: String) -> (Data, HTTPURLResponse) {
        (Data(body.utf8), HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: nil)!)
    }
}

extension Data {
    /// Bytes from lowercase or uppercase hex; nil for anything else.
    fileprivate init?(hex: String) {
        guard hex.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}

import Foundation
import Testing

@testable import TernKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Registration against scripted answers: when it talks to the server, how it keeps the secret, and how it comes
/// back under a new device id (once) when the server no longer takes this installation's secret.
struct RegistrarTests {
    private let noon = Date(timeIntervalSince1970: 1_800_000_000)
    private let configuration = TernConfiguration(serverURL: URL(string: "http://127.0.0.1:8080")!, appID: "demo", appKey: "tak_x")

    private func answer(_ deviceID: String, secret: String? = nil, alias: String? = nil) -> ScriptedHTTP.Answer {
        let secretField = secret.map { #","deviceSecret":"\#($0)""# } ?? ""
        let aliasField = alias.map { #","alias":"\#($0)""# } ?? ""
        return .status(200, #"{"active":true,"deviceId":"\#(deviceID)","tags":[]\#(secretField)\#(aliasField)}"#)
    }

    private func registrar(_ http: ScriptedHTTP, _ identities: MemoryIdentityStore, _ states: MemoryStateStore, at now: Date) -> Registrar {
        Registrar(
            client: TernClient(configuration: configuration, transport: http), identities: identities, states: states, policy: RegistrationPolicy(),
            now: { now })
    }

    @Test func theFirstAnswersSecretIsKeptAndAnUnchangedLaunchSendsNothing() async throws {
        let identities = MemoryIdentityStore()
        let states = MemoryStateStore()
        let first = try identities.loadOrCreate()
        let http = ScriptedHTTP([answer(first.deviceID, secret: "tds_new"), answer(first.deviceID)])
        let facts = facts()
        let registration = try await registrar(http, identities, states, at: noon).register(facts)
        #expect(registration.outcome == .sent && registration.deviceID == first.deviceID)
        #expect(try identities.load()?.deviceSecret == "tds_new")
        #expect(try states.load()?.lastRegistration == .init(facts: facts, at: noon))
        // The next launch within the day, nothing changed: no request.
        let again = try await registrar(http, identities, states, at: noon.addingTimeInterval(3600)).register(facts)
        #expect(again.outcome == .upToDate)
        #expect(http.requests.count == 1)
        // The locale changed: registered with the secret.
        var moved = facts
        moved.locale = "zh-CN"
        #expect(try await registrar(http, identities, states, at: noon.addingTimeInterval(7200)).register(moved).outcome == .sent)
        #expect(http.requests.count == 2)
        #expect(http.requests[1].value(forHTTPHeaderField: "X-Tern-Device-Secret") == "tds_new")
        #expect(http.requests[0].value(forHTTPHeaderField: "X-Tern-Device-Secret") == nil)
    }

    @Test func aLostSecretRegistersUnderANewDeviceIdAndSaysTheUserWasLost() async throws {
        let old = DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_from_before_the_wipe")
        let identities = MemoryIdentityStore(old)
        let states = MemoryStateStore()
        try states.save(TernState(deviceID: old.deviceID, alias: "user-42"))
        let refused = ScriptedHTTP.Answer.status(
            403, #"{"error":"forbidden","field":"X-Tern-Device-Secret","message":"X-Tern-Device-Secret is not this device's secret"}"#)
        // The new device's id is made after the refusal: this transport answers with the id it is asked about.
        let echo = EchoingRegistrationHTTP(first: refused)
        let recovering = Registrar(
            client: TernClient(configuration: configuration, transport: echo), identities: identities, states: states, policy: RegistrationPolicy(),
            now: { noon })
        let registration = try await recovering.register(facts(), force: true)
        let fresh = try #require(try identities.load())
        #expect(fresh.deviceID != old.deviceID && fresh.deviceSecret == "tds_fresh")
        #expect(registration.outcome == .newDevice(previousDeviceID: old.deviceID))
        #expect(registration.deviceID == fresh.deviceID && registration.needsSignIn)
        #expect(echo.paths == ["/v1/apps/demo/devices/\(old.deviceID)", "/v1/apps/demo/devices/\(fresh.deviceID)"])
        #expect(echo.secrets == ["tds_from_before_the_wipe", nil])
    }

    @Test func aRefusedNewDeviceIsAnErrorNotALoop() async throws {
        let identities = MemoryIdentityStore(DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_old"))
        let refused = ScriptedHTTP.Answer.status(403, #"{"error":"forbidden","field":"X-Tern-Device-Secret","message":"no"}"#)
        let http = ScriptedHTTP([refused, refused, refused])
        let error = await #expect(throws: TernError.self) { try await registrar(http, identities, MemoryStateStore(), at: noon).register(facts()) }
        #expect(error?.field == "X-Tern-Device-Secret")
        #expect(http.requests.count == 2)
    }

    @Test func aRefusedAliasTokenIsNotALostSecret() async throws {
        let identity = DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_ok")
        let identities = MemoryIdentityStore(identity)
        let http = ScriptedHTTP([
            answer(identity.deviceID),
            .status(403, #"{"error":"forbidden","field":"aliasToken","message":"the alias token has expired"}"#),
            answer(identity.deviceID, alias: "user-7"),
        ])
        let registrar = registrar(http, identities, MemoryStateStore(), at: noon)
        _ = try await registrar.register(facts())
        let refusal = await #expect(throws: TernError.self) {
            try await registrar.signIn(aliasToken: AliasTokenMinter.token(user: "user-7", app: "demo", identitySecret: "x"))
        }
        #expect(refusal?.field == "aliasToken")
        #expect(try identities.load() == identity)
        // Signing in sends the user the token names, with the token, and the facts last registered.
        let token = AliasTokenMinter.token(user: "user-7", app: "demo", identitySecret: "x")
        let signedIn = try await registrar.signIn(aliasToken: token)
        #expect(signedIn.alias == "user-7")
        let body = http.bodies[2]
        #expect(body["alias"] == .string("user-7") && body["aliasToken"] == .string(token) && body["token"] == http.bodies[0]["token"])
        #expect(await registrar.alias() == "user-7")
    }

    @Test func theLaunchCallReturnsAtOnceAndRunRegistersRetryingAfterAFailure() async throws {
        let http = EchoingRegistrationHTTP(first: .unreachable)
        var configuration = configuration
        configuration.registrationBackoff = RetryBackoff(initial: 0.01, maximum: 0.02)
        let badge = RecordingBadgeSink()
        let tern = Tern(configuration: configuration, identityStore: MemoryIdentityStore(), stateStore: MemoryStateStore(), httpTransport: http, badgeSink: badge)
        // From didRegisterForRemoteNotificationsWithDeviceToken: nothing happens until run() does it.
        tern.register(facts())
        #expect(http.paths.isEmpty)
        let runner = Task { await tern.run() }
        defer { runner.cancel() }
        var events = tern.events.makeAsyncIterator()
        guard case .registrationFailed(let failure)? = await events.next() else {
            Issue.record("the first attempt did not fail")
            return
        }
        #expect(failure.kind == .unreachable)
        guard case .registered(let registration)? = await events.next() else {
            Issue.record("no registration after the retry")
            return
        }
        #expect(registration.outcome == .sent)
        #expect(await tern.deviceID == registration.deviceID)
        // Then the badge follows the unread count.
        try await waitUntil("the badge") { await badge.badges == [2] }
    }

    /// A probe's case: a registration in flight, the app signs in as A (queued), then as B just as the registration
    /// ends (its state being written). B was sent first and A last, so the device stayed A's: the app's last sign-in
    /// (or sign-out) lost. The calls go in the order they came now.
    @Test func theAppsCallsGoInTheOrderTheyCameSoTheLastSignInHolds() async throws {
        let identity = DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_x")
        let states = BlockingStateStore()
        let http = AliasEchoHTTP()
        let registrar = Registrar(
            client: TernClient(configuration: configuration, transport: http), identities: MemoryIdentityStore(identity), states: states,
            policy: RegistrationPolicy(), now: { noon })
        _ = try await registrar.register(facts())
        // A registration the server is slow to answer.
        http.hold()
        let registering = Task { try await registrar.register(facts(), force: true) }
        try await waitUntil("the registration is sent") { http.isHolding }
        let signingInAsA = Task { try await registrar.signIn(aliasToken: AliasTokenMinter.token(user: "user-a", app: "demo", identitySecret: "x")) }
        try await waitUntil("signing in as A waits its turn") { await registrar.waiting == 1 }
        // The registration's answer comes; keeping it holds the registrar (a slow write) while B is asked for.
        states.blockNextSave()
        http.release()
        try await waitUntil("the registration's state is being written") { states.isBlocking }
        let signingInAsB = Task { try await registrar.signIn(aliasToken: AliasTokenMinter.token(user: "user-b", app: "demo", identitySecret: "x")) }
        // B's call reaches the registrar while it is held: a moment for its task to get there (not a proof of anything).
        try await Task.sleep(for: .milliseconds(100))
        states.unblock()
        _ = try await registering.value
        _ = try await signingInAsA.value
        #expect(try await signingInAsB.value.alias == "user-b")
        #expect(http.sent == [nil, nil, "user-a", "user-b"])
        #expect(await registrar.alias() == "user-b")
    }

    /// The server deleted the device (its owner's backend, or an operator) and made it again at the next registration:
    /// the user it was bound to is gone, and the app is told to sign in again, as after a lost secret.
    @Test func aDeviceTheServerMadeAgainSaysTheUserWasLost() async throws {
        let identity = DeviceIdentity(deviceID: UUID().uuidString.lowercased(), deviceSecret: "tds_before")
        let identities = MemoryIdentityStore(identity)
        let states = MemoryStateStore()
        try states.save(TernState(deviceID: identity.deviceID, alias: "user-5"))
        // The answer of a registration that made the device: a secret, and no user.
        let http = ScriptedHTTP([answer(identity.deviceID, secret: "tds_made_again"), answer(identity.deviceID, alias: "user-5")])
        let again = try await registrar(http, identities, states, at: noon).register(facts(), force: true)
        #expect(again.outcome == .sent && again.alias == nil)
        #expect(again.needsSignIn)
        #expect(try identities.load()?.deviceSecret == "tds_made_again")
        // An answer without a secret is the same device as before: whatever its user, nothing was lost with it.
        let states2 = MemoryStateStore()
        try states2.save(TernState(deviceID: identity.deviceID, alias: "user-5"))
        let same = try await registrar(http, identities, states2, at: noon).register(facts(), force: true)
        #expect(!same.needsSignIn && same.alias == "user-5")
    }

    /// `register(deviceToken:)` rings the registration loop's bell before the first attempt; that ring, kept from
    /// before the wait, must not cut the server's Retry-After short, and neither may a newer token asked for meanwhile.
    @Test func aRetryAfterIsKeptWhateverRingsMeanwhile() async throws {
        let identity = DeviceIdentity(deviceID: UUID().uuidString.lowercased())
        let http = ScriptedHTTP(
            [
                .status(429, #"{"error":"tooManyRequests","message":"slow down"}"#, headers: ["Retry-After": "1"]),
                answer(identity.deviceID, secret: "tds_new"),
            ],
            always: ["/inbox": .status(200, #"{"messages":[],"unread":0}"#)])
        var configuration = configuration
        configuration.registrationBackoff = RetryBackoff(initial: 0.01, maximum: 0.02)
        let tern = Tern(configuration: configuration, identityStore: MemoryIdentityStore(identity), stateStore: MemoryStateStore(), httpTransport: http)
        tern.register(facts())
        let runner = Task { await tern.run() }
        defer { runner.cancel() }
        var events = tern.events.makeAsyncIterator()
        guard case .registrationFailed(let failure)? = await events.next() else {
            Issue.record("the first attempt did not fail")
            return
        }
        #expect(failure.status == 429 && failure.retryAfter == 1)
        tern.register(facts())
        guard case .registered? = await events.next() else {
            Issue.record("no registration after the Retry-After")
            return
        }
        let registrations = zip(http.requests, http.times).filter { $0.0.httpMethod == "PUT" }.map(\.1)
        try #require(registrations.count == 2)
        #expect(registrations[1] - registrations[0] >= .milliseconds(990), "\(registrations[1] - registrations[0])")
    }

    @Test func signingInBeforeTheTokenArrivedSaysWhatToDo() async throws {
        let http = ScriptedHTTP([])
        let error = await #expect(throws: TernError.self) {
            try await registrar(http, MemoryIdentityStore(), MemoryStateStore(), at: noon).signIn(
                aliasToken: AliasTokenMinter.token(user: "u", app: "demo", identitySecret: "x"))
        }
        #expect(error?.kind == .notRegistered && error?.message.contains("register(deviceToken:)") == true)
        #expect(http.requests.isEmpty)
    }
}

/// Answers a registration's first request with `first`, then each next with a new device named as asked, with a
/// new secret.
/// Answers every registration with the alias its body asked for (the server binds what a valid alias token names),
/// keeps the order the aliases were sent in, and can hold the next registration until released.
final class AliasEchoHTTP: HTTPTransport, @unchecked Sendable {
    // @unchecked: state behind `lock`.
    private let lock = NSLock()
    private var _sent: [String?] = []
    private var holdNext = false
    private var held: CheckedContinuation<Void, Never>?

    /// The alias each registration asked for, in the order they were sent (nil: none).
    var sent: [String?] { lock.withLock { _sent } }
    var isHolding: Bool { lock.withLock { held != nil } }

    func hold() { lock.withLock { holdNext = true } }

    func release() {
        let held = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { self.held = nil }
            return self.held
        }
        held?.resume()
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let body = request.httpBody.flatMap { try? JSONDecoder().decode([String: TernJSON].self, from: $0) }
        let alias = body?["alias"]?.stringValue
        let hold = lock.withLock { () -> Bool in
            _sent.append(alias)
            defer { holdNext = false }
            return holdNext
        }
        if hold { await withCheckedContinuation { continuation in lock.withLock { held = continuation } } }
        let deviceID = request.url!.lastPathComponent
        let aliasField = alias.map { #","alias":"\#($0)""# } ?? ""
        let answer = #"{"active":true,"deviceId":"\#(deviceID)","tags":[]\#(aliasField)}"#
        return (Data(answer.utf8), HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: nil, headerFields: nil)!)
    }
}

/// A state store whose next save blocks its thread until released, as a slow flash write holds the registrar.
final class BlockingStateStore: StateStore, @unchecked Sendable {
    // @unchecked: state behind `lock`; the semaphores are thread-safe.
    private let lock = NSLock()
    private var state: TernState?
    private var blockNext = false
    private let entered = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    private var _blocking = false

    var isBlocking: Bool { lock.withLock { _blocking } }

    func blockNextSave() { lock.withLock { blockNext = true } }
    func unblock() { gate.signal() }

    func load() throws -> TernState? { lock.withLock { state } }

    func save(_ state: TernState) throws {
        let block = lock.withLock { () -> Bool in
            defer { blockNext = false }
            _blocking = blockNext
            return blockNext
        }
        if block {
            gate.wait()
            lock.withLock { _blocking = false }
        }
        lock.withLock { self.state = state }
    }
}

final class EchoingRegistrationHTTP: HTTPTransport, @unchecked Sendable {
    // @unchecked: state behind `lock`.
    private let lock = NSLock()
    private var first: ScriptedHTTP.Answer?
    private var _paths: [String] = []
    private var _secrets: [String?] = []

    init(first: ScriptedHTTP.Answer) {
        self.first = first
    }

    var paths: [String] { lock.withLock { _paths } }
    var secrets: [String?] { lock.withLock { _secrets } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let first = lock.withLock { () -> ScriptedHTTP.Answer? in
            _paths.append(request.url!.path)
            _secrets.append(request.value(forHTTPHeaderField: "X-Tern-Device-Secret"))
            defer { self.first = nil }
            return self.first
        }
        let response = { (status: Int) in HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: nil, headerFields: nil)! }
        switch first {
        case .status(let status, let body, _)?: return (Data(body.utf8), response(status))
        case .unreachable?: throw URLError(.cannotConnectToHost)
        case nil: break
        }
        if request.url!.path.hasSuffix("/inbox") { return (Data(#"{"messages":[],"unread":2}"#.utf8), response(200)) }
        let deviceID = request.url!.lastPathComponent
        return (Data(#"{"active":true,"deviceId":"\#(deviceID)","tags":[],"deviceSecret":"tds_fresh"}"#.utf8), response(200))
    }
}

import Foundation
import TernKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport the integration tests connect the channel with: SwiftNIO's on Linux, Foundation's elsewhere.
func testChannelTransport() -> any ChannelTransport {
    #if canImport(HummingbirdWSClient)
    NIOChannelTransport()
    #else
    URLSessionChannelTransport()
    #endif
}

/// The same, checking that a connection is alive every `pingInterval`: with the NIO client, its own autoPing does it
/// (see ``NIOChannelTransport``); a URLSession connection is pinged by TernKit at the configuration's `pingInterval`.
func testChannelTransport(pingInterval: Duration) -> any ChannelTransport {
    #if canImport(HummingbirdWSClient)
    NIOChannelTransport(pingInterval: pingInterval)
    #else
    URLSessionChannelTransport()
    #endif
}

/// Answers HTTP requests from a script, and keeps what was asked. A request whose path ends with a key of `always`
/// gets that answer every time, without taking one from the script (the badge's refreshes, the channel's refusal).
final class ScriptedHTTP: HTTPTransport, @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    enum Answer {
        case status(Int, String, headers: [String: String] = [:])
        case unreachable
    }

    private let lock = NSLock()
    private var answers: [Answer]
    private let always: [String: Answer]
    private var _requests: [URLRequest] = []
    private var _times: [ContinuousClock.Instant] = []

    init(_ answers: [Answer], always: [String: Answer] = [:]) {
        self.answers = answers
        self.always = always
    }

    var requests: [URLRequest] { lock.withLock { _requests } }
    /// When each request came, in order.
    var times: [ContinuousClock.Instant] { lock.withLock { _times } }

    /// The JSON bodies sent, as objects.
    var bodies: [[String: TernJSON]] {
        requests.map { request in
            guard let body = request.httpBody, case .object(let object)? = try? JSONDecoder().decode(TernJSON.self, from: body) else { return [:] }
            return object
        }
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let answer = lock.withLock { () -> Answer? in
            _requests.append(request)
            _times.append(.now)
            let path = request.url?.path ?? ""
            if let answer = always.first(where: { path.hasSuffix($0.key) })?.value { return answer }
            return answers.isEmpty ? nil : answers.removeFirst()
        }
        switch answer {
        case .status(let status, let body, let headers)?:
            return (Data(body.utf8), HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!)
        case .unreachable?:
            throw URLError(.cannotConnectToHost)
        case nil:
            throw TestFailure("no answer scripted for \(request.httpMethod ?? "") \(request.url?.path ?? "")")
        }
    }
}

/// Keeps the badges set.
actor RecordingBadgeSink: BadgeSink {
    private(set) var badges: [Int] = []

    func setBadge(_ count: Int) {
        badges.append(count)
    }
}

/// Passes connections through to another transport (forwarded to where the server listens now) and keeps the URLs
/// it was asked to open.
final class RecordingTransport: ChannelTransport, @unchecked Sendable {
    // @unchecked: `_urls` is behind `lock`.
    let base: any ChannelTransport
    let forwarding: Forwarding?
    private let lock = NSLock()
    private var _urls: [URL] = []

    init(_ base: any ChannelTransport, forwarding: Forwarding? = nil) {
        self.base = base
        self.forwarding = forwarding
    }

    var urls: [URL] { lock.withLock { _urls } }

    func connect(_ request: URLRequest, maximumFrameSize: Int) async throws -> any ChannelConnection {
        lock.withLock { _urls.append(request.url!) }
        return try await base.connect(forwarding?.rewrite(request) ?? request, maximumFrameSize: maximumFrameSize)
    }
}

/// Opens connections from a script: each `connect` takes the next step (a refused upgrade, or a connection the test
/// drives), and keeps when it was asked.
final class ScriptedChannelTransport: ChannelTransport, @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    enum Step {
        case refuse
        case open(ScriptedConnection)
    }

    private let lock = NSLock()
    private var steps: [Step]
    private var _attempts: [ContinuousClock.Instant] = []

    init(_ steps: [Step]) {
        self.steps = steps
    }

    /// When each connection was asked for, in order.
    var attempts: [ContinuousClock.Instant] { lock.withLock { _attempts } }

    func connect(_ request: URLRequest, maximumFrameSize: Int) async throws -> any ChannelConnection {
        let step = lock.withLock { () -> Step? in
            _attempts.append(.now)
            return steps.isEmpty ? nil : steps.removeFirst()
        }
        switch step {
        case .refuse?: throw ChannelTransportError.upgradeRefused(status: nil)
        case .open(let connection)?: return connection
        case nil: throw TestFailure("no connection scripted")
        }
    }
}

/// A connection the test drives: it hands over the frames the test delivers, keeps what TernKit sends, and answers
/// pings or (`answersPings: false`, a connection gone silent) leaves them unanswered until it is closed.
final class ScriptedConnection: ChannelConnection, @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    let answersPings: Bool
    private let lock = NSLock()
    private var events: [ChannelEvent] = []
    private var receiver: CheckedContinuation<ChannelEvent, Never>?
    private var pingWaiters: [CheckedContinuation<Void, any Error>] = []
    private var ended = false
    private var _sent: [String] = []
    private var _pings = 0

    init(answersPings: Bool = true) {
        self.answersPings = answersPings
    }

    /// The text frames TernKit sent.
    var sent: [String] { lock.withLock { _sent } }
    var pings: Int { lock.withLock { _pings } }
    var isClosed: Bool { lock.withLock { ended } }
    /// Every frame delivered was taken, and TernKit waits for the next (so it handled them).
    var isWaitingForFrames: Bool { lock.withLock { events.isEmpty && receiver != nil } }

    /// A frame from the server.
    func deliver(_ text: String) {
        let waiting = lock.withLock { () -> CheckedContinuation<ChannelEvent, Never>? in
            guard !ended else { return nil }
            guard let receiver else {
                events.append(.text(text))
                return nil
            }
            self.receiver = nil
            return receiver
        }
        waiting?.resume(returning: .text(text))
    }

    func receive() async -> ChannelEvent {
        await withCheckedContinuation { continuation in
            let now = lock.withLock { () -> ChannelEvent? in
                if !events.isEmpty { return events.removeFirst() }
                if ended { return .closed(code: 1000, reason: "closed by the client") }
                receiver = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    func send(_ text: String) async throws {
        try lock.withLock {
            guard !ended else { throw TestFailure("closed") }
            _sent.append(text)
        }
    }

    func ping() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let answer = lock.withLock { () -> Result<Void, any Error>? in
                _pings += 1
                if ended { return .failure(TestFailure("closed")) }
                if answersPings { return .success(()) }
                pingWaiters.append(continuation)
                return nil
            }
            if let answer { continuation.resume(with: answer) }
        }
    }

    func close() {
        let (receiver, pings) = lock.withLock { () -> (CheckedContinuation<ChannelEvent, Never>?, [CheckedContinuation<Void, any Error>]) in
            ended = true
            defer {
                self.receiver = nil
                pingWaiters = []
            }
            return (self.receiver, pingWaiters)
        }
        receiver?.resume(returning: .closed(code: 1000, reason: "closed by the client"))
        for ping in pings { ping.resume(throwing: TestFailure("closed")) }
    }
}

/// A channel frame of a message, as the server sends it.
func messageFrame(id: String, sequence: Int64, title: String) -> String {
    #"{"type":"message","id":"\#(id)","sequence":\#(sequence),"notification":{"title":"\#(title)"},"createdAt":"2026-11-29T00:00:00.000Z"}"#
}

/// An identity store in memory.
final class MemoryIdentityStore: IdentityStore, @unchecked Sendable {
    // @unchecked: `identity` is behind `lock`.
    private let lock = NSLock()
    private var identity: DeviceIdentity?

    init(_ identity: DeviceIdentity? = nil) {
        self.identity = identity
    }

    func load() throws -> DeviceIdentity? { lock.withLock { identity } }
    func save(_ identity: DeviceIdentity) throws { lock.withLock { self.identity = identity } }
    func delete() throws { lock.withLock { identity = nil } }
}

/// A state store in memory.
final class MemoryStateStore: StateStore, @unchecked Sendable {
    // @unchecked: `state` is behind `lock`.
    private let lock = NSLock()
    private var state: TernState?

    func load() throws -> TernState? { lock.withLock { state } }
    func save(_ state: TernState) throws { lock.withLock { self.state = state } }
}

/// A token as APNs gives one: 32 random bytes.
func randomToken() -> Data {
    Data((0..<32).map { _ in UInt8.random(in: 0...255) })
}

func facts(_ token: Data = randomToken(), locale: String = "ko-KR") -> RegistrationFacts {
    RegistrationFacts(token: RegistrationFacts.hex(token), environment: "production", appVersion: "1.0 (1)", locale: locale, timezone: "Asia/Seoul")
}

/// Sends what the SDK addresses to the server's first address to wherever it listens now, as a load balancer in
/// front of it would: `tern serve` refuses to start again on the port it just used while that port has connections
/// in TIME_WAIT (its early "can I listen" check binds without SO_REUSEADDR), so a restart
/// listens on a new one.
struct Forwarding: Sendable {
    /// Where the server listens now.
    let port: @Sendable () -> Int

    func rewrite(_ request: URLRequest) -> URLRequest {
        guard let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return request }
        components.port = port()
        var request = request
        request.url = components.url
        return request
    }
}

/// HTTP through ``Forwarding``.
struct ForwardingHTTP: HTTPTransport {
    let forwarding: Forwarding
    let base = URLSessionHTTPTransport()

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        try await base.send(forwarding.rewrite(request))
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Waits until `condition` holds, checking every 20 ms, for at most `seconds`. Only for what must happen: what must
/// not happen is proven otherwise (by what comes next, or by a value test).
func waitUntil(_ what: String, within seconds: Double = 10, _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw TestFailure("waited \(seconds) s for \(what)")
}

/// The next element of `iterator`, or a failure after `seconds`.
func next<Element: Sendable>(
    _ what: String, within seconds: Double = 10, _ take: @escaping @Sendable () async -> Element?
) async throws -> Element {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask { await take() }
        group.addTask {
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            throw TestFailure("waited \(seconds) s for \(what)")
        }
        defer { group.cancelAll() }
        guard let element = try await group.next() ?? nil else { throw TestFailure("\(what): the sequence ended") }
        return element
    }
}

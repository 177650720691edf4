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

/// Answers HTTP requests from a script, and keeps what was asked.
final class ScriptedHTTP: HTTPTransport, @unchecked Sendable {
    // @unchecked: all state is behind `lock`.
    enum Answer {
        case status(Int, String, headers: [String: String] = [:])
        case unreachable
    }

    private let lock = NSLock()
    private var answers: [Answer]
    private var _requests: [URLRequest] = []

    init(_ answers: [Answer]) {
        self.answers = answers
    }

    var requests: [URLRequest] { lock.withLock { _requests } }

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

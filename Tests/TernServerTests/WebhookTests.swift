import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// Token events go to the app's webhook: signed, retried until acknowledged, not repeated after.
@Suite(.serialized) struct WebhookTests {
    /// A webhook receiver on a free port that fails its first `failures` requests with 500.
    final class Receiver: Sendable {
        struct Received: Sendable {
            var signature: String?
            var body: [UInt8]
            var answered: Int
        }

        let received = Mutex<[Received]>([])
        let failures: Int
        /// When the first post is held: it is answered once the test calls ``releaseTheFirstPost()``.
        private let gate: (held: AsyncStream<Void>, release: AsyncStream<Void>.Continuation)?
        private let arrivals = Atomic<Int>(0)

        init(failures: Int, holdingTheFirstPost: Bool = false) {
            self.failures = failures
            self.gate = holdingTheFirstPost ? AsyncStream<Void>.makeStream() as (AsyncStream<Void>, AsyncStream<Void>.Continuation) : nil
        }

        func releaseTheFirstPost() { gate?.release.finish() }
        /// Posts that arrived, answered or not.
        var arrived: Int { arrivals.load(ordering: .relaxed) }

        func run(_ body: (Int) async throws -> Void) async throws {
            let router = Router()
            router.post("hook") { request, _ -> HTTPResponse.Status in
                let bytes = Array(try await request.body.collect(upTo: 1 << 20).readableBytesView)
                if self.arrivals.add(1, ordering: .relaxed).oldValue == 0, let gate = self.gate { for await _ in gate.held {} }
                let signature = request.headers[HTTPField.Name("X-Tern-Signature")!]
                return self.received.withLock { received in
                    let status: HTTPResponse.Status = received.count < self.failures ? .internalServerError : .ok
                    received.append(Received(signature: signature, body: bytes, answered: Int(status.code)))
                    return status
                }
            }
            let port = Mutex<Int?>(nil)
            var logger = Logger(label: "receiver")
            logger.logLevel = .error
            let app = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } }, logger: logger)
            let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                do {
                    try await waitUntil("the webhook receiver to listen", every: .milliseconds(10)) { port.withLock { $0 } != nil }
                    try await body(try #require(port.withLock { $0 }))
                } catch {
                    await group.triggerGracefulShutdown()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    @Test func aPrunedTokenIsPostedSignedAndRetriedUntilAcknowledged() async throws {
        let receiver = Receiver(failures: 2)
        let clock = ManualClock()
        let logs = LogRecorder()
        try await receiver.run { port in
            try await RouterHarness.withServer(
                configure: { $0.webhooks.allowPrivateNetworks = true }, clocks: .manual(clock), logs: logs
            ) { server in
                let patched = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:\#(port)/hook"}"#)
                #expect(patched.status == 200)
                let secret = try #require(try patched.json()["webhookSecret"]?.string)

                try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
                let later = Int64((Date().timeIntervalSince1970 + 60) * 1000)
                _ = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(later)}"#)
                let push = try await server.push(Fixture.push(audience: #"{"aliases": ["u"]}"#))
                #expect(push[path: "counts.pruned"]?.int == 1)

                // Two 500s, then a 200: back-off of 1 s, then 2 s, on the test's clock. The sender looks every second (on
                // the clock too): at 1 s it tries again, at 2 s it leaves the app alone, at 3 s it tries again.
                // Before each move the sender has taken in the answer to its last post: the receiver has the post before
                // the sender has the answer, and a look waits a second of real time for its posts, then sleeps on the
                // test's clock all the same. Moved before the answer is in, the clock wakes a look that passes the app
                // over as still posting, and the back-off is dated from the moved clock: every try comes late.
                let failed = { logs.messages(containing: "webhook delivery failed").count }
                for (second, failures) in [(1, 1), (2, 2), (3, 2)] {
                    try await waitUntil("\(failures) failed posts") { failed() == failures }
                    try await withTimeout(10, "the webhook sender to wait until \(second) s") {
                        // The sender's wait, not another loop's that ends at the same second.
                        await clock.waitUntilSleeping(
                            until: ManualClock.Instant(offset: .seconds(second)), label: ServerClocks.Waiter.webhooks.rawValue)
                    }
                    clock.advance(by: .seconds(1))
                }
                try await waitUntil("an acknowledged post") { receiver.received.withLock { $0.last?.answered } == 200 }
                let attempts = receiver.received.withLock { $0 }
                try #require(attempts.count == 3, "\(attempts.map(\.answered))")
                #expect(Set(attempts.map(\.body)).count == 1, "every attempt carries the same events")
                let event = try JSONValue(parsing: Data(attempts[2].body))
                #expect(event["app"]?.string == "demo")
                #expect(event["events"]?.arrayFirst?["token"]?.string == Fixture.token(1))
                #expect(event["events"]?.arrayFirst?["reason"]?.string == "Unregistered")
                #expect(event["events"]?.arrayFirst?["apnsTimestamp"]?.int == Int(later))

                // The signature is HMAC-SHA256(secret, "<t>.<body>").
                let header = try #require(attempts[2].signature)
                let parts = Dictionary(uniqueKeysWithValues: header.split(separator: ",").map { part in
                    let pair = part.split(separator: "=", maxSplits: 1)
                    return (String(pair[0]), String(pair[1]))
                })
                let timestamp = try #require(parts["t"])
                let expected = HMAC<SHA256>.authenticationCode(
                    for: Array("\(timestamp).".utf8) + attempts[2].body, using: SymmetricKey(data: Array(secret.utf8)))
                #expect(parts["v1"] == expected.map { String(format: "%02x", $0) }.joined())

                // Acknowledged events are not sent again: the next post, for another pruned token, has only that one.
                try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "v")
                _ = try await server.simulator.post("/tokens/\(Fixture.token(2))/unregister", #"{"timestamp": \#(later)}"#)
                let second = try await server.push(Fixture.push(audience: #"{"aliases": ["v"]}"#))
                #expect(second[path: "counts.pruned"]?.int == 1)
                // The prune wakes the sender at once (the test's clock does not move).
                try await waitUntil("the second post", within: 15) { receiver.received.withLock { $0.count } >= 4 }
                let next = try JSONValue(parsing: Data(receiver.received.withLock { $0[3].body }))
                #expect(next["events"]?.arrayItems?.compactMap { $0["token"]?.string } == [Fixture.token(2)])

                // A leaked secret is rotated: the next post is signed with the new one, and the old one no longer fits.
                let rotated = try await server.admin.patch("/v1/apps/demo", #"{"rotate": ["webhookSecret"]}"#)
                let newSecret = try #require(try rotated.json()["webhookSecret"]?.string)
                #expect(newSecret != secret && newSecret.hasPrefix("tws_"))
                try await server.register(Fixture.device(3), token: Fixture.token(3), alias: "w")
                _ = try await server.simulator.post("/tokens/\(Fixture.token(3))/unregister", #"{"timestamp": \#(later)}"#)
                #expect(try await server.push(Fixture.push(audience: #"{"aliases": ["w"]}"#))[path: "counts.pruned"]?.int == 1)
                try await waitUntil("the post after the rotation", within: 15) { receiver.received.withLock { $0.count } >= 5 }
                let last = receiver.received.withLock { $0[4] }
                #expect(Self.signatureFits(last.signature, body: last.body, secret: newSecret))
                #expect(!Self.signatureFits(last.signature, body: last.body, secret: secret))
            }
        }
    }

    /// Takes connections and never answers: a receiver that is down in the worst way.
    final class SilentReceiver: Sendable {
        let channel: any Channel

        init() async throws {
            let taken = Taken()
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .childChannelInitializer { channel in
                    taken.add(channel)
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
                .bind(host: "127.0.0.1", port: 0).get()
            self.connections = taken
        }

        private let connections: Taken
        var taken: Int { connections.count }
        var port: Int { channel.localAddress?.port ?? 0 }

        /// Ends every connection it took (the sender's post then fails at once) and stops listening.
        func close() async {
            for connection in connections.all { try? await connection.close() }
            try? await channel.close()
        }

        final class Taken: Sendable {
            private let channels = Mutex<[any Channel]>([])
            func add(_ channel: any Channel) { channels.withLock { $0.append(channel) } }
            var count: Int { channels.withLock { $0.count } }
            var all: [any Channel] { channels.withLock { $0 } }
        }
    }

    /// Apps' receivers were posted to one after another, so one that never answered held every other app's events
    /// for its timeout (ten such receivers kept a healthy app's events 97 s late). Now they are posted side by side.
    @Test func aReceiverThatNeverAnswersHoldsUpOnlyItsOwnApp() async throws {
        let silent = try await SilentReceiver()
        let receiver = Receiver(failures: 0)
        try await receiver.run { port in
            try await RouterHarness.withServer(configure: { $0.webhooks.allowPrivateNetworks = true }) { server in
                // An app whose id comes before the demo's, so it is the one looked at first.
                let created = try await server.admin.post(
                    "/v1/apps",
                    #"{"id": "a-silent", "topic": "com.example.silent", "environment": "simulator", "webhookURL": "http://127.0.0.1:\#(silent.port)/hook"}"#)
                #expect(created.status == 201, "\(created.text)")
                let appKey = try #require(try created.json()["appKey"]?.string)
                let master = try #require(try created.json()["masterSecret"]?.string)
                let later = Int64((Date().timeIntervalSince1970 + 60) * 1000)
                let registered = try await server.api.with(bearer: appKey).put(
                    "/v1/apps/a-silent/devices/\(Fixture.device(1))", Fixture.registration(token: Fixture.token(1)))
                #expect(registered.status == 200, "\(registered.text)")
                _ = try await server.simulator.post("/tokens/\(Fixture.token(1))/unregister", #"{"timestamp": \#(later)}"#)
                let silentPush = try await server.api.with(bearer: master).post(
                    "/v1/apps/a-silent/pushes?wait=20", Fixture.push(audience: #"{"all": true}"#))
                #expect(try silentPush.json()[path: "counts.pruned"]?.int == 1, "\(silentPush.text)")
                // Its receiver has the post and will never answer (the client's read timeout is 10 s).
                try await waitUntil("the silent receiver to be posted to") { silent.taken >= 1 }

                #expect(try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:\#(port)/hook"}"#).status == 200)
                try await server.register(Fixture.device(2), token: Fixture.token(2))
                _ = try await server.simulator.post("/tokens/\(Fixture.token(2))/unregister", #"{"timestamp": \#(later)}"#)
                #expect(try await server.push(Fixture.push(audience: #"{"all": true}"#))[path: "counts.pruned"]?.int == 1)
                // Well inside the silent receiver's 10 s: the demo app's post does not wait for it.
                try await waitUntil("the demo app's post", within: 5) { receiver.received.withLock { $0.count } >= 1 }
                // The silent post fails now, so the server's stop does not wait out its timeout.
                await silent.close()
            }
        }
    }

    /// `webhooks.proxy`: a node whose only way out is an egress proxy posts its webhooks through the proxy's tunnel,
    /// with the proxy's credentials; a proxy that refuses the tunnel is a failed post, retried, its password in no
    /// log line.
    @Test func webhooksGoThroughTheEgressProxyAndARefusalIsAFailedPost() async throws {
        let receiver = Receiver(failures: 0)
        let proxy = try await ConnectProxy(credentials: "tern:s3cret-proxy")
        let logs = LogRecorder()
        let portBox = Mutex(0)
        try await receiver.run { port in
            portBox.withLock { $0 = port }
            for (credentials, delivered) in [("tern:s3cret-proxy", true), ("tern:wrong-hunter2", false)] {
                try await RouterHarness.withServer(configure: {
                    $0.webhooks.allowPrivateNetworks = true
                    $0.webhooks.proxy = "http://\(credentials)@127.0.0.1:\(proxy.port)"
                }, logs: logs) { server in
                    #expect(try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:\#(port)/hook"}"#).status == 200)
                    let number = delivered ? 1 : 2
                    try await server.register(Fixture.device(number), token: Fixture.token(number))
                    let later = Int64((Date().timeIntervalSince1970 + 60) * 1000)
                    _ = try await server.simulator.post("/tokens/\(Fixture.token(number))/unregister", #"{"timestamp": \#(later)}"#)
                    #expect(try await server.push(Fixture.push(audience: #"{"devices": ["\#(Fixture.device(number))"]}"#))[path: "counts.pruned"]?.int == 1)
                    if delivered {
                        try await waitUntil("the post through the proxy") { receiver.received.withLock { $0.count } == 1 }
                        let event = try JSONValue(parsing: Data(try #require(receiver.received.withLock { $0.first?.body })))
                        #expect(event["events"]?.arrayFirst?["token"]?.string == Fixture.token(1))
                        #expect(proxy.tunnels == ["127.0.0.1:\(port)"], "one tunnel, to the receiver")
                        // A name the node cannot resolve is the proxy's to resolve (a network whose only way out is the
                        // proxy often resolves no outside name).
                        #expect(try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://hooks.invalid:\#(port)/hook"}"#).status == 200)
                        try await server.register(Fixture.device(3), token: Fixture.token(3))
                        _ = try await server.simulator.post("/tokens/\(Fixture.token(3))/unregister", #"{"timestamp": \#(later)}"#)
                        #expect(try await server.push(Fixture.push(audience: #"{"devices": ["\#(Fixture.device(3))"]}"#))[path: "counts.pruned"]?.int == 1)
                        try await waitUntil("the proxy to be asked for hooks.invalid") { proxy.requests.contains("CONNECT hooks.invalid:\(port) HTTP/1.1") }
                        #expect(try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": null}"#).status == 200)
                    } else {
                        try await waitUntil("the refused post to be logged, saying why") {
                            logs.lines(atLeast: .warning).contains { $0.contains("webhook delivery failed") && $0.contains("proxyAuthenticationRequired") }
                        }
                        #expect(receiver.received.withLock { $0.count } == 1, "nothing more reached the receiver")
                        #expect(proxy.tunnels.count == 1)
                    }
                }
            }
        }
        await proxy.close()
        let receiverPort = portBox.withLock { $0 }
        let lines = logs.lines(atLeast: .trace).joined(separator: "\n")
        #expect(!lines.contains("hunter2") && !lines.contains("s3cret-proxy"), "\(lines)")
        #expect(Set(proxy.requests) == ["CONNECT 127.0.0.1:\(receiverPort) HTTP/1.1", "CONNECT hooks.invalid:\(receiverPort) HTTP/1.1"], "\(proxy.requests)")
    }

    /// Whether `header` (`t=…,v1=…`) is HMAC-SHA256(secret, "<t>.<body>").
    static func signatureFits(_ header: String?, body: [UInt8], secret: String) -> Bool {
        guard let header else { return false }
        var parts: [String: String] = [:]
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parts[String(pair[0])] = String(pair[1]) }
        }
        guard let timestamp = parts["t"], let v1 = parts["v1"] else { return false }
        let mac = HMAC<SHA256>.authenticationCode(for: Array("\(timestamp).".utf8) + body, using: SymmetricKey(data: Array(secret.utf8)))
        return v1 == mac.map { String(format: "%02x", $0) }.joined()
    }

    /// An app's backend that asks for opens (`webhookEvents` with `push.opened`) gets each device's first open of a
    /// push, with the user it was bound to, instead of reading every push's reports.
    @Test func opensArePostedOnceEachWithTheirUserOnceTheAppAsksForThem() async throws {
        let receiver = Receiver(failures: 0)
        try await receiver.run { port in
            try await RouterHarness.withServer(configure: { $0.webhooks.allowPrivateNetworks = true }) { server in
                let patched = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:\#(port)/hook"}"#)
                #expect(patched.status == 200, "\(patched.text)")
                #expect(try patched.json()["webhookEvents"]?.arrayItems?.compactMap(\.string) == ["token.deactivated"], "the default")
                let secret = try #require(try patched.json()["webhookSecret"]?.string)
                try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "ana")
                try await server.register(Fixture.device(2), token: Fixture.token(2))
                let open = { (device: Int, push: String) in
                    try await server.device.send(
                        .POST, "/v1/apps/demo/devices/\(Fixture.device(device))/opens", body: #"{"pushId": "\#(push)"}"#,
                        headers: server.asDevice(Fixture.device(device))).status
                }

                // Opened before the app asks for opens: no event, now or later.
                let earlier = try #require(try await server.push(Fixture.push(audience: #"{"all": true}"#))["id"]?.string)
                #expect(try await open(1, earlier) == 204)

                let asked = try await server.admin.patch("/v1/apps/demo", #"{"webhookEvents": ["push.opened", "token.deactivated"]}"#)
                #expect(asked.status == 200, "\(asked.text)")
                #expect(try asked.json()["webhookEvents"]?.arrayItems?.compactMap(\.string) == ["token.deactivated", "push.opened"])
                #expect(try asked.json()["webhookSecret"] == nil, "the URL was not set again")
                let pushID = try #require(try await server.push(Fixture.push(audience: #"{"all": true}"#))["id"]?.string)
                #expect(try await open(1, pushID) == 204)
                #expect(try await open(1, pushID) == 204, "opened again: counted once, posted once")
                #expect(try await open(2, pushID) == 204)
                #expect(try await open(2, earlier) == 204, "the first open of the earlier push on this device")

                // Each open is posted once: the sender is woken by the open, and a 2xx moves its cursor.
                let events = { () -> [JSONValue] in
                    receiver.received.withLock { posts in posts.flatMap { (try? JSONValue(parsing: Data($0.body)))?["events"]?.arrayItems ?? [] } }
                }
                try await waitUntil("three opens posted", within: 15) { events().count >= 3 }
                let posts = receiver.received.withLock { $0 }
                for post in posts {
                    let body = try JSONValue(parsing: Data(post.body))
                    #expect(body["type"]?.string == "push.opened" && body["app"]?.string == "demo", "\(body)")
                    #expect(Self.signatureFits(post.signature, body: post.body, secret: secret))
                }
                let posted = events()
                #expect(posted.map { $0["pushId"]?.string } == [pushID, pushID, earlier])
                #expect(posted.map { $0["deviceId"]?.string } == [Fixture.device(1), Fixture.device(2), Fixture.device(2)])
                #expect(posted.map { $0["alias"]?.string } == ["ana", nil, nil])
                let ids = posted.compactMap { $0["id"]?.int }
                #expect(ids.count == 3 && ids == ids.sorted())
                #expect(posted.allSatisfy { ($0["openedAt"]?.int ?? 0) > 1_700_000_000_000 }, "epoch milliseconds")
                // The opens are still counted as before.
                #expect(try await server.master.get("/v1/apps/demo/pushes/\(pushID)").json()[path: "counts.opened"]?.int == 2)
            }
        }
    }

    /// Each kind of event goes one post at a time in turn: a token deactivated while hundreds of opens wait is posted
    /// after the opens' post under way, not after all of them (before, each kind was posted to its end in turn).
    @Test func aDeactivationIsNotHeldBackBehindABacklogOfOpens() async throws {
        let receiver = Receiver(failures: 0, holdingTheFirstPost: true)
        let opens = 2 * WebhookSender.eventsPerPost + 50
        try await receiver.run { port in
            try await RouterHarness.withServer(configure: { $0.webhooks.allowPrivateNetworks = true }) { server in
                let patched = try await server.admin.patch(
                    "/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:\#(port)/hook", "webhookEvents": ["token.deactivated", "push.opened"]}"#)
                #expect(patched.status == 200, "\(patched.text)")
                for n in 1...opens { try await server.register(Fixture.device(n), token: Fixture.token(n), alias: "fan") }
                let pushID = try #require(try await server.push(Fixture.push(audience: #"{"aliases": ["fan"]}"#))["id"]?.string)
                for n in 1...opens {
                    let opened = try await server.device.send(
                        .POST, "/v1/apps/demo/devices/\(Fixture.device(n))/opens", body: #"{"pushId": "\#(pushID)"}"#,
                        headers: server.asDevice(Fixture.device(n)))
                    #expect(opened.status == 204)
                }
                // The first post (of the first opens) is held at the receiver while a token dies behind the rest.
                try await waitUntil("the first post") { receiver.arrived >= 1 }
                try await server.register(Fixture.device(9_000), token: Fixture.token(9_000), alias: "gone")
                _ = try await server.simulator.post("/tokens/\(Fixture.token(9_000))/unregister", "{}")
                #expect(try await server.push(Fixture.push(audience: #"{"aliases": ["gone"]}"#))[path: "counts.pruned"]?.int == 1)
                receiver.releaseTheFirstPost()

                let posts = { () -> [JSONValue] in receiver.received.withLock { $0.compactMap { try? JSONValue(parsing: Data($0.body)) } } }
                let posted = { (type: String) in posts().filter { $0["type"]?.string == type }.flatMap { $0["events"]?.arrayItems ?? [] } }
                try await waitUntil("every open and the deactivation posted", within: 30) {
                    posted("push.opened").count == opens && posted("token.deactivated").count == 1
                }
                let types = posts().compactMap { $0["type"]?.string }
                #expect(types.count >= 4, "\(types)")
                #expect(types.dropFirst().first == "token.deactivated", "next after the opens' post under way: \(types)")
                #expect(Set(posted("push.opened").compactMap { $0["deviceId"]?.string }).count == opens, "each open once")
                #expect(posted("token.deactivated").first?["token"]?.string == Fixture.token(9_000))
            }
        }
    }

    @Test func eachCreationAndRotationGivesANewWebhookSecretAndAnAppFromBeforeKeepsItsOwn() async throws {
        try await RouterHarness.withServer(configure: { $0.webhooks.allowPrivateNetworks = true }) { server in
            let create = #"{"id": "hooky", "topic": "com.example.hooky", "environment": "simulator", "webhookURL": "http://127.0.0.1:9/hook"}"#
            var seen: [String] = []
            let created = try await server.admin.post("/v1/apps", create)
            seen.append(try #require(try created.json()["webhookSecret"]?.string))
            for _ in 0..<2 {
                let rotated = try await server.admin.patch("/v1/apps/hooky", #"{"rotate": ["webhookSecret"]}"#)
                #expect(rotated.status == 200)
                seen.append(try #require(try rotated.json()["webhookSecret"]?.string))
            }
            // A change that neither sets the URL nor rotates the key does not show it.
            #expect(try await server.admin.patch("/v1/apps/hooky", #"{"inboxCap": 5}"#).json()["webhookSecret"] == nil)
            #expect(try await server.admin.delete("/v1/apps/hooky").status == 204)
            seen.append(try #require(try await server.admin.post("/v1/apps", create).json()["webhookSecret"]?.string))
            #expect(Set(seen).count == 4, "\(seen)")
            let refused = try await server.admin.patch("/v1/apps/hooky", #"{"rotate": ["webhookKey"]}"#)
            #expect(refused.status == 400)
            #expect(try refused.json()["field"]?.string == "rotate[0]")
        }
        // An app made before the salt (none stored) keeps the key derived from the server key and its id alone.
        let key = try ServerKey(bytes: Array(repeating: 7, count: 32))
        var old = AppRecord(
            id: "legacy", topic: "t", environment: .simulator, endpoint: nil, sealedCredentials: [], appKeyHash: [], masterSecretHash: [],
            webhookURL: nil, createdAt: Date(), updatedAt: Date())
        let derived = HMAC<SHA256>.authenticationCode(for: Array("webhook:legacy".utf8), using: SymmetricKey(data: Array(repeating: UInt8(7), count: 32)))
        #expect(key.webhookSecret(app: old) == "tws_" + Base64URL.encode(Array(derived)))
        old.webhookSecretSalt = ServerKey.webhookSalt()
        #expect(key.webhookSecret(app: old) != "tws_" + Base64URL.encode(Array(derived)))
    }

    @Test func aTokenPrunedWhileItsChunkIsStillBeingSentWakesTheSenderAtOnce() async throws {
        let receiver = Receiver(failures: 0)
        // The test's clock never moves: the post can only come from the wake-up the prune gives.
        let clock = ManualClock()
        try await receiver.run { port in
            try await RouterHarness.withServer(configure: {
                $0.webhooks.allowPrivateNetworks = true
                // One at a time: the dead token's answer is recorded (a record of its own, while the chunk is still
                // being sent) well before the chunk's closing record.
                $0.delivery.concurrency = 1
            }, clocks: .manual(clock)) { server in
                let patched = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:\#(port)/hook"}"#)
                #expect(patched.status == 200)
                // Device ids sort in this order, and so are they sent: the dead token first.
                for number in 1...4 {
                    try await server.register(Fixture.device(700 + number), token: Fixture.token(700 + number), alias: "early")
                }
                _ = try await server.simulator.post("/tokens/\(Fixture.token(701))/unregister", "{}")
                _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 300}"#)
                let push = try await server.push(Fixture.push(audience: #"{"aliases": ["early"]}"#))
                #expect(push[path: "counts.pruned"]?.int == 1)
                try await waitUntil("the post of the pruned token") { receiver.received.withLock { $0.count } >= 1 }
                let event = try JSONValue(parsing: Data(receiver.received.withLock { $0[0].body }))
                #expect(event["events"]?.arrayFirst?["token"]?.string == Fixture.token(701))
            }
        }
    }
}

import Foundation
import Logging
import Synchronization
import TernAPNs
import TernSimulator
import TernTestSupport
import Testing

@testable import TernServer

/// Several `tern serve` nodes on one PostgreSQL database, delivering to one simulator (in this process).
@Suite("Several nodes on one PostgreSQL", .enabled(if: PostgresTestServer.url != nil))
struct MultiNodeTests {
    @Test("both nodes send a large push together, each device once; when one leaves, the other sends alone")
    func nodesShareAPush() async throws {
        // 20 in flight: a node has at most three chunks of 20 claimed at a time (``ClaimRoom``).
        try await MultiNode.with(concurrency: 20) { cluster in
            let devices = 400
            _ = try await cluster.pushToAllWithBothNodesSending(devices: devices)

            // One node leaves; the other sends the next push alone.
            await cluster.nodes[0].server.shutdown()
            let second = try await cluster.completedPush(title: "two", through: 1)
            #expect(second["counts"]?["accepted"]?.int == devices)
            let arrivals = cluster.arrivals()
            #expect(arrivals.count == 2 * devices)
            #expect(arrivals.filter { $0.payload.contains("\"two\"") }.count == devices)
        }
    }

    @Test("a node whose clock runs a minute ahead dates by the database's, so it takes over no chunk the other is still sending: each device once")
    func aNodeWithItsClockAheadTakesNothingOver() async throws {
        // A minute ahead: every lease of the other node's (15 s) would look long run out to it.
        try await MultiNode.with(concurrency: 20, secondClocks: ServerClocks(wall: ClockAhead(by: 60))) { cluster in
            // Taken in through the node ahead, and sent by both.
            let id = try await cluster.pushToAllWithBothNodesSending(devices: 400)
            // What the node ahead stores is dated by the database's clock: the push it took in is not dated a
            // minute into the future. Its first chunk was claimed just after it was made (the earliest claim is the
            // other node's, whose clock is the database's, if the node ahead dated its own wrongly too).
            let madeBeforeClaimed = try await PostgresTestServer.integers(
                "SELECT (SELECT MIN(claimed_at) FROM push_chunks WHERE push_id = '\(id)') - created_at FROM pushes WHERE id = '\(id)'",
                database: cluster.databaseURL)
            #expect(madeBeforeClaimed.count == 1 && madeBeforeClaimed.allSatisfy { (-1_000..<30_000).contains($0) }, "\(madeBeforeClaimed)")
        }
    }

    @Test("a push to a few devices made during a large push reaches them after the large one, whichever node sends it")
    func targetedPushAfterABroadcast() async throws {
        // One notification at a time per chunk, so a node's chunk of 20 takes a while to go out.
        try await MultiNode.with(concurrency: 1) { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            let devices = 300
            try await cluster.register(devices, on: cluster.nodes[0])
            try cluster.simulator.state.setLatency(.init(minMilliseconds: 2, maxMilliseconds: 10))

            // The broadcast through one node, at once the last 10 devices (its last chunk) through the other.
            let broadcast = try await cluster.master(0).post("/v1/apps/shop/pushes", Fixture.push(audience: #"{"all": true}"#, title: "first"))
            #expect(broadcast.status == 202, "\(broadcast.text)")
            let last = (devices - 10..<devices).map { #""\#(Fixture.device($0))""# }.joined(separator: ", ")
            let targeted = try await cluster.master(1).post("/v1/apps/shop/pushes", Fixture.push(audience: #"{"devices": [\#(last)]}"#, title: "second"))
            #expect(targeted.status == 202, "\(targeted.text)")

            let arrivals = try await cluster.arrivals(count: devices + 10)
            #expect(arrivals.count == devices + 10)
            for number in devices - 10..<devices {
                let titles = try MultiNode.titles(in: arrivals, for: Fixture.token(number))
                #expect(titles == ["first", "second"], "device \(number) saw \(titles)")
            }
        }
    }

    @Test("an idempotent push sent to both nodes at once is one push, delivered once")
    func idempotencyAcrossNodes() async throws {
        try await MultiNode.with { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            try await cluster.register(50, on: cluster.nodes[0])
            let body = Fixture.push(audience: #"{"all": true}"#, extra: #", "idempotencyKey": "order-17""#)
            async let a = cluster.master(0).post("/v1/apps/shop/pushes?wait=20", body)
            async let b = cluster.master(1).post("/v1/apps/shop/pushes?wait=20", body)
            let (answerA, answerB) = try await (a, b)
            let ids = [try answerA.json()["id"]?.string, try answerB.json()["id"]?.string]
            #expect(ids[0] != nil && ids[0] == ids[1], "\(answerA.text) / \(answerB.text)")
            #expect(Set([answerA.status, answerB.status]) == [200, 201], "one created it, the other found it")
            #expect(cluster.arrivals().count == 50)
        }
    }

    // MARK: The online channel across nodes

    /// Registers a device with the app key through `node`. - Returns: its secret.
    private func registerDevice(_ number: Int, in cluster: MultiNode, on node: Int) async throws -> String {
        let answer = try await cluster.nodes[node].api.with(bearer: cluster.appKey)
            .put("/v1/apps/shop/devices/\(Fixture.device(number))", Fixture.registration(token: Fixture.token(number)))
        #expect(answer.status == 200, "\(answer.text)")
        return try #require(try answer.json()["deviceSecret"]?.string)
    }

    private func connect(_ number: Int, secret: String, to node: Int, in cluster: MultiNode, after: Int64? = nil) -> TestDevice {
        TestDevice(
            port: cluster.nodes[node].server.boundPort!, app: "shop", deviceID: Fixture.device(number), appKey: cluster.appKey, secret: secret,
            after: after)
    }

    private func online(_ title: String, to number: Int, via node: Int, in cluster: MultiNode, extra: String = "") async throws -> JSONValue {
        let answer = try await cluster.master(node).post(
            "/v1/apps/shop/pushes?wait=20",
            #"{"audience": {"devices": ["\#(Fixture.device(number))"]}, "notification": {"title": "\#(title)"}, "delivery": "online"\#(extra)}"#)
        #expect([200, 201].contains(answer.status), "\(answer.text)")
        return try answer.json()
    }

    /// Registers device `number` through node 0, connects it to `node`, and waits until a first message ("probe",
    /// sequence 1) pushed through node 0 arrives: the connection is live. - Returns: the device and its secret.
    private func liveDevice(_ number: Int, on node: Int, in cluster: MultiNode) async throws -> (device: TestDevice, secret: String) {
        let secret = try await registerDevice(number, in: cluster, on: 0)
        let device = connect(number, secret: secret, to: node, in: cluster)
        _ = try await online("probe", to: number, via: 0, in: cluster)
        #expect(try await device.next()[path: "notification.title"]?.string == "probe")
        return (device, secret)
    }

    @Test("a device connected to one node gets, in order, what is pushed on the other, woken over NOTIFY")
    func onlineAcrossNodes() async throws {
        try await MultiNode.with { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            // The connection is live on node 1.
            let (device, _) = try await liveDevice(1, on: 1, in: cluster)
            // Each of these reaches node 1's connection as a wake event from node 0, well before the connection's own
            // look every 30 s.
            for title in ["a", "b", "c"] { _ = try await online(title, to: 1, via: 0, in: cluster) }
            var titles: [String?] = []
            var sequences: [Int?] = []
            for _ in 0..<3 {
                let frame = try await device.next(within: 5)
                titles.append(frame[path: "notification.title"]?.string)
                sequences.append(frame["sequence"]?.int)
            }
            #expect(titles == ["a", "b", "c"])
            #expect(sequences == [2, 3, 4])
            #expect(cluster.arrivals().isEmpty, "an online message went through APNs")
            await device.close()
        }
    }

    @Test("a device's newer connection on one node closes its older one on the other (4409)")
    func aNewerConnectionOnAnotherNodeReplacesTheOlder() async throws {
        try await MultiNode.with { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            let (older, secret) = try await liveDevice(1, on: 0, in: cluster)

            // The device connects again, to the other node, and the older connection is not closed by the device.
            let newer = connect(1, secret: secret, to: 1, in: cluster, after: 1)
            let closed = try await older.closeFrame(within: 10, "the older connection, on the other node")
            #expect(closed?.closeCode == .unknown(4409))
            #expect(closed?.reason == ChannelCloseCode.replaced.reason)
            _ = try await online("after", to: 1, via: 0, in: cluster)
            #expect(try await newer.next()[path: "notification.title"]?.string == "after")
            await newer.close()
        }
    }

    @Test("a push whose messages cannot be kept while the database is away keeps its turn: the device gets it before the pushes made after it")
    func aChunkCutOffByTheDatabaseKeepsItsTurn() async throws {
        let logs = LogRecorder()
        // A call unanswered for 2 s fails as the database being away, as calls in flight do while PostgreSQL restarts.
        try await MultiNode.with(callTimeout: .seconds(2), logs: logs) { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            let (device, _) = try await liveDevice(1, on: 0, in: cluster)

            // The device's counter locked elsewhere: "two" cannot be numbered, and its call fails at its deadline.
            let lock = "SELECT 1 FROM device_channels WHERE device_id = '\(Fixture.device(1))' FOR UPDATE"
            try await PostgresTestServer.holding(lock, database: cluster.databaseURL) {
                for title in ["two", "three"] {
                    let answer = try await cluster.master(0).post(
                        "/v1/apps/shop/pushes",
                        #"{"audience": {"devices": ["\#(Fixture.device(1))"]}, "notification": {"title": "\#(title)"}, "delivery": "online"}"#)
                    #expect(answer.status == 202, "\(answer.text)")
                }
                try await waitUntil("the call keeping \"two\" to fail", within: 20) {
                    !logs.messages(containing: "the database is away").isEmpty || !logs.messages(containing: "push chunk not sent").isEmpty
                }
            }
            // Given up, "two" would wait out its lease (15 s) while "three" went first.
            var titles: [String?] = []
            for _ in 0..<2 { titles.append(try await device.next(within: 20)[path: "notification.title"]?.string) }
            #expect(titles == ["two", "three"])
            await device.close()
        }
    }

    @Test("the presence rows of a node that died are removed once it has been unseen for channel.nodeTimeout: its devices are woken through APNs, a live node's rows stay")
    func aDeadNodesPresenceGoes() async throws {
        try await MultiNode.with(configure: { $0.channel.nodeTimeout = .seconds(6) }) { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            let (live, _) = try await liveDevice(1, on: 0, in: cluster)
            // Device 2 was connected to a node that crashed: its row names that node, which never runs again.
            _ = try await registerDevice(2, in: cluster, on: 0)
            _ = try await PostgresTestServer.integers("""
                INSERT INTO device_presence (app_id, device_id, node, connection, connected_at)
                VALUES ('shop', '\(Fixture.device(2))', 'crashed-node', 'gone', 0) RETURNING 1
                """, database: cluster.databaseURL)

            try await waitUntil("the crashed node's row to go", within: 30) {
                try await PostgresTestServer.integers(
                    "SELECT count(*) FROM device_presence WHERE node = 'crashed-node'", database: cluster.databaseURL) == [0]
            }
            #expect(try await PostgresTestServer.integers("SELECT count(*) FROM device_presence", database: cluster.databaseURL) == [1])
            // Offline now, device 2 is woken through APNs; the live one still gets its message online.
            _ = try await online("wake up", to: 2, via: 1, in: cluster, extra: #", "wake": true"#)
            #expect(cluster.arrivals().count == 1, "the silent push that wakes the offline device")
            _ = try await online("still here", to: 1, via: 1, in: cluster)
            #expect(try await live.next()[path: "notification.title"]?.string == "still here")
            #expect(cluster.arrivals().count == 1)
            await live.close()
        }
    }

    @Test("auto pushes fall back to a device in the order they were made, however long each one's fallback takes to mark: offline, or connected and silent")
    func autoFallbacksKeepTheirOrder() async throws {
        try await MultiNode.with { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            try await cluster.register(2, on: cluster.nodes[0])
            // Device 0 is offline. Device 1 looks connected to a node that died: its pushes wait for their ackTimeout,
            // then fall back.
            _ = try await PostgresTestServer.integers(
                "INSERT INTO device_presence (app_id, device_id, node, connection, connected_at) "
                    + "VALUES ('shop', '\(Fixture.device(1))', 'dead-node', 'gone', 0) RETURNING 1",
                database: cluster.databaseURL)
            // The first fallback marked takes 1.5 s (a slow database call): the push made after it is marked first.
            for statement in [
                "CREATE SEQUENCE fallbacks_marked",
                """
                CREATE FUNCTION slow_first_fallback() RETURNS trigger AS $$
                BEGIN
                    IF NEW.fallback_at IS NOT NULL AND OLD.fallback_at IS NULL AND nextval('fallbacks_marked') = 1 THEN
                        PERFORM pg_sleep(1.5);
                    END IF;
                    RETURN NEW;
                END $$ LANGUAGE plpgsql
                """,
                "CREATE TRIGGER slow_first_fallback BEFORE UPDATE ON device_messages FOR EACH ROW EXECUTE FUNCTION slow_first_fallback()",
            ] {
                _ = try await PostgresTestServer.integers(statement, database: cluster.databaseURL)
            }

            let audience = #""\#(Fixture.device(0))", "\#(Fixture.device(1))""#
            for title in ["first", "second"] {
                let answer = try await cluster.master(0).post(
                    "/v1/apps/shop/pushes",
                    #"{"audience": {"devices": [\#(audience)]}, "notification": {"title": "\#(title)"}, "delivery": "auto", "ackTimeout": 0.3}"#)
                #expect(answer.status == 202, "\(answer.text)")
            }
            let arrivals = try await cluster.arrivals(count: 4)
            for number in 0..<2 {
                let titles = try MultiNode.titles(in: arrivals, for: Fixture.token(number))
                #expect(titles == ["first", "second"], "device \(number) saw \(titles)")
            }
        }
    }

    @Test("when a device's node goes away, the device reconnects to the other and misses nothing; a dead node's devices fall back once")
    func aNodeGoesAwayWithConnections() async throws {
        try await MultiNode.with { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            let secret = try await registerDevice(2, in: cluster, on: 0)
            let device = connect(2, secret: secret, to: 1, in: cluster)
            _ = try await online("before", to: 2, via: 0, in: cluster)
            let before = try await device.next()
            device.ack([try #require(before["id"]?.string)])
            let seen = try #require(before["sequence"]?.int)

            // Node 1 stops: the HTTP server closes its connections first (1001, "the server is stopping"), and its
            // presence rows go with it.
            await cluster.nodes[1].server.shutdown()
            let closed = try await device.closeFrame()
            #expect(closed?.closeCode == .goingAway)
            #expect(closed?.reason == "the server is stopping; connect again")
            _ = try await online("while away 1", to: 2, via: 0, in: cluster)
            _ = try await online("while away 2", to: 2, via: 0, in: cluster)

            // The device comes back through the load balancer, to node 0, after what it had.
            let back = connect(2, secret: secret, to: 0, in: cluster, after: Int64(seen))
            #expect(try await back.next()[path: "notification.title"]?.string == "while away 1")
            #expect(try await back.next()[path: "notification.title"]?.string == "while away 2")
            await back.close()

            // A node that died without clearing its rows: the device still looks connected to it. An `auto` push
            // waits its ackTimeout, then goes through APNs, once.
            _ = try await PostgresTestServer.integers(
                "INSERT INTO device_presence (app_id, device_id, node, connection, connected_at) "
                    + "VALUES ('shop', '\(Fixture.device(2))', 'dead-node', 'gone', 0) "
                    // The closed connection's own row may still be there for a moment; it is removed only by it.
                    + "ON CONFLICT (app_id, device_id) DO UPDATE SET node = excluded.node, connection = excluded.connection",
                database: cluster.databaseURL)
            let auto = try await cluster.master(0).post(
                "/v1/apps/shop/pushes?wait=20",
                #"{"audience": {"devices": ["\#(Fixture.device(2))"]}, "notification": {"title": "auto"}, "delivery": "auto", "ackTimeout": 0.3}"#)
            #expect(try auto.json()["counts"]?["fellBackToAPNs"]?.int == 1, "\(auto.text)")
            let arrivals = try await cluster.arrivals(count: 1)
            #expect(arrivals.filter { $0.token == Fixture.token(2) }.count == 1)
        }
    }

    @Test("a throttled push keeps its rate with both nodes claiming: a second's worth at a time, each device once")
    func aThrottledPushKeepsItsRateAcrossNodes() async throws {
        try await MultiNode.with { cluster in
            try await cluster.createApp(on: cluster.nodes[0])
            try await cluster.register(60, on: cluster.nodes[1])
            let stored = try await cluster.master(0).post(
                "/v1/apps/shop/pushes", Fixture.push(audience: #"{"all": true}"#, title: "paced", extra: #", "ratePerSecond": 20"#))
            #expect(stored.status == 202, "\(stored.text)")
            let id = try #require(try stored.json()["id"]?.string)
            try await waitUntil("the throttled push to complete", within: 60, every: .milliseconds(100)) {
                try await cluster.master(1).get("/v1/apps/shop/pushes/\(id)").json()["status"]?.string == "completed"
            }
            let arrivals = cluster.arrivals()
            #expect(arrivals.count == 60 && Set(arrivals.map(\.token)).count == 60, "each device once: \(arrivals.count)")
            // Three chunks of 20, each claimed (by either node) a second or more after the one before, by the
            // database's clock.
            let claimed = try await PostgresTestServer.integers(
                "SELECT claimed_at FROM push_chunks WHERE push_id = '\(id)' ORDER BY sequence", database: cluster.databaseURL)
            #expect(claimed.count == 3, "\(claimed)")
            let gaps = zip(claimed.dropFirst(), claimed).map { $0 - $1 }
            #expect(gaps.allSatisfy { $0 >= 1_000 }, "milliseconds between chunks: \(gaps)")
            let sizes = try await PostgresTestServer.integers(
                "SELECT accepted FROM push_chunks WHERE push_id = '\(id)' ORDER BY sequence", database: cluster.databaseURL)
            #expect(sizes == [20, 20, 20])
        }
    }
}

/// Two nodes, one database, one simulator.
struct MultiNode: Sendable {
    let nodes: [RunningServer]
    let simulator: APNsSimulator
    let key: APNsSigningKey
    let databaseURL: String
    /// What both nodes logged at warning level and above.
    let logs: LogRecorder

    func arrivals() -> [RecordedNotification] {
        simulator.state.notifications(after: 0, limit: 100_000)
    }

    /// What the simulator received, once `count` notifications have arrived or 30 s have passed.
    func arrivals(count: Int) async throws -> [RecordedNotification] {
        // The callers check the count, saying what was missing; a shortfall is theirs to report.
        try? await waitUntil("\(count) arrivals", within: 30, every: .milliseconds(100)) { self.arrivals().count >= count }
        return arrivals()
    }

    /// The alert titles `token` received, in arrival order.
    static func titles(in arrivals: [RecordedNotification], for token: String) throws -> [String?] {
        try arrivals.filter { $0.token == token }.map { arrival in
            try JSONValue(parsing: Data(arrival.payload.utf8))[path: "aps.alert.title"]?.string
        }
    }

    /// The app `shop`, delivering to the simulator with a token key.
    func createApp(on node: RunningServer) async throws {
        let escape = { (text: String) in text.replacingOccurrences(of: "\n", with: "\\n") }
        let created = try await node.admin.post("/v1/apps", """
            {"id": "shop", "topic": "com.example.shop", "environment": "custom",
             "endpoint": {"host": "127.0.0.1", "port": \(simulator.port), "caPEM": "\(escape(simulator.certificateAuthority.certificatePEM))"},
             "credentials": {"type": "token", "keyPEM": "\(escape(key.pemRepresentation))", "keyID": "\(key.keyID)", "teamID": "\(key.teamID)"}}
            """)
        #expect(created.status == 201, "\(created.text)")
        let json = try created.json()
        secrets.withLock { $0 = (json["appKey"]?.string ?? "", json["masterSecret"]?.string ?? "") }
    }

    /// The app's key.
    var appKey: String { secrets.withLock { $0.appKey } }

    /// Node `index`'s API with the app's master secret.
    func master(_ index: Int) -> HTTPTestClient { nodes[index].api.with(bearer: secrets.withLock { $0.masterSecret }) }

    /// What the large-push tests share: the app `shop` (made through the first node), `devices` devices registered
    /// through the second, and one push to all of them through the second, expected whole: each device once, each
    /// chunk recorded once, both nodes sending. Every answer takes 100-150 ms: one node alone, 20 in flight, needs
    /// over two seconds for the 20 chunks, so the other claims some even if it misses the wake-up and only finds the
    /// push at its next look (every second). - Returns: the push's id.
    func pushToAllWithBothNodesSending(devices: Int) async throws -> String {
        try await createApp(on: nodes[0])
        try await register(devices, on: nodes[1])
        try simulator.state.setLatency(.init(minMilliseconds: 100, maxMilliseconds: 150))

        let push = try await completedPush(title: "one", through: 1)
        let id = try #require(push["id"]?.string)
        #expect(push["counts"]?["accepted"]?.int == devices)
        #expect(push["counts"]?["targeted"]?.int == devices, "each chunk recorded once")
        let arrivals = self.arrivals()
        #expect(arrivals.count == devices, "\(arrivals.count - devices) more than one a device")
        #expect(Set(arrivals.map(\.token)).count == devices, "each device got it")
        let owners = try await PostgresTestServer.integers(
            "SELECT COUNT(DISTINCT owner) FROM push_chunks WHERE push_id = '\(id)'", database: databaseURL)
        #expect(owners == [2], "both nodes claimed chunks of the push")
        return id
    }

    /// A push titled `title` to every device, made through node `node`, once it completed. Alone, such a push of 400
    /// takes about two seconds; with the whole suite running on two cores, once over 30. So it is waited for while
    /// its results keep coming (`?wait=`, then reading it), and the test fails, with what the nodes logged, once no
    /// result has come for 30 s: a stuck push fails, a slow one passes.
    func completedPush(title: String, through node: Int) async throws -> JSONValue {
        let answer = try await master(node).post("/v1/apps/shop/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, title: title))
        #expect(answer.status == 201 || answer.status == 202, "\(answer.text)")
        var push = try answer.json()
        guard answer.status == 202, let id = push["id"]?.string else { return push }
        do {
            try await waitUntil("push \(id) to complete", stalledFor: 30, within: 180, every: .milliseconds(200)) {
                push = try await master(node).get("/v1/apps/shop/pushes/\(id)").json()
                return (push["status"]?.string == "completed", push["counts"]?["targeted"]?.int)
            }
        } catch {
            // The rows as the database holds them, for the diagnosis (which does not hide the failure if it fails).
            let rows = (try? await PostgresTestServer.texts(
                """
                SELECT format('push %s: status %s, handed_out %s, chunks %s', id, status, handed_out, chunks) FROM pushes WHERE id = '\(id)'
                UNION ALL
                SELECT format('chunk %s: %s by %s, lease_until %s, accepted %s, failed %s', sequence, status, owner, lease_until, accepted, failed)
                FROM (SELECT * FROM push_chunks WHERE push_id = '\(id)' ORDER BY sequence) k
                """, database: databaseURL)) ?? ["(the rows could not be read)"]
            Issue.record(
                error, "\(push)\nthe database holds:\n\(rows.joined(separator: "\n"))\nthe nodes logged:\n\(logs.lines(atLeast: .warning).joined(separator: "\n"))")
        }
        return push
    }

    /// Registers `count` devices with the app key, through `node`, eight at a time (one at a time, 400 took most of
    /// a minute while the whole suite ran).
    func register(_ count: Int, on node: RunningServer) async throws {
        let appKey = secrets.withLock { $0.appKey }
        let client = node.api.with(bearer: appKey)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<count {
                if n >= 8 { try await group.next() }
                group.addTask {
                    let answer = try await client.put("/v1/apps/shop/devices/\(Fixture.device(n))", Fixture.registration(token: Fixture.token(n)))
                    #expect(answer.status == 200 || answer.status == 201, "\(answer.text)")
                }
            }
            try await group.waitForAll()
        }
    }

    private let secrets = SecretsBox()

    /// Runs two nodes (chunks of 20, `concurrency` notifications in flight per chunk) on a fresh database and a
    /// simulator, all stopped afterwards.
    static func with(
        concurrency: Int = 1000, secondClocks: ServerClocks = .system, callTimeout: Duration = PostgresTestServer.callTimeout,
        logs given: LogRecorder? = nil, configure extra: @escaping (inout TernServerConfiguration) -> Void = { _ in },
        _ body: (MultiNode) async throws -> Void
    ) async throws {
        let key = APNsSigningKey.generate(keyID: "NODEKEY001", teamID: "NODETEAM01")
        var configuration = try APNsSimulator.Configuration()
        configuration.port = 0
        configuration.controlPort = nil
        configuration.legacyGatewayPort = nil
        configuration.feedbackPort = nil
        configuration.environment = .production
        configuration.tokenKeys = [ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)]
        try await APNsSimulator.withRunning(configuration, logger: Logger(label: "test.simulator")) { simulator in
            try await PostgresTestServer.withDatabase(prefix: "tern_nodes") { url in
                // Printed too, as the nodes' logs were before they were kept for the large pushes' failure messages.
                let logs = given ?? LogRecorder(printing: true)
                let serverKey = Data((0..<32).map { UInt8($0) }).base64EncodedString()
                let configure = { (settings: inout TernServerConfiguration) in
                    settings.database.url = url
                    settings.database.callTimeout = callTimeout
                    settings.server.key = serverKey
                    settings.simulator.enabled = false
                    settings.demo.enabled = false
                    settings.delivery.chunkSize = 20
                    settings.delivery.concurrency = concurrency
                    extra(&settings)
                }
                try await ServerHarness.withServer(configure: configure, logs: logs) { first in
                    try await ServerHarness.withServer(configure: configure, clocks: secondClocks, logs: logs) { second in
                        try await body(MultiNode(nodes: [first, second], simulator: simulator, key: key, databaseURL: url, logs: logs))
                    }
                }
            }
        }
    }
}

private final class SecretsBox: Sendable {
    private let value = Mutex<(appKey: String, masterSecret: String)>(("", ""))
    func withLock<T: Sendable>(_ body: (inout sending (appKey: String, masterSecret: String)) -> sending T) -> T { value.withLock(body) }
}

/// The system's time, `seconds` ahead: a node whose clock is off.
private struct ClockAhead: WallClock {
    let seconds: TimeInterval
    init(by seconds: TimeInterval) { self.seconds = seconds }
    var now: Date { Date().addingTimeInterval(seconds) }
}

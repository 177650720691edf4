import Foundation
import TernAPNs
import TernServer
import TernSimulator
import TernTestSupport
import Testing

/// Several apps on one node: one app's large push, or an app whose endpoint is down, does not hold up another app.
struct FairnessTests {
    /// The demo app's one-device push (device 100, registered by the test), made while another app's push is held up:
    /// how long it took to be accepted.
    static func otherAppsPush(_ server: RoutedServer) async throws -> Duration {
        let started = ContinuousClock.now
        let other = try await server.master.post(
            "/v1/apps/demo/pushes?wait=30", Fixture.push(audience: #"{"devices": ["\#(Fixture.device(100))"]}"#, title: "other"))
        let waited = ContinuousClock.now - started
        #expect(other.status == 201, "\(other.text)")
        #expect(try other.json()[path: "counts.accepted"]?.int == 1)
        return waited
    }

    /// Chunks of 10, two at a time, 20 in flight: an app's first two chunks can take every chunk slot and permit.
    static func twoChunksFillTheNode(sendTimeout: Duration) -> @Sendable (inout TernServerConfiguration) -> Void {
        { configuration in
            configuration.delivery.chunkSize = 10
            configuration.delivery.pushes = 2
            configuration.delivery.concurrency = 20
            configuration.delivery.minimumConcurrency = 20
            configuration.apns.sendTimeout = sendTimeout
        }
    }

    /// Waits until `app`'s push `id` has completed.
    static func waitForCompletion(_ master: RouterTestClient, app: String, push id: String, within seconds: Double) async throws {
        try await waitUntil("\(app)'s push to complete", within: seconds) {
            try await master.get("/v1/apps/\(app)/pushes/\(id)").json()["status"]?.string == "completed"
        }
    }

    @Test func anAppWhoseEndpointIsDownHoldsUpNoOtherApp() async throws {
        try await withClosedPort { port in
            // The down app's first two chunks would take every chunk slot and every permit until the send timeout.
            try await RouterHarness.withServer(configure: Self.twoChunksFillTheNode(sendTimeout: .seconds(10))) { server in
                let devices = 50
                let (_, downMaster) = try await server.createCustomApp(
                    "down", port: port, key: APNsSigningKey.generate(keyID: "ABCDE12345", teamID: "TEAM123456"), devices: devices)
                _ = try await server.register(Fixture.device(100), token: Fixture.token(100))

                let stuck = try await downMaster.post("/v1/apps/down/pushes", Fixture.push(audience: #"{"all": true}"#, title: "stuck"))
                #expect(stuck.status == 202, "\(stuck.text)")
                let stuckID = try #require(try stuck.json()["id"]?.string)
                try await waitUntil("the down app's push to be claimed", within: 10) {
                    try await downMaster.get("/v1/apps/down/pushes/\(stuckID)").json()["status"]?.string == "sending"
                }
                let waited = try await Self.otherAppsPush(server)
                // Its chunks waited for a connection holding no room and no permit: the other app's push did not wait
                // for the down app's send timeout (10 s).
                #expect(waited < .seconds(5), "the other app's push took \(waited)")
                #expect(try await downMaster.get("/v1/apps/down/pushes/\(stuckID)").json()["status"]?.string == "sending")

                // Then the down app's push ends: once its first chunk waited a whole send time, each notification fails
                // at once, naming the connect error, and the later chunks do not wait again.
                try await Self.waitForCompletion(downMaster, app: "down", push: stuckID, within: 40)
                let ended = try await downMaster.get("/v1/apps/down/pushes/\(stuckID)").json()
                #expect(ended[path: "counts.failed"]?.int == devices)
                #expect(ended[path: "counts.failedByReason.connectionFailed"]?.int == devices, "\(ended)")
                // The push says why, as the client did: the endpoint it could not reach.
                let detail = try #require(ended[path: "failureDetails.connectionFailed"]?.string, "\(ended)")
                #expect(detail.contains("last connect error: 127.0.0.1:\(port)"), "\(detail)")
            }
        }
    }

    @Test func aLegacyAppWhoseGatewayIsDownHoldsUpNoOtherAppAndItsNextPushFailsAtOnce() async throws {
        // A gateway that takes TCP and never completes the TLS handshake, as a host whose service is gone can.
        let gateway = try await HostileLegacyPeer.start(.silentTCP, topic: "com.example.old")
        // The legacy app's first two chunks would take every permit until the send timeout.
        try await RouterHarness.withServer(configure: Self.twoChunksFillTheNode(sendTimeout: .seconds(6))) { server in
            let escape = { (text: String) in text.replacingOccurrences(of: "\n", with: "\\n") }
            let created = try await server.admin.post("/v1/apps", """
                {"id": "old", "topic": "com.example.old", "environment": "custom", "transport": "legacy",
                 "endpoint": {"host": "127.0.0.1", "port": \(gateway.port), "caPEM": "\(escape(gateway.trustRootsPEM))"},
                 "credentials": {"type": "certificate", "certificatePEM": "\(escape(gateway.client.certificatePEM))",
                                 "privateKeyPEM": "\(escape(gateway.client.privateKeyPEM))"}}
                """)
            #expect(created.status == 201, "\(created.text)")
            let app = try created.json()
            let appKey = try #require(app["appKey"]?.string)
            let oldMaster = server.master.with(bearer: try #require(app["masterSecret"]?.string))
            let devices = 40
            for number in 0..<devices {
                let registered = try await server.device.with(bearer: appKey)
                    .put("/v1/apps/old/devices/\(Fixture.device(number))", Fixture.registration(token: Fixture.token(number)))
                #expect(registered.status == 200, "\(registered.text)")
            }
            _ = try await server.register(Fixture.device(100), token: Fixture.token(100))

            let started = ContinuousClock.now
            let stuck = try await oldMaster.post("/v1/apps/old/pushes", Fixture.push(audience: #"{"all": true}"#, title: "stuck"))
            #expect(stuck.status == 202, "\(stuck.text)")
            let stuckID = try #require(try stuck.json()["id"]?.string)
            try await waitUntil("the legacy app's client to connect", within: 10) { gateway.connections >= 1 }
            let waited = try await Self.otherAppsPush(server)
            // Its chunk waited for a handshake holding no permit: the other app's push did not wait for the legacy
            // app's send timeout (6 s).
            #expect(waited < .seconds(3), "the other app's push took \(waited)")

            // After one send time, its notifications fail, and so do those of its later chunks, at once.
            try await Self.waitForCompletion(oldMaster, app: "old", push: stuckID, within: 30)
            let took = ContinuousClock.now - started
            let ended = try await oldMaster.get("/v1/apps/old/pushes/\(stuckID)").json()
            #expect(ended[path: "counts.failedByReason.connectionFailed"]?.int == devices, "\(ended)")
            #expect(took < .seconds(12), "one send time and no more: \(took)")

            // The next push is not held either: it fails at once, saying why, and the gateway is not tried again
            // before the probe interval (30 s).
            let connections = gateway.connections
            let nextStarted = ContinuousClock.now
            let next = try await oldMaster.post("/v1/apps/old/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, title: "next"))
            let nextTook = ContinuousClock.now - nextStarted
            #expect(next.status == 201, "\(next.text)")
            let nextBody = try next.json()
            #expect(nextBody[path: "counts.failedByReason.connectionFailed"]?.int == devices, "\(nextBody)")
            let detail = nextBody[path: "failureDetails.connectionFailed"]?.string ?? ""
            #expect(detail.contains("the gateway is unreachable"), "\(nextBody)")
            #expect(nextTook < .seconds(3), "the next push took \(nextTook)")
            #expect(gateway.connections == connections)
        }
        await gateway.stop()
    }

    @Test func anAppWhoseEndpointStopsAnsweringHoldsUpNoOtherAppFailsSoonAndRecovers() async throws {
        // An endpoint that takes connections and streams and answers none: a simulator whose every answer takes an hour.
        let key = APNsSigningKey.generate(keyID: "SILENT0001", teamID: "TEAM123456")
        try await APNsSimulator.withRunning(.endpoint(trusting: key)) { silent in
            let control = HTTPTestClient(port: try #require(silent.controlPort))
            let latency = try await control.put("/scenario/latency", #"{"fixedMilliseconds": 3600000}"#)
            #expect(latency.status == 204, "\(latency.text)")
            // 20 in flight on the node; the silent app's window starts at half the least of it (10). Chunks of 10.
            try await RouterHarness.withServer(configure: {
                $0.delivery.chunkSize = 10
                $0.delivery.pushes = 4
                $0.delivery.concurrency = 20
                $0.delivery.minimumConcurrency = 20
                $0.apns.sendTimeout = .seconds(6)
            }) { server in
                let devices = 50
                let (_, silentMaster) = try await server.createCustomApp(
                    "silent", port: silent.port, caPEM: silent.certificateAuthority.certificatePEM, key: key, devices: devices)
                _ = try await server.register(Fixture.device(100), token: Fixture.token(100))

                let started = ContinuousClock.now
                let stuck = try await silentMaster.post("/v1/apps/silent/pushes", Fixture.push(audience: #"{"all": true}"#, title: "stuck"))
                #expect(stuck.status == 202, "\(stuck.text)")
                let stuckID = try #require(try stuck.json()["id"]?.string)
                try await waitUntil("the silent app's notifications to reach its endpoint", within: 10) {
                    try await control.get("/stats").json()["requests"]?.int ?? 0 >= 10
                }
                let waited = try await Self.otherAppsPush(server)
                // The silent app holds its window's 10 permits, not the node's 20, and its next chunks wait without
                // any: the other app's push did not wait for the silent app's attempt timeout (6 s).
                #expect(waited < .seconds(3), "the other app's push took \(waited)")

                // Its first notifications time out with nothing answered meanwhile: the endpoint is silent. The rest
                // of the push fails then, unsent, but for one probe at a time.
                try await Self.waitForCompletion(silentMaster, app: "silent", push: stuckID, within: 30)
                let took = ContinuousClock.now - started
                let ended = try await silentMaster.get("/v1/apps/silent/pushes/\(stuckID)").json()
                let timedOut = ended[path: "counts.failedByReason.timedOut"]?.int ?? 0
                let notAnswering = ended[path: "counts.failedByReason.notAnswering"]?.int ?? 0
                #expect(ended[path: "counts.failed"]?.int == devices, "\(ended)")
                #expect(timedOut + notAnswering == devices, "\(ended)")
                #expect((10...11).contains(timedOut), "its window's 10, and one probe at most: \(ended)")
                // Two attempt timeouts at most (the window's, then a probe's), not one per window's worth (five).
                #expect(took < .seconds(16), "the silent push took \(took)")
                let requests = try await control.get("/stats").json()["requests"]?.int
                #expect(requests == timedOut, "only the notifications that timed out reached the endpoint")

                // The endpoint answers again: the next push's probe is answered and the whole push goes.
                _ = try await control.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
                let again = try await silentMaster.post("/v1/apps/silent/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, title: "again"))
                #expect(again.status == 201, "\(again.text)")
                #expect(try again.json()[path: "counts.accepted"]?.int == devices, "\(again.text)")
            }
        }
    }

    @Test func anotherAppsSmallPushGoesOutWhileALargePushIsSentNotAfterIt() async throws {
        // Chunks of 20 and 20 in flight: a node holds about three chunks of the large push at a time.
        try await RouterHarness.withServer(configure: {
            $0.delivery.chunkSize = 20
            $0.delivery.concurrency = 20
            $0.delivery.minimumConcurrency = 20
        }) { server in
            let devices = 600
            for number in 0..<devices {
                _ = try await server.register(Fixture.device(number), token: Fixture.token(number), tags: ["big"])
            }
            let created = try await server.admin.post("/v1/apps", #"{"id": "small", "topic": "com.example.small", "environment": "simulator"}"#)
            #expect(created.status == 201, "\(created.text)")
            let app = try created.json()
            let appKey = try #require(app["appKey"]?.string)
            let masterSecret = try #require(app["masterSecret"]?.string)
            let registered = try await server.device.with(bearer: appKey)
                .put("/v1/apps/small/devices/\(Fixture.device(9_999))", Fixture.registration(token: Fixture.token(9_999)))
            #expect(registered.status == 200, "\(registered.text)")

            // Each answer takes 100 ms: the large push needs about three seconds.
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 100}"#)
            let large = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["big"]}"#, title: "large"))
            #expect(large.status == 202, "\(large.text)")
            let largeID = try #require(try large.json()["id"]?.string)
            let small = try await server.master.with(bearer: masterSecret)
                .post("/v1/apps/small/pushes?wait=30", Fixture.push(audience: #"{"devices": ["\#(Fixture.device(9_999))"]}"#, title: "small"))
            #expect(small.status == 201, "\(small.text)")
            #expect(try small.json()[path: "counts.accepted"]?.int == 1)

            // The small push took the first room a chunk of the large one gave back: most of the large push was still
            // to go. (Claimed oldest push first, it waited until the large push's last chunk was claimed.)
            let largeNow = try await server.master.get("/v1/apps/demo/pushes/\(largeID)").json()
            let sent = (largeNow[path: "counts.accepted"]?.int ?? 0) + (largeNow[path: "counts.failed"]?.int ?? 0)
            #expect(sent < devices / 2, "the large push had sent \(sent) of \(devices) when the small one completed")
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
            try await waitUntil("the large push to complete", within: 30) {
                try await server.master.get("/v1/apps/demo/pushes/\(largeID)").json()["status"]?.string == "completed"
            }
        }
    }

    @Test func anAppWhoseKeyAPNsRefusesSendsItsWindowAndFailsTheRestUnsentUntilTheKeyIsPutRight() async throws {
        let trusted = APNsSigningKey.generate(keyID: "TRUSTED001", teamID: "TEAM123456")
        let revoked = APNsSigningKey.generate(keyID: "REVOKED001", teamID: "TEAM123456")
        try await APNsSimulator.withRunning(.endpoint(trusting: trusted)) { apns in
            // The app's endpoint window starts at half the node's least in-flight limit: 10.
            try await RouterHarness.withServer(configure: {
                $0.delivery.concurrency = 20
                $0.delivery.minimumConcurrency = 20
            }) { server in
                let devices = 200
                let (_, master) = try await server.createCustomApp(
                    "revoked", port: apns.port, caPEM: apns.certificateAuthority.certificatePEM, key: revoked, devices: devices)
                let everyone = Fixture.push(audience: #"{"all": true}"#)

                // APNs refuses the key: what went before the first refusal came back is all that reaches it.
                let first = try await master.post("/v1/apps/revoked/pushes?wait=30", everyone).json()
                #expect(first[path: "counts.failedByReason.InvalidProviderToken"]?.int == devices, "\(first)")
                #expect(first[path: "failureDetails.InvalidProviderToken"]?.string?.hasPrefix("not sent: APNs refused the app's credentials") == true)
                let sent = apns.state.stats().requests
                #expect((1...10).contains(sent), "\(sent) requests reached APNs")

                // The next push sends nothing: no probe is due for a minute.
                let second = try await master.post("/v1/apps/revoked/pushes?wait=30", everyone).json()
                #expect(second[path: "counts.failedByReason.InvalidProviderToken"]?.int == devices, "\(second)")
                #expect(apns.state.stats().requests == sent)

                // The key put right: the app gets a new client, and its pushes go.
                let escape = { (text: String) in text.replacingOccurrences(of: "\n", with: "\\n") }
                let fixed = try await server.admin.patch("/v1/apps/revoked", """
                    {"credentials": {"type": "token", "keyPEM": "\(escape(trusted.pemRepresentation))", "keyID": "\(trusted.keyID)", "teamID": "\(trusted.teamID)"}}
                    """)
                #expect(fixed.status == 200, "\(fixed.text)")
                let third = try await master.post("/v1/apps/revoked/pushes?wait=30", everyone).json()
                #expect(third[path: "counts.accepted"]?.int == devices, "\(third)")
            }
        }
    }
}

import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// `POST …/pushes/{id}/cancel`: a push sent by mistake stops after the chunks in flight.
struct PushCancellationTests {
    @Test func aCancelledPushHandsOutNoMoreChunksAndCompletesWithTheOneInFlight() async throws {
        // When the cancel comes, one chunk is on the wire and four are still to be handed out.
        try await withASlowPush(to: 50) { server, id in
            // A later push of the app waits for this one's audience to be handed out.
            let later = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, title: "a second one"))
            let laterID = try #require(try later.json()["id"]?.string)

            // It takes no body: a member is refused, as an unknown field anywhere is, and nothing is cancelled.
            for (body, field) in [(#"{"reason": "wrong audience"}"#, "reason"), ("[]", "body"), ("no", "body")] {
                let refused = try await server.master.post("/v1/apps/demo/pushes/\(id)/cancel", body)
                #expect(refused.status == 400, "\(body): \(refused.text)")
                #expect(try refused.json()["field"]?.string == field, "\(body): \(refused.text)")
            }
            #expect(try await server.master.get("/v1/apps/demo/pushes/\(id)").json()["cancelledAt"] == nil)
            let cancelled = try await server.master.post("/v1/apps/demo/pushes/\(id)/cancel", "{}")
            #expect(cancelled.status == 200, "\(cancelled.text)")
            let view = try cancelled.json()
            #expect(view["status"]?.string == "sending", "its chunk in flight is still being sent")
            let cancelledAt = try #require(view["cancelledAt"]?.string)
            // The later push has handed out nothing: it completes at once.
            let laterCancelled = try await server.master.post("/v1/apps/demo/pushes/\(laterID)/cancel", "").json()
            #expect(laterCancelled["status"]?.string == "completed")
            #expect(laterCancelled[path: "counts.targeted"]?.int == 0)

            // It completes with its chunk in flight, and no other chunk goes.
            let done = try await server.master.get("/v1/apps/demo/pushes/\(id)")
            var push = try done.json()
            try await waitUntil("the cancelled push to complete", within: 10) {
                push = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
                return push["status"]?.string == "completed"
            }
            #expect(push[path: "counts.targeted"]?.int == 10)
            #expect(push[path: "counts.accepted"]?.int == 10)
            #expect(push["cancelledAt"]?.string == cancelledAt)
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
            // A push made now goes to everyone at once: the node is free, and the cancelled ones sent no more.
            let next = try await server.push(Fixture.push(audience: #"{"all": true}"#, title: "meant"))
            #expect(next[path: "counts.accepted"]?.int == 50)
            let arrivals = try await server.arrivals()
            #expect(arrivals.filter { $0.payload.contains("by mistake") }.count == 10)
            #expect(arrivals.filter { $0.payload.contains("meant") }.count == 50)

            // Cancelling again changes nothing; a push that completed by itself is a conflict; an unknown push is not
            // found; the app key may not.
            let again = try await server.master.post("/v1/apps/demo/pushes/\(id)/cancel", "")
            #expect(again.status == 200)
            #expect(try again.json()["cancelledAt"]?.string == cancelledAt)
            let nextID = try #require(next["id"]?.string)
            let finished = try await server.master.post("/v1/apps/demo/pushes/\(nextID)/cancel", "")
            #expect(finished.status == 409, "\(finished.text)")
            #expect(try finished.json()["message"]?.string?.contains("completed before it was cancelled") == true)
            #expect(try await server.master.post("/v1/apps/demo/pushes/\(UUID().uuidString.lowercased())/cancel", "").status == 404)
            #expect(try await server.device.post("/v1/apps/demo/pushes/\(id)/cancel", "").status == 403)
        }
    }

    @Test func theConsoleStopsAPushFromItsPageWithItsFormAndNotWithoutIt() async throws {
        try await withASlowPush(to: 30) { server, id in
            let browser = ConsoleBrowser(server)
            try await browser.signIn(try #require(server.master.bearer))
            let page = try await browser.get("/console/apps/demo/pushes/\(id)")
            #expect(page.text.contains("Stop this push"), "\(page.text.prefix(3000))")

            // Without the page's CSRF token, nothing is stopped.
            let forged = try await browser.post("/console/apps/demo/pushes/\(id)/cancel", [], csrf: .some("forged"))
            #expect(forged.status == 403)
            #expect(try await server.master.get("/v1/apps/demo/pushes/\(id)").json()["cancelledAt"] == nil)

            let stopped = try await browser.post("/console/apps/demo/pushes/\(id)/cancel", [])
            #expect(stopped.status == 303)
            #expect(stopped.header("Location") == "/console/apps/demo/pushes/\(id)")
            let after = try await browser.get("/console/apps/demo/pushes/\(id)")
            #expect(after.text.contains("no recipient was handed out after it"))
            #expect(!after.text.contains("Stop this push"))
            var push = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
            #expect(push["cancelledAt"]?.string != nil)
            try await waitUntil("the cancelled push to complete", within: 10) {
                push = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
                return push["status"]?.string == "completed"
            }
            #expect((push[path: "counts.targeted"]?.int ?? 30) < 30, "\(push)")
        }
    }

    /// A server sending chunks of 10, one at a time, with APNs answering in 1.5 s, and a push to all of its `devices`
    /// devices (registered first) whose first chunk is on the wire; APNs answers at once again afterwards.
    private func withASlowPush(to devices: Int, _ body: @escaping @Sendable (RoutedServer, String) async throws -> Void) async throws {
        try await RouterHarness.withServer(configure: {
            $0.delivery.chunkSize = 10
            $0.delivery.pushes = 1
        }) { server in
            for number in 0..<devices { _ = try await server.register(Fixture.device(number), token: Fixture.token(number)) }
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 1500}"#)
            // The simulator counts requests as they come, and logs them as arrivals once answered.
            let requestsBefore = try await server.simulator.get("/stats").json()["requests"]?.int ?? 0
            let sent = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, title: "by mistake"))
            #expect(sent.status == 202, "\(sent.text)")
            try await waitUntil("the push's first chunk to be on the wire", within: 10) {
                try await server.simulator.get("/stats").json()["requests"]?.int == requestsBefore + 10
            }
            try await body(server, try #require(try sent.json()["id"]?.string))
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
        }
    }
}

import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// `GET /v1/apps/{app}/pushes`: what a backend has sent and scheduled, newest first.
struct PushListTests {
    @Test func theAppsPushesAreListedNewestFirstAPageAtATimeAndByStatus() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(clocks: .manual(clock)) { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            var sent: [String] = []
            for n in 0..<3 {
                let push = try await server.push(Fixture.push(audience: #"{"all": true}"#, title: "sent \(n)"))
                sent.append(try #require(push["id"]?.string))
            }
            let sendAt = ScheduledPushTests.text(clock.wall.now.addingTimeInterval(3600))
            let scheduled = try await server.master.post(
                "/v1/apps/demo/pushes", Fixture.push(audience: #"{"all": true}"#, title: "later", extra: #", "sendAt": "\#(sendAt)""#))
            let later = try #require(try scheduled.json()["id"]?.string)
            let other = try await server.admin.post("/v1/apps", #"{"id": "other", "topic": "com.example.other", "environment": "simulator"}"#)
            #expect(other.status == 201)

            let all = try await server.master.get("/v1/apps/demo/pushes").json()
            let listed = try #require(all["pushes"]?.arrayItems)
            #expect(listed.compactMap { $0["id"]?.string } == [later] + sent.reversed())
            #expect(all["next"] == nil)
            #expect(listed.first?["status"]?.string == "scheduled")
            #expect(listed.first?["sendAt"]?.string == sendAt)
            #expect(listed.last?[path: "counts.accepted"]?.int == 1)
            #expect(listed.allSatisfy { $0["failures"] == nil }, "a list carries no failures")

            // Two at a time: the second page follows the first's next, and is the last.
            let first = try await server.master.get("/v1/apps/demo/pushes?limit=2").json()
            #expect(first["pushes"]?.arrayItems?.compactMap { $0["id"]?.string } == [later, sent[2]])
            let next = try #require(first["next"]?.string)
            let second = try await server.master.get("/v1/apps/demo/pushes?limit=2&after=\(next)").json()
            #expect(second["pushes"]?.arrayItems?.compactMap { $0["id"]?.string } == [sent[1], sent[0]])
            #expect(second["next"] == nil)

            let waiting = try await server.master.get("/v1/apps/demo/pushes?status=scheduled").json()
            #expect(waiting["pushes"]?.arrayItems?.compactMap { $0["id"]?.string } == [later])
            let done = try await server.master.get("/v1/apps/demo/pushes?status=completed").json()
            #expect(done["pushes"]?.arrayItems?.compactMap { $0["id"]?.string } == sent.reversed())
            let none = try await server.master.get("/v1/apps/demo/pushes?status=sending").json()
            #expect(none["pushes"]?.arrayItems?.isEmpty == true)
            // Another app lists its own: none.
            let otherMaster = try #require(try other.json()["masterSecret"]?.string)
            let otherList = try await server.api.with(bearer: otherMaster).send(.GET, "/v1/apps/other/pushes", body: nil).json()
            #expect(otherList["pushes"]?.arrayItems?.isEmpty == true)

            for (query, field) in [
                ("status=done", "status"), ("status=", "status"), ("limit=0", "limit"), ("limit=101", "limit"), ("limit=x", "limit"),
                ("after=-1", "after"), ("after=abc", "after"), ("colour=red", "colour"), ("status=pending&status=sending", "status"),
            ] {
                let refused = try await server.master.get("/v1/apps/demo/pushes?\(query)")
                #expect(refused.status == 400, "\(query): \(refused.text)")
                #expect(try refused.json()["field"]?.string == field, "\(query): \(refused.text)")
            }
            #expect(try await server.device.get("/v1/apps/demo/pushes").status == 403)
        }
    }
}

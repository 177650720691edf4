import Foundation
import TernTestSupport
import Testing

/// `GET /metrics` of a running `tern serve` (the process bootstraps the Prometheus registry; the in-process suites
/// have none): failures are counted by reason, and every series the node gives is in the deployment guide's
/// "Monitoring" table.
@Suite struct MetricsTests {
    /// The deployment guide, from this file's place in the repository.
    static let deploymentGuide = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/deployment.md")

    /// The value of a series without labels, as Prometheus' text gives it (`name 3`).
    static func value(of series: String, in metrics: String) -> Double? {
        metrics.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
    }

    @Test func failuresAreCountedByReasonAndEverySeriesIsInTheDeploymentGuide() async throws {
        let folder = ServeCommandTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // Webhooks may go to loopback here, so the test's receiver (a closed port) fails as a down receiver would.
        let serve = try ServeProcess(folder: folder, environment: ["TERN_WEBHOOKS_ALLOW_PRIVATE_NETWORKS": "true"])
        defer { _ = serve.interrupt() }
        let appKey = try #require(serve.value(after: "app key"))
        let master = try #require(serve.value(after: "master secret"))
        let controlPort = try #require(
            serve.banner.components(separatedBy: "control API http://127.0.0.1:").dropFirst().first?.prefix { $0.isNumber })
        let control = HTTPTestClient(port: try #require(Int(controlPort)))

        let device = serve.client(bearer: appKey)
        var secrets: [String] = []
        for number in 1...3 {
            let registered = try await device.put(
                "/v1/apps/demo/devices/\(ServeCommandTests.device(number))",
                #"{"token": "\#(ServeCommandTests.token(number))", "environment": "production", "tags": ["metrics"]}"#)
            #expect(registered.status == 200, "\(registered.text)")
            guard case .string(let secret)? = try registered.json()["deviceSecret"] else {
                Issue.record("no device secret: \(registered.text)")
                return
            }
            secrets.append(secret)
        }
        // A webhook receiver that is down.
        let adminToken = try #require(serve.value(after: "admin token"))
        let admin = serve.client(bearer: adminToken)
        let patched = try await admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:9/hook"}"#)
        #expect(patched.status == 200, "\(patched.text)")
        // The built-in simulator answers 410 Unregistered for the first device's token from now on.
        let unregistered = try await control.post("/tokens/\(ServeCommandTests.token(1))/unregister", "{}")
        #expect(unregistered.status == 204, "\(unregistered.text)")
        let push = try await serve.client(bearer: master).post(
            "/v1/apps/demo/pushes?wait=10", #"{"audience": {"tags": ["metrics"]}, "notification": {"title": "Counted"}}"#)
        #expect(push.status == 201, "\(push.text)")
        #expect(try push.json()["counts"]?["failedByReason"]?["Unregistered"] == .int(1))
        // The second device's extension reports the push's arrival, and its user opens it.
        guard case .string(let pushID)? = try push.json()["id"] else {
            Issue.record("no push id: \(push.text)")
            return
        }
        for report in ["acks", "opens"] {
            let reported = try await device.send(
                .POST, "/v1/apps/demo/devices/\(ServeCommandTests.device(2))/\(report)", body: #"{"pushId": "\#(pushID)"}"#,
                headers: [("X-Tern-Device-Secret", secrets[1])])
            #expect([200, 204].contains(reported.status), "\(report): \(reported.text)")
        }
        // A scheduled push cancelled completes too.
        let tomorrow = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
        let scheduled = try await serve.client(bearer: master).post(
            "/v1/apps/demo/pushes", #"{"audience": {"tags": ["metrics"]}, "notification": {"title": "Later"}, "sendAt": "\#(tomorrow)"}"#)
        guard case .string(let scheduledID)? = try scheduled.json()["id"] else {
            Issue.record("no push id: \(scheduled.text)")
            return
        }
        let cancelled = try await serve.client(bearer: master).post("/v1/apps/demo/pushes/\(scheduledID)/cancel")
        #expect(cancelled.status == 200, "\(cancelled.text)")

        let metrics = try await serve.client(bearer: nil).get("/metrics").text
        for line in [
            #"tern_push_failures_total{reason="Unregistered"} 1"#,
            #"tern_push_recipients_total{outcome="failed"} 1"#,
            #"tern_push_recipients_total{outcome="accepted"} 2"#,
            #"tern_apns_rejected_total{reason="Unregistered"} 1"#,
            "tern_tokens_pruned_total 1",
            "tern_pushes_completed_total 2",
            "tern_push_opens_total 1",
            "tern_push_receipts_total 1",
            "tern_devices_created_total 3",
            // The API's answers, by the route's pattern.
            #"tern_http_requests_total{route="/v1/apps/{app}/devices/{device}",method="PUT",status="200"} 3"#,
            #"tern_http_requests_total{route="/v1/apps/{app}/pushes",method="POST",status="201"} 1"#,
        ] {
            #expect(metrics.contains(line), "\(line) is not in /metrics:\n\(metrics)")
        }

        // A refusal is counted under its route, and a path no route has under one name, whatever the path.
        #expect(try await device.put("/v1/apps/demo/devices/\(ServeCommandTests.device(4))", #"{"token": "zz"}"#).status == 400)
        for number in 1...3 { #expect(try await device.get("/no/such/path/\(number)").status == 404) }
        let refusals = try await serve.client(bearer: nil).get("/metrics").text
        for line in [
            #"tern_http_request_errors_total{route="/v1/apps/{app}/devices/{device}",method="PUT",status="400"} 1"#,
            #"tern_http_requests_total{route="NotFound",method="GET",status="404"} 3"#,
            // Timed as the answers that were no error are: the API's latency includes its refusals.
            #"tern_http_request_duration_seconds_count{route="/v1/apps/{app}/devices/{device}",method="PUT",status="400"} 1"#,
            #"tern_http_request_duration_seconds_count{route="NotFound",method="GET",status="404"} 3"#,
            #"tern_http_request_duration_seconds_count{route="/v1/apps/{app}/devices/{device}",method="PUT",status="200"} 3"#,
        ] {
            #expect(refusals.contains(line), "\(line) is not in /metrics:\n\(refusals)")
        }
        #expect(!refusals.contains("/no/such/path"))
        // A device registered again is no new device; a refused registration is none at all.
        let first = try await device.put(
            "/v1/apps/demo/devices/\(ServeCommandTests.device(5))", #"{"token": "\#(ServeCommandTests.token(5))", "environment": "production"}"#)
        guard case .string(let secret)? = try first.json()["deviceSecret"] else {
            Issue.record("no deviceSecret in \(first.text)")
            return
        }
        let again = try await device.send(
            .PUT, "/v1/apps/demo/devices/\(ServeCommandTests.device(5))",
            body: #"{"token": "\#(ServeCommandTests.token(6))", "environment": "production"}"#, headers: [("X-Tern-Device-Secret", secret)])
        #expect(again.status == 200, "\(again.text)")
        #expect(Self.value(of: "tern_devices_created_total", in: try await serve.client(bearer: nil).get("/metrics").text) == 4)

        // The pruned token's event waits for the receiver, and the failed post is counted.
        try await waitUntil("the failed webhook post is counted") {
            (Self.value(of: "tern_webhook_failures_total", in: try await serve.client(bearer: nil).get("/metrics").text) ?? 0) >= 1
        }
        let last = try await serve.client(bearer: nil).get("/metrics").text
        #expect(Self.value(of: "tern_webhook_events_delivered_total", in: last) == 0)

        // The legacy feedback service's deactivations are pruned tokens too: the app on the legacy transport, and a
        // token the service lists as dead since a minute from now.
        #expect(try await admin.patch("/v1/apps/demo", #"{"transport": "legacy"}"#).status == 200)
        let deadSince = Int64((Date().timeIntervalSince1970 + 60) * 1000)
        let listed = try await control.post("/tokens/\(ServeCommandTests.token(2))/unregister", #"{"timestamp": \#(deadSince)}"#)
        #expect(listed.status == 204, "\(listed.text)")
        let feedback = try await admin.post("/v1/apps/demo/feedback")
        #expect(feedback.status == 200, "\(feedback.text)")
        #expect(try feedback.json()["deactivated"] == .int(1), "\(feedback.text)")
        #expect(Self.value(of: "tern_tokens_pruned_total", in: try await serve.client(bearer: nil).get("/metrics").text) == 2)

        // An app on a certificate (the legacy transport's, from the built-in simulator's CA, good for a year): its end
        // is a gauge from the moment the node makes the app's client for a push.
        let legacyPush = try await serve.client(bearer: master).post(
            "/v1/apps/demo/pushes?wait=10", #"{"audience": {"tags": ["metrics"]}, "notification": {"title": "Over 2195"}}"#)
        #expect(legacyPush.status == 201, "\(legacyPush.text)")
        let withCertificate = try await serve.client(bearer: nil).get("/metrics").text
        let expiry = try #require(
            Self.value(of: #"tern_apns_certificate_expiry_timestamp_seconds{app="demo"}"#, in: withCertificate), "\(withCertificate)")
        #expect(abs(expiry - Date().addingTimeInterval(365 * 86400).timeIntervalSince1970) < 86400, "\(expiry)")
        // Back on a token key: the series goes, so no alert is left about a certificate the app no longer uses.
        #expect(try await admin.patch("/v1/apps/demo", #"{"transport": "http2"}"#).status == 200)
        let withoutCertificate = try await serve.client(bearer: nil).get("/metrics").text
        #expect(!withoutCertificate.contains("tern_apns_certificate_expiry_timestamp_seconds{"), "\(withoutCertificate)")

        // Every series family the node gives is named in the guide's table (`name` or `name{labels}` in backquotes).
        let guide = try String(contentsOf: Self.deploymentGuide, encoding: .utf8)
        let monitoring = try #require(guide.components(separatedBy: "## Monitoring").dropFirst().first?.components(separatedBy: "\n## ").first)
        let families = withCertificate.split(separator: "\n").compactMap { line -> String? in
            line.hasPrefix("# TYPE ") ? line.split(separator: " ").dropFirst(2).first.map(String.init) : nil
        }
        #expect(families.count >= 20, "\(families)")
        for family in families {
            #expect(monitoring.contains("`\(family)`") || monitoring.contains("`\(family){"), "\(family) is not in docs/deployment.md's Monitoring table")
        }
    }
}

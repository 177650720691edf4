import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// `/v1/apps`: creation, secrets shown once, validation, rotation, deletion; `/health`, `/ready`, `/metrics`.
@Suite(.serialized) struct AppsTests {
    static let keyPEM = APNsSigningKey.generate(keyID: "ABCDE12345", teamID: "TEAM123456").pemRepresentation

    static func tokenApp(id: String = "shop") -> String {
        let pem = keyPEM.replacingOccurrences(of: "\n", with: "\\n")
        return #"{"id": "\#(id)", "topic": "com.example.shop", "environment": "production", "credentials": {"type": "token", "keyPEM": "\#(pem)", "keyID": "ABCDE12345", "teamID": "TEAM123456"}}"#
    }

    @Test func anAppsSecretsAndKeyAreShownOnlyWhenMade() async throws {
        try await RouterHarness.withServer { server in
            let created = try await server.admin.post("/v1/apps", Self.tokenApp())
            #expect(created.status == 201)
            let app = try created.json()
            #expect(app["appKey"]?.string?.hasPrefix("tak_") == true)
            #expect(app["masterSecret"]?.string?.hasPrefix("tms_") == true)
            #expect(app[path: "credentials.type"]?.string == "token")
            #expect(app[path: "credentials.keyID"]?.string == "ABCDE12345")
            #expect(!created.text.contains("PRIVATE KEY"))

            let fetched = try await server.admin.get("/v1/apps/shop")
            #expect(fetched.status == 200)
            #expect(try fetched.json()["masterSecret"] == nil)
            #expect(try fetched.json()["appKey"] == nil)
            #expect(!fetched.text.contains("PRIVATE KEY"))
            let list = try await server.admin.get("/v1/apps").json()
            #expect(list["apps"]?.arrayItems?.compactMap { $0["id"]?.string }.sorted() == ["demo", "shop"])

            // The credentials rest sealed: the key's text is nowhere in the database files.
            let body = Data(Self.keyPEM.split(separator: "\n")[1].utf8)
            for name in ["tern.db", "tern.db-wal"] {
                let bytes = (try? Data(contentsOf: server.folder.appendingPathComponent(name))) ?? Data()
                #expect(bytes.range(of: body) == nil, "\(name) holds the key")
            }
        }
    }

    @Test func rotatingTheMasterSecretRetiresTheOldOne() async throws {
        try await RouterHarness.withServer { server in
            let rotated = try await server.admin.patch("/v1/apps/demo", #"{"rotate": ["masterSecret"]}"#)
            #expect(rotated.status == 200)
            let newSecret = try #require(try rotated.json()["masterSecret"]?.string)
            #expect(try await server.master.get("/v1/apps/demo/token-events").status == 401)
            #expect(try await server.master.with(bearer: newSecret).get("/v1/apps/demo/token-events").status == 200)
            #expect(try rotated.json()["appKey"] == nil, "only what was rotated is shown")
        }
    }

    @Test(arguments: [
        (#"{"id": "Shop!", "topic": "t", "environment": "simulator"}"#, "id"),
        (#"{"id": "shop", "topic": "has space", "environment": "simulator"}"#, "topic"),
        (#"{"id": "shop", "topic": "t", "environment": "staging"}"#, "environment"),
        (#"{"id": "shop", "topic": "t", "environment": "custom"}"#, "endpoint"),
        (#"{"id": "shop", "topic": "t", "environment": "custom", "endpoint": {"host": "h", "port": 70000}, "credentials": {"type": "pkcs12", "base64": "", "passphrase": ""}}"#, "endpoint.port"),
        (#"{"id": "shop", "topic": "t", "environment": "production"}"#, "credentials"),
        (#"{"id": "shop", "topic": "t", "environment": "production", "credentials": {"type": "token", "keyPEM": "nope", "keyID": "ABCDE12345", "teamID": "TEAM123456"}}"#, "credentials.keyPEM"),
        (#"{"id": "shop", "topic": "t", "environment": "production", "credentials": {"type": "magic"}}"#, "credentials.type"),
        (#"{"id": "shop", "topic": "t", "environment": "production", "credentials": {"type": "pkcs12", "base64": "AAAA", "passphrase": "x"}}"#, "credentials.passphrase"),
        (#"{"id": "shop", "topic": "t", "environment": "simulator", "webhookURL": "ftp://x"}"#, "webhookURL"),
        (#"{"id": "shop", "topic": "t", "environment": "simulator", "webhookEvents": ["push.opened", "push.clicked"]}"#, "webhookEvents[1]"),
        (#"{"id": "shop", "topic": "t", "environment": "simulator", "webhookEvents": []}"#, "webhookEvents"),
        (#"{"id": "shop", "topic": "t", "environment": "simulator", "webhookEvents": "push.opened"}"#, "webhookEvents"),
        (#"{"id": "demo", "topic": "t", "environment": "simulator"}"#, "id"),
    ])
    func aBadAppIsRefusedNamingTheField(_ body: String, _ field: String) async throws {
        try await RouterHarness.withServer { server in
            let response = try await server.admin.post("/v1/apps", body)
            #expect([400, 409].contains(response.status), "\(response.text)")
            #expect(try response.json()["field"]?.string == field, "\(response.text)")
            let list = try await server.admin.get("/v1/apps").json()
            #expect(list["apps"]?.arrayItems?.count == 1, "nothing stored")
        }
    }

    @Test func deletingAnAppRemovesItsDevices() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "u")
            #expect(try await server.admin.delete("/v1/apps/demo").status == 204)
            #expect(try await server.admin.get("/v1/apps/demo").status == 404)
            // The app is gone, and its master secret with it: answered as any wrong secret is.
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").status == 401)
        }
    }

    @Test func healthReadinessAndMetricsAnswer() async throws {
        try await RouterHarness.withServer { server in
            #expect(try await server.api.get("/health").status == 200)
            let ready = try await server.api.get("/ready")
            #expect(ready.status == 200)
            #expect(try ready.json()["status"]?.string == "ready")
            #expect(try await server.api.get("/metrics").status == 200)
        }
    }

    @Test("with http.metricsToken set, /metrics answers that token only, and wrong ones are counted as wrong admin tokens are")
    func theMetricsTokenGuardsMetrics() async throws {
        let token = "scrape-0123456789abcdef"
        try await RouterHarness.withServer(configure: { $0.http.metricsToken = token }) { server in
            let none = try await server.api.get("/metrics")
            #expect(none.status == 401)
            #expect(none.headers.first(name: "WWW-Authenticate") == "Bearer")
            #expect(try none.json()["message"]?.string == "send the secret as 'Authorization: Bearer <secret>'")
            // The admin token is not it: a scraper holds the one secret it needs.
            let admin = try await server.admin.get("/metrics")
            #expect(admin.status == 401)
            #expect(try admin.json()["message"]?.string == "this call needs the metrics token (http.metricsToken)")
            let scraped = try await server.api.with(bearer: token).get("/metrics")
            #expect(scraped.status == 200)
            #expect(scraped.headers.first(name: "Content-Type") == "text/plain; version=0.0.4")
            #expect(try await server.api.get("/health").status == 200)
            #expect(try await server.api.get("/ready").status == 200)
            // Ten wrong from one address (the admin token above was one), and the address waits, right token or not.
            for _ in 0..<9 { #expect(try await server.api.with(bearer: "scrape-guess-0123456789").get("/metrics").status == 401) }
            let waiting = try await server.api.with(bearer: token).get("/metrics")
            #expect(waiting.status == 429)
            #expect(waiting.headers.first(name: "Retry-After") != nil)
        }
    }
}

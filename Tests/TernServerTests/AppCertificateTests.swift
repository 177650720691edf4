import Foundation
import TernAPNs
import TernSimulator
import TernTestSupport
import Testing

/// An app on a push certificate: its end of validity shown by the API and the console, an expired one refused, and one
/// near or past its end logged when the node makes the app's client (Apple's push certificates last a year, and APNs
/// refuses an expired one at the TLS handshake, so every notification fails); and one for another app refused. It runs openssl for a PKCS#12 bundle, so
/// `scripts/test.sh` runs it with the suites that start processes (one test at a time).
@Suite struct AppCertificateTests {
    static func escape(_ text: String) -> String { text.replacingOccurrences(of: "\n", with: "\\n") }

    /// An app `id` on a custom endpoint (a closed port will do: nothing here needs an answer) with `credentials`.
    static func certificateApp(_ id: String, port: Int, credentials: String) -> String {
        #"{"id": "\#(id)", "topic": "com.example.\#(id)", "environment": "custom", "endpoint": {"host": "127.0.0.1", "port": \#(port)}, "credentials": \#(credentials)}"#
    }

    static func pem(_ certificate: IssuedCertificate) -> String {
        #"{"type": "certificate", "certificatePEM": "\#(escape(certificate.certificatePEM))", "privateKeyPEM": "\#(escape(certificate.privateKeyPEM))"}"#
    }

    /// A certificate from a fresh CA, good for `validFor` seconds from now (negative: expired that long ago).
    static func certificate(_ id: String, validFor: TimeInterval) throws -> IssuedCertificate {
        try SimulatorCertificateAuthority.generate().issuePushCertificate(bundleID: "com.example.\(id)", validFor: validFor)
    }

    @Test func theAPIShowsWhenACertificateEndsAndRefusesOneThatHasEnded() async throws {
        try await withClosedPort { port in
            try await RouterHarness.withServer { server in
                let good = try Self.certificate("shop", validFor: 10 * 86400)
                let created = try await server.admin.post("/v1/apps", Self.certificateApp("shop", port: port, credentials: Self.pem(good)))
                #expect(created.status == 201, "\(created.text)")
                let shown = try #require(try created.json()[path: "credentials.certificateExpiresAt"]?.string, "\(created.text)")
                let expiry = try #require(try? Date(shown, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)))
                #expect(abs(expiry.timeIntervalSinceNow - 10 * 86400) < 120, "\(shown)")
                #expect(try await server.admin.get("/v1/apps/shop").json()[path: "credentials.certificateExpiresAt"]?.string == shown)
                // A token key does not expire: nothing is shown.
                #expect(try await server.admin.get("/v1/apps/demo").json()[path: "credentials.certificateExpiresAt"] == nil)

                // An expired certificate is refused, as PEM and as a PKCS#12 bundle, naming the field.
                let expired = try Self.certificate("old", validFor: -86400)
                let refused = try await server.admin.post("/v1/apps", Self.certificateApp("old", port: port, credentials: Self.pem(expired)))
                #expect(refused.status == 400, "\(refused.text)")
                #expect(try refused.json()["field"]?.string == "credentials.certificatePEM")
                #expect(try refused.json()["message"]?.string?.contains("the certificate expired on") == true, "\(refused.text)")
                #expect(!refused.text.contains("PRIVATE KEY"))
                let bundle = Data(try pkcs12Bundle(expired, passphrase: "secret")).base64EncodedString()
                let refusedBundle = try await server.admin.post(
                    "/v1/apps", Self.certificateApp("old", port: port, credentials: #"{"type": "pkcs12", "base64": "\#(bundle)", "passphrase": "secret"}"#))
                #expect(refusedBundle.status == 400, "\(refusedBundle.text)")
                #expect(try refusedBundle.json()["field"]?.string == "credentials.base64")
                #expect(try await server.admin.get("/v1/apps/old").status == 404)

                // Nor is one given to an app that has a good one: the app keeps what it had.
                let patched = try await server.admin.patch("/v1/apps/shop", #"{"credentials": \#(Self.pem(expired))}"#)
                #expect(patched.status == 400, "\(patched.text)")
                #expect(try patched.json()["field"]?.string == "credentials.certificatePEM")
                #expect(try await server.admin.get("/v1/apps/shop").json()[path: "credentials.certificateExpiresAt"]?.string == shown)
            }
        }
    }

    @Test func aCertificateForAnotherAppIsRefusedAndOneThatNamesNoAppIsTaken() async throws {
        try await withClosedPort { port in
            try await RouterHarness.withServer { server in
                // Another app's certificate: APNs would refuse every notification for this topic.
                let other = try SimulatorCertificateAuthority.generate().issuePushCertificate(bundleID: "com.example.other")
                let refused = try await server.admin.post("/v1/apps", Self.certificateApp("shop", port: port, credentials: Self.pem(other)))
                #expect(refused.status == 400, "\(refused.text)")
                #expect(try refused.json()["field"]?.string == "credentials.certificatePEM")
                #expect(try refused.json()["message"]?.string?.contains("the certificate is for com.example.other") == true, "\(refused.text)")
                #expect(try await server.admin.get("/v1/apps/shop").status == 404)

                // Its own: taken. A new topic it does not cover is refused, naming the topic, and nothing changes.
                let own = try Self.certificate("shop", validFor: 86400)
                #expect(try await server.admin.post("/v1/apps", Self.certificateApp("shop", port: port, credentials: Self.pem(own))).status == 201)
                let renamed = try await server.admin.patch("/v1/apps/shop", #"{"topic": "com.example.renamed"}"#)
                #expect(renamed.status == 400, "\(renamed.text)")
                #expect(try renamed.json()["field"]?.string == "topic")
                #expect(try await server.admin.get("/v1/apps/shop").json()["topic"]?.string == "com.example.shop")
                // With the certificate for the new topic, in the same change: taken.
                let renamedToo = try Self.certificate("renamed", validFor: 86400)
                let both = try await server.admin.patch(
                    "/v1/apps/shop", #"{"topic": "com.example.renamed", "credentials": \#(Self.pem(renamedToo))}"#)
                #expect(both.status == 200, "\(both.text)")

                // A certificate that names no app (a custom gateway's client certificate): its topics cannot be told, so
                // any topic goes.
                let plain = try SimulatorCertificateAuthority.generate().issueServerCertificate()
                let gateway = try await server.admin.post("/v1/apps", Self.certificateApp("gateway", port: port, credentials: Self.pem(plain)))
                #expect(gateway.status == 201, "\(gateway.text)")
            }
        }
    }

    @Test func aCertificateNearItsEndIsWarnedOfAndOnePastItIsAnErrorInTheLogAndTheConsole() async throws {
        let clock = ManualClock()
        let logs = LogRecorder()
        try await withClosedPort { port in
            // Its pushes fail soon (the endpoint is a closed port): the second one's client is made once the first is done.
            try await RouterHarness.withServer(configure: { $0.apns.sendTimeout = .seconds(1) }, clocks: .manual(clock), logs: logs) { server in
                let certificate = try Self.certificate("near", validFor: 10 * 86400)
                let created = try await server.admin.post("/v1/apps", Self.certificateApp("near", port: port, credentials: Self.pem(certificate)))
                #expect(created.status == 201, "\(created.text)")
                let app = try created.json()
                let master = server.master.with(bearer: try #require(app["masterSecret"]?.string))
                let registered = try await server.device.with(bearer: try #require(app["appKey"]?.string))
                    .put("/v1/apps/near/devices/\(Fixture.device(1))", Fixture.registration(token: Fixture.token(1)))
                #expect(registered.status == 200, "\(registered.text)")

                // The console says so at the top of the app's page.
                let browser = ConsoleBrowser(server)
                try await browser.signIn(try #require(server.admin.bearer))
                let page = try await browser.get("/console/apps/near")
                #expect(page.text.contains(#"id="certificate-warning""#), "\(page.text)")
                #expect(page.text.contains("expires in 9 days") || page.text.contains("expires in 10 days"), "\(page.text)")
                #expect(!(try await browser.get("/console/apps/demo")).text.contains(#"id="certificate-warning""#))

                // The node makes the app's client for a push: a warning, once.
                let push = try await master.post("/v1/apps/near/pushes", Fixture.push(audience: #"{"all": true}"#))
                #expect(push.status == 202, "\(push.text)")
                try await waitUntil("the warning about the certificate") {
                    !logs.messages(containing: "certificate expires within 30 days").isEmpty
                }
                let warning = logs.lines(atLeast: .warning).filter { $0.contains("certificate expires within 30 days") }
                #expect(warning.count == 1, "\(warning)")
                #expect(warning.first?.contains("app=near") == true, "\(warning)")

                // Eleven days on, the certificate has ended: the console says every notification fails, and the client
                // made after a change of the app logs an error.
                clock.advance(by: .seconds(11 * 86400))
                try await browser.signIn(try #require(server.admin.bearer))
                let ended = try await browser.get("/console/apps/near")
                #expect(ended.text.contains("push certificate expired on"), "\(ended.text)")
                #expect(try await server.admin.patch("/v1/apps/near", #"{"inboxCap": 10}"#).status == 200)
                let again = try await master.post("/v1/apps/near/pushes", Fixture.push(audience: #"{"all": true}"#))
                #expect(again.status == 202, "\(again.text)")
                try await waitUntil("the error about the certificate") {
                    logs.lines(atLeast: .error).contains { $0.contains("certificate has expired") && $0.contains("app=near") }
                }
            }
        }
    }

    /// What an Apple certificate is for (its APNs environments and topics) is shown by the API and the console, and the
    /// console warns when it is not for the app's own environment, the one its tokens are of unless they say otherwise.
    /// The view is made once for each version of the app: a new certificate shows at once.
    @Test func whatACertificateIsForIsShownAndOneNotForTheAppsEnvironmentIsWarnedOf() async throws {
        try await RouterHarness.withServer { server in
            let authority = try SimulatorCertificateAuthority.generate()
            func app(_ id: String, environment: String, _ certificate: IssuedCertificate) -> String {
                #"{"id": "\#(id)", "topic": "com.example.\#(id)", "environment": "\#(environment)", "credentials": \#(Self.pem(certificate))}"#
            }
            let developmentOnly = try authority.issuePushCertificate(bundleID: "com.example.shop", environments: [.development])
            let created = try await server.admin.post("/v1/apps", app("shop", environment: "production", developmentOnly))
            #expect(created.status == 201, "\(created.text)")
            #expect(try created.json()[path: "credentials.certificateEnvironments"] == .array([.string("development")]), "\(created.text)")
            // Apple's list the app's VoIP and complication topics too, and so do the simulator's.
            let topics = ["com.example.shop", "com.example.shop.voip", "com.example.shop.complication"]
            #expect(try created.json()[path: "credentials.certificateTopics"] == .array(topics.map { .string($0) }), "\(created.text)")
            let both = try authority.issuePushCertificate(bundleID: "com.example.both")
            #expect(try await server.admin.post("/v1/apps", app("both", environment: "production", both)).status == 201)
            let shown = try await server.admin.get("/v1/apps/both").json()
            #expect(shown[path: "credentials.certificateEnvironments"] == .array([.string("production"), .string("development")]), "\(shown)")
            // A token key says nothing of the kind.
            #expect(try await server.admin.get("/v1/apps/demo").json()[path: "credentials.certificateEnvironments"] == nil)

            let browser = ConsoleBrowser(server)
            try await browser.signIn(try #require(server.admin.bearer))
            let shop = try await browser.get("/console/apps/shop")
            #expect(shop.text.contains("development only; topics " + topics.joined(separator: ", ")), "\(shop.text)")
            #expect(shop.text.contains(#"id="certificate-environment-warning""#), "\(shop.text)")
            let bothPage = try await browser.get("/console/apps/both")
            #expect(bothPage.text.contains("production and development"), "\(bothPage.text)")
            #expect(!bothPage.text.contains(#"id="certificate-environment-warning""#), "\(bothPage.text)")

            // The app's tokens are development ones now: the certificate is right for it, and no warning is left.
            #expect(try await server.admin.patch("/v1/apps/shop", #"{"environment": "development"}"#).status == 200)
            #expect(!(try await browser.get("/console/apps/shop")).text.contains(#"id="certificate-environment-warning""#))
            // A new certificate is shown at once, though the one before was read for the views before.
            let renewed = try authority.issuePushCertificate(bundleID: "com.example.shop", environments: [.production], validFor: 20 * 86400)
            #expect(try await server.admin.patch("/v1/apps/shop", #"{"credentials": \#(Self.pem(renewed))}"#).status == 200)
            let listed = try await server.admin.get("/v1/apps").json()
            let entry = try #require(listed["apps"]?.arrayItems?.first { $0["id"]?.string == "shop" }, "\(listed)")
            #expect(entry[path: "credentials.certificateEnvironments"] == .array([.string("production")]), "\(entry)")
            let expiry = try #require(entry[path: "credentials.certificateExpiresAt"]?.string
                .flatMap { try? Date($0, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) })
            #expect(abs(expiry.timeIntervalSinceNow - 20 * 86400) < 120, "\(entry)")
            #expect((try await browser.get("/console/apps/shop")).text.contains(#"id="certificate-environment-warning""#))
        }
    }
}

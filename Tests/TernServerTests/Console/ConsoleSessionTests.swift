import Foundation
import NIOCore
import HTTPTypes
import Testing
import TernAPNs
import TernStore
import TernTestSupport

@testable import TernServer

/// Sign-in, sessions, cookies and CSRF through the router.
@Suite("Console: sessions and CSRF")
struct ConsoleSessionTests {
    @Test("the console's pages carry a CSP without inline script, no framing, no sniffing, and are never cached")
    func securityHeaders() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        for path in ["/console/sign-in", "/console/static/console.js", "/console/nowhere"] {
            let page = try await browser.get(path)
            let policy = try #require(page.header("Content-Security-Policy"), "\(path) has no CSP")
            #expect(policy.contains("script-src 'self'"), "\(path)")
            #expect(!policy.contains("unsafe-inline"), "\(path)")
            #expect(policy.contains("frame-ancestors 'none'"), "\(path)")
            #expect(page.header("X-Content-Type-Options") == "nosniff", "\(path)")
            #expect(page.header("Referrer-Policy") == "same-origin", "\(path)")
        }
        let signIn = try await browser.get("/console/sign-in")
        #expect(signIn.status == 200)
        #expect(signIn.header("Cache-Control") == "no-store")
        #expect(!signIn.text.contains("<script>"), "no inline script")
        #expect(try await browser.get("/console/nowhere").status == 404)
    }

    /// What the router refuses before a console page runs (a path with a slash at the end, a method a page does not
    /// take) answered the API's JSON without the console's headers; it is the console's page now, with them.
    @Test("what the router refuses under /console is the console's page with its headers, and /console/ goes home")
    func routerRefusals() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        let home = try await browser.get("/console/")
        #expect(home.status == 303)
        #expect(home.header("Location") == "/console")
        for (method, path, status) in [
            (HTTPRequest.Method.get, "/console/apps/", 404), (.get, "/console/static/", 404), (.get, "/console/sign-out", 404),
            (.post, "/console", 405), (.put, "/console/apps", 405), (.delete, "/console", 405),
        ] {
            for accept in ["text/html", "application/json"] {
                let answer = try await browser.send(method, path, body: nil, headers: [("Accept", accept)])
                #expect(answer.status == status, "\(method) \(path): \(answer.status)")
                #expect(answer.header("Content-Security-Policy")?.contains("frame-ancestors 'none'") == true, "\(method) \(path) \(accept)")
                #expect(answer.header("X-Frame-Options") == "DENY", "\(method) \(path) \(accept)")
                let isPage = answer.header("Content-Type")?.hasPrefix("text/html") == true
                #expect(isPage == (accept == "text/html"), "\(method) \(path) \(accept): \(answer.header("Content-Type") ?? "")")
                if status == 405 { #expect(answer.header("Allow") != nil, "\(method) \(path)") }
            }
        }
    }

    @Test("without a session a page goes to the sign-in, and a script's call is a 401 in the API's shape")
    func signedOut() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        let page = try await browser.get("/console/apps/demo/devices")
        #expect(page.status == 303)
        #expect(page.header("Location") == "/console/sign-in")
        let data = try await browser.get("/console/overview/data", headers: [("Accept", "application/json")])
        #expect(data.status == 401)
        #expect(try data.json()["error"] == "unauthorized")
        // A session id the server never gave is no session.
        browser.sessionCookie = ConsoleSessions.randomToken()
        #expect(try await browser.get("/console").header("Location") == "/console/sign-in")
    }

    @Test("a wrong secret and the app key are refused with no cookie; the admin token signs in with a strict cookie")
    func signIn() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        for secret in ["tat_wrong", server.device.bearer!, ""] {
            let refused = try await browser.signIn(secret)
            #expect(refused.status == 401)
            #expect(refused.text.contains("that is not the admin token or an app&#39;s master secret"))
            #expect(refused.header("Set-Cookie") == nil)
            #expect(!refused.text.contains(secret.isEmpty ? "tat_wrong" : secret), "the secret is not echoed")
        }
        let accepted = try await browser.signIn(RunningServer.adminToken)
        #expect(accepted.status == 303)
        #expect(accepted.header("Location") == "/console")
        let cookie = try #require(accepted.header("Set-Cookie"))
        #expect(cookie.hasPrefix("tern_console="))
        #expect(cookie.contains("; Path=/console; HttpOnly; SameSite=Strict"))
        #expect(!cookie.contains("Secure"), "plain HTTP, no proxy: not Secure")
        let overview = try await browser.get("/console")
        #expect(overview.status == 200)
        #expect(overview.text.contains("Signed in: admin"))
        #expect(!overview.text.contains(RunningServer.adminToken), "the page never shows the secret")
        #expect(!overview.text.contains(browser.sessionCookie!), "nor the session id")
    }

    @Test("behind a TLS proxy (X-Forwarded-Proto https) the cookie is Secure")
    func secureCookie() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        let response = try await browser.post(
            "/console/sign-in", [("secret", RunningServer.adminToken)], csrf: .some(nil), origin: "https://localhost",
            headers: [("X-Forwarded-Proto", "https")])
        #expect(response.status == 303)
        #expect(response.header("Set-Cookie")?.contains("; Secure") == true)
    }

    @Test("a session id planted before the sign-in is never the one signed in (fixation)")
    func fixation() async throws {
        let server = try await RouterHarness.shared.value
        // An attacker's own live session, planted in the victim's browser.
        let attacker = ConsoleBrowser(server)
        try await attacker.signIn(server.master.bearer!)
        let planted = try #require(attacker.sessionCookie)
        let victim = ConsoleBrowser(server)
        victim.sessionCookie = planted
        try await victim.signIn(RunningServer.adminToken)
        let issued = try #require(victim.sessionCookie)
        #expect(issued != planted, "a new session id at sign-in")
        #expect(try await victim.get("/console").text.contains("Signed in: admin"))
        // The planted session is over: the attacker does not share the victim's sign-in, nor keeps their own.
        #expect(try await attacker.get("/console").header("Location") == "/console/sign-in")
        // A made-up id planted beforehand is replaced the same way.
        let another = ConsoleBrowser(server)
        another.sessionCookie = "made-up"
        try await another.signIn(RunningServer.adminToken)
        #expect(another.sessionCookie != "made-up")
    }

    @Test("every POST needs the session's CSRF token and this origin; refused forms change nothing")
    func csrf() async throws {
        try await RouterHarness.withServer { server in
            let browser = ConsoleBrowser(server)
            try await browser.signIn(server.master.bearer!)
            let good = try #require(browser.csrf)
            let push = [("audience.kind", "all"), ("notification.title", "csrf test")]
            let refusals: [(csrf: String??, origin: String?, why: String)] = [
                (.some(nil), ConsoleBrowser.origin, "no token"),
                // One character changed (to one it is not: a token may start with "x").
                (.some((good.first == "x" ? "y" : "x") + good.dropFirst()), ConsoleBrowser.origin, "a wrong token"),
                (.none, "http://evil.example", "another origin"),
                (.none, "null", "an opaque origin"),
            ]
            for refusal in refusals {
                let response = try await browser.post("/console/apps/demo/pushes", push, csrf: refusal.csrf, origin: refusal.origin)
                #expect(response.status == 403, "\(refusal.why): \(response.status)")
            }
            // Another session's token is not this one's.
            let other = ConsoleBrowser(server)
            try await other.signIn(server.master.bearer!)
            #expect(try await browser.post("/console/apps/demo/pushes", push, csrf: .some(other.csrf)).status == 403)
            let none = try await browser.get("/console/apps/demo/pushes")
            #expect(none.text.contains("No pushes yet."), "no refused form stored a push")
            // The same form with the token, from this origin (or with no Origin, as a non-browser client): sent.
            #expect(try await browser.post("/console/apps/demo/pushes", push).status == 303)
            #expect(try await browser.post("/console/apps/demo/pushes", push, origin: nil).status == 303)
            // Sign-out is a POST like the others: without the token it signs nobody out.
            #expect(try await browser.post("/console/sign-out", [], csrf: .some(nil)).status == 403)
            #expect(try await browser.get("/console").status == 200)
        }
    }

    @Test("signing out ends the session: the old cookie no longer works")
    func signOut() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        try await browser.signIn(RunningServer.adminToken)
        let id = try #require(browser.sessionCookie)
        let out = try await browser.post("/console/sign-out", [])
        #expect(out.status == 303)
        #expect(out.header("Set-Cookie")?.contains("Max-Age=0") == true)
        let replay = ConsoleBrowser(server)
        replay.sessionCookie = id
        #expect(try await replay.get("/console").header("Location") == "/console/sign-in")
    }

    @Test("after ten failed sign-ins a minute the next is answered 429 with Retry-After, even with the right secret")
    func signInLimit() async throws {
        try await RouterHarness.withServer { server in
            let browser = ConsoleBrowser(server)
            for _ in 0..<10 { #expect(try await browser.signIn("tat_guess").status == 401) }
            let limited = try await browser.signIn(RunningServer.adminToken)
            #expect(limited.status == 429)
            #expect(Int(limited.header("Retry-After") ?? "") ?? 0 > 0)
            #expect(browser.sessionCookie == nil)
        }
    }

    @Test("a master secret rotated or its app deleted through the API ends its sessions; an app made again is not the one signed in to")
    func sessionsEndWithTheirSecretWhereverItChanges() async throws {
        try await RouterHarness.withServer { server in
            let backend = ConsoleBrowser(server)
            try await backend.signIn(server.master.bearer!)
            #expect(try await backend.get("/console/apps/demo/devices").status == 200)
            #expect(try await server.admin.patch("/v1/apps/demo", #"{"rotate": ["masterSecret"]}"#).status == 200)
            #expect(try await backend.get("/console/apps/demo/devices").header("Location") == "/console/sign-in")
            #expect(try await backend.post("/console/apps/demo/preview", [("audience.kind", "all")]).status == 401)

            let created = try await server.admin.post("/v1/apps", #"{"id": "shop", "topic": "com.example.shop", "environment": "simulator"}"#)
            let shopSecret = try #require(try created.json()["masterSecret"]?.string)
            let shop = ConsoleBrowser(server)
            try await shop.signIn(shopSecret)
            #expect(try await shop.get("/console/apps/shop/devices").status == 200)
            #expect(try await server.admin.delete("/v1/apps/shop").status == 204)
            #expect(try await server.admin.post("/v1/apps", #"{"id": "shop", "topic": "com.example.shop", "environment": "simulator"}"#).status == 201)
            let again = try await shop.get("/console/apps/shop/devices")
            #expect(again.status == 303, "the old session opened the new app: \(again.text.prefix(300))")
            #expect(again.header("Location") == "/console/sign-in")
        }
    }

    @Test("a page's own polling does not keep an idle session alive; a request of the user's does")
    func pollingDoesNotRenewTheIdleTime() async throws {
        let clock = ManualClock()
        try await RouterHarness.withServer(configure: { $0.console.sessionIdleTimeout = .seconds(60) }, clocks: .manual(clock)) { server in
            let browser = ConsoleBrowser(server)
            try await browser.signIn(RunningServer.adminToken)
            for _ in 0..<2 {
                clock.advance(by: .seconds(20))
                #expect(try await browser.get("/console/overview/data").status == 200)
            }
            // 65 s after the sign-in, polled every 20 s: signed out.
            clock.advance(by: .seconds(25))
            #expect(try await browser.get("/console/overview/data").status == 401)
            #expect(try await browser.get("/console").header("Location") == "/console/sign-in")

            try await browser.signIn(RunningServer.adminToken)
            for _ in 0..<4 {
                clock.advance(by: .seconds(20))
                #expect(try await browser.get("/console/apps").status == 200)
            }
        }
    }

    @Test("rotating an app's master secret signs out the sessions it signed in")
    func rotationEndsSessions() async throws {
        try await RouterHarness.withServer { server in
            let backend = ConsoleBrowser(server)
            try await backend.signIn(server.master.bearer!)
            #expect(try await backend.get("/console/apps/demo/devices").status == 200)
            let admin = ConsoleBrowser(server)
            try await admin.signIn(RunningServer.adminToken)
            let rotated = try await admin.post("/console/apps/demo/rotate", [("rotate", "masterSecret")])
            #expect(rotated.status == 200)
            let secret = try #require(rotated.text.firstMatch(of: /tms_[A-Za-z0-9_-]+/).map { String($0.0) })
            #expect(rotated.header("Cache-Control") == "no-store")
            #expect(try await backend.get("/console/apps/demo/devices").header("Location") == "/console/sign-in")
            // The new secret works, in the console and in the API; the admin stays signed in.
            #expect(try await ConsoleBrowser(server).signIn(secret).status == 303)
            #expect(try await server.master.with(bearer: secret).get("/v1/apps/demo/token-events").status == 200)
            #expect(try await admin.get("/console/apps").status == 200)
        }
    }
}

/// The session table and the sign-in limit as values, on a clock the test moves.
@Suite("Console: the session table")
struct ConsoleSessionTableTests {
    @Test("a session ends after its idle time, and after its lifetime however busy")
    func expiry() {
        let clock = ManualClock()
        let sessions = ConsoleSessions(idleTimeout: .seconds(60), lifetime: .seconds(150), clock: clock.wall)
        let (id, session) = sessions.start(.admin, credential: [1])
        #expect(session.csrfToken != id)
        #expect(Base64URL.decode(id)?.count == 32, "256 random bits")
        clock.advance(by: .seconds(50))
        #expect(sessions.session(id: id) != nil, "used within the idle time")
        clock.advance(by: .seconds(50))
        #expect(sessions.session(id: id) != nil, "each use renews the idle time")
        clock.advance(by: .seconds(45))
        #expect(sessions.session(id: id) != nil)
        clock.advance(by: .seconds(10))
        #expect(sessions.session(id: id) == nil, "past the lifetime, however busy")
        let (idle, _) = sessions.start(.admin, credential: [1])
        clock.advance(by: .seconds(61))
        #expect(sessions.session(id: idle) == nil, "idle too long")
    }

    @Test("the table keeps at most its capacity: the least recently used goes first")
    func capacity() {
        let clock = ManualClock()
        let sessions = ConsoleSessions(idleTimeout: .seconds(600), lifetime: .seconds(6000), capacity: 3, clock: clock.wall)
        var ids: [String] = []
        for _ in 0..<3 {
            ids.append(sessions.start(.admin, credential: [1]).id)
            clock.advance(by: .seconds(1))
        }
        _ = sessions.session(id: ids[0])
        let newest = sessions.start(.master(app: "demo"), credential: [2]).id
        #expect(sessions.count == 3)
        #expect(sessions.session(id: ids[1]) == nil, "the least recently used made room")
        #expect(sessions.session(id: ids[0]) != nil)
        #expect(sessions.session(id: newest) != nil)
    }

    /// A probe signed in with one app's master secret 10,000 times in 20 s, and the admin was signed out.
    @Test("one principal signing in over and over pushes out only its own sessions")
    func noEvictionOfOthers() {
        let clock = ManualClock()
        let sessions = ConsoleSessions(idleTimeout: .seconds(600), lifetime: .seconds(6000), capacity: 4, clock: clock.wall)
        let admin = sessions.start(.admin, credential: [1]).id
        clock.advance(by: .seconds(1))
        let other = sessions.start(.master(app: "other"), credential: [3]).id
        var own: [String] = []
        for _ in 0..<50 {
            clock.advance(by: .seconds(1))
            own.append(sessions.start(.master(app: "demo"), credential: [2]).id)
        }
        #expect(sessions.count == 4)
        #expect(sessions.session(id: admin) != nil, "the admin, least recently used of all, stays")
        #expect(sessions.session(id: other) != nil)
        #expect(own.suffix(2).allSatisfy { sessions.session(id: $0) != nil }, "its own newest stay")
        #expect(sessions.session(id: own[0]) == nil)
    }

    @Test("an IPv6 client is counted by its /64, an IPv4 one (mapped or not) by its address")
    func guessesAreCountedPerClientNetwork() throws {
        func key(_ ip: String) throws -> String { SecretGuessLimiter.key(for: try SocketAddress(ipAddress: ip, port: 443)) }
        #expect(try key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(try key("2001:db8:1:2:ffff:ffff:ffff:ffff") == key("2001:db8:1:2::9"), "one /64: one count")
        #expect(try key("2001:db8:1:3::1") != key("2001:db8:1:2::1"), "the next /64 is someone else")
        #expect(try key("203.0.113.7") == "203.0.113.7")
        #expect(try key("::ffff:203.0.113.7") == "203.0.113.7")
        #expect(SecretGuessLimiter.key(for: nil) == "unknown")
    }

    @Test("failed sign-ins are limited per address and per minute")
    func limiter() {
        let clock = ManualClock()
        let limiter = SecretGuessLimiter(limit: 3, window: 60, clock: clock.wall)
        for _ in 0..<3 { limiter.recordFailure("10.0.0.1") }
        #expect(limiter.retryAfter("10.0.0.1") == 60)
        #expect(limiter.retryAfter("10.0.0.2") == nil, "another address is not limited")
        clock.advance(by: .seconds(45))
        #expect(limiter.retryAfter("10.0.0.1") == 15)
        clock.advance(by: .seconds(15))
        #expect(limiter.retryAfter("10.0.0.1") == nil, "a new minute")
    }

    @Test("who a secret signs in as: the admin token, or an app's master secret; nothing else")
    func principals() {
        let admin = "tat_admin-secret"
        let authorization = Authorization(adminTokenHash: Secrets.hash(admin))
        let app = AppRecord(
            id: "shop", topic: "com.example.shop", environment: .production, endpoint: nil, sealedCredentials: [1],
            appKeyHash: Secrets.hash("tak_shop"), masterSecretHash: Secrets.hash("tms_shop"), webhookURL: nil, createdAt: Date(), updatedAt: Date())
        #expect(authorization.consolePrincipal(secret: admin, apps: [app]) == .admin)
        #expect(authorization.consolePrincipal(secret: "tms_shop", apps: [app]) == .master(app: "shop"))
        #expect(authorization.consolePrincipal(secret: "tak_shop", apps: [app]) == nil)
        #expect(authorization.consolePrincipal(secret: "", apps: [app]) == nil)
        #expect(Authorization.consoleAccess(.admin, .manageApps))
        #expect(Authorization.consoleAccess(.admin, .appData("shop")))
        #expect(!Authorization.consoleAccess(.master(app: "shop"), .manageApps))
        #expect(Authorization.consoleAccess(.master(app: "shop"), .appData("shop")))
        #expect(!Authorization.consoleAccess(.master(app: "shop"), .appData("demo")))
    }
}

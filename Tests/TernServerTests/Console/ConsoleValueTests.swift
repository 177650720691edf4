import Foundation
import Testing
import TernAPNs
import TernWeb

@testable import TernServer

/// The console's pieces as values: forms into the API's bodies, the activity's minutes, the chart, the page frame.
@Suite("Console: values")
struct ConsoleValueTests {
    @Test("a form's origin is its page's host and port as written, an IPv6 address's brackets included")
    func sameOrigin() {
        for (authority, source, same) in [
            ("localhost:8080", "http://localhost:8080", true),
            ("localhost:8080", "https://LOCALHOST:8080/console/sign-in?x=1", true),
            ("[::1]:8080", "http://[::1]:8080", true),
            ("[::1]:8080", "http://[::1]:8080/console/sign-in", true),
            ("[2001:db8::1]", "http://[2001:DB8::1]", true),
            ("localhost:8080", "http://localhost:8081", false),
            ("localhost:8080", "http://localhost:8080.evil.example", false),
            ("localhost:8080", "http://localhost:8080@evil.example", false),
            ("localhost:8080", "null", false),
            ("localhost:8080", "ftp://localhost:8080", false),
            ("[::1]:8080", "http://::1:8080", false),
        ] as [(String, String, Bool)] {
            #expect(ConsoleRoutes.isSameOrigin(authority: authority, source: source) == same, "\(authority) \(source)")
        }
        // No Origin or Referer (not a browser's request): the CSRF token decides; no Host: refused.
        #expect(ConsoleRoutes.isSameOrigin(authority: "localhost", source: nil))
        #expect(!ConsoleRoutes.isSameOrigin(authority: nil, source: "http://localhost"))
    }

    @Test("a url-encoded form reads as the browser wrote it")
    func formDecoding() {
        let form = ConsoleForm(urlEncoded: "a=1&b=x+y&b=%C3%A9t%C3%A9&empty=&flag&bad=%zz")
        #expect(form["a"] == "1")
        #expect(form.all("b") == ["x y", "été"])
        #expect(form["empty"] == "")
        #expect(form.given("empty") == nil)
        #expect(form.isChecked("flag"))
        #expect(form["bad"] == "%zz")
        #expect(form["missing"] == nil)
    }

    @Test("the composer's fields make the body a client would send; blank fields are left out")
    func composerBody() throws {
        let form = ConsoleForm([
            ("audience.kind", "tags"), ("audience.values", "news, sports\nbeta"), ("audience.match", "all"),
            ("content", "notification"), ("notification.title", "Hi"), ("notification.subtitle", ""), ("notification.badge", "3"),
            ("notification.contentAvailable", "true"), ("notification.data", #"{"k": [1, {"x": null}]}"#), ("apns.priority", "5"),
            ("apns.expiration", ""), ("inbox", "true"), ("inbox.ttl", "600"), ("delivery", "auto"), ("ackTimeout", "2.5"),
            ("payload", #"{"ignored": true}"#),
        ])
        let body = String(decoding: try ConsoleRequests.pushBody(form).serialized(), as: UTF8.self)
        #expect(body == #"{"audience":{"tags":["news","sports","beta"],"match":"all"},"notification":{"title":"Hi","badge":3,"contentAvailable":true,"data":{"k": [1, {"x": null}]}},"apns":{"priority":5},"inbox":{"ttl":600},"delivery":"auto","ackTimeout":2.5}"#)
        let request = try ConsoleRequests.push(form)
        #expect(request.notification?.badge == .change(.set(3)))
        #expect(request.ackTimeout == 2.5)
        // Aliases may hold commas and spaces: one a line.
        let aliases = try ConsoleRequests.push(ConsoleForm([("audience.kind", "aliases"), ("audience.values", "Smith, Jane\nuser 2\n"), ("notification.title", "x")]))
        #expect(aliases.audience.aliases == ["Smith, Jane", "user 2"])
        let raw = try ConsoleRequests.pushBody(ConsoleForm([("audience.kind", "all"), ("content", "payload"), ("payload", #"{"aps": {"badge": 1}}"#)]))
        #expect(String(decoding: raw.serialized(), as: UTF8.self) == #"{"audience":{"all":true},"payload":{"aps": {"badge": 1}}}"#)
    }

    @Test("a field that is not what the API takes is refused naming its JSON path")
    func composerRefusals() {
        func refusal(_ form: ConsoleForm) -> (field: String?, message: String)? {
            do {
                _ = try ConsoleRequests.push(form)
                return nil
            } catch {
                return (error.field, error.message)
            }
        }
        let data = refusal(ConsoleForm([("audience.kind", "all"), ("notification.data", "nope")]))
        #expect(data?.field == "notification.data")
        #expect(data?.message.hasPrefix("the body is not valid JSON: ") == true)
        #expect(refusal(ConsoleForm([("audience.kind", "all"), ("apns.priority", "high")]))?.field == "apns.priority")
        #expect(refusal(ConsoleForm([("audience.kind", "all"), ("notification.title", "x")])) == nil)
        // A kind is a name the composer offers, never a path: 40,000 dots once nested 40,000 objects and crashed.
        for kind in ["everyone", "tags.x", String(repeating: "a.", count: 40_000) + "b"] {
            #expect(refusal(ConsoleForm([("audience.kind", kind), ("audience.values", "x")]))?.field == "audience.kind")
        }
        do {
            _ = try ConsoleRequests.rotate(ConsoleForm())
            Issue.record("an empty rotation was taken")
        } catch {
            #expect(error.field == "rotate")
        }
    }

    @Test("the new-app form sends only the credentials of the kind chosen, and an endpoint only for custom")
    func appBody() throws {
        let form = ConsoleForm([
            ("id", "shop"), ("topic", "com.example.shop"), ("environment", "production"), ("endpoint.host", "ignored"),
            ("credentials.type", "token"), ("credentials.keyPEM", "PEM"), ("credentials.keyID", "K"), ("credentials.teamID", "T"),
            ("credentials.certificatePEM", "also ignored"), ("inboxCap", "10"),
        ])
        let request = try ConsoleRequests.createApp(form)
        #expect(request.endpoint == nil)
        #expect(request.credentials == .token(keyPEM: "PEM", keyID: "K", teamID: "T"))
        #expect(request.inboxCap == 10)
        let custom = try ConsoleRequests.createApp(ConsoleForm([
            ("id", "c"), ("topic", "t"), ("environment", "custom"), ("endpoint.host", "apns.local"), ("endpoint.port", "2197"),
        ]))
        #expect(custom.endpoint?.host == "apns.local")
        #expect(custom.endpoint?.port == 2197)
    }

    @Test("the activity adds what the counters moved to each minute and keeps sixty")
    func activityMinutes() throws {
        let activity = ConsoleActivity(registry: nil, clocks: .system)
        let start = Date(timeIntervalSince1970: 1_800_000_000 - 1_800_000_000.truncatingRemainder(dividingBy: 60))
        func totals(_ accepted: Double, _ failed: Double, unregistered: Double, opens: Double = 0) -> [String: Double] {
            ConsoleActivity.parse("""
                # TYPE tern_push_recipients_total counter
                tern_push_recipients_total{outcome="accepted"} \(accepted)
                tern_push_recipients_total{outcome="failed"} \(failed)
                tern_pushes_completed_total \(accepted > 0 ? 1 : 0)
                tern_push_opens_total \(opens)
                tern_channel_opens_total \(opens / 2)
                tern_apns_accepted_total \(accepted)
                tern_apns_rejected_total{reason="Unregistered"} \(unregistered)
                tern_apns_connections 2.0
                """)
        }
        activity.record(totals(5, 0, unregistered: 0), at: start)  // where counting starts
        activity.record(totals(15, 1, unregistered: 1), at: start.addingTimeInterval(10))
        activity.record(totals(18, 1, unregistered: 1, opens: 4), at: start.addingTimeInterval(70))
        let (minutes, connections) = activity.lastHour(now: start.addingTimeInterval(70))
        #expect(minutes.count == 60)
        #expect(connections == 2)
        #expect(minutes[58].accepted == 10)
        #expect(minutes[58].failed == 1)
        #expect(minutes[58].answers == ["accepted": 10, "Unregistered": 1])
        #expect(minutes[59].accepted == 3)
        #expect(minutes[59].answers == ["accepted": 3])
        #expect(minutes[58].opens == 0 && minutes[59].opens == 6, "opens of pushes and of device messages")
        // An hour later the old minutes are gone.
        activity.record(totals(18, 1, unregistered: 1, opens: 4), at: start.addingTimeInterval(3700))
        let later = activity.lastHour(now: start.addingTimeInterval(3700)).minutes
        #expect(later.allSatisfy { $0.accepted == 0 && $0.failed == 0 })
    }

    @Test("the chart's bars stack failed on accepted and fit the view")
    func chart() {
        let chart = ConsoleChart(id: "c", points: [("a", 3, 1), ("b", 0, 0), ("c", 1, 1)], caption: "test")
        #expect(chart.highest == 4)
        #expect(chart.bars[0].acceptedHeight == 75)
        #expect(chart.bars[0].failedHeight == 25)
        #expect(chart.bars[0].failedY == 0)
        #expect(chart.bars[1].acceptedHeight == 0)
        #expect(chart.bars.allSatisfy { $0.x + $0.barWidth <= Double(chart.viewWidth) })
        #expect(chart.bars[0].barWidth == 24, "three bars take three of twenty slots, not the whole width")
        #expect(ConsoleChart(id: "e", points: [], caption: "none").bars.isEmpty)
    }

    @Test("a push's page gives each failure reason its cause, as text")
    func failureCauses() throws {
        let view = PushesAPI.PushView(
            id: "0f8fad5b-d9cb-469f-a165-70867728950e", status: "completed",
            counts: .init(targeted: 3, accepted: 0, failed: 3, pruned: 0, failedByReason: ["connectionFailed": 2, "BadDeviceToken": 1], opened: 0, inboxDropped: 0),
            createdAt: Date(timeIntervalSince1970: 1_800_000_000), finishedAt: Date(timeIntervalSince1970: 1_800_000_001),
            failureDetails: ["connectionFailed": "last connect error: <proxy> refused (407)"])
        let page = PushPageView(view, failureLimit: 0)
        #expect(page.reasons == [
            ReasonCount(reason: "connectionFailed", count: 2, detail: "last connect error: <proxy> refused (407)"),
            ReasonCount(reason: "BadDeviceToken", count: 1),
        ])
        var chrome = Chrome(title: "Push", csrf: "token-1", signedIn: true, principal: "Signed in: admin")
        chrome.app = .init(id: "demo", canManage: false, devices: true)
        let html = try ConsoleRenderer().render("push", ConsolePage(chrome: chrome, view: page, problem: nil))
        #expect(html.contains("<td>connectionFailed</td><td class=\"num\">2</td><td>last connect error: &lt;proxy&gt; refused (407)</td>"), "\(html)")
        #expect(html.contains("<td>BadDeviceToken</td><td class=\"num\">1</td><td>—</td>"))
    }

    @Test("a page renders its frame: the title, the CSRF token, the current entry")
    func rendering() throws {
        let renderer = try ConsoleRenderer()
        var chrome = Chrome(title: "Devices <&>", csrf: "token-1", signedIn: true, principal: "Signed in: admin")
        chrome.app = .init(id: "demo", canManage: false, devices: true)
        let html = renderer.render("error", ConsolePage(chrome: chrome, view: nil, problem: nil))
        #expect(html.contains("<title>Devices &lt;&amp;&gt; · Tern console</title>"))
        #expect(html.contains(#"<meta name="csrf-token" content="token-1">"#))
        #expect(html.contains(#"<a href="/console/apps/demo/devices" aria-current="page">Devices</a>"#))
        #expect(!html.contains("/console/apps/demo\">Settings"), "settings are the admin's")
        let signedOut = renderer.render("sign-in", ConsolePage(chrome: Chrome(title: "Sign in"), view: nil, problem: Problem(message: "no <b>", field: "secret")))
        #expect(!signedOut.contains("csrf-token"))
        #expect(!signedOut.contains("Sign out"))
        #expect(signedOut.contains("no &lt;b&gt;"))
        #expect(signedOut.contains(#"aria-invalid="true""#))
    }
}

import Foundation
import Testing
import TernAPNs
import TernTestSupport

@testable import TernServer

/// The console's pages through the router: what they show, who may see them, and that a form is refused as the API
/// refuses the same request.
@Suite("Console: pages")
struct ConsolePageTests {
    /// A device of the shared server's demo app with a tag and an alias of its own.
    private func device(_ server: RoutedServer, alias: String = "console-\(UUID().uuidString.prefix(8))") async throws -> (id: String, token: String, tag: String, alias: String) {
        let id = UUID().uuidString.lowercased()
        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let tag = "console-\(UUID().uuidString.prefix(8).lowercased())"
        let body = #"{"token": "\#(token)", "environment": "production", "tags": ["\#(tag)"], "alias": \#(try String(decoding: JSONValue.string(alias).serialized(), as: UTF8.self))}"#
        let registered = try await server.master.put("/v1/apps/demo/devices/\(id)", body)
        #expect(registered.status == 200, "\(registered.text)")
        return (id, token, tag, alias)
    }

    @Test("every page renders for the admin, each input has a label, and no page carries the secret")
    func everyPageRenders() async throws {
        let server = try await RouterHarness.shared.value
        let device = try await device(server)
        let browser = ConsoleBrowser(server)
        try await browser.signIn(RunningServer.adminToken)
        let sent = try await browser.post("/console/apps/demo/pushes", [("audience.kind", "tags"), ("audience.values", device.tag), ("notification.title", "pages")])
        let push = try #require(sent.header("Location"))
        let pages = [
            "/console", "/console/apps", "/console/apps/demo", "/console/apps/demo/devices", "/console/apps/demo/devices?by=tag&q=\(device.tag)",
            "/console/apps/demo/devices/\(device.id)", "/console/apps/demo/compose", "/console/apps/demo/pushes", push,
            "/console/apps/demo/token-events", "/console/apps/demo/activities",
        ]
        for path in pages {
            let page = try await browser.get(path)
            #expect(page.status == 200, "\(path): \(page.status)")
            #expect(page.text.contains("<html lang=\"en\">"), "\(path)")
            #expect(page.text.contains("<h1>"), "\(path)")
            #expect(!page.text.contains(RunningServer.adminToken), "\(path) shows the admin token")
            #expect(!page.text.contains(server.master.bearer!), "\(path) shows the master secret")
            for match in page.text.matches(of: /<(input|select|textarea) id="([^"]+)"/) {
                #expect(page.text.contains("<label for=\"\(match.2)\""), "\(path): #\(match.2) has no label")
            }
            #expect(!page.text.contains("{{"), "\(path): a tag was left unrendered")
        }
        let found = try await browser.get("/console/apps/demo/devices?by=tag&q=\(device.tag)")
        #expect(found.text.contains(device.id))
        #expect(found.text.contains("1 device"))
        let voipToken = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let set = try await server.master.put("/v1/apps/demo/devices/\(device.id)/push-tokens/voip", #"{"token": "\#(voipToken)"}"#)
        #expect(set.status == 200, "\(set.text)")
        let detail = try await browser.get("/console/apps/demo/devices/\(device.id)")
        #expect(detail.text.contains(device.token))
        #expect(detail.text.contains(device.alias))
        #expect(detail.text.contains("<dt>VoIP token (PushKit)</dt><dd><code class=\"token\">\(voipToken)</code> active, set"))
        // And the Live Activities it follows.
        let activityToken = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        #expect(try await server.master.put("/v1/apps/demo/devices/\(device.id)/activities/match-\(device.tag)", #"{"token": "\#(activityToken)"}"#).status == 200)
        let following = try await browser.get("/console/apps/demo/devices/\(device.id)")
        #expect(following.text.contains("<dt>Live Activity match-\(device.tag)</dt><dd><code class=\"token\">\(activityToken)</code> started"), "\(following.text)")
        // The app's activities list it, with its one device and a link to update it.
        let activities = try await browser.get("/console/apps/demo/activities")
        #expect(activities.text.contains("<tr><td>match-\(device.tag)</td><td>1</td>"), "\(activities.text)")
        #expect(activities.text.contains("/console/apps/demo/compose?audience.kind=activity&amp;audience.values=match-\(device.tag)"))
        #expect(try await browser.get("/console/apps/demo/activities?after=a%2Fb").status == 400)
        // And the app's broadcast channels, on the first page only.
        let made = try await server.master.put("/v1/apps/demo/broadcast-channels/final-\(device.tag)", #"{"storage": "mostRecent"}"#)
        let channelID = try #require(try made.json()["channelId"]?.string)
        let withChannel = try await browser.get("/console/apps/demo/activities")
        #expect(
            withChannel.text.contains(
                #"<tr><td><a href="/console/apps/demo/broadcast-channels/final-\#(device.tag)">final-\#(device.tag)</a></td><td><code>\#(channelID)</code></td><td>the most recent, 8 hours</td>"#),
            "\(withChannel.text)")
        #expect(try await browser.get("/console/apps/demo/broadcast-channels/final-\(device.tag)").status == 200)
        let later = try await browser.get("/console/apps/demo/activities?after=zzz")
        #expect(later.status == 200 && !later.text.contains("Broadcast channels"), "a later page of activities: \(later.status)")
        // The device's page links to the composer with the device as the audience, counted at once.
        let link = "/console/apps/demo/compose?audience.kind=devices&amp;audience.values=\(device.id)"
        #expect(detail.text.contains(link))
        let prefilled = try await browser.get(link.replacingOccurrences(of: "&amp;", with: "&"))
        #expect(prefilled.text.contains(#"id="audience-devices" name="audience.kind" value="devices" checked"#))
        #expect(prefilled.text.contains("Reaches 1 device now."))
    }

    @Test("a channel's page broadcasts to it and lists what was sent with APNs' answer; bad input names its field, and a refusal is shown")
    func aChannelsPageBroadcasts() async throws {
        try await RouterHarness.withServer { server in
            let browser = ConsoleBrowser(server)
            try await browser.signIn(server.master.bearer!)
            let made = try await server.master.put("/v1/apps/demo/broadcast-channels/final", #"{"storage": "none"}"#)
            let channelID = try #require(try made.json()["channelId"]?.string)
            let path = "/console/apps/demo/broadcast-channels/final"
            let empty = try await browser.get(path)
            #expect(empty.status == 200 && empty.text.contains(#"<code id="channel-id">\#(channelID)</code>"#))
            #expect(empty.text.contains("Nothing broadcast to this channel yet."))

            let sent = try await browser.post(
                "\(path)/broadcasts", [("event", "update"), ("contentState", #"{"home": 2, "away": 1}"#), ("alertTitle", "Goal!"), ("priority", "5")])
            #expect(sent.status == 303 && sent.header("Location") == path, "\(sent.status) \(sent.text)")
            let taken = try #require(try await server.simulator.get("/broadcasts").json()["items"]?.arrayItems)
            #expect(taken.count == 1 && taken[0]["channelID"]?.string == channelID && taken[0]["priority"]?.int == 5)
            let payload = try JSONValue(parsing: Data((taken[0]["payload"]?.string ?? "").utf8))
            #expect(payload[path: "aps.content-state.home"]?.int == 2 && payload[path: "aps.alert.title"]?.string == "Goal!")
            #expect(payload[path: "aps.event"]?.string == "update")
            let stamped = try #require(payload[path: "aps.timestamp"]?.int)
            #expect(abs(Double(stamped) - Date().timeIntervalSince1970) < 60, "stamped now")
            let history = try await browser.get(path)
            #expect(history.text.contains("<td>update</td><td><code>{&quot;away&quot;:1,&quot;home&quot;:2}</code></td><td>5</td><td>delivered</td>"), "\(history.text)")
            #expect(history.text.contains(">{&quot;away&quot;:1,&quot;home&quot;:2}</textarea>"), "the form starts from the state last sent")

            for (fields, field) in [
                ([("event", "update"), ("contentState", "[1")], "payload.aps.content-state"),
                ([("event", "update")], "payload.aps.content-state"),
                ([("event", "start"), ("contentState", "{}")], "payload.aps.event"),
                ([("event", "end"), ("contentState", "{}"), ("priority", "7")], "priority"),
            ] {
                let refused = try await browser.post("\(path)/broadcasts", fields)
                #expect(refused.status == 400 && refused.text.contains("<p>Field: <code>\(field)</code></p>"), "\(fields): \(refused.status) \(refused.text)")
            }
            let kept = try await browser.post("\(path)/broadcasts", [("event", "end"), ("contentState", "[1")])
            #expect(kept.text.contains("[1</textarea>") && kept.text.contains(#"<option value="end" selected>"#), "the form as sent")
            #expect(try await server.simulator.get("/broadcasts").json()["items"]?.arrayItems?.count == 1, "nothing else was sent")

            // APNs' refusal: shown, and in the history.
            #expect(try await server.simulator.post("/reset").status == 204)
            let refused = try await browser.post("\(path)/broadcasts", [("event", "end"), ("contentState", "{}")])
            #expect(refused.status == 409 && refused.text.contains("APNs has no such channel"), "\(refused.status)")
            #expect(refused.text.contains("<strong>rejected</strong>: ChannelNotRegistered"))
            #expect(try await browser.get("/console/apps/demo/broadcast-channels/other").status == 404)
            #expect(try await browser.get("\(path)?before=x").status == 400)

            // The composer: a start names the channel its activities follow, and the preview shows APNs' id in place.
            let start = #"{"aps": {"event": "start", "timestamp": 1, "content-state": {}, "attributes-type": "M", "attributes": {}, "alert": {"title": "Kick-off"}}}"#
            func preview(_ channel: String) async throws -> JSONValue {
                try await browser.post(
                    "/console/apps/demo/preview",
                    [("audience.kind", "all"), ("content", "payload"), ("payload", start), ("apns.pushType", "liveactivity"), ("broadcastChannel", channel)]
                ).json()
            }
            let shown = try await preview("final")
            #expect(shown["problem"] == nil, "\(shown)")
            #expect(shown["payload"]?.string?.contains(#""input-push-channel":"\#(channelID)""#) == true, "\(shown)")
            #expect(try await preview("nope")["problem"]?.string?.hasPrefix("broadcastChannel: the app has no broadcast channel 'nope'") == true)

            // Past 100 channels, the list pages on by name.
            for n in 0..<100 {
                #expect(try await server.master.put("/v1/apps/demo/broadcast-channels/match-\(String(format: "%03d", n))", #"{"storage": "none"}"#).status == 201)
            }
            let first = try await browser.get("/console/apps/demo/activities")
            #expect(first.text.contains(">final</a>") && first.text.contains(">match-098</a>") && !first.text.contains(">match-099</a>"))
            // Each with its last broadcast: the refused end above for final, none for the others.
            #expect(first.text.contains(", rejected: ChannelNotRegistered</td></tr>"), "\(first.text)")
            #expect(first.text.contains(">match-000</a></td>") && first.text.contains("<td>—</td></tr>"))
            #expect(first.text.contains(#"<a href="/console/apps/demo/activities?channelsAfter=match-098">More channels</a>"#))
            let next = try await browser.get("/console/apps/demo/activities?channelsAfter=match-098")
            #expect(next.text.contains(">match-099</a>") && !next.text.contains(">final</a>") && !next.text.contains("More channels"))
            #expect(try await browser.get("/console/apps/demo/activities?channelsAfter=a%20b").status == 400)
        }
    }

    @Test("a channel is made from the Live Activities page and deleted from its own once its name is typed; bad input names its field")
    func channelsAreMadeAndDeleted() async throws {
        try await RouterHarness.withServer { server in
            let browser = ConsoleBrowser(server)
            try await browser.signIn(server.master.bearer!)
            func simulated() async throws -> [JSONValue] {
                try #require(try await server.simulator.get("/channels").json()["channels"]?.arrayItems)
            }
            let made = try await browser.post("/console/apps/demo/broadcast-channels", [("name", "final"), ("storage", "mostRecent")])
            #expect(made.status == 303 && made.header("Location") == "/console/apps/demo/broadcast-channels/final", "\(made.status) \(made.text)")
            let kept = try #require(try await server.master.get("/v1/apps/demo/broadcast-channels/final").json()["channelId"]?.string)
            #expect(try await simulated().count == 1)
            #expect(try await browser.get("/console/apps/demo/activities").text.contains(">final</a>"))

            for (fields, field, status) in [
                ([("name", "a b"), ("storage", "none")], "name", 400),
                ([("name", "other"), ("storage", "forever")], "storage", 400),
                ([("name", "final"), ("storage", "none")], "storage", 409),
            ] {
                let refused = try await browser.post("/console/apps/demo/broadcast-channels", fields)
                #expect(refused.status == status && refused.text.contains("<p>Field: <code>\(field)</code></p>"), "\(fields): \(refused.status) \(refused.text)")
                #expect(refused.text.contains(#"value="\#(fields[0].1)""#), "the form as it was sent")
            }
            #expect(try await simulated().count == 1, "nothing else was made at APNs")

            let path = "/console/apps/demo/broadcast-channels/final"
            #expect(try await browser.get(path).text.contains("Type the channel's name, final, to delete it"))
            let unconfirmed = try await browser.post("\(path)/delete", [("confirm", "Final")])
            #expect(unconfirmed.status == 400 && unconfirmed.text.contains("<p>Field: <code>confirm</code></p>"), "\(unconfirmed.status)")
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels/final").status == 200, "not deleted")
            let deleted = try await browser.post("\(path)/delete", [("confirm", "final")])
            #expect(deleted.status == 303 && deleted.header("Location") == "/console/apps/demo/activities", "\(deleted.status) \(deleted.text)")
            #expect(try await server.master.get("/v1/apps/demo/broadcast-channels/final").status == 404)
            #expect(try await simulated().allSatisfy { $0["id"]?.string != kept }, "gone at APNs too")
            #expect(try await browser.get(path).status == 404)
            #expect(try await browser.post("\(path)/delete", [("confirm", "final")]).status == 404)
        }
    }

    @Test("no template ever renders a value unescaped")
    func templatesEscape() {
        for (name, text) in ConsoleTemplates.all {
            #expect(!text.contains("{{{"), "\(name) uses a triple mustache")
            #expect(!text.contains("{{&"), "\(name) uses {{& }}")
        }
    }

    @Test("what a device sent is shown as text, never as markup")
    func escaping() async throws {
        let server = try await RouterHarness.shared.value
        let device = try await device(server, alias: #"<script>alert("x")</script> & 'co'"#)
        let browser = ConsoleBrowser(server)
        try await browser.signIn(server.master.bearer!)
        let query = device.alias.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let page = try await browser.get("/console/apps/demo/devices?by=alias&q=\(query)")
        #expect(page.status == 200)
        #expect(page.text.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;"))
        #expect(!page.text.contains("<script>alert"))
        #expect(page.text.contains(device.id))
    }

    @Test("the composer's forms are refused with the API's message for the same request")
    func composerRefusesAsTheAPIDoes() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        try await browser.signIn(server.master.bearer!)
        let cases: [(form: [(String, String)], json: String)] = [
            ([("audience.kind", "all"), ("notification.title", "x"), ("apns.priority", "7")],
             #"{"audience": {"all": true}, "notification": {"title": "x"}, "apns": {"priority": 7}}"#),
            ([("audience.kind", "all"), ("notification.title", "x"), ("notification.badge", "many")],
             #"{"audience": {"all": true}, "notification": {"title": "x", "badge": "many"}}"#),
            ([("audience.kind", "tags"), ("audience.values", "good bad!tag"), ("notification.title", "x")],
             #"{"audience": {"tags": ["good", "bad!tag"]}, "notification": {"title": "x"}}"#),
            ([("audience.kind", "all"), ("content", "payload"), ("payload", #"{"aps": {}}"#)],
             #"{"audience": {"all": true}, "payload": {"aps": {}}}"#),
            ([("audience.kind", "all"), ("notification.title", "x"), ("inbox", "true"), ("inbox.ttl", "0")],
             #"{"audience": {"all": true}, "notification": {"title": "x"}, "inbox": {"ttl": 0}}"#),
            ([("audience.kind", "all"), ("notification.title", "x"), ("apns.expiration", "soon")],
             #"{"audience": {"all": true}, "notification": {"title": "x"}, "apns": {"expiration": "soon"}}"#),
            ([("audience.kind", "all"), ("notification.title", "x"), ("ratePerSecond", "-1")],
             #"{"audience": {"all": true}, "notification": {"title": "x"}, "ratePerSecond": -1}"#),
        ]
        for (form, json) in cases {
            let api = try await server.master.post("/v1/apps/demo/pushes", json)
            #expect(api.status == 400, "\(json): \(api.text)")
            let message = try #require(api.json()["message"]?.string)
            let field = try #require(api.json()["field"]?.string)
            let page = try await browser.post("/console/apps/demo/pushes", form)
            #expect(page.status == 400, "\(form)")
            #expect(page.text.contains(Self.escaped(message)), "the page does not say: \(message)\n\(page.text.prefix(3000))")
            #expect(page.text.contains("<code>\(Self.escaped(field))</code>"), "the page does not name \(field)")
            // The form comes back as it was sent, to be corrected.
            #expect(page.text.contains(#"name="csrf""#))
        }
        // An audience kind the composer does not offer, in either form that takes one; the second once crashed the
        // server (each dot a level of nesting).
        for kind in ["everyone", String(repeating: "a.", count: 40_000) + "b"] {
            let form = [("audience.kind", kind), ("audience.values", "x"), ("notification.title", "x")]
            let sent = try await browser.post("/console/apps/demo/pushes", form)
            #expect(sent.status == 400)
            #expect(sent.text.contains("<code>audience.kind</code>"))
            let preview = try await browser.post("/console/apps/demo/preview", form)
            #expect(preview.status == 200)
            #expect(preview.text.contains("audience.kind: the audience is one of"), "\(preview.text.prefix(500))")
        }
        // JSON typed in a field is read by the API's strict parser.
        let trailing = try await browser.post("/console/apps/demo/pushes", [("audience.kind", "all"), ("notification.title", "x"), ("notification.data", #"{"a": 1,}"#)])
        #expect(trailing.status == 400)
        #expect(trailing.text.contains("the body is not valid JSON: expected a member name after &#39;,&#39; (no trailing commas)"))
    }

    @Test("the new-app form is refused with the API's message for the same request")
    func appFormRefusesAsTheAPIDoes() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        try await browser.signIn(RunningServer.adminToken)
        let cases: [(form: [(String, String)], json: String)] = [
            ([("id", "Bad_Id"), ("topic", "com.example.x"), ("environment", "simulator")],
             #"{"id": "Bad_Id", "topic": "com.example.x", "environment": "simulator"}"#),
            ([("id", "demo"), ("topic", "com.example.x"), ("environment", "simulator")],
             #"{"id": "demo", "topic": "com.example.x", "environment": "simulator"}"#),
            ([("id", "needs-endpoint"), ("topic", "com.example.x"), ("environment", "custom")],
             #"{"id": "needs-endpoint", "topic": "com.example.x", "environment": "custom"}"#),
            ([("id", "no-creds"), ("topic", "com.example.x"), ("environment", "production")],
             #"{"id": "no-creds", "topic": "com.example.x", "environment": "production"}"#),
            ([("id", "ttl"), ("topic", "com.example.x"), ("environment", "simulator"), ("inboxMaxTTL", "5")],
             #"{"id": "ttl", "topic": "com.example.x", "environment": "simulator", "inboxMaxTTL": 5}"#),
        ]
        for (form, json) in cases {
            let api = try await server.admin.post("/v1/apps", json)
            #expect([400, 409].contains(api.status), "\(json): \(api.text)")
            let message = try #require(api.json()["message"]?.string)
            let page = try await browser.post("/console/apps", form)
            #expect(page.status == api.status, "\(form)")
            #expect(page.text.contains(Self.escaped(message)), "the page does not say: \(message)")
            // What was typed is kept (the id field), to be corrected.
            #expect(page.text.contains(#"value="\#(Self.escaped(form[0].1))""#))
        }
    }

    @Test("the admin creates an app on the simulator: its secrets are shown once, and the master secret signs in")
    func createApp() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        try await browser.signIn(RunningServer.adminToken)
        let id = "console-\(UUID().uuidString.prefix(6).lowercased())"
        let created = try await browser.post(
            "/console/apps",
            [
                ("id", id), ("topic", "com.example.\(id)"), ("environment", "simulator"), ("credentials.type", ""), ("broadcastRatePerSecond", "250"),
                ("webhookOpens", "on"),
            ])
        #expect(created.status == 201, "\(created.text.prefix(2000))")
        #expect(created.header("Cache-Control") == "no-store")
        let master = try #require(created.text.firstMatch(of: /tms_[A-Za-z0-9_-]+/).map { String($0.0) })
        #expect(created.text.contains("tak_"))
        #expect(created.text.contains("tis_"))
        let listed = try await browser.get("/console/apps")
        #expect(listed.text.contains("/console/apps/\(id)"))
        #expect(!listed.text.contains(master), "the list never shows a secret")
        // The API sees the same app: one path to the data.
        #expect(try await server.admin.get("/v1/apps/\(id)").json()["broadcastRatePerSecond"]?.int == 250)
        #expect(try await browser.get("/console/apps/\(id)").text.contains("throttled to 250 recipients a second"))
        // The box for opens asks the webhook for both kinds; the page says what it posts.
        #expect(try await server.admin.get("/v1/apps/\(id)").json()["webhookEvents"]?.arrayItems?.compactMap(\.string) == ["token.deactivated", "push.opened"])
        #expect(try await browser.get("/console/apps/\(id)").text.contains("token.deactivated, push.opened (once a URL is set)"))
        let backend = ConsoleBrowser(server)
        #expect(try await backend.signIn(master).status == 303)
        #expect(try await backend.get("/console/apps/\(id)/devices").status == 200)
    }

    @Test("a master secret sees its own app only, and manages no apps")
    func masterSeesItsAppOnly() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        try await browser.signIn(server.master.bearer!)
        #expect(try await browser.get("/console").text.contains("Signed in: master secret of demo"))
        #expect(try await browser.get("/console/apps").header("Location") == "/console/apps/demo/devices")
        #expect(try await browser.get("/console/apps/demo").header("Location") == "/console/apps/demo/devices")
        #expect(try await browser.get("/console/apps/demo/compose").status == 200)
        #expect(try await browser.get("/console/apps/other/devices").status == 404)
        #expect(try await browser.get("/console/apps/other/pushes").status == 404)
        let create = try await browser.post("/console/apps", [("id", "sneaky"), ("topic", "com.example.sneaky"), ("environment", "simulator")])
        #expect(create.status == 403)
        #expect(try await browser.post("/console/apps/demo/rotate", [("rotate", "masterSecret")]).status == 403)
        #expect(try await server.admin.get("/v1/apps/sneaky").status == 404)
    }

    @Test("devices are found by alias, tag, token (any case, any kind) and id; a malformed token is refused as the API does")
    func deviceSearch() async throws {
        let server = try await RouterHarness.shared.value
        let device = try await device(server)
        let browser = ConsoleBrowser(server)
        try await browser.signIn(server.master.bearer!)
        for (by, query) in [("alias", device.alias), ("tag", device.tag), ("token", device.token.uppercased()), ("device", device.id.uppercased())] {
            let page = try await browser.get("/console/apps/demo/devices?by=\(by)&q=\(query)")
            #expect(page.status == 200, "\(by)")
            #expect(page.text.contains("/console/apps/demo/devices/\(device.id)"), "by \(by)")
        }
        // Its VoIP token finds it too (the token a failed call's record names).
        let voipToken = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        #expect(try await server.master.put("/v1/apps/demo/devices/\(device.id)/push-tokens/voip", #"{"token": "\#(voipToken)"}"#).status == 200)
        let byVoIP = try await browser.get("/console/apps/demo/devices?by=token&q=\(voipToken)")
        #expect(byVoIP.text.contains("/console/apps/demo/devices/\(device.id)") && byVoIP.text.contains("1 device"), "\(byVoIP.text)")
        let none = try await browser.get("/console/apps/demo/devices?by=token&q=\(String(repeating: "0f", count: 32))")
        #expect(none.text.contains("No device."))
        let bad = try await browser.get("/console/apps/demo/devices?by=token&q=xyz")
        #expect(bad.status == 400)
        #expect(bad.text.contains("token must be the device token in hex (APNs tokens are 32 bytes)"))
        #expect(try await browser.get("/console/apps/demo/devices/not-a-uuid").status == 400)
    }

    @Test("the preview is the payload the simulator then receives, and the push is followed to completion")
    func previewIsWhatIsSent() async throws {
        let server = try await RouterHarness.shared.value
        let device = try await device(server)
        let browser = ConsoleBrowser(server)
        try await browser.signIn(server.master.bearer!)
        let form = [
            ("audience.kind", "tags"), ("audience.values", device.tag), ("notification.title", "Préview ✓"), ("notification.body", "a \"quoted\" body"),
            ("notification.sound", "default"), ("notification.threadID", "t1"), ("notification.data", #"{"orderId": 17, "nested": {"a": [1, 2]}}"#),
            ("apns.collapseID", "c1"),
        ]
        let preview = try await browser.post(
            "/console/apps/demo/preview", form, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(preview.status == 200)
        let shown = try preview.json()
        #expect(shown["audience"] == "Reaches 1 device now.")
        #expect(shown["problem"] == nil)
        let payload = try #require(shown["payload"]?.string)
        #expect(shown["bytes"] == .int(payload.utf8.count))
        #expect(shown["limit"] == 4096)
        let sent = try await browser.post("/console/apps/demo/pushes", form)
        #expect(sent.status == 303)
        let location = try #require(sent.header("Location"))
        try await waitUntil("the push completes", every: .milliseconds(50)) {
            try await browser.get("\(location)/status", headers: [("Accept", "application/json")]).json()["status"] == "completed"
        }
        let status = try await browser.get("\(location)/status", headers: [("Accept", "application/json")]).json()
        #expect(status["accepted"] == 1)
        let arrived = try await server.arrivals().filter { $0.token == device.token }
        // The preview holds a stand-in for the push's id, which it has only once it is sent.
        #expect(payload.contains(#""tern":{"pushId":"\#(PushContent.previewPushID)"}"#))
        let pushID = try #require(location.split(separator: "/").last.map(String.init))
        let sentPayload = payload.replacingOccurrences(of: PushContent.previewPushID, with: pushID)
        #expect(arrived.map(\.payload) == [sentPayload], "the simulator got exactly the previewed payload, with the push's id")
        let page = try await browser.get(location)
        #expect(page.text.contains(#"data-status="completed""#))
    }

    @Test("the preview says what sending would refuse: a complication push to a tag, which the same form's send is refused for")
    func previewRefusesWhatSendingRefuses() async throws {
        let server = try await RouterHarness.shared.value
        let device = try await device(server)
        let browser = ConsoleBrowser(server)
        try await browser.signIn(server.master.bearer!)
        let toTag = [("audience.kind", "tags"), ("audience.values", device.tag), ("notification.title", "Call"), ("apns.pushType", "complication")]
        let preview = try await browser.post(
            "/console/apps/demo/preview", toTag, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(preview.status == 200)
        let problem = try #require(try preview.json()["problem"]?.string)
        #expect(problem.hasPrefix("apns.pushType: a complication push goes to the tokens PushKit gives the app"), "\(problem)")
        let sent = try await browser.post("/console/apps/demo/pushes", toTag)
        #expect(sent.status == 400)
        #expect(sent.text.contains("a complication push goes to the tokens PushKit gives the app"))
        // A VoIP push to a tag goes to the tagged devices' VoIP tokens, and the preview says so.
        let voip = [("audience.kind", "tags"), ("audience.values", device.tag), ("notification.title", "Call"), ("apns.pushType", "voip")]
        let call = try await browser.post(
            "/console/apps/demo/preview", voip, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(try call.json()["problem"] == nil, "\(call.text)")
        #expect(try call.json()["note"]?.string?.contains("Goes to the devices' voip tokens") == true, "\(call.text)")
        // Counted as sending hands it out: the tagged devices with a VoIP token.
        #expect(try call.json()["audience"]?.string == "Reaches 0 devices' voip tokens now.", "\(call.text)")
        let voipToken = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        #expect(try await server.master.put("/v1/apps/demo/devices/\(device.id)/push-tokens/voip", #"{"token": "\#(voipToken)"}"#).status == 200)
        let counted = try await browser.post(
            "/console/apps/demo/preview", voip, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(try counted.json()["audience"]?.string == "Reaches 1 device's voip token now.", "\(counted.text)")
        // To tokens it is what sending does.
        let toTokens = [("audience.kind", "tokens"), ("audience.values", device.token), ("notification.title", "Call"), ("apns.pushType", "voip")]
        let given = try await browser.post(
            "/console/apps/demo/preview", toTokens, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(try given.json()["problem"] == nil, "\(given.text)")
        #expect(try given.json()["headers"]?.string?.contains("apns-push-type: voip") == true)
        // A Live Activity's update goes to the tokens devices registered for it, counted as such.
        let activity = "score-\(device.tag)"
        let update = [
            ("audience.kind", "activity"), ("audience.values", activity), ("apns.pushType", "liveactivity"), ("content", "payload"),
            ("payload", #"{"aps": {"event": "update", "timestamp": 1764547200, "content-state": {"score": "1-0"}}}"#),
        ]
        #expect(try await server.master.put("/v1/apps/demo/devices/\(device.id)/activities/\(activity)", #"{"token": "\#(voipToken)"}"#).status == 200)
        let scored = try await browser.post(
            "/console/apps/demo/preview", update, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(try scored.json()["problem"] == nil, "\(scored.text)")
        #expect(try scored.json()["audience"]?.string == "Reaches 1 device's token for the activity now.", "\(scored.text)")
        // Narrowed to users on the lines after the id: the device's own, then another's.
        for (user, reached) in [(device.alias, "1 device's token"), ("nobody-\(device.tag)", "0 devices' tokens")] {
            let narrowed = update.map { $0.0 == "audience.values" ? ($0.0, "\(activity)\n\(user)") : $0 }
            let answer = try await browser.post(
                "/console/apps/demo/preview", narrowed, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
            #expect(try answer.json()["audience"]?.string == "Reaches \(reached) for the activity now.", "\(answer.text)")
        }
        let start = update.map { $0.0 == "payload" ? ($0.0, #"{"aps": {"event": "start", "timestamp": 1}}"#) : $0 }
        let refused = try await browser.post(
            "/console/apps/demo/preview", start, headers: [("Accept", "application/json"), ("X-CSRF-Token", browser.csrf!)])
        #expect(try refused.json()["problem"]?.string?.hasPrefix("payload.aps.event: ") == true, "\(refused.text)")
    }

    @Test("the overview's data: sixty minutes, connections, APNs' answers")
    func overviewData() async throws {
        let server = try await RouterHarness.shared.value
        let browser = ConsoleBrowser(server)
        try await browser.signIn(RunningServer.adminToken)
        let data = try await browser.get("/console/overview/data", headers: [("Accept", "application/json")])
        #expect(data.status == 200)
        let json = try data.json()
        guard case .array(let bars)? = json[path: "chart.bars"] else {
            Issue.record("no bars: \(data.text.prefix(500))")
            return
        }
        #expect(bars.count == 60)
        #expect(json["deviceConnections"]?.int != nil)
        #expect(json["answers"] != nil)
    }

    @Test("with console.enabled false there is no /console, and the API's routes are the same")
    func disabled() async throws {
        let enabledRoutes = try await RouterHarness.shared.value.servedRoutes
        #expect(!enabledRoutes.contains { $0.contains("/console") }, "the console is not part of the API's contract")
        try await RouterHarness.withServer(configure: { $0.console.enabled = false }) { server in
            let browser = ConsoleBrowser(server)
            for path in ["/console", "/console/sign-in", "/console/static/console.js"] {
                let page = try await browser.get(path)
                #expect(page.status == 404, "\(path)")
                #expect(try page.json()["error"] == "notFound")
            }
            #expect(try await browser.post("/console/sign-in", [("secret", RunningServer.adminToken)], csrf: .some(nil)).status == 404)
            #expect(server.servedRoutes == enabledRoutes)
        }
    }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "'", with: "&#39;")
    }
}

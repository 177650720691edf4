import Foundation
import NIOHTTP1
import TernAPNs
import TernTestSupport
import TernWeb
import Testing

/// Input is taken only as the contract writes it: strict JSON, no unknown fields, documented character sets, and
/// every refusal in the JSON error shape. The findings of the hostile-input review, each replayed.
struct StrictInputTests {
    struct Probe: Decodable {
        var name: String
        var count: Int?
        var options: Options?

        struct Options: Decodable {
            var priority: Int?
        }
    }

    static func decode(_ text: String) throws -> Probe {
        try StrictJSONDecoder().decode(Probe.self, from: Array(text.utf8))
    }

    @Test(arguments: [
        (#"{"name": "a",}"#, "no trailing commas"),
        (#"{"name": ["a",]}"#, "no trailing commas"),
        (#"{"name": "a", "name": "b"}"#, "given twice"),
        (#"{"name": "a"} x"#, "after the JSON value"),
        (#"{"name": 'a'}"#, "unexpected character"),
        (#"{"name": "a\q"}"#, "unknown escape"),
        (#"{"name": "\ud800"}"#, "lone surrogate"),
        (#"{"count": 012, "name": "a"}"#, "may not start with 0"),
        ("{\"name\": \"a\u{01}\"}", "control character"),
        (#"{"name": "a\u0000b"}"#, "NUL character"),
        (#"{"name": "a"#, "not closed"),
        (String(repeating: "[", count: 100) + String(repeating: "]", count: 100), "nested more than 64"),
    ])
    func textThatIsNotStrictJSONIsRefusedSayingWhy(text: String, why: String) {
        do {
            _ = try StrictJSON.parse(Array(text.utf8))
            Issue.record("\(text) was taken")
        } catch {
            #expect(error.message.contains(why), "\(text): \(error)")
        }
    }

    @Test func textCutShortIsTheBodysFaultAndAMembersOwnFaultNamesIt() throws {
        for text in [#"[{"#, #"{"name": ["a", "#, #"{"options": {"priority": "#, #"{"name": "a"#] {
            do {
                _ = try StrictJSON.parse(Array(text.utf8))
                Issue.record("\(text) was taken")
            } catch {
                #expect(error.path == "", "\(text): \(error)")
            }
        }
        do {
            _ = try StrictJSON.parse(Array(#"{"options": {"name": 1, "name": 2}}"#.utf8))
            Issue.record("a duplicate key was taken")
        } catch {
            #expect(error.path == "options.name")
        }
    }

    @Test func aByteOrderMarkAndInvalidUTF8AreRefused() {
        #expect(throws: StrictJSON.SyntaxError.self) { try StrictJSON.parse([0xEF, 0xBB, 0xBF] + Array(#"{"name": "a"}"#.utf8)) }
        #expect(throws: StrictJSON.SyntaxError.self) { try StrictJSON.parse(Array(#"{"name": ""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)) }
        #expect(throws: StrictJSON.SyntaxError.self) { try StrictJSON.parse(Array(#"{"name": ""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)) }
    }

    @Test func validJSONDecodesExactly() throws {
        let probe = try Self.decode(#" { "name" : "caf\u00e9 \ud83d\ude00 \/", "count": 2, "options": {"priority": 10} } "#)
        #expect(probe.name == "café 😀 /")
        #expect(probe.count == 2)
        #expect(probe.options?.priority == 10)
        #expect(try StrictJSON.parse(Array("[1.5e3, -0, true, null, {}]".utf8)) == .array([.number("1.5e3"), .number("-0"), .bool(true), .null, .object([])]))
    }

    @Test func anUnknownFieldIsNamedWithItsPath() {
        for (text, path) in [(#"{"name": "a", "nmae": "b"}"#, "nmae"), (#"{"name": "a", "options": {"prioirty": 5}}"#, "options.prioirty")] {
            do {
                _ = try Self.decode(text)
                Issue.record("\(text) was taken")
            } catch let error as StrictJSONDecoder.UnknownField {
                #expect(error.path == path)
            } catch {
                Issue.record("\(text): \(error)")
            }
        }
        // A number where a whole number is wanted is refused, not truncated.
        #expect(throws: (any Error).self) { try Self.decode(#"{"name": "a", "count": 1.5}"#) }
        #expect(throws: (any Error).self) { try Self.decode(#"{"name": "a", "count": 1e999}"#) }
    }

    struct FreeForm: Decodable {
        var data: [String: JSONValue]
    }

    /// Free-form JSON (a push's `data`) is kept as sent: a number that would be changed on the way is refused, named
    /// by its path, instead of going out as another number.
    @Test func freeFormNumbersAreKeptExactlyOrRefusedNamingThem() throws {
        func decode(_ text: String) throws -> [String: JSONValue] {
            try StrictJSONDecoder().decode(FreeForm.self, from: Array(#"{"data": \#(text)}"#.utf8)).data
        }
        let kept = try decode(#"{"n": 9223372036854775807, "m": -9223372036854775808, "f": 0.5, "e": 1.5e3, "z": 0.0, "list": [1, [2.25]]}"#)
        #expect(kept == ["n": .int(.max), "m": .int(.min), "f": .double(0.5), "e": .double(1500), "z": .double(0), "list": .array([.int(1), .array([.double(2.25)])])])
        for (text, path, why) in [
            (#"{"n": 123456789012345678901234567890}"#, "data.n", "past 64 bits"),
            (#"{"n": 9223372036854775808}"#, "data.n", "past 64 bits"),
            (#"{"list": [1, 1e400]}"#, "data.list[1]", "too large"),
            (#"{"a": {"b": 1E-400}}"#, "data.a.b", "too small"),
        ] {
            do {
                _ = try decode(text)
                Issue.record("\(text) was taken")
            } catch let error as DecodingError {
                guard case .dataCorrupted(let context) = error else { Issue.record("\(text): \(error)"); continue }
                #expect(JSONAPIError.path(context.codingPath) == path, "\(text)")
                #expect(context.debugDescription.contains(why), "\(text): \(context.debugDescription)")
            }
        }
    }

    // MARK: Through the API (its router; the HTTP parser's own limits over a socket)

    @Test func bodiesThatAreNotStrictJSONOrHaveUnknownFieldsAre400NamingTheField() async throws {
        let server = try await RouterHarness.shared.value
        let cases: [(HTTPMethod, String, RouterTestClient, [UInt8], String)] = [
            (.PATCH, "/v1/apps/demo", server.admin, Array(#"{"inboxCap": 10,}"#.utf8), "body"),
            (.PATCH, "/v1/apps/demo", server.admin, [0xEF, 0xBB, 0xBF] + Array(#"{"inboxCap": 10}"#.utf8), "body"),
            (.PATCH, "/v1/apps/demo", server.admin, Array(#"{"webhookURL": ""#.utf8) + [0xFF] + Array(#""}"#.utf8), "webhookURL"),
            (.PATCH, "/v1/apps/demo", server.admin, Array(#"{"inboxCap": 10, "inboxCap": 20}"#.utf8), "inboxCap"),
            (.PATCH, "/v1/apps/demo", server.admin, Array(#"{"id": "renamed"}"#.utf8), "id"),
            (.POST, "/v1/apps/demo/pushes", server.master,
             Array(#"{"audience": {"all": true}, "notification": {"title": "x"}, "apns": {"prioirty": 5}}"#.utf8), "apns.prioirty"),
            (.POST, "/v1/apps/demo/pushes", server.master, Array(#"{"audience": {"all": true}, "payload": {}}"#.utf8), "payload.aps"),
            (.POST, "/v1/apps/demo/pushes", server.master,
             Array(#"{"audience": {"all": true}, "payload": {"aps": {"content-available": 1}}}"#.utf8), "apns.priority"),
            (.POST, "/v1/apps/demo/pushes", server.master,
             Array(#"{"audience": {"aliases": ["bob\u0000"]}, "notification": {"title": "x"}}"#.utf8), "audience.aliases[0]"),
            (.POST, "/v1/apps/demo/pushes", server.master,
             Array(#"{"audience": {"aliases": ["\u202eevil"]}, "notification": {"title": "x"}}"#.utf8), "audience.aliases[0]"),
            (.PUT, "/v1/apps/demo/devices/\(UUID().uuidString)", server.master,
             Array(#"{"token": "\#(Fixture.token(77))", "environment": "production", "alias": "line\nbreak"}"#.utf8), "alias"),
        ]
        let before = try await server.admin.get("/v1/apps/demo").text
        for (method, path, client, body, field) in cases {
            let response = try await client.send(method, path, bytes: body)
            #expect(response.status == 400, "\(String(decoding: body, as: UTF8.self)): \(response.text)")
            #expect(try response.json()["field"]?.string == field, "\(String(decoding: body, as: UTF8.self)): \(response.text)")
        }
        #expect(try await server.admin.get("/v1/apps/demo").text == before, "nothing was changed")
    }

    @Test func everyRefusalHasTheJSONShapeIncludingHummingbirdsOwn() async throws {
        let server = try await RouterHarness.shared.value
        let unknownPath = try await server.admin.get("/v1/nothing-here")
        #expect(unknownPath.status == 404)
        #expect(try unknownPath.json()["error"]?.string == "notFound")
        let doubled = try await server.master.get("//v1//apps//demo//token-events")
        #expect(doubled.status == 404)
        #expect(try doubled.json()["error"]?.string == "notFound")
        let wrongMethod = try await server.master.send(.PUT, "/v1/apps/demo/token-events", body: "{}")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers.first(name: "Allow") == "GET")
        #expect(try wrongMethod.json()["error"]?.string == "methodNotAllowed")
        let longQuery = try await server.master.get("/v1/apps/demo/token-events?after=" + String(repeating: "1", count: 10_000))
        #expect(longQuery.status == 414)
        #expect(try longQuery.json()["error"]?.string == "uriTooLong")
        let tooLarge = try await server.master.send(.POST, "/v1/apps/demo/pushes", body: #"{"audience": {"all": true}, "notification": {"title": ""# + String(repeating: "x", count: 2 << 20) + #""}}"#)
        #expect(tooLarge.status == 413)
        #expect(try tooLarge.json()["error"]?.string == "payloadTooLarge")
    }

    /// The HTTP/1 parser refuses these before any route sees them (a channel handler answers), so over a socket.
    @Test func theHTTPParsersRefusalsHaveTheJSONShapeToo() async throws {
        let server = try await ServerHarness.shared.value
        // Longer than the 414 above, the request line alone is over the header limit.
        let hugeQuery = try await server.master.get("/v1/apps/demo/token-events?after=" + String(repeating: "1", count: 60_000))
        #expect(hugeQuery.status == 431)
        #expect(try hugeQuery.json()["error"]?.string == "headersTooLarge")
        let hugeHeader = try await server.api.send(.GET, "/v1/apps/demo/token-events", headers: [("Authorization", "Bearer " + String(repeating: "x", count: 100_000))])
        #expect(hugeHeader.status == 431)
        #expect(try hugeHeader.json()["error"]?.string == "headersTooLarge")
    }

    @Test func anUnknownAppAndAKnownOneAnswerAMissingOrWrongSecretAlike() async throws {
        let server = try await RouterHarness.shared.value
        for bearer in [nil, "tms_wrong"] as [String?] {
            let known = try await server.api.with(bearer: bearer).get("/v1/apps/demo/token-events")
            let unknown = try await server.api.with(bearer: bearer).get("/v1/apps/no-such-app/token-events")
            #expect(known.status == 401)
            #expect(unknown.status == known.status)
            #expect(unknown.text == known.text, "an app id can be probed: \(unknown.text) vs \(known.text)")
        }
    }
}

import Crypto
import Foundation
import TernAPNs
import TernSimulator
import TernTestSupport
import Testing

/// Device ids, tokens and request bodies the server tests share.
enum Fixture {
    /// A device id (UUID) from a number.
    static func device(_ number: Int) -> String {
        String(format: "6f1c1f9e-8d7a-4d44-9d2e-%012x", number)
    }

    /// A 32-byte device token from a number.
    static func token(_ number: Int) -> String {
        String(repeating: "ab", count: 28) + String(format: "%08x", number)
    }

    static func registration(
        token: String, alias: String? = nil, aliasToken: String? = nil, tags: [String]? = nil, environment: String = "production",
        locale: String? = nil, appVersion: String? = nil
    ) -> String {
        var object: [String: JSONValue] = ["token": .string(token), "environment": .string(environment)]
        if let locale { object["locale"] = .string(locale) }
        if let appVersion { object["appVersion"] = .string(appVersion) }
        if let alias { object["alias"] = .string(alias) }
        if let aliasToken { object["aliasToken"] = .string(aliasToken) }
        if let tags { object["tags"] = .array(tags.map { .string($0) }) }
        return String(decoding: try! JSONValue.object(object).serialized(), as: UTF8.self)
    }

    static func push(audience: String, title: String = "Hello", extra: String = "") -> String {
        #"{"audience": \#(audience), "notification": {"title": "\#(title)", "body": "from Tern"}\#(extra)}"#
    }
}

/// What the simulator received.
struct Arrival: Decodable {
    var token: String
    var topic: String
    var collapseID: String?
    var apnsID: String
    var payload: String
    /// `http2` or `legacy`.
    var transport: String
}

struct ArrivalPage: Decodable {
    var items: [Arrival]
    var next: UInt64
}

extension TestServer {
    /// Every notification the built-in simulator accepted, oldest first.
    func arrivals() async throws -> [Arrival] {
        var all: [Arrival] = []
        var after: UInt64 = 0
        while true {
            let page = try await simulator.get("/notifications?after=\(after)&limit=10000").decode(ArrivalPage.self)
            all += page.items
            if page.items.isEmpty { return all }
            after = page.next
        }
    }

    /// Registers a device with the demo app's key, as the app would: with the device secret of an earlier
    /// registration, and an alias token from the backend for the alias. Expects 200.
    @discardableResult
    func register(
        _ device: String, token: String, alias: String? = nil, tags: [String]? = nil, locale: String? = nil, appVersion: String? = nil
    ) async throws -> JSONValue {
        let aliasToken = alias.map { AliasTokens.mint(alias: $0, app: "demo", secret: identitySecret) }
        let response = try await self.device.send(
            .PUT, "/v1/apps/demo/devices/\(device)",
            body: Fixture.registration(token: token, alias: alias, aliasToken: aliasToken, tags: tags, locale: locale, appVersion: appVersion),
            headers: deviceSecrets[device].map { [("X-Tern-Device-Secret", $0)] } ?? [])
        #expect(response.status == 200, "registration answered \(response.status): \(response.text)")
        let answer = try response.json()
        if let secret = answer["deviceSecret"]?.string { deviceSecrets[device] = secret }
        return answer
    }

    /// Another app, `id` (topic `com.example.<id>`), delivering to a custom endpoint on 127.0.0.1:`port` (trusting
    /// `caPEM`, if given) with a token key, and `devices` devices registered with its key (``Fixture/device(_:)``
    /// numbered from 0). Expects each call to work. - Returns: the app's key, and the API with its master secret.
    func createCustomApp(
        _ id: String, port: Int, caPEM: String? = nil, key: APNsSigningKey, devices: Int = 0
    ) async throws -> (appKey: String, master: Client) {
        let escape = { (text: String) in text.replacingOccurrences(of: "\n", with: "\\n") }
        let trust = caPEM.map { #", "caPEM": "\#(escape($0))""# } ?? ""
        let created = try await admin.post("/v1/apps", """
            {"id": "\(id)", "topic": "com.example.\(id)", "environment": "custom", "endpoint": {"host": "127.0.0.1", "port": \(port)\(trust)},
             "credentials": {"type": "token", "keyPEM": "\(escape(key.pemRepresentation))", "keyID": "\(key.keyID)", "teamID": "\(key.teamID)"}}
            """)
        #expect(created.status == 201, "\(created.text)")
        let app = try created.json()
        let appKey = try #require(app["appKey"]?.string)
        for number in 0..<devices {
            let registered = try await device.with(bearer: appKey)
                .put("/v1/apps/\(id)/devices/\(Fixture.device(number))", Fixture.registration(token: Fixture.token(number)))
            #expect(registered.status == 200, "\(registered.text)")
        }
        return (appKey, master.with(bearer: try #require(app["masterSecret"]?.string)))
    }

    /// The demo app's key with a device's secret, as that device calls.
    func asDevice(_ device: String) -> [(String, String)] {
        deviceSecrets[device].map { [("X-Tern-Device-Secret", $0)] } ?? []
    }

    /// Sends a push with the master secret and waits up to 20 s for its outcome.
    func push(_ body: String) async throws -> JSONValue {
        let response = try await master.post("/v1/apps/demo/pushes?wait=20", body)
        #expect([200, 201].contains(response.status), "push answered \(response.status): \(response.text)")
        return try response.json()
    }
}

extension JSONValue {
    /// The member at a dotted path (`counts.accepted`), or nil.
    subscript(path path: String) -> JSONValue? {
        var current: JSONValue? = self
        for part in path.split(separator: ".") { current = current?[String(part)] }
        return current
    }

    var int: Int? {
        switch self {
        case .int(let value): value
        case .double(let value): Int(value)
        default: nil
        }
    }

    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}

/// Alias tokens as an app's backend mints them (HS256 over the identity secret's bytes), written here apart from
/// the server's own code so the tests check the server against an independent signer.
enum AliasTokens {
    static func mint(
        alias: String, app: String, secret: String, expiresIn: TimeInterval = 600, now: Date = Date(),
        header: String = #"{"alg":"HS256","typ":"JWT"}"#, extraClaims: [String: JSONValue] = [:], audience: JSONValue? = nil
    ) -> String {
        var claims: [String: JSONValue] = [
            "sub": .string(alias), "aud": audience ?? .string(app), "exp": .int(Int(now.timeIntervalSince1970 + expiresIn)),
        ]
        for (key, value) in extraClaims { claims[key] = value }
        let signingInput = base64URL(Array(header.utf8)) + "." + base64URL(try! JSONValue.object(claims).serialized())
        let mac = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return signingInput + "." + base64URL(Array(mac))
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension APNsSimulator.Configuration {
    /// An APNs of its own for a `custom` app's endpoint: it trusts `key` alone, serves neither the legacy gateway nor
    /// the feedback service, and stops without waiting long for its connections.
    static func endpoint(trusting key: APNsSigningKey) throws -> Self {
        var configuration = try Self()
        configuration.tokenKeys = [ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)]
        configuration.legacyGatewayPort = nil
        configuration.feedbackPort = nil
        configuration.shutdownGracePeriod = .milliseconds(100)
        return configuration
    }
}

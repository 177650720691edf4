import Foundation
import TernAPNs
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

    static func registration(token: String, alias: String? = nil, tags: [String]? = nil, environment: String = "production") -> String {
        var object: [String: JSONValue] = ["token": .string(token), "environment": .string(environment)]
        if let alias { object["alias"] = .string(alias) }
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

extension RunningServer {
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

    /// Registers a device with the demo app's key; expects 200.
    @discardableResult
    func register(_ device: String, token: String, alias: String? = nil, tags: [String]? = nil) async throws -> JSONValue {
        let response = try await self.device.put("/v1/apps/demo/devices/\(device)", Fixture.registration(token: token, alias: alias, tags: tags))
        #expect(response.status == 200, "registration answered \(response.status): \(response.text)")
        return try response.json()
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

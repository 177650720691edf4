import NIOCore
import Testing

@testable import TernServer

/// `http.trustedProxies`: which peers' `X-Forwarded-For` is believed, and how far (``TrustedProxies``).
@Suite("Trusted proxies")
struct TrustedProxiesTests {
    static func address(_ text: String) throws -> SocketAddress { try SocketAddress(ipAddress: text, port: 40_000) }

    @Test("addresses and ranges are read, and an entry that is neither is an error naming it")
    func parsing() throws {
        let proxies = try TrustedProxies(parsing: ["10.0.0.0/8", "127.0.0.1", "fd00::/8", "192.168.1.77/24", "::1"])
        #expect(proxies.ranges.map(\.description) == [
            "10.0.0.0/8", "127.0.0.1/32", "fd00::/8", "192.168.1.0/24", "::1/128",
        ])
        #expect(try TrustedProxies(parsing: []).ranges.isEmpty)
        for (entry, problem) in [
            ("10.0.0.0/33", "has a prefix length that is not 0-32"),
            ("fd00::/129", "has a prefix length that is not 0-128"),
            ("10.0.0.1/", "has a prefix length that is not 0-32"),
            ("10.0.0.0/08", "has a prefix length that is not 0-32"),
            ("lb.internal", "is not an IP address or a range such as 10.0.0.0/8"),
            ("10.0.0.0/8/8", "is not an IP address or a range such as 10.0.0.0/8"),
        ] {
            let error = #expect(throws: TernServerConfigurationError.self) { try TrustedProxies(parsing: [entry]) }
            #expect(error?.description == "http.trustedProxies: '\(entry)' \(problem)")
        }
    }

    @Test("a range holds its own addresses only, and an IPv4-mapped IPv6 peer is its IPv4 address")
    func containment() throws {
        let proxies = try TrustedProxies(parsing: ["10.0.0.0/8", "fd00::/8"])
        func trusted(_ text: String) throws -> Bool { proxies.trusts(try #require(try Self.address(text).unmappedIPBytes)) }
        #expect(try trusted("10.255.0.1"))
        #expect(try trusted("::ffff:10.1.2.3"))
        #expect(try trusted("fdab::1"))
        #expect(try !trusted("11.0.0.1"))
        #expect(try !trusted("9.255.255.255"))
        #expect(try !trusted("fe80::1"))
        #expect(try !trusted("::ffff:11.0.0.1"))
    }

    @Test("the client is the right-most address of the chain that is not a trusted proxy")
    func clients() throws {
        let proxies = try TrustedProxies(parsing: ["10.0.0.0/8"])
        func client(_ peer: String, _ forwardedFor: [String]) throws -> String? {
            proxies.client(peer: try Self.address(peer), forwardedFor: forwardedFor)?.ipAddress
        }
        // An untrusted peer is the client, whatever it says.
        #expect(try client("203.0.113.7", ["198.51.100.1"]) == "203.0.113.7")
        // A trusted one forwards the client it saw.
        #expect(try client("10.0.0.5", ["203.0.113.7"]) == "203.0.113.7")
        // What a client writes itself is to the left of what its balancer appends, and never reached.
        #expect(try client("10.0.0.5", ["198.51.100.1, 203.0.113.7"]) == "203.0.113.7")
        #expect(try client("10.0.0.5", ["198.51.100.1", "203.0.113.7"]) == "203.0.113.7", "two header lines are one list")
        // Through two trusted hops.
        #expect(try client("10.0.0.5", ["203.0.113.7, 10.1.1.1"]) == "203.0.113.7")
        // A trusted peer that forwards nobody (the balancer's health check) is the client; so is the left-most of
        // a chain trusted all along.
        #expect(try client("10.0.0.5", []) == "10.0.0.5")
        #expect(try client("10.0.0.5", ["10.2.2.2"]) == "10.2.2.2")
        // An entry that is not an address ends the walk at the hop that gave it.
        #expect(try client("10.0.0.5", ["203.0.113.7, unknown"]) == "10.0.0.5")
        #expect(try client("10.0.0.5", ["unknown, 10.1.1.1"]) == "10.1.1.1")
        // IPv6, bare or in brackets.
        #expect(try client("10.0.0.5", ["[2001:db8::7]"]) == "2001:db8::7")
        #expect(try client("10.0.0.5", ["2001:db8::8"]) == "2001:db8::8")
        // With no proxy trusted, the peer is the client.
        #expect(try TrustedProxies(parsing: []).client(peer: try Self.address("10.0.0.5"), forwardedFor: ["203.0.113.7"])?.ipAddress == "10.0.0.5")
    }
}

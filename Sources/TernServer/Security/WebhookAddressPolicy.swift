import Foundation
import NIOCore
import NIOPosix

/// Which addresses a webhook may be sent to. A webhook URL is chosen by whoever holds the admin token, but the
/// request leaves from the server's network position: it must not reach the cloud's metadata service or link-local
/// addresses ever, nor loopback and private networks unless the operator allows them (`webhooks.allowPrivateNetworks`).
struct WebhookAddressPolicy: Sendable {
    var allowPrivateNetworks: Bool

    /// Why an address is refused, or nil if it may be reached.
    func refusal(_ address: SocketAddress) -> String? {
        guard let bytes = address.ipBytes else { return "a Unix socket" }
        if bytes.count == 4 { return refusal(ipv4: bytes) }
        if let embedded = Self.embeddedIPv4(bytes) { return refusal(ipv4: embedded) }
        return refusal(ipv6: bytes)
    }

    /// The IPv4 address an IPv6 address carries to the same host, checked as that address: mapped (::ffff:a.b.c.d),
    /// compatible (::a.b.c.d, which some stacks still route to it), NAT64's well-known prefix (64:ff9b::a.b.c.d, which
    /// a NAT64 gateway forwards to it), 6to4 (2002:aabb:ccdd::) and Teredo (2001:0::, the client's address inverted).
    static func embeddedIPv4(_ bytes: [UInt8]) -> [UInt8]? {
        let zeros = { (range: Range<Int>) in bytes[range].allSatisfy { $0 == 0 } }
        if zeros(0..<10), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12..<16]) }
        // :: and ::1 are IPv6's own (unspecified, loopback), not IPv4-compatible.
        if zeros(0..<12), !zeros(12..<15) { return Array(bytes[12..<16]) }
        if bytes[0..<4] == [0x00, 0x64, 0xFF, 0x9B], zeros(4..<12) { return Array(bytes[12..<16]) }
        if bytes[0] == 0x20, bytes[1] == 0x02 { return Array(bytes[2..<6]) }
        if bytes[0..<4] == [0x20, 0x01, 0x00, 0x00] { return bytes[12..<16].map { $0 ^ 0xFF } }
        return nil
    }

    func refusal(ipv4 bytes: [UInt8]) -> String? {
        let (a, b) = (bytes[0], bytes[1])
        if a == 169, b == 254 { return "a link-local address (cloud metadata services live there)" }
        if a == 0 || a >= 224 { return "not a unicast address" }
        let isPrivate = a == 127 || a == 10 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168) || (a == 100 && (64...127).contains(b))
        if isPrivate, !allowPrivateNetworks { return "a loopback or private address (set webhooks.allowPrivateNetworks to allow it)" }
        return nil
    }

    func refusal(ipv6 bytes: [UInt8]) -> String? {
        if bytes[0] == 0xFE, bytes[1] & 0xC0 == 0x80 { return "a link-local address" }
        if bytes[0] == 0xFF || bytes.allSatisfy({ $0 == 0 }) { return "not a unicast address" }
        // fd00:ec2::254, the AWS metadata service over IPv6.
        if bytes == [0xFD, 0x00, 0x0E, 0xC2] + Array(repeating: 0, count: 10) + [0x02, 0x54] { return "a cloud metadata address" }
        let isLoopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
        // fc00::/7 unique local; 64:ff9b:1::/48, NAT64 for a network's own use (RFC 8215), reaches its IPv4 hosts.
        let isLocalNAT64 = bytes[0..<6] == [0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01]
        let isPrivate = isLoopback || bytes[0] & 0xFE == 0xFC || isLocalNAT64
        if isPrivate, !allowPrivateNetworks { return "a loopback or private address (set webhooks.allowPrivateNetworks to allow it)" }
        return nil
    }

    /// Checks a URL's host as written: an address literal, or a name that always means this machine.
    func refusal(host: String) -> String? {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let name = bare.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
        if name == "localhost" || name.hasSuffix(".localhost") {
            return allowPrivateNetworks ? nil : "a loopback address (set webhooks.allowPrivateNetworks to allow it)"
        }
        guard let address = try? SocketAddress(ipAddress: bare, port: 0) else { return nil }
        return refusal(address)
    }

    /// Resolves `host` and checks every address it has, so a name that points at a forbidden address is refused
    /// too. (A name whose answers change between this look-up and the connection is not caught.)
    /// - Parameter proxied: whether the post goes through an egress proxy (`webhooks.proxy`), which resolves the
    ///   name itself: a network whose only way out is a proxy often resolves no outside name, so a name that does not
    ///   resolve here is left to the proxy. One that does, and an address written in the URL, are checked as ever.
    func refusal(resolving host: String, port: Int, proxied: Bool = false) async -> String? {
        if let refused = refusal(host: host) { return refused }
        let addresses: [SocketAddress]
        do {
            addresses = try await NIOThreadPool.singleton.runIfActive { try Self.resolve(host, port: port) }
        } catch {
            return proxied ? nil : "its host \(host) does not resolve"
        }
        for address in addresses {
            if let refused = refusal(address) { return "\(host) resolves to \(address.ipAddress ?? "?"), \(refused)" }
        }
        return nil
    }

    private static func resolve(_ host: String, port: Int) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let first = result else {
            throw UnresolvedHost()
        }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next {
            if let address = info.pointee.ai_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET: addresses.append(address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
                case AF_INET6: addresses.append(address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
                default: break
                }
            }
            next = info.pointee.ai_next
        }
        return addresses
    }
}

private struct UnresolvedHost: Error {}

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
        switch address {
        case .v4(let v4):
            let bytes = withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
            return refusal(ipv4: bytes)
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // An IPv4-mapped address (::ffff:a.b.c.d) is that IPv4 address.
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return refusal(ipv4: Array(bytes[12..<16])) }
            return refusal(ipv6: bytes)
        case .unixDomainSocket:
            return "a Unix socket"
        }
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
        let isPrivate = isLoopback || bytes[0] & 0xFE == 0xFC
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
    func refusal(resolving host: String, port: Int) async -> String? {
        if let refused = refusal(host: host) { return refused }
        let addresses: [SocketAddress]
        do {
            addresses = try await NIOThreadPool.singleton.runIfActive { try Self.resolve(host, port: port) }
        } catch {
            return "its host \(host) does not resolve"
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

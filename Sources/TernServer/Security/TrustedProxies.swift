import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The load balancers and proxies in front of the node (`http.trustedProxies`), whose `X-Forwarded-For` names the
/// client they forward. Wrong secrets are counted per client address (``SecretGuessLimiter``): without this, behind a
/// balancer every request comes from the balancer, and ten wrong admin tokens a minute from anyone on the internet
/// lock the admin out of the API and the console.
///
/// Only a trusted peer's header is believed, and only as far as trusted hops go: the client is the right-most address
/// of the chain (the peer, then `X-Forwarded-For` from its end) that is not a trusted proxy. A client that writes its
/// own `X-Forwarded-For` only adds entries to the left of the one its balancer appends, which are never reached.
struct TrustedProxies: Sendable, Equatable {
    /// An address range: `10.0.0.0/8`, `fd00::/8`, or one address (`127.0.0.1`, `::1`).
    struct Range: Sendable, Equatable, CustomStringConvertible {
        /// The network's address, 4 bytes or 16.
        let network: [UInt8]
        let prefixLength: Int

        /// - Throws: a message naming the entry, when it is no address or range.
        init(parsing text: String) throws(TernServerConfigurationError) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let bytes = TrustedProxies.address(String(parts[0]))?.unmappedIPBytes else {
                throw .init("http.trustedProxies: '\(text.prefix(80))' is not an IP address or a range such as 10.0.0.0/8")
            }
            let bits = bytes.count * 8
            var prefixLength = bits
            if parts.count == 2 {
                guard let given = Int(parts[1]), (0...bits).contains(given), String(given) == parts[1] else {
                    throw .init("http.trustedProxies: '\(text.prefix(80))' has a prefix length that is not 0-\(bits)")
                }
                prefixLength = given
            }
            self.network = Self.masked(bytes, prefixLength)
            self.prefixLength = prefixLength
        }

        func contains(_ address: [UInt8]) -> Bool {
            address.count == network.count && Self.masked(address, prefixLength) == network
        }

        var description: String {
            let address = (try? SocketAddress(packedIPAddress: ByteBuffer(bytes: network), port: 0))?.ipAddress ?? "?"
            return "\(address)/\(prefixLength)"
        }

        private static func masked(_ bytes: [UInt8], _ prefixLength: Int) -> [UInt8] {
            bytes.enumerated().map { index, byte in
                let kept = min(8, max(0, prefixLength - index * 8))
                return kept == 8 ? byte : byte & ~(0xFF >> kept)
            }
        }
    }

    let ranges: [Range]

    /// Addresses and ranges (`10.0.0.0/8`, `127.0.0.1`); none trusts no proxy.
    init(parsing list: [String]) throws(TernServerConfigurationError) {
        var ranges: [Range] = []
        for entry in list { ranges.append(try Range(parsing: entry)) }
        self.ranges = ranges
    }

    func trusts(_ address: [UInt8]) -> Bool {
        ranges.contains { $0.contains(address) }
    }

    /// The client of a request that came from `peer` with `forwardedFor` (the `X-Forwarded-For` values in their
    /// order, each possibly a comma-separated list). An entry that is not an address ends the walk at the hop that
    /// gave it.
    func client(peer: SocketAddress?, forwardedFor: [String]) -> SocketAddress? {
        guard let peer, !ranges.isEmpty, let peerBytes = peer.unmappedIPBytes, trusts(peerBytes) else { return peer }
        var client = peer
        let chain = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for entry in chain.reversed() {
            guard let address = Self.address(entry), let bytes = address.unmappedIPBytes else { return client }
            client = address
            guard trusts(bytes) else { return client }
        }
        return client
    }

    /// An address written as text (`203.0.113.7`, `2001:db8::1`, or `[2001:db8::1]` as a header may write it), or nil.
    static func address(_ text: String) -> SocketAddress? {
        let bare = text.hasPrefix("[") && text.hasSuffix("]") ? String(text.dropFirst().dropLast()) : text
        return try? SocketAddress(ipAddress: bare, port: 0)
    }
}

/// Gives each request its client's address (``ServerRequestContext/clientAddress``): its peer's, or, from a trusted
/// proxy, the client the proxy forwards (``TrustedProxies``).
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    let proxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !proxies.ranges.isEmpty else { return try await next(request, context) }
        var context = context
        context.clientAddress = proxies.client(peer: context.remoteAddress, forwardedFor: request.headers[values: Self.forwardedFor])
        return try await next(request, context)
    }
}

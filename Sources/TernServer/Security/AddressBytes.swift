import NIOCore

extension SocketAddress {
    /// The IP address's bytes in network order: 4 for IPv4, 16 for IPv6; nil for a Unix socket.
    var ipBytes: [UInt8]? {
        switch self {
        case .v4(let v4): withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6): withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        case .unixDomainSocket: nil
        }
    }

    /// ``ipBytes``, with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, how a dual-stack socket sees an IPv4 peer) as
    /// the 4 bytes of the IPv4 address it is.
    var unmappedIPBytes: [UInt8]? {
        guard let bytes = ipBytes else { return nil }
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else { return bytes }
        return Array(bytes[12..<16])
    }
}

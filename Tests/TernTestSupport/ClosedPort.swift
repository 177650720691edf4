import Foundation

/// Runs `body` with a port on 127.0.0.1 where nothing listens: a socket is bound to it (so no one else takes
/// it) but never listens, so every connect is refused.
public func withClosedPort<T>(_ body: (Int) async throws -> T) async throws -> T {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketError(operation: "socket") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
            guard bind(fd, sockaddrPointer, length) == 0 else { return false }
            return getsockname(fd, sockaddrPointer, &length) == 0
        }
    }
    guard bound else { throw SocketError(operation: "bind") }
    return try await body(Int(UInt16(bigEndian: address.sin_port)))
}

/// A socket call that failed while setting up a test's port.
public struct SocketError: Error {
    public let operation: String
}

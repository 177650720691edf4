#if os(Linux)
import Foundation
import Glibc

/// A TCP relay on 127.0.0.1 in front of the server, for a network that goes silent: ``freeze()`` stops forwarding on
/// the connections open now, both ways, and keeps their sockets open, as a NAT that forgot them or a dead Wi-Fi
/// leaves them (nothing arrives, nothing fails); connections made after it pass. Blocking sockets on threads of its
/// own, so it never holds a thread of the tests' small concurrency pool.
final class FreezingRelay: @unchecked Sendable {
    // @unchecked: the mutable state is behind `lock`; the sockets are file descriptors, each closed once.
    private final class Pair: @unchecked Sendable {
        let client: Int32
        let upstream: Int32
        var frozen = false

        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
    }

    /// Where it listens.
    let port: Int
    private let target: @Sendable () -> Int
    private let listener: Int32
    private let lock = NSLock()
    private var pairs: [Pair] = []
    private var stopped = false
    private var _accepted = 0

    /// - Parameter target: the server's port now (read for each connection).
    init(to target: @escaping @Sendable () -> Int) throws {
        self.target = target
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard fd >= 0, bound == 0, named == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw TestFailure("the relay cannot listen: errno \(errno)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in accepting() }.start()
    }

    /// Connections accepted so far.
    var accepted: Int { lock.withLock { _accepted } }

    /// Stops forwarding on the connections open now (both ways), keeping them open.
    func freeze() {
        lock.withLock { for pair in pairs { pair.frozen = true } }
    }

    /// Closes the listener and every connection.
    func stop() {
        lock.withLock { stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func accepting() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0, !lock.withLock({ stopped }) else {
                if client >= 0 { close(client) }
                return
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: UInt16(target()))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(upstream)
                continue
            }
            let pair = Pair(client: client, upstream: upstream)
            lock.withLock {
                pairs.append(pair)
                _accepted += 1
            }
            Thread { [self] in forwarding(pair) }.start()
        }
    }

    private func forwarding(_ pair: Pair) {
        defer {
            close(pair.client)
            close(pair.upstream)
        }
        var fds = [pollfd(fd: pair.client, events: Int16(POLLIN), revents: 0), pollfd(fd: pair.upstream, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let ready = poll(&fds, 2, 50)
            // Looked at after poll: bytes that arrived after `freeze()` returned are never forwarded.
            let (stopped, frozen) = lock.withLock { (self.stopped, pair.frozen) }
            if stopped { return }
            // Frozen: nothing is read, so nothing is forwarded and nothing fails (the kernel's buffers fill).
            guard !frozen, ready > 0 else {
                if frozen { usleep(20_000) }
                continue
            }
            for (index, fd) in fds.enumerated() where fd.revents != 0 {
                let count = read(fd.fd, &buffer, buffer.count)
                guard count > 0 else { return }
                let to = fds[1 - index].fd
                var written = 0
                while written < count {
                    let wrote = buffer.withUnsafeBytes { write(to, $0.baseAddress! + written, count - written) }
                    guard wrote > 0 else { return }
                    written += wrote
                }
            }
        }
    }
}
#endif

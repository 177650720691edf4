import Foundation
import TernAPNs

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a simulator keeps its broadcast channels across restarts, as Apple keeps them: a file of JSON lines, one a
/// channel made or deleted, appended as it happens (so keeping 10,000 channels writes each once, not the whole list
/// each time). Starting reads it back and rewrites it with only the channels it holds.
///
/// A line is written before the channel is made or deleted in memory, so what the file says is what was answered.
/// It survives the process being killed (the line is in the system's cache once `write` returns); it is not synced
/// to the disk for each change, as a simulator need not survive a power loss. Its appends are made under the
/// simulator state's lock, in the order of the changes.
final class ChannelJournal: Sendable {
    /// One line of the file.
    struct Line: Codable, Equatable {
        enum Operation: String, Codable { case create, delete }
        var op: Operation
        var bundleID: String
        var id: String
        /// For a channel made: whether it stores messages.
        var storesMessages: Bool?
    }

    /// What the file held when it was opened.
    struct Contents {
        /// Channels by bundle id, oldest first.
        var channels: [String: [SimulatedChannel]] = [:]
        /// Lines that could not be read (a line cut short when the process was killed in the middle of it, or an
        /// edit by hand); they are gone from the rewritten file.
        var linesSkipped = 0
    }

    private let descriptor: Int32
    /// `<file>.lock`, held (`flock`) while the journal is open, so two simulators never keep channels in one file.
    private let lock: Int32?

    /// A journal appending to `descriptor`, which it closes (`load(from:)` opens one; a test gives `/dev/full`).
    init(descriptor: Int32, lock: Int32? = nil) {
        self.descriptor = descriptor
        self.lock = lock
    }

    deinit {
        close(descriptor)
        if let lock { close(lock) }
    }

    /// Takes the file's lock, reads the file (none yet: no channels), rewrites it with just the channels it holds
    /// (owner-only), and opens it for the changes to come.
    static func load(from url: URL) throws(ChannelJournalError) -> (journal: ChannelJournal, contents: Contents) {
        let lock = open(url.path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw ChannelJournalError(path: url.path, reason: systemReason()) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = systemReason()
            close(lock)
            throw ChannelJournalError(
                path: url.path, reason: busy ? "another simulator keeps its channels there; stop it, or give this one a state folder of its own" : reason)
        }
        do {
            return try load(from: url, lock: lock)
        } catch {
            close(lock)
            throw error
        }
    }

    private static func load(from url: URL, lock: Int32) throws(ChannelJournalError) -> (journal: ChannelJournal, contents: Contents) {
        let contents = replay(try readWhole(url.path))
        var compacted: [UInt8] = []
        for channel in contents.channels.keys.sorted().flatMap({ contents.channels[$0] ?? [] }) {
            compacted += encode(Line(op: .create, bundleID: channel.bundleID, id: channel.id, storesMessages: channel.storesMessages))
        }
        let temporary = url.path + ".new"
        try writeWhole(compacted, to: temporary, finalPath: url.path)
        guard rename(temporary, url.path) == 0 else {
            let reason = systemReason()
            unlink(temporary)
            throw ChannelJournalError(path: url.path, reason: reason)
        }
        let descriptor = open(url.path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard descriptor >= 0 else { throw ChannelJournalError(path: url.path, reason: systemReason()) }
        return (ChannelJournal(descriptor: descriptor, lock: lock), contents)
    }

    /// The channels the lines leave, in the order they were made.
    static func replay(_ data: Data) -> Contents {
        var contents = Contents()
        let decoder = JSONDecoder()
        for text in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            guard let line = try? decoder.decode(Line.self, from: Data(text)),
                APNsBroadcastRules.isValidBundleID(line.bundleID), APNsBroadcastRules.isValidChannelID(line.id)
            else {
                contents.linesSkipped += 1
                continue
            }
            switch line.op {
            case .create:
                guard let storesMessages = line.storesMessages,
                    contents.channels[line.bundleID]?.contains(where: { $0.id == line.id }) != true
                else {
                    contents.linesSkipped += 1
                    continue
                }
                contents.channels[line.bundleID, default: []].append(
                    SimulatedChannel(bundleID: line.bundleID, id: line.id, storesMessages: storesMessages))
            case .delete:
                contents.channels[line.bundleID]?.removeAll { $0.id == line.id }
                if contents.channels[line.bundleID]?.isEmpty == true { contents.channels[line.bundleID] = nil }
            }
        }
        return contents
    }

    /// Appends one change; false when the system would not write it whole (a full disk), and then the change must not
    /// be made. A line written in part is cut off again, so the next one does not run on from it.
    func append(_ line: Line) -> Bool {
        let bytes = Self.encode(line)
        let end = lseek(descriptor, 0, SEEK_END)
        guard bytes.withUnsafeBytes({ Self.writeAll(descriptor, $0) }) else {
            if end >= 0 { _ = ftruncate(descriptor, end) }
            return false
        }
        return true
    }

    /// Empties the file (the control API's reset); false when the system would not.
    func clear() -> Bool {
        ftruncate(descriptor, 0) == 0
    }

    private static func encode(_ line: Line) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // A line of strings and a flag always encodes.
        return Array((try? encoder.encode(line)) ?? Data()) + [UInt8(ascii: "\n")]
    }

    /// The file's bytes; none when there is no file yet.
    private static func readWhole(_ path: String) throws(ChannelJournalError) -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 && errno == ENOENT { return Data() }
        guard descriptor >= 0 else { throw ChannelJournalError(path: path, reason: systemReason()) }
        defer { close(descriptor) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count == 0 { return data }
            if count < 0 {
                if errno == EINTR { continue }
                throw ChannelJournalError(path: path, reason: systemReason())
            }
            data.append(contentsOf: chunk[0..<count])
        }
    }

    private static func writeWhole(_ bytes: [UInt8], to path: String, finalPath: String) throws(ChannelJournalError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw ChannelJournalError(path: finalPath, reason: systemReason()) }
        defer { close(descriptor) }
        guard bytes.withUnsafeBytes({ writeAll(descriptor, $0) }), fsync(descriptor) == 0 else {
            let reason = systemReason()
            unlink(path)
            throw ChannelJournalError(path: finalPath, reason: reason)
        }
    }

    /// Writes every byte, going on after a short write or an interrupted call.
    private static func writeAll(_ descriptor: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    private static func systemReason() -> String {
        String(cString: strerror(errno))
    }
}

/// The simulator's channels file cannot be read or written: starting fails with this one line.
public struct ChannelJournalError: Error, CustomStringConvertible, Sendable {
    public var path: String
    /// The system's words ("Permission denied").
    public var reason: String

    public var description: String {
        "simulator: cannot keep broadcast channels in \(path): \(reason)"
    }
}

import Logging
import Synchronization

/// Keeps what a logger is given, so a test can count events or look for one (and the test output stays quiet).
public final class LogRecorder: Sendable {
    fileprivate struct Entry {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }

    private let entries = Mutex<[Entry]>([])
    private let printing: Bool

    /// - Parameter printing: also write each entry to standard error, as an unrecorded logger does: for suites whose
    ///   failures should show what the servers said in the test run's output too.
    public init(printing: Bool = false) {
        self.printing = printing
    }

    public var logger: Logger {
        Logger(label: "tern.test") { label in
            Handler(recorder: self, echo: self.printing ? StreamLogHandler.standardError(label: label) : nil)
        }
    }

    /// How many messages were exactly `message`.
    public func count(_ message: String) -> Int {
        entries.withLock { $0.filter { $0.message == message }.count }
    }

    /// The messages that contain `text`.
    public func messages(containing text: String) -> [String] {
        entries.withLock { $0.map(\.message).filter { $0.contains(text) } }
    }

    /// What was logged at `level` or above, a line each with its level and metadata: for a failure's message, so a
    /// test that failed on a slow or stuck run says what the servers reported meanwhile.
    public func lines(atLeast level: Logger.Level) -> [String] {
        entries.withLock { entries in
            entries.filter { $0.level >= level }.map { entry in
                let metadata = entry.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                return "\(entry.level) \(entry.message)" + (metadata.isEmpty ? "" : " \(metadata)")
            }
        }
    }

    fileprivate func record(_ entry: Entry) {
        entries.withLock { $0.append(entry) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var echo: StreamLogHandler?
        var metadata: Logger.Metadata = [:] {
            didSet { echo?.metadata = metadata }
        }
        var logLevel: Logger.Level = .debug {
            didSet { echo?.logLevel = logLevel }
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.record(Entry(level: event.level, message: event.message.description, metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
            echo?.log(event: event)
        }
    }
}

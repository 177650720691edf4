import Logging
import Synchronization

/// Keeps what a logger is given, so a test can count events or look for one (and the test output stays quiet).
public final class LogRecorder: Sendable {
    private let messages = Mutex<[String]>([])

    public init() {}

    public var logger: Logger {
        Logger(label: "tern.test") { _ in Handler(recorder: self) }
    }

    /// How many messages were exactly `message`.
    public func count(_ message: String) -> Int {
        messages.withLock { $0.filter { $0 == message }.count }
    }

    /// The messages that contain `text`.
    public func messages(containing text: String) -> [String] {
        messages.withLock { $0.filter { $0.contains(text) } }
    }

    fileprivate func record(_ message: String) {
        messages.withLock { $0.append(message) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.record(event.message.description)
        }
    }
}

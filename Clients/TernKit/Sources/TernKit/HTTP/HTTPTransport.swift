import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends one HTTP request and answers what came back. ``URLSessionHTTPTransport`` is the one apps use; tests may
/// put another in front of a server to see or change what goes by.
public protocol HTTPTransport: Sendable {
    /// - Throws: when no answer came (no network, a timeout); an answer with any status is returned.
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

/// HTTP through a `URLSession` (by default an ephemeral one: TernKit keeps no cookies and no cache).
public struct URLSessionHTTPTransport: HTTPTransport {
    public let session: URLSession

    public init(session: URLSession = URLSession(configuration: .ephemeral)) {
        self.session = session
    }

    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let started = Locked<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, HTTPURLResponse), any Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error { return continuation.resume(throwing: error) }
                    guard let data, let response = response as? HTTPURLResponse else {
                        return continuation.resume(throwing: URLError(.badServerResponse))
                    }
                    continuation.resume(returning: (data, response))
                }
                let cancelled = started.withLock { started -> Bool in
                    started.task = task
                    return started.cancelled
                }
                task.resume()
                if cancelled { Self.cancel(task) }
            }
        } onCancel: {
            let task = started.withLock { started -> URLSessionDataTask? in
                started.cancelled = true
                return started.task
            }
            if let task { Self.cancel(task) }
        }
    }

    /// Cancels `task` from another queue. Not from the cancellation handler itself: that runs while Swift holds the
    /// cancelled task's status lock, and on Linux `URLSessionTask.cancel()` waits for the session's queue, which may
    /// be busy resuming that same task (it needs the lock): a deadlock (swift-corelibs-foundation; seen in these
    /// tests when a run was cancelled mid-request). `URLSession.data(for:)` cancels from the handler, so it is not used.
    private static func cancel(_ task: URLSessionDataTask) {
        DispatchQueue.global().async { task.cancel() }
    }
}

import Testing
import TernTestSupport
@testable import TernStore

/// ``withDeadline(_:_:)``: a database call that never answers (as postgres-nio's can when the server goes away) gives
/// its caller an error at its deadline, or at once when the caller is cancelled, such as a server shutting down.
struct DeadlineTests {
    /// A call that never returns and ignores cancellation; `started` hears when it began.
    private static func hang(_ started: AsyncStream<Void>.Continuation) async -> Int {
        started.yield()
        await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
        return 0
    }

    @Test func anAnswerInTimeIsReturned() async throws {
        #expect(try await withDeadline(.seconds(5)) { 42 } == 42)
    }

    @Test func aCallPastItsDeadlineFailsAsUnavailable() async throws {
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        _ = try await withTimeout(10, "the deadline") {
            await #expect(throws: StoreError.self) { try await withDeadline(.milliseconds(50)) { await Self.hang(signal) } }
        }
        var iterator = started.makeAsyncIterator()
        #expect(await iterator.next() != nil, "the body ran")
    }

    @Test func aCancelledCallerIsResumedAtOnceThoughTheCallHangs() async throws {
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        let call = Task { try await withDeadline(.seconds(3600)) { await Self.hang(signal) } }
        var iterator = started.makeAsyncIterator()
        _ = await iterator.next()
        call.cancel()
        let outcome = try await withTimeout(10, "the cancelled call to end") { await call.result }
        #expect(throws: CancellationError.self) { try outcome.get() }
    }

    @Test func aCallerCancelledBeforeTheCallStartsIsResumedToo() async throws {
        let (_, signal) = AsyncStream.makeStream(of: Void.self)
        let call = Task {
            // Cancelled before withDeadline is entered: the cancellation handler runs first.
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withDeadline(.seconds(3600)) { await Self.hang(signal) }
        }
        let outcome = try await withTimeout(10, "the cancelled call to end") { await call.result }
        #expect(throws: CancellationError.self) { try outcome.get() }
    }
}

/// Runs work in a child task that ends with it.
///
/// A device's connection keeps its tasks for as long as it is open, hours for most devices, and a Swift task keeps
/// the memory its deepest call needed until it ends: the runtime allocates a task's async frames in slabs that it
/// gives back only with the task. A connection that once read the store or wrote a frame in its own task would hold
/// those slabs while idle. So the connection's tasks only wait, and each piece of work (reading the store, writing
/// frames, the checks before the upgrade) runs through here, in a task that is gone when the work is done
/// (docs/benchmarks.md, "At scale": this is most of what took an idle connection from 50 KiB to under 20).
enum ShortLived {
    static func run<T: Sendable>(_ work: @escaping @Sendable () async -> T) async -> T {
        await withTaskGroup(of: T.self) { group in
            group.addTask(operation: work)
            guard let result = await group.next() else { preconditionFailure("a task group with one task gave no result") }
            return result
        }
    }

    static func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask(operation: work)
            guard let result = try await group.next() else { preconditionFailure("a task group with one task gave no result") }
            return result
        }
    }
}

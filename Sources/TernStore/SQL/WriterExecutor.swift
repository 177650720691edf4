import Foundation

/// A thread of its own for the store's writer task.
///
/// On SQLite every statement is a hand-off to a thread pool and back. Resumed on Swift's shared cooperative pool, the
/// writer queued behind request work after each statement (milliseconds under load, with two cores); on this
/// executor it resumes at once, so a group commit takes about as long as SQLite needs for it.
final class WriterExecutor: TaskExecutor, @unchecked Sendable {
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    private let condition = NSCondition()

    static let shared = WriterExecutor(name: "tern-store-writer")

    private init(name: String) {
        let thread = Thread { [unowned self] in self.runJobs() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func runJobs() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}

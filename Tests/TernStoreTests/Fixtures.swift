import Foundation
import Synchronization
import TernAPNs
import Testing
import TernStore

/// A date at millisecond precision, as the store keeps dates: `ms` milliseconds after a fixed moment in 2025.
func time(_ ms: Int64) -> Date {
    Date(timeIntervalSince1970: Double(1_750_000_000_000 + ms) / 1000)
}

func makeApp(_ id: String = "demo", at created: Date = time(0)) -> AppRecord {
    AppRecord(
        id: id, topic: "com.example.\(id)", environment: .production, endpoint: nil, sealedCredentials: [1, 2, 3],
        appKeyHash: Array(repeating: 0xAA, count: 32), masterSecretHash: Array(repeating: 0xBB, count: 32), webhookURL: nil,
        createdAt: created, updatedAt: created
    )
}

func registration(
    _ deviceID: String, token: String, alias: String? = nil, tags: Set<String>? = nil, environment: APNsEnvironment = .production
) -> DeviceRegistration {
    DeviceRegistration(deviceID: deviceID, token: token, environment: environment, alias: alias, tags: tags)
}

func makePush(
    _ id: String, app: String = "demo", key: String? = nil, audience: Audience = .everyone, at created: Date = time(0)
) -> PushRecord {
    PushRecord(
        id: id, appID: app, idempotencyKey: key, audience: audience, notification: Array("{\"aps\":{}}".utf8), createdAt: created
    )
}

func failure(_ token: String, reason: DeliveryFailureReason = .apns(.badDeviceToken), status: Int? = 400, at: Date = time(0)) -> PushFailure {
    PushFailure(deviceID: "device-\(token)", token: token, status: status, reason: reason, at: at)
}

/// Registers devices `device-0001`… with tokens `token-0001`… (``numbered(_:_:)``) for app `demo`.
func registerDevices(_ count: Int, in store: any TernStore) async throws {
    for n in 1...count {
        _ = try await store.register(registration(numbered("device", n), token: numbered("token", n)), app: "demo", at: time(0))
    }
}

/// What `nodes` claim of `size` each when they ask all at once at `now`, every one asking again until there is
/// nothing for now (a claim that met another node's retries shortly): the chunks they were handed, together.
func claimTogether(_ nodes: [String], size: Int, leaseUntil: Date, at now: Date, in store: any TernStore) async throws -> [PushChunk] {
    try await withThrowingTaskGroup(of: [PushChunk].self) { group in
        for node in nodes {
            group.addTask {
                var mine: [PushChunk] = []
                for _ in 0..<200 {
                    switch try await store.claimChunk(node: node, size: size, leaseUntil: leaseUntil, at: now) {
                    case .chunk(let chunk): mine.append(chunk)
                    case .retrySoon: try await Task.sleep(for: .milliseconds(5))
                    case .idle, .notBefore: return mine
                    }
                }
                return mine
            }
        }
        return try await group.reduce(into: []) { $0 += $1 }
    }
}

/// A zero-padded name, so string order is number order: `numbered("device", 7)` is `device-0007`.
func numbered(_ prefix: String, _ n: Int) -> String {
    "\(prefix)-" + String(repeating: "0", count: max(0, 4 - String(n).count)) + String(n)
}

extension StoreError {
    var isNotFound: Bool {
        if case .notFound = self { true } else { false }
    }

    var isConflict: Bool {
        if case .conflict = self { true } else { false }
    }
}

/// Every recipient of an audience, page by page, checking that no page is longer than `limit`.
func allRecipients(
    _ store: any TernStore, app: String = "demo", _ audience: Audience, limit: Int, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Recipient] {
    var recipients: [Recipient] = []
    var cursor: String?
    for _ in 0..<10_000 {
        let page = try await store.recipients(app: app, audience: audience, after: cursor, limit: limit)
        #expect(page.items.count <= limit, "a page is longer than its limit", sourceLocation: sourceLocation)
        recipients += page.items
        guard let next = page.next else { return recipients }
        #expect(next == page.items.last?.key, "the cursor is not the page's last key", sourceLocation: sourceLocation)
        cursor = next
    }
    Issue.record("paging never ended", sourceLocation: sourceLocation)
    return recipients
}

/// A flag one task raises when its writes are done, for a reader running beside them to read once more and stop.
final class Finished: Sendable {
    let flag = Atomic<Bool>(false)
}

/// The webhook's way of following an app's events while they are written: `write(n)` for each n below `count`,
/// sixteen at a time (as chunks prune, as devices report), while a reader reads the ids after its cursor (`read`) and
/// moves the cursor to the last one, until the writes are done and nothing is left. - Returns: the ids it read.
func readByCursor(
    whileWriting count: Int, _ write: @escaping @Sendable (Int) async throws -> Void, read: @escaping @Sendable (_ after: Int64) async throws -> [Int64]
) async throws -> [Int64] {
    let finished = Finished()
    return try await withThrowingTaskGroup(of: [Int64].self) { group in
        group.addTask {
            try await withThrowingTaskGroup(of: Void.self) { writes in
                for n in 0..<count {
                    if n >= 16 { try await writes.next() }
                    writes.addTask { try await write(n) }
                }
                try await writes.waitForAll()
            }
            finished.flag.store(true, ordering: .sequentiallyConsistent)
            return []
        }
        group.addTask {
            var cursor: Int64 = 0
            var seen: [Int64] = []
            while true {
                let wasFinished = finished.flag.load(ordering: .sequentiallyConsistent)
                let ids = try await read(cursor)
                seen += ids
                cursor = ids.last ?? cursor
                if ids.isEmpty, wasFinished { return seen }
            }
        }
        return try await group.reduce(into: []) { $0 += $1 }
    }
}

import Foundation
import Hummingbird
import Synchronization
import TernStore
import TernWeb

/// Apps by id for the API's per-request lookups, kept up to `lifetime`: apps change rarely, requests come by the
/// thousand. This node's changes evict at once; another node's show within the lifetime.
final class AppCache: Sendable {
    private let store: any TernStore
    private let lifetime: Duration
    private let entries = Mutex<[String: (app: AppRecord, until: ContinuousClock.Instant)]>([:])

    init(store: any TernStore, lifetime: Duration = .seconds(1)) {
        self.store = store
        self.lifetime = lifetime
    }

    func app(_ id: String) async throws -> AppRecord? {
        let now = ContinuousClock.now
        if let entry = entries.withLock({ $0[id] }), entry.until > now { return entry.app }
        guard let app = try await store.app(id) else {
            entries.withLock { _ = $0.removeValue(forKey: id) }
            return nil
        }
        entries.withLock { $0[id] = (app, now + lifetime) }
        return app
    }

    /// The app named by the request path's `{app}`, for endpoints guarded by the app's own secrets.
    /// - Throws: the 401 a wrong secret gets, if there is no such app: without a right secret, an app id that exists
    ///   and one that does not answer alike, so ids cannot be probed.
    func app(_ request: Request, _ context: ServerRequestContext) async throws -> AppRecord {
        _ = try Authorization.bearer(request)
        guard let app = try await app(context.parameters.get("app") ?? "") else { throw Authorization.wrongAppSecret }
        return app
    }

    func evict(_ id: String) {
        entries.withLock { _ = $0.removeValue(forKey: id) }
    }
}

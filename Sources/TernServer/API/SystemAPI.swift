import Hummingbird
import Prometheus
import TernStore

/// `/health` (the process answers), `/ready` (and its store does), `/metrics` (Prometheus text), `/openapi.json`
/// (the API's contract).
struct SystemAPI {
    let store: any TernStore
    let registry: PrometheusCollectorRegistry?
    /// The SHA-256 of `http.metricsToken`, which `/metrics` then asks for; nil: `/metrics` answers anyone.
    let metricsTokenHash: [UInt8]?
    let authorization: Authorization

    struct Status: ResponseEncodable {
        var status: String
    }

    func register(on router: Router<ServerRequestContext>) {
        router.get("health") { _, _ in Status(status: "ok") }
        router.get("ready") { _, _ -> EditedResponse<Status> in
            do {
                try await store.ping()
                return EditedResponse(status: .ok, response: Status(status: "ready"))
            } catch {
                return EditedResponse(status: .serviceUnavailable, response: Status(status: "store unavailable"))
            }
        }
        router.get("openapi.json") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        router.get("metrics") { request, context -> Response in
            if let metricsTokenHash {
                try authorization.requireSecret(request, context, storedHash: metricsTokenHash, named: "the metrics token (http.metricsToken)")
            }
            var bytes: [UInt8] = []
            registry?.emit(into: &bytes)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }
}

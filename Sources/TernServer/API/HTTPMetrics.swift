import Dispatch
import Hummingbird
import Metrics

/// The API's request metrics, from Hummingbird's `MetricsMiddleware` (outermost on the router, so it sees every
/// answer, refusals included). That middleware names its series and labels as OpenTelemetry does (`hb.requests`,
/// `http.route`), which Prometheus' text format cannot carry; `tern serve`'s metrics factory renames them with
/// ``prometheusNames(_:_:)``. Every label's values are bounded: a route is the router's pattern (`/v1/apps/{app}/…`,
/// `NotFound` for a path no route has), the method one the HTTP parser knows, the status a number.
public enum HTTPMetrics {
    static let series = [
        "hb.requests": "tern_http_requests_total",
        "hb.request.errors": "tern_http_request_errors_total",
        "http.server.request.duration": "tern_http_request_duration_seconds",
        "http.server.active_requests": "tern_http_active_requests",
    ]
    /// `error.type` holds the refusal's status too.
    static let labels = ["http.route": "route", "http.request.method": "method", "http.response.status_code": "status", "error.type": "status"]

    /// The Prometheus name of a series and its labels: the HTTP middleware's renamed, every other left as it is.
    public static func prometheusNames(_ name: String, _ dimensions: [(String, String)]) -> (String, [(String, String)]) {
        guard let renamed = series[name] else { return (name, dimensions) }
        return (renamed, dimensions.map { (labels[$0.0] ?? $0.0, $0.1) })
    }
}

/// Times the requests whose handler ended in an error, into the series Hummingbird's `MetricsMiddleware` times the
/// others in (`http.server.request.duration`, with the same labels). That middleware counts an error but does not
/// time it, so the API's latency left out every refusal and failure: a 503 that waited out the database's call
/// timeout, a 429. Right inside `MetricsMiddleware`, so the two measure the same span; an error's time ends where
/// it is thrown (its answer is a small JSON body).
struct ErrorTimingMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            return try await next(request, context)
        } catch {
            // As `MetricsMiddleware` labels it: the route's pattern (`NotFound` for a path no route has), the method,
            // the status the error answers with.
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            let timer = Timer(
                label: "http.server.request.duration",
                dimensions: [
                    ("http.route", context.endpointPath ?? "NotFound"),
                    ("http.request.method", request.method.description),
                    ("http.response.status_code", status.code.description),
                ],
                preferredDisplayUnit: .seconds)
            timer.recordNanoseconds(DispatchTime.now().uptimeNanoseconds - start)
            throw error
        }
    }
}

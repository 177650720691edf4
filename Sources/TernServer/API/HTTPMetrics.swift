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

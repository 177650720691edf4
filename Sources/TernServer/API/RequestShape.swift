import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TernAPNs
import TernStore
import TernWeb

/// The routes the API serves, so a request for a known path with another method is told which methods it has.
final class RouteTable: Sendable {
    private let routes = Mutex<[(method: HTTPRequest.Method, components: [String])]>([])

    /// Takes the router's routes, once they are all registered.
    func load(_ descriptions: [Router<ServerRequestContext>.RouteDescription]) {
        let loaded = descriptions.map { ($0.method, Self.components("\($0.path)")) }
        routes.withLock { $0 = loaded }
    }

    /// The methods of the routes whose path pattern `path` matches.
    func methods(for path: String) -> [HTTPRequest.Method] {
        let requested = Self.components(path)
        let methods = routes.withLock { routes in routes.filter { Self.matches($0.components, requested) }.map(\.method) }
        return methods.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    static func components(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    static func matches(_ pattern: [String], _ path: [String]) -> Bool {
        if pattern.last == "**" { return path.count >= pattern.count - 1 && zip(pattern.dropLast(), path).allSatisfy(componentMatches) }
        return pattern.count == path.count && zip(pattern, path).allSatisfy(componentMatches)
    }

    private static func componentMatches(_ pattern: String, _ component: String) -> Bool {
        pattern == component || pattern.hasPrefix(":") || pattern.hasPrefix("{") || pattern == "*"
    }
}

/// Every answer that is not a route's own has the API's JSON error shape: an unknown path is a 404, a known path with
/// a method it does not have a 405 with `Allow`, a request target over 8 KiB a 414. A path is taken only as written:
/// `//v1//apps` is not `/v1/apps`.
struct RequestShapeMiddleware<Context: RequestContext>: RouterMiddleware {
    let routes: RouteTable
    /// The console's way to refuse, for paths under `/console` (nil: no console is served).
    var console: ConsoleRefusals? = nil
    static var longestTarget: Int { 8192 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let console, ConsoleRefusals.covers(request.uri.path) else { return try await shape(request, context: context, next: next) }
        // Typed with a slash at the end: the console's home, not a page saying it is not found.
        if request.uri.path == ConsoleRoutes.root + "/", request.method == .get || request.method == .head {
            return Response(status: .seeOther, headers: [.location: ConsoleRoutes.root])
        }
        do {
            return try await shape(request, context: context, next: next)
        } catch let error as JSONAPIError {
            return try console.answer(error, to: request)
        }
    }

    private func shape(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.string.utf8.count <= Self.longestTarget else {
            throw JSONAPIError(status: .uriTooLong, error: "uriTooLong", message: "the path and query are longer than \(Self.longestTarget) bytes")
        }
        let path = request.uri.path
        guard !path.contains("//"), path == "/" || !path.hasSuffix("/") else { throw notFound(request) }
        // A query on a call that exists (an unknown path or method is told so first).
        if request.uri.query?.isEmpty == false, path.hasPrefix("/v1/"), routes.methods(for: path).contains(request.method) {
            _ = try request.query(taking: QueryRules.parameters(of: request.method, path))
        }
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let allowed = routes.methods(for: path)
            guard !allowed.isEmpty, !allowed.contains(request.method) else { throw notFound(request) }
            var refusal = JSONAPIError(
                status: .methodNotAllowed, error: "methodNotAllowed",
                message: "\(request.method) is not a method of \(path.prefix(200)); it takes \(allowed.map(\.rawValue).joined(separator: ", "))")
            refusal.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ")
            throw refusal
        } catch let error as HTTPError {
            throw JSONAPIError(
                status: error.status, error: "httpError",
                message: error.body ?? (error.status.reasonPhrase.isEmpty ? "HTTP \(error.status.code)" : error.status.reasonPhrase))
        } catch let error as any HTTPResponseError {
            throw error
        } catch let error as StoreError {
            // The database is away (a restart, a full disk): the client may try again.
            if case .unavailable = error {
                throw JSONAPIError(status: .serviceUnavailable, error: "unavailable", message: "the database is not available; try again", retryAfter: 1)
            }
            throw JSONAPIError(status: .internalServerError, error: "internal", message: "an internal error; the server logged it")
        } catch {
            throw JSONAPIError(status: .internalServerError, error: "internal", message: "an internal error; the server logged it")
        }
    }

    private func notFound(_ request: Request) -> JSONAPIError {
        JSONAPIError(status: .notFound, error: "notFound", message: "no such endpoint: \(request.method) \(request.uri.path.prefix(200))")
    }
}

/// Answers a request the HTTP/1 parser refused (headers over the limit, a malformed request line) in the API's JSON
/// error shape, instead of an empty 400 or no answer at all, then closes the connection.
///
/// It sits right after the parser from the connection's start (``HTTPChannel``), where the parts are
/// still NIOHTTP1's own: the upgrade handler adds the server's other handlers only once a first request was parsed,
/// too late for a first request the parser refuses. It stays for the connection's later requests (a WebSocket
/// connection removes it).
final class ParserErrorResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Header fields and lists larger than this are refused with 431.
    static let headerLimit = 16 * 1024

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let (status, message): (HTTPResponseStatus, String) =
            switch parserError {
            case .headerOverflow: (.requestHeaderFieldsTooLarge, "the request's headers are larger than \(Self.headerLimit) bytes")
            default: (.badRequest, "the request is not valid HTTP/1.1")
            }
        let body = (try? JSONValue.object(["error": .string(status == .badRequest ? "badRequest" : "headersTooLarge"), "message": .string(message)])
            .serialized()) ?? []
        let headers = HTTPHeaders([("Content-Type", "application/json"), ("Connection", "close"), ("Content-Length", String(body.count))])
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.close(mode: .output, promise: nil)
    }
}

/// The query parameters each call of the API under `/v1` takes; every call not listed takes none.
enum QueryRules {
    static let calls: [(method: HTTPRequest.Method, path: [String], parameters: Set<String>)] = [
        call(.get, "v1/apps/:app/devices", ["alias", "tag", "createdSince", "createdBefore", "after", "limit"]),
        call(.get, "v1/apps/:app/devices/:device/connect", ["after"]),
        call(.get, "v1/apps/:app/inbox", ["alias", "deviceId", "after", "limit", "locale"]),
        call(.post, "v1/apps/:app/inbox/read", ["alias", "deviceId"]),
        call(.delete, "v1/apps/:app/inbox/:message", ["alias", "deviceId"]),
        call(.get, "v1/apps/:app/pushes", ["status", "after", "limit"]),
        call(.post, "v1/apps/:app/pushes", ["wait"]),
        call(.get, "v1/apps/:app/pushes/:push", ["failuresAfter", "limit"]),
        call(.get, "v1/apps/:app/pushes/:push/reports", ["after", "limit"]),
        call(.get, "v1/apps/:app/token-events", ["after", "limit"]),
        call(.get, "v1/apps/:app/activities", ["after", "limit"]),
        call(.get, "v1/apps/:app/broadcast-channels", ["after", "limit"]),
        call(.get, "v1/apps/:app/broadcast-channels/:name/broadcasts", ["before", "limit"]),
    ]

    private static func call(
        _ method: HTTPRequest.Method, _ path: String, _ parameters: Set<String>
    ) -> (method: HTTPRequest.Method, path: [String], parameters: Set<String>) {
        (method, RouteTable.components(path), parameters)
    }

    /// What the call `method` `path` takes.
    static func parameters(of method: HTTPRequest.Method, _ path: String) -> Set<String> {
        let components = RouteTable.components(path)
        return calls.first { $0.method == method && RouteTable.matches($0.path, components) }?.parameters ?? []
    }
}

extension Request {
    /// The request's query, checked as bodies are: a parameter the call does not take is an error, not ignored, and
    /// so is one given twice (which of the two would count is a guess).
    /// - Throws: a 400 naming the parameter.
    func query(taking names: Set<String>) throws(JSONAPIError) -> Parameters {
        let query = uri.queryParameters
        var seen: Set<Substring> = []
        for (name, _) in query {
            guard names.contains(String(name)) else {
                let taken = names.isEmpty ? "no parameters" : names.sorted().joined(separator: ", ")
                throw .badRequest(field: String(name.prefix(64)), "this call takes \(taken), not '\(name.prefix(64))'")
            }
            guard seen.insert(name).inserted else { throw .badRequest(field: String(name), "\(name) is given twice") }
        }
        return query
    }
}

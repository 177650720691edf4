import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import TernWeb

/// Renders the console's pages from ``ConsoleTemplates`` and gives every answer under `/console` its headers.
struct ConsoleRenderer: Sendable {
    private let library: MustacheLibrary

    /// - Throws: when a template does not parse (a test renders every page, so this fails there first).
    init() throws {
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all { try library.register(text, named: name) }
        self.library = library
    }

    func render(_ template: String, _ page: ConsolePage) -> String {
        library.render(page, withTemplate: template) ?? ""
    }

    /// A page, never cached: pages carry the session's CSRF token, and some a secret shown once.
    func response(_ template: String, _ page: ConsolePage, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: render(template, page))))
    }

    /// What every answer under `/console` carries: scripts and styles from the console's own files only (no inline
    /// script can run, whatever a page contained), no framing, no sniffing, no referrer beyond this origin.
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy:
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        .xContentTypeOptions: "nosniff",
        .referrerPolicy: "same-origin",
        .xFrameOptions: "DENY",
    ]
}

extension HTTPField.Name {
    static let contentSecurityPolicy = HTTPField.Name("Content-Security-Policy")!
    static let xContentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
}

/// The console's answers: the security headers on every one, and a refusal as a page (for a script, which asks for
/// JSON, as the API's JSON error, from the middleware outside).
struct ConsoleMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let renderer: ConsoleRenderer
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as JSONAPIError {
            return try ConsoleRefusals(renderer: renderer).answer(error, to: request)
        } catch let error as HTTPError {
            if Self.wantsJSON(request) { throw error }
            response = errorPage(error.status, error.body ?? error.status.reasonPhrase, headers: [:], retryAfter: nil)
        } catch {
            // The outer middlewares log it and answer for the API; here the page says as little.
            logger.error("console: request failed", metadata: ["path": "\(request.uri.path)", "error": "\(String(describing: type(of: error)))"])
            if Self.wantsJSON(request) { throw error }
            response = errorPage(.internalServerError, "an internal error; the server logged it", headers: [:], retryAfter: nil)
        }
        for field in ConsoleRenderer.securityHeaders { response.headers[field.name] = field.value }
        return response
    }

    private func errorPage(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields, retryAfter: Int?) -> Response {
        ConsoleRefusals(renderer: renderer).page(status, message, headers: headers, retryAfter: retryAfter)
    }

    fileprivate static func wantsJSON(_ request: Request) -> Bool {
        request.headers[.accept]?.contains("application/json") == true
    }
}

/// A refusal of a request under `/console`, answered as the console answers: a page with the console's headers, or
/// for a script (which asks for JSON) the API's JSON error with them. The console's own routes refuse this way
/// (``ConsoleMiddleware``), and so do the router and the request checks before them (``RequestShapeMiddleware``): a
/// path no page has (`/console/apps/`), a method a page does not take (`POST /console`), which answered the
/// API's JSON without the console's headers.
struct ConsoleRefusals: Sendable {
    let renderer: ConsoleRenderer

    static func covers(_ path: String) -> Bool {
        path == ConsoleRoutes.root || path.hasPrefix(ConsoleRoutes.root + "/")
    }

    /// The page for `error`; thrown back (with the console's headers) when the request asks for JSON.
    func answer(_ error: JSONAPIError, to request: Request) throws -> Response {
        if ConsoleMiddleware.wantsJSON(request) {
            var error = error
            for field in ConsoleRenderer.securityHeaders { error.headers[field.name] = field.value }
            throw error
        }
        return page(error.status, error.message, headers: error.headers, retryAfter: error.retryAfter)
    }

    func page(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields, retryAfter: Int?) -> Response {
        struct View { var message: String }
        var response = renderer.response(
            "error", ConsolePage(chrome: Chrome(title: status.code == 404 ? "Not found" : "That did not work"), view: View(message: message)),
            status: status)
        for field in headers { response.headers[field.name] = field.value }
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        for field in ConsoleRenderer.securityHeaders { response.headers[field.name] = field.value }
        return response
    }
}

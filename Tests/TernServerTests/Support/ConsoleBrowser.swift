import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import Synchronization
import TernTestSupport

@testable import TernServer

/// The console as a browser uses it, through the router: a cookie jar, forms sent url-encoded from this origin
/// (`http://localhost`, the router tests' authority) with the page's CSRF token, the answers as text.
final class ConsoleBrowser: Sendable {
    let client: any TestClientProtocol
    private let jar = Mutex<[String: String]>([:])
    /// The CSRF token of the last page that had one.
    private let token = Mutex<String?>(nil)
    static let origin = "http://localhost"

    init(_ server: RoutedServer) {
        client = server.admin.client
    }

    /// The session cookie's value, if the browser has one.
    var sessionCookie: String? {
        get { jar.withLock { $0[ConsoleRoutes.cookieName] } }
        set { jar.withLock { $0[ConsoleRoutes.cookieName] = newValue } }
    }

    var csrf: String? { token.withLock { $0 } }

    func get(_ path: String, headers extra: [(String, String)] = []) async throws -> HTTPTestResponse {
        try await send(.get, path, body: nil, headers: extra)
    }

    /// Sends a form; `csrf` defaults to the last page's token (nil: none is sent).
    func post(
        _ path: String, _ fields: [(String, String)], csrf: String?? = .none, origin: String? = ConsoleBrowser.origin,
        headers extra: [(String, String)] = []
    ) async throws -> HTTPTestResponse {
        var fields = fields
        if let token = csrf ?? self.csrf { fields.insert(("csrf", token), at: 0) }
        var headers = [("Content-Type", "application/x-www-form-urlencoded")] + extra
        if let origin { headers.append(("Origin", origin)) }
        return try await send(.post, path, body: Self.encode(fields), headers: headers)
    }

    /// Signs in with `secret`; expects the redirect to the overview.
    @discardableResult
    func signIn(_ secret: String) async throws -> HTTPTestResponse {
        let response = try await post("/console/sign-in", [("secret", secret)], csrf: .some(nil))
        // The overview's page gives the CSRF token the forms need.
        if response.status == 303 { _ = try await get("/console") }
        return response
    }

    static func encode(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return fields.map { name, value in
            "\(name.addingPercentEncoding(withAllowedCharacters: allowed)!)=\(value.addingPercentEncoding(withAllowedCharacters: allowed)!)"
        }.joined(separator: "&")
    }

    func send(_ method: HTTPRequest.Method, _ path: String, body: String?, headers extra: [(String, String)]) async throws -> HTTPTestResponse {
        var fields = HTTPFields()
        for (name, value) in extra { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        let cookies = jar.withLock { $0.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
        if !cookies.isEmpty { fields[.cookie] = cookies }
        let answer = try await withTimeout(30, "an answer to \(method) \(path)") { [client, fields] in
            try await client.executeRequest(uri: path, method: method, headers: fields, body: ByteBuffer(string: body ?? ""))
        }
        var headers = HTTPHeaders()
        for field in answer.headers { headers.add(name: field.name.rawName, value: field.value) }
        for cookie in answer.headers[values: .setCookie] {
            let pair = cookie.split(separator: ";")[0].split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let (name, value) = (String(pair[0]), pair.count > 1 ? String(pair[1]) : "")
            jar.withLock { $0[name] = cookie.contains("Max-Age=0") ? nil : value }
        }
        let response = HTTPTestResponse(status: answer.status.code, headers: headers, body: Array(answer.body.readableBytesView))
        if let found = response.text.firstMatch(of: /name="csrf" value="([^"]+)"/) { token.withLock { $0 = String(found.1) } }
        return response
    }
}

extension HTTPTestResponse {
    /// The first value of a header.
    func header(_ name: String) -> String? { headers.first(name: name) }
}

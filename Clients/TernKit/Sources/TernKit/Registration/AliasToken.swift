import Foundation

/// The user an alias token binds: the `sub` of the JWT the app's backend signed. TernKit reads it to send it as the
/// registration's `alias`, so the app passes the token alone; it does not check the signature (it cannot: only the
/// backend and the server hold the identity secret).
enum AliasToken {
    /// - Throws: ``TernError/Kind/aliasToken`` saying what is wrong (never the token itself: it is a credential).
    static func subject(of token: String) throws(TernError) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw TernError(.aliasToken, "an alias token is a JWT: three base64url parts separated by dots, not \(parts.count)")
        }
        guard let payload = base64URLDecoded(parts[1]) else { throw TernError(.aliasToken, "the alias token's payload is not base64url") }
        guard case .object(let claims)? = try? JSONDecoder().decode(TernJSON.self, from: payload) else {
            throw TernError(.aliasToken, "the alias token's payload is not a JSON object")
        }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty else {
            throw TernError(.aliasToken, "the alias token has no 'sub' (the user it binds)")
        }
        return subject
    }

    static func base64URLDecoded(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}

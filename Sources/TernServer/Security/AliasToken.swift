import Crypto
import Foundation
import TernAPNs

/// The proof that the app's backend let a device bind itself to a user: a JWT (HS256) signed with the app's
/// identity secret, `sub` the alias, `aud` the app id, `exp` at most an hour ahead.
///
/// The app's backend mints one after its own sign-in and hands it to the app; the app sends it once, as `aliasToken`
/// in its registration. Tern never issues these tokens, it only checks them.
enum AliasToken {
    /// The longest an alias token may be valid from now.
    static let maximumLifetime: TimeInterval = 3600
    /// How far apart the backend's clock and Tern's may be.
    static let clockSkew: TimeInterval = 60
    /// Longer tokens are refused before any parsing.
    static let maximumLength = 4096

    /// Why a token was refused; `rawValue` goes into the 403's message.
    enum Refusal: String, Error, Sendable, CaseIterable {
        case malformed = "not a JWT (three base64url parts of JSON)"
        case unsupportedAlgorithm = "the header's alg must be HS256"
        case badSignature = "the signature does not verify with the app's identity secret"
        case missingExpiry = "exp (a number of seconds since 1970) is missing"
        case expired = "it has expired (exp is in the past)"
        case tooLongLived = "exp is more than an hour ahead"
        case notYetValid = "nbf or iat is in the future"
        case wrongAudience = "aud is not this app's id"
        case wrongSubject = "sub is not the alias being bound"
        case wrongDevice = "did names another device"
    }

    /// Checks `token` for binding `alias` to `deviceID` in `app`. A token with a `did` claim is for that device only
    /// (so one that leaks is no use on another device); one without is for any device of the app.
    /// - Throws: the first rule it breaks.
    static func verify(_ token: String, alias: String, app: String, deviceID: String? = nil, secret: [UInt8], now: Date) throws(Refusal) {
        guard token.utf8.count <= maximumLength else { throw .malformed }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])), let payloadBytes = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2])),
            case .object(let header)? = try? JSONValue(parsing: Data(headerBytes)),
            case .object(let claims)? = try? JSONValue(parsing: Data(payloadBytes))
        else { throw .malformed }
        guard header["alg"] == .string("HS256"), header["crit"] == nil else { throw .unsupportedAlgorithm }
        let signed = Array((parts[0] + "." + parts[1]).utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: SymmetricKey(data: secret)) else {
            throw .badSignature
        }
        let nowSeconds = now.timeIntervalSince1970
        guard let expiry = number(claims["exp"]) else { throw .missingExpiry }
        guard expiry > nowSeconds - clockSkew else { throw .expired }
        guard expiry <= nowSeconds + maximumLifetime + clockSkew else { throw .tooLongLived }
        for name in ["nbf", "iat"] {
            if let value = claims[name] {
                guard let seconds = number(value), seconds <= nowSeconds + clockSkew else { throw .notYetValid }
            }
        }
        // Compared by their bytes, as the database compares them: Swift's `==` takes canonically equivalent texts
        // (a KELVIN SIGN and "K") for equal.
        func same(_ claim: JSONValue?, _ expected: String) -> Bool {
            guard case .string(let text)? = claim else { return false }
            return text.utf8.elementsEqual(expected.utf8)
        }
        switch claims["aud"] {
        case .array(let audiences)? where audiences.contains(where: { same($0, app) }): break
        case let audience where same(audience, app): break
        default: throw .wrongAudience
        }
        guard same(claims["sub"], alias) else { throw .wrongSubject }
        if let device = claims["did"] {
            guard case .string(let named) = device, let deviceID, named.lowercased().utf8.elementsEqual(deviceID.lowercased().utf8) else {
                throw .wrongDevice
            }
        }
    }

    /// A token for `alias`, as an app's backend would make it. For tests, the demo and `tern` tooling.
    static func mint(alias: String, app: String, secret: [UInt8], expires: Date) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let claims: JSONValue = .object([
            "sub": .string(alias), "aud": .string(app), "exp": .int(Int(expires.timeIntervalSince1970)),
        ])
        let payload = Base64URL.encode(Array((try? claims.serialized()) ?? []))
        let mac = HMAC<SHA256>.authenticationCode(for: Array((header + "." + payload).utf8), using: SymmetricKey(data: secret))
        return header + "." + payload + "." + Base64URL.encode(Array(mac))
    }

    private static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let number)?: Double(number)
        case .double(let number)?: number
        default: nil
        }
    }
}

import Crypto
import Foundation
import TernAPNs
import Testing

@testable import TernServer

/// The alias token's rules, as values: HS256 only, signed with the app's identity secret, `sub` the alias, `aud` the
/// app, `exp` required and at most an hour ahead, 60 s of clock skew.
struct AliasTokenTests {
    static let secret = "tis_test-identity-secret"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static let device = "6f1c1f9e-8d7a-4d44-9d2e-000000000001"

    static func verify(_ token: String, alias: String = "alice", app: String = "demo", secret: String = secret) throws(AliasToken.Refusal) {
        try AliasToken.verify(token, alias: alias, app: app, deviceID: device, secret: Array(secret.utf8), now: now)
    }

    @Test func aTokenFromAnIndependentSignerVerifies() throws {
        try Self.verify(AliasTokens.mint(alias: "alice", app: "demo", secret: Self.secret, expiresIn: 600, now: Self.now))
        // aud may be a list naming the app; iat and nbf in the past are fine.
        try Self.verify(AliasTokens.mint(
            alias: "alice", app: "demo", secret: Self.secret, now: Self.now, extraClaims: ["iat": .int(1_799_999_000), "nbf": .int(1_799_999_000)],
            audience: .array([.string("other"), .string("demo")])))
        // A token for this one device (did, any case) is taken from it.
        try Self.verify(AliasTokens.mint(alias: "alice", app: "demo", secret: Self.secret, now: Self.now, extraClaims: ["did": .string(Self.device.uppercased())]))
        // The server's own minter (the demo's banner) makes tokens the verifier takes.
        try Self.verify(AliasToken.mint(alias: "alice", app: "demo", secret: Array(Self.secret.utf8), expires: Self.now.addingTimeInterval(3600)))
    }

    @Test(arguments: [
        (AliasTokens.mint(alias: "alice", app: "demo", secret: "tis_another", now: now), AliasToken.Refusal.badSignature),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, header: #"{"alg":"none"}"#), .unsupportedAlgorithm),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, header: #"{"alg":"HS512"}"#), .unsupportedAlgorithm),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, header: #"{"alg":"HS256","crit":["x"]}"#), .unsupportedAlgorithm),
        (AliasTokens.mint(alias: "bob", app: "demo", secret: secret, now: now), .wrongSubject),
        (AliasTokens.mint(alias: "alice", app: "other", secret: secret, now: now), .wrongAudience),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, audience: .array([.string("other")])), .wrongAudience),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, expiresIn: -61, now: now), .expired),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, expiresIn: 3600 + 61, now: now), .tooLongLived),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, expiresIn: 86_400 * 365, now: now), .tooLongLived),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, extraClaims: ["exp": .string("soon")]), .missingExpiry),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, extraClaims: ["nbf": .int(1_800_000_061)]), .notYetValid),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, extraClaims: ["iat": .int(1_800_000_100)]), .notYetValid),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, extraClaims: ["did": .string("6f1c1f9e-8d7a-4d44-9d2e-000000000002")]), .wrongDevice),
        (AliasTokens.mint(alias: "alice", app: "demo", secret: secret, now: now, extraClaims: ["did": .int(1)]), .wrongDevice),
        ("not.a.jwt", .malformed),
        ("", .malformed),
        ("a.b", .malformed),
        (String(repeating: "a", count: 5000), .malformed),
    ])
    func aTokenBreakingARuleIsRefusedNamingIt(token: String, refusal: AliasToken.Refusal) {
        #expect(throws: refusal) { try Self.verify(token) }
    }

    /// Canonically equivalent to Swift, different in bytes (and so to the database): KELVIN SIGN and K, a composed é
    /// and e with a combining acute, ANGSTROM SIGN and Å.
    @Test(arguments: [("\u{212A}ate", "Kate"), ("Kate", "\u{212A}ate"), ("e\u{301}lodie", "\u{E9}lodie"), ("\u{212B}sa", "\u{C5}sa")])
    func aSubjectThatSwiftTakesForTheAliasButIsOtherBytesIsRefused(subject: String, alias: String) {
        #expect(subject == alias, "the premise: equal to Swift")
        let token = AliasTokens.mint(alias: subject, app: "demo", secret: Self.secret, now: Self.now)
        #expect(throws: AliasToken.Refusal.wrongSubject) { try Self.verify(token, alias: alias) }
    }

    @Test func theClockSkewIsSixtySecondsEachWay() throws {
        // Expired 59 s ago: still within the skew; 3,659 s ahead: within an hour plus skew.
        try Self.verify(AliasTokens.mint(alias: "alice", app: "demo", secret: Self.secret, expiresIn: -59, now: Self.now))
        try Self.verify(AliasTokens.mint(alias: "alice", app: "demo", secret: Self.secret, expiresIn: 3659, now: Self.now))
        try Self.verify(AliasTokens.mint(alias: "alice", app: "demo", secret: Self.secret, now: Self.now, extraClaims: ["iat": .int(1_800_000_059)]))
    }

    /// The Swift recipe in the README, as a backend would paste it.
    static func readmeAliasToken(user: String, app: String, identitySecret: String, lifetime: TimeInterval = 600) throws -> String {
        func b64url(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let claims: [String: Any] = ["sub": user, "aud": app, "exp": Int(Date().timeIntervalSince1970 + lifetime)]
        let signingInput = b64url(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + b64url(try JSONSerialization.data(withJSONObject: claims))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: SymmetricKey(data: Data(identitySecret.utf8)))
        return signingInput + "." + b64url(Data(mac))
    }

    @Test func theReadmesSwiftRecipeMakesTokensTheServerTakes() throws {
        let token = try Self.readmeAliasToken(user: "alice", app: "demo", identitySecret: Self.secret)
        try AliasToken.verify(token, alias: "alice", app: "demo", deviceID: Self.device, secret: Array(Self.secret.utf8), now: Date())
    }

    @Test func aTamperedPayloadOrSignatureIsRefused() {
        let token = AliasTokens.mint(alias: "alice", app: "demo", secret: Self.secret, now: Self.now)
        let parts = token.split(separator: ".").map(String.init)
        let forged = AliasTokens.base64URL(Array(#"{"sub":"bob","aud":"demo","exp":1800000600}"#.utf8))
        #expect(throws: AliasToken.Refusal.badSignature) { try Self.verify([parts[0], forged, parts[2]].joined(separator: "."), alias: "bob") }
        let flipped = String(parts[2].dropLast()) + (parts[2].last == "A" ? "B" : "A")
        #expect(throws: AliasToken.Refusal.badSignature) { try Self.verify([parts[0], parts[1], flipped].joined(separator: ".")) }
    }
}

/// Wrong device secrets, counted per device against a manual clock.
struct DeviceSecretLimiterTests {
    @Test func theEleventhWrongSecretInAMinuteIsLimitedUntilTheMinuteIsOver() {
        let clock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))
        let limiter = DeviceSecretLimiter(limit: 10, window: 60, clock: clock)
        for _ in 0..<10 { #expect(limiter.recordFailure(app: "demo", deviceID: "victim") == .counted) }
        clock.advance(by: 15)
        #expect(limiter.recordFailure(app: "demo", deviceID: "victim") == .limited(retryAfter: 45, firstTime: true))
        #expect(limiter.recordFailure(app: "demo", deviceID: "victim") == .limited(retryAfter: 45, firstTime: false))
        // Another device, and the same id in another app, are counted apart.
        #expect(limiter.recordFailure(app: "demo", deviceID: "other") == .counted)
        #expect(limiter.recordFailure(app: "shop", deviceID: "victim") == .counted)
        clock.advance(by: 45)
        #expect(limiter.recordFailure(app: "demo", deviceID: "victim") == .counted, "a new minute starts a new count")
    }

    @Test func memoryIsBoundedHoweverManyDevicesAreProbed() {
        let clock = ManualWallClock()
        let limiter = DeviceSecretLimiter(limit: 10, window: 60, capacity: 100, clock: clock)
        for n in 0..<1000 {
            _ = limiter.recordFailure(app: "demo", deviceID: "d\(n)")
            if n % 10 == 0 { clock.advance(by: 1) }
        }
        #expect(limiter.trackedDevices <= 100)
        // A device being guessed at right now is still limited: probing many others does not reset it.
        for _ in 0..<11 { _ = limiter.recordFailure(app: "demo", deviceID: "victim") }
        for n in 0..<50 { _ = limiter.recordFailure(app: "demo", deviceID: "e\(n)") }
        if case .limited = limiter.recordFailure(app: "demo", deviceID: "victim") {} else {
            Issue.record("the victim's count was evicted by newer probes")
        }
    }
}

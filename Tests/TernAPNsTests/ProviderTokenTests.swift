import Crypto
import Foundation
import Testing

@testable import TernAPNs

private let keyID = "ABC123DEFG"
private let teamID = "DEF123GHIJ"
private let epoch = Date(timeIntervalSince1970: 1_700_000_000)

// Base64url written out here rather than borrowed from the module, so a bug there cannot hide itself.
private func base64URL(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

private func base64URL(_ text: String) -> String { base64URL(Array(text.utf8)) }

private func decodeBase64URL(_ text: some StringProtocol) -> [UInt8]? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
    return Data(base64Encoded: base64).map(Array.init)
}

/// A JWT assembled by hand from header and claims JSON, signed with `key` (raw R‖S unless `der`).
private func jwt(header: String, claims: String, signedWith key: P256.Signing.PrivateKey, der: Bool = false) throws -> String {
    let signingInput = base64URL(header) + "." + base64URL(claims)
    let signature = try key.signature(for: Data(signingInput.utf8))
    return signingInput + "." + base64URL(der ? signature.derRepresentation : signature.rawRepresentation)
}

private func expectRule<R>(
    _ rule: ProviderTokenVerificationError.Rule, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) {
    let error = #expect(throws: ProviderTokenVerificationError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.rule == rule, sourceLocation: sourceLocation)
}

@Suite("APNsSigningKey")
struct SigningKeyTests {
    let privateKey = P256.Signing.PrivateKey()
    var signingKey: APNsSigningKey { APNsSigningKey(privateKey: privateKey, keyID: keyID, teamID: teamID) }

    @Test("makeToken produces header.claims.signature with the exact ES256 header and claims")
    func tokenHasExactHeaderAndClaims() throws {
        let token = try signingKey.makeToken(issuedAt: Date(timeIntervalSince1970: 1_700_000_000.75))
        let parts = token.value.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        #expect(utf8(try #require(decodeBase64URL(parts[0]))) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(utf8(try #require(decodeBase64URL(parts[1]))) == #"{"iss":"DEF123GHIJ","iat":1700000000}"#)
        #expect(token.keyID == keyID)
        #expect(token.issuedAt == epoch, "iat is whole seconds, rounded down")
        #expect(token.authorizationHeader == "bearer " + token.value)
    }

    @Test("The signature is 64 raw bytes that verify with the key's public key")
    func signatureIsRawAndVerifies() throws {
        let token = try signingKey.makeToken(issuedAt: epoch)
        let parts = token.value.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let signatureBytes = try #require(decodeBase64URL(parts[2]))
        #expect(signatureBytes.count == 64)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        let signingInput = Data((parts[0] + "." + parts[1]).utf8)
        #expect(privateKey.publicKey.isValidSignature(signature, for: signingInput))
        #expect(signingKey.publicKey.rawRepresentation == privateKey.publicKey.rawRepresentation)
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: signingInput))
    }

    @Test("Tokens are unpadded base64url: no '=', '+' or '/'")
    func tokensAreUnpaddedBase64URL() throws {
        // Signatures are random; 40 of them make it all but certain that plain base64 would show '+' or '/'.
        for second in 0..<40 {
            let value = try signingKey.makeToken(issuedAt: epoch + TimeInterval(second)).value
            #expect(!value.contains("="))
            #expect(!value.contains("+"))
            #expect(!value.contains("/"))
            #expect(value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
        }
    }

    @Test("The description shows key and team ids only; the token's description leaves out the signature")
    func descriptionsHideSecrets() throws {
        let description = String(describing: signingKey)
        #expect(description == "APNsSigningKey(keyID: ABC123DEFG, teamID: DEF123GHIJ)")
        #expect(String(reflecting: signingKey) == description)
        #expect(!description.contains(privateKey.rawRepresentation.base64EncodedString()))
        let token = try signingKey.makeToken(issuedAt: epoch)
        let signature = try #require(token.value.split(separator: ".").last)
        #expect(!String(describing: token).contains(signature))
        #expect(String(describing: token) == "ProviderToken(kid: ABC123DEFG, iat: 1700000000)")
    }

    @Test("A .p8 PEM loads, and tokens from it verify with the original public key")
    func p8PEMLoads() throws {
        let pem = privateKey.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let loaded = try APNsSigningKey(pem: pem, keyID: keyID, teamID: teamID)
        #expect(loaded.keyID == keyID)
        #expect(loaded.teamID == teamID)
        #expect(loaded.publicKey.rawRepresentation == privateKey.publicKey.rawRepresentation)
        #expect(loaded.pemRepresentation == pem)
        let token = try loaded.makeToken(issuedAt: epoch)
        let verifier = ProviderTokenVerifier(keys: [
            ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey),
        ])
        #expect(try verifier.verify(token.value, now: epoch).teamID == teamID)
    }

    @Test("A key that is not a P-256 private key PEM is refused without echoing the input", arguments: [
        "-----BEGIN PRIVATE KEY-----\nTOPSECRETGARBAGEMATERIAL\n-----END PRIVATE KEY-----\n",
        "TOPSECRETGARBAGEMATERIAL",
        "",
    ])
    func garbagePEMIsRefusedWithoutEcho(pem: String) {
        let error = #expect(throws: APNsCredentialError.self) {
            try APNsSigningKey(pem: pem, keyID: keyID, teamID: teamID)
        }
        #expect(error?.message.contains("TOPSECRETGARBAGEMATERIAL") == false)
        #expect(error?.message.isEmpty == false)
    }

    @Test("A public-key PEM is not a signing key, and the error does not echo it")
    func publicKeyPEMIsRefused() {
        let pem = privateKey.publicKey.pemRepresentation
        let body = pem.split(separator: "\n")[1]
        let error = #expect(throws: APNsCredentialError.self) {
            try APNsSigningKey(pem: pem, keyID: keyID, teamID: teamID)
        }
        #expect(error?.description.contains(body) == false)
    }

    @Test("Key and team ids must be non-empty letters and digits", arguments: [
        ("", teamID), ("ABC 123", teamID), (#"AB"C"#, teamID), (keyID, ""), (keyID, "TEAM/1"), ("ÄBC", teamID),
    ])
    func badIdentifiersAreRefused(keyID: String, teamID: String) {
        #expect(throws: APNsCredentialError.self) {
            try APNsSigningKey(pem: privateKey.pemRepresentation, keyID: keyID, teamID: teamID)
        }
    }
}

@Suite("ProviderTokenCache")
struct ProviderTokenCacheTests {
    let clock = ManualWallClock(epoch)
    let key = APNsSigningKey.generate(keyID: keyID, teamID: teamID)

    @Test("The same token is served until 50 minutes, and a new one at 50 minutes")
    func tokenRenewsAtFiftyMinutes() throws {
        let cache = ProviderTokenCache(key: key, clock: clock)
        #expect(cache.refreshInterval == 50 * 60)
        let first = try cache.currentToken()
        #expect(first.issuedAt == epoch)
        clock.advance(by: 50 * 60 - 1)
        #expect(try cache.currentToken() == first)
        clock.advance(by: 1)
        let second = try cache.currentToken()
        #expect(second != first)
        #expect(second.issuedAt == epoch + 50 * 60)
        #expect(try cache.currentToken() == second)
    }

    /// (requested, expected) refresh intervals, in minutes.
    static let clampCases: [(requested: Double, expected: Double)] = [
        (0, 20), (5, 20), (20, 20), (30, 30), (55, 55), (56, 55), (120, 55),
    ]

    @Test("refreshInterval is clamped to 20…55 minutes", arguments: clampCases)
    func refreshIntervalIsClamped(requested: Double, expected: Double) {
        let cache = ProviderTokenCache(key: key, refreshInterval: requested * 60, clock: clock)
        #expect(cache.refreshInterval == expected * 60)
    }

    @Test("A too-short refresh interval still keeps a token for 20 minutes")
    func clampedIntervalGovernsRenewal() throws {
        let cache = ProviderTokenCache(key: key, refreshInterval: 60, clock: clock)
        let first = try cache.currentToken()
        clock.advance(by: 20 * 60 - 1)
        #expect(try cache.currentToken() == first)
        clock.advance(by: 1)
        #expect(try cache.currentToken() != first)
    }

    @Test("A token rejected 5 minutes after issue is not renewed")
    func earlyRejectionKeepsToken() throws {
        let cache = ProviderTokenCache(key: key, clock: clock)
        let first = try cache.currentToken()
        clock.advance(by: 5 * 60)
        #expect(try cache.tokenAfterRejection(of: first) == first)
        clock.advance(by: 15 * 60 - 1)
        #expect(try cache.tokenAfterRejection(of: first) == first, "19:59 is still too soon")
        #expect(try cache.currentToken() == first)
    }

    @Test("A current token rejected at 20 minutes or later is renewed")
    func lateRejectionRenews() throws {
        let cache = ProviderTokenCache(key: key, clock: clock)
        let first = try cache.currentToken()
        clock.advance(by: 20 * 60)
        let renewed = try cache.tokenAfterRejection(of: first)
        #expect(renewed != first)
        #expect(renewed.issuedAt == epoch + 20 * 60)
        #expect(try cache.currentToken() == renewed)
    }

    @Test("A rejection of a token another caller already replaced returns the newer token")
    func staleRejectionReturnsNewerToken() throws {
        let cache = ProviderTokenCache(key: key, clock: clock)
        let first = try cache.currentToken()
        clock.advance(by: 25 * 60)
        let second = try cache.tokenAfterRejection(of: first)
        #expect(second != first)
        clock.advance(by: 30 * 60)
        // 55 minutes after the first token: a slow caller reports the first one; the cache must not sign a third.
        #expect(try cache.tokenAfterRejection(of: first) == second)
        #expect(try cache.currentToken() == second)
    }

    @Test("A rejection of a token replaced by the normal refresh returns the current token")
    func rejectionAfterRefreshReturnsCurrent() throws {
        let cache = ProviderTokenCache(key: key, clock: clock)
        let first = try cache.currentToken()
        clock.advance(by: 50 * 60)
        let second = try cache.currentToken()
        #expect(try cache.tokenAfterRejection(of: first) == second)
    }

    @Test("Concurrent callers share one token, signed once")
    func concurrentCallersShareOneToken() async throws {
        let cache = ProviderTokenCache(key: key, clock: clock)
        // ECDSA signatures are randomised, so two signings at the same second would give two different values.
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<64 {
                group.addTask { try cache.currentToken().value }
            }
            var values: Set<String> = []
            for try await value in group { values.insert(value) }
            return values
        }
        #expect(values.count == 1)
        #expect(values.first == (try cache.currentToken().value))
    }
}

@Suite("ProviderTokenVerifier")
struct ProviderTokenVerifierTests {
    let privateKey = P256.Signing.PrivateKey()
    var verifier: ProviderTokenVerifier {
        ProviderTokenVerifier(keys: [ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey)])
    }
    var header: String { #"{"alg":"ES256","kid":"\#(keyID)"}"# }
    var claims: String { #"{"iss":"\#(teamID)","iat":1700000000}"# }

    @Test("A fresh token with a raw signature is accepted")
    func freshRawTokenIsAccepted() throws {
        let token = try APNsSigningKey(privateKey: privateKey, keyID: keyID, teamID: teamID).makeToken(issuedAt: epoch)
        let verified = try verifier.verify(token.value, now: epoch + 30)
        #expect(verified.keyID == keyID)
        #expect(verified.teamID == teamID)
        #expect(verified.issuedAt == epoch)
    }

    @Test("The same token with a DER signature is accepted")
    func derSignatureIsAccepted() throws {
        let token = try APNsSigningKey(privateKey: privateKey, keyID: keyID, teamID: teamID).makeToken(issuedAt: epoch)
        let parts = token.value.split(separator: ".")
        let signingInput = parts[0] + "." + parts[1]
        let der = try privateKey.signature(for: Data(signingInput.utf8)).derRepresentation
        #expect(der.count != 64)
        #expect(der.first == 0x30)
        let verified = try verifier.verify(signingInput + "." + base64URL(der), now: epoch)
        #expect(verified.issuedAt == epoch)
        #expect(try verifier.verify(jwt(header: header, claims: claims, signedWith: privateKey, der: true), now: epoch).keyID == keyID)
    }

    @Test("A hand-built token with typ and extra claims is accepted")
    func extraFieldsAreTolerated() throws {
        let token = try jwt(
            header: #"{"typ":"JWT","alg":"ES256","kid":"\#(keyID)"}"#,
            claims: #"{"iat":1700000000,"iss":"\#(teamID)","jti":"x"}"#, signedWith: privateKey)
        #expect(try verifier.verify(token, now: epoch).issuedAt == epoch)
    }

    @Test("Tokens that are not three base64url JSON parts are malformed", arguments: [
        "",
        "onlyonepart",
        "two.parts",
        "a.b.c.d",
        "!!!.e30.AAAA",
        base64URL("hello") + "." + base64URL("{}") + ".AAAA",
        base64URL("{}") + "." + base64URL("not json") + ".AAAA",
        base64URL("[1]") + "." + base64URL("{}") + ".AAAA",
        base64URL(#"{"alg":"ES256"}"#) + "=." + base64URL("{}") + ".AAAA",
    ])
    func malformedTokensAreRejected(token: String) {
        expectRule(.malformed) { try verifier.verify(token, now: epoch) }
    }

    @Test("A two-part token built from a real one is malformed")
    func realTokenMissingSignatureIsMalformed() throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        let twoParts = token.split(separator: ".").prefix(2).joined(separator: ".")
        expectRule(.malformed) { try verifier.verify(twoParts, now: epoch) }
    }

    @Test("Algorithms other than ES256 are unsupported", arguments: [
        #"{"alg":"HS256","kid":"ABC123DEFG"}"#,
        #"{"alg":"none","kid":"ABC123DEFG"}"#,
        #"{"alg":"es256","kid":"ABC123DEFG"}"#,
        #"{"alg":"RS256","kid":"ABC123DEFG"}"#,
        #"{"kid":"ABC123DEFG"}"#,
    ])
    func otherAlgorithmsAreUnsupported(header: String) throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        expectRule(.unsupportedAlgorithm) { try verifier.verify(token, now: epoch) }
        let unsigned = base64URL(header) + "." + base64URL(claims) + "."
        expectRule(.unsupportedAlgorithm) { try verifier.verify(unsigned, now: epoch) }
    }

    @Test("A header without a string kid is missingKeyID", arguments: [#"{"alg":"ES256"}"#, #"{"alg":"ES256","kid":42}"#])
    func missingKeyIDIsReported(header: String) throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        expectRule(.missingKeyID) { try verifier.verify(token, now: epoch) }
    }

    @Test("A kid the verifier does not know is unknownKeyID")
    func unknownKeyIDIsReported() throws {
        let token = try APNsSigningKey(privateKey: privateKey, keyID: "ZZZ9999999", teamID: teamID).makeToken(issuedAt: epoch)
        expectRule(.unknownKeyID) { try verifier.verify(token.value, now: epoch) }
    }

    @Test("A signature from another key is badSignature, raw or DER")
    func signatureFromAnotherKeyIsBad() throws {
        let other = P256.Signing.PrivateKey()
        expectRule(.badSignature) {
            try verifier.verify(jwt(header: header, claims: claims, signedWith: other), now: epoch)
        }
        expectRule(.badSignature) {
            try verifier.verify(jwt(header: header, claims: claims, signedWith: other, der: true), now: epoch)
        }
    }

    @Test("Tampered claims are badSignature")
    func tamperedClaimsAreBad() throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        var parts = token.split(separator: ".").map(String.init)
        parts[1] = base64URL(#"{"iss":"\#(teamID)","iat":1700000600}"#)
        expectRule(.badSignature) { try verifier.verify(parts.joined(separator: "."), now: epoch) }
        parts[1] = base64URL(#"{"iss":"EVILTEAM00","iat":1700000000}"#)
        expectRule(.badSignature) { try verifier.verify(parts.joined(separator: "."), now: epoch) }
    }

    @Test("A tampered header is badSignature")
    func tamperedHeaderIsBad() throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        var parts = token.split(separator: ".").map(String.init)
        parts[0] = base64URL(#"{"alg":"ES256","kid":"\#(keyID)","typ":"JWT"}"#)
        expectRule(.badSignature) { try verifier.verify(parts.joined(separator: "."), now: epoch) }
    }

    @Test("A signature that is neither 64 raw bytes nor DER is badSignature", arguments: [0, 10, 63, 64, 65, 72])
    func garbageSignatureIsBad(length: Int) throws {
        let signingInput = base64URL(header) + "." + base64URL(claims)
        let token = signingInput + "." + base64URL([UInt8](repeating: 0x01, count: length))
        expectRule(.badSignature) { try verifier.verify(token, now: epoch) }
    }

    @Test("An iss other than the key's team, or none, is teamMismatch", arguments: [
        #"{"iss":"OTHERTEAM1","iat":1700000000}"#,
        #"{"iat":1700000000}"#,
        #"{"iss":42,"iat":1700000000}"#,
    ])
    func wrongTeamIsReported(claims: String) throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        expectRule(.teamMismatch) { try verifier.verify(token, now: epoch) }
    }

    @Test("Claims without a numeric iat are missingIssuedAt", arguments: [
        #"{"iss":"DEF123GHIJ"}"#,
        #"{"iss":"DEF123GHIJ","iat":"1700000000"}"#,
        #"{"iss":"DEF123GHIJ","iat":null}"#,
    ])
    func missingIssuedAtIsReported(claims: String) throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        expectRule(.missingIssuedAt) { try verifier.verify(token, now: epoch) }
    }

    @Test("A token issued 3601 s before now is expired; 3600 s is still accepted")
    func expiryIsAfterExactlyOneHour() throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        expectRule(.expired) { try verifier.verify(token, now: epoch + 3601) }
        #expect(try verifier.verify(token, now: epoch + 3600).issuedAt == epoch)
        let verified = try verifier.verifySignature(token)
        try verifier.checkAge(verified, now: epoch + 3600)
        expectRule(.expired) { try verifier.checkAge(verified, now: epoch + 3600.5) }
    }

    @Test("A token issued further ahead than the allowed clock skew is issuedInFuture")
    func futureTokenIsReported() throws {
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        #expect(verifier.allowedClockSkew == 300)
        try verifier.checkAge(try verifier.verifySignature(token), now: epoch - 300)
        expectRule(.issuedInFuture) { try verifier.verify(token, now: epoch - 301) }
    }

    @Test("verifySignature does not look at the token's age")
    func verifySignatureIgnoresAge() throws {
        let token = try jwt(header: header, claims: #"{"iss":"DEF123GHIJ","iat":1}"#, signedWith: privateKey)
        #expect(try verifier.verifySignature(token).issuedAt == Date(timeIntervalSince1970: 1))
        expectRule(.expired) { try verifier.verify(token, now: epoch) }
    }

    @Test("ProviderTokenKey loads a public-key PEM and a .p8 private-key PEM alike", arguments: [true, false])
    func providerTokenKeyLoadsPublicAndPrivatePEM(usePublicPEM: Bool) throws {
        let pem = usePublicPEM ? privateKey.publicKey.pemRepresentation : privateKey.pemRepresentation
        #expect(pem.contains(usePublicPEM ? "BEGIN PUBLIC KEY" : "BEGIN PRIVATE KEY"))
        let key = try ProviderTokenKey(keyID: keyID, teamID: teamID, pem: pem)
        #expect(key.publicKey.rawRepresentation == privateKey.publicKey.rawRepresentation)
        let verifier = ProviderTokenVerifier(keys: [key])
        let token = try jwt(header: header, claims: claims, signedWith: privateKey)
        #expect(try verifier.verify(token, now: epoch).keyID == keyID)
    }

    @Test("ProviderTokenKey refuses a PEM that is no P-256 key, without echoing it")
    func providerTokenKeyRefusesGarbage() {
        let error = #expect(throws: APNsCredentialError.self) {
            try ProviderTokenKey(keyID: keyID, teamID: teamID, pem: "-----BEGIN PUBLIC KEY-----\nSECRETISH\n-----END PUBLIC KEY-----")
        }
        #expect(error?.message.contains("SECRETISH") == false)
    }

    @Test("The verifier picks the key named by kid among several")
    func verifierPicksKeyByKid() throws {
        let other = P256.Signing.PrivateKey()
        let verifier = ProviderTokenVerifier(keys: [
            ProviderTokenKey(keyID: "OTHER00001", teamID: "OTHERTEAM1", publicKey: other.publicKey),
            ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey),
        ])
        let mine = try jwt(header: header, claims: claims, signedWith: privateKey)
        #expect(try verifier.verify(mine, now: epoch).teamID == teamID)
        let theirs = try jwt(
            header: #"{"alg":"ES256","kid":"OTHER00001"}"#, claims: #"{"iss":"OTHERTEAM1","iat":1700000000}"#,
            signedWith: other)
        #expect(try verifier.verify(theirs, now: epoch).teamID == "OTHERTEAM1")
        // Signed with my key but naming theirs.
        let crossed = try jwt(
            header: #"{"alg":"ES256","kid":"OTHER00001"}"#, claims: #"{"iss":"OTHERTEAM1","iat":1700000000}"#,
            signedWith: privateKey)
        expectRule(.badSignature) { try verifier.verify(crossed, now: epoch) }
    }
}

import Crypto
import Foundation
import NIOHTTP2
import TernAPNs
import TernSimulator
import Testing

// Base64url and JWT assembly written out here, so a token can be shaped by hand (DER signature, odd claims).
private func base64URL(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

private func jwt(keyID: String, teamID: String, issuedAt: Date, signedWith key: P256.Signing.PrivateKey, der: Bool) throws -> String {
    let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
    let claims = #"{"iss":"\#(teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#
    let signingInput = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
    let signature = try key.signature(for: Data(signingInput.utf8))
    return signingInput + "." + base64URL(der ? Array(signature.derRepresentation) : Array(signature.rawRepresentation))
}

@Suite("Authentication: provider tokens and client certificates")
struct SimulatorAuthTests {
    // MARK: Provider tokens

    @Test(
        "No token, or bearer with nothing after it, is MissingProviderToken",
        arguments: [Authorization.omitted, .header("bearer ")])
    func missingProviderToken(_ authorization: Authorization) async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            expectRejection(try await client.send(sim.push(authorization: authorization)), status: 403, reason: "MissingProviderToken")
        }
    }

    @Test("A token that is not a JWT is InvalidProviderToken", arguments: ["bearer garbage", "bearer a.b.c", "bearer ..."])
    func garbageTokenIsInvalid(_ header: String) async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            expectRejection(try await client.send(sim.push(authorization: .header(header))), status: 403, reason: "InvalidProviderToken")
        }
    }

    @Test func tokenSignedByAnotherKeyIsInvalid() async throws {
        try await withSimulator { sim in
            let impostor = APNsSigningKey.generate(keyID: TestSimulator.keyID, teamID: TestSimulator.teamID)
            let client = try await sim.connect()
            let response = try await client.send(sim.push(authorization: .header(try sim.bearer(impostor))))
            expectRejection(response, status: 403, reason: "InvalidProviderToken")
        }
    }

    @Test func tokenWithUnknownKeyIDIsInvalid() async throws {
        try await withSimulator { sim in
            let stranger = APNsSigningKey.generate(keyID: "KEY0000099", teamID: TestSimulator.teamID)
            let client = try await sim.connect()
            let response = try await client.send(sim.push(authorization: .header(try sim.bearer(stranger))))
            expectRejection(response, status: 403, reason: "InvalidProviderToken")
        }
    }

    @Test func tokenClaimingAnotherTeamIsInvalid() async throws {
        try await withSimulator { sim in
            // The trusted key's own signature, but `iss` names a team the key does not belong to.
            let otherTeam = try APNsSigningKey(pem: sim.key.pemRepresentation, keyID: TestSimulator.keyID, teamID: "TEAM000002")
            let client = try await sim.connect()
            let response = try await client.send(sim.push(authorization: .header(try sim.bearer(otherTeam))))
            expectRejection(response, status: 403, reason: "InvalidProviderToken")
        }
    }

    @Test func secondTeamOnAConnectionIsInvalid() async throws {
        let secondTeam = APNsSigningKey.generate(keyID: "KEY0000002", teamID: "TEAM000002")
        try await withSimulator({
            $0.tokenKeys.append(ProviderTokenKey(keyID: secondTeam.keyID, teamID: secondTeam.teamID, publicKey: secondTeam.publicKey))
        }) { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            sim.clock.advance(by: 25 * 60)
            let response = try await client.send(sim.push(authorization: .header(try sim.bearer(secondTeam))))
            expectRejection(response, status: 403, reason: "InvalidProviderToken")
            // The same token is fine on a connection of its own.
            let fresh = try await sim.connect()
            #expect(try await fresh.send(sim.push(authorization: .header(try sim.bearer(secondTeam)))).status == 200)
        }
    }

    @Test func topicSpecificKeyRefusesATopicItDoesNotCover() async throws {
        let appKey = APNsSigningKey.generate(keyID: "KEY0000APP", teamID: TestSimulator.teamID)
        try await withSimulator({
            $0.tokenKeys.append(
                ProviderTokenKey(keyID: appKey.keyID, teamID: appKey.teamID, publicKey: appKey.publicKey, bundleIDs: ["com.example.app"]))
        }) { sim in
            let client = try await sim.connect()
            let bearer = try sim.bearer(appKey)
            #expect(try await client.send(sim.push(topic: "com.example.app.voip", pushType: "voip", authorization: .header(bearer))).status == 200)
            expectRejection(
                try await client.send(sim.push(topic: "com.other.app", authorization: .header(bearer))), status: 403,
                reason: "InvalidProviderToken")
        }
    }

    @Test func keyOfTheOtherEnvironmentIsBadEnvironmentKeyIdInToken() async throws {
        let productionKey = APNsSigningKey.generate(keyID: "KEY000PROD", teamID: TestSimulator.teamID)
        try await withSimulator({
            $0.tokenKeys.append(
                ProviderTokenKey(
                    keyID: productionKey.keyID, teamID: productionKey.teamID, publicKey: productionKey.publicKey, environment: .production))
        }) { sim in
            let client = try await sim.connect()
            let response = try await client.send(sim.push(authorization: .header(try sim.bearer(productionKey))))
            expectRejection(response, status: 403, reason: "BadEnvironmentKeyIdInToken")
        }
    }

    @Test func tokenIssuedMoreThanAnHourAgoIsExpired() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let stale = try sim.bearer(issuedAt: sim.clock.now.addingTimeInterval(-61 * 60))
            expectRejection(try await client.send(sim.push(authorization: .header(stale))), status: 403, reason: "ExpiredProviderToken")
            #expect(sim.state.stats().rejectedByReason["ExpiredProviderToken"] == 1)
        }
    }

    @Test func tokenIssuedFiftyNineMinutesAgoIsAccepted() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let old = try sim.bearer(issuedAt: sim.clock.now.addingTimeInterval(-59 * 60))
            #expect(try await client.send(sim.push(authorization: .header(old))).status == 200)
        }
    }

    @Test func tokenExpiresOnItsConnectionAfterAnHour() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            sim.clock.advance(by: 61 * 60)
            expectRejection(try await client.send(sim.push()), status: 403, reason: "ExpiredProviderToken")
            // Renewing is what the client must do, and it is allowed: the old token is more than 20 minutes old.
            #expect(try await client.send(sim.push(authorization: .header(try sim.bearer()))).status == 200)
        }
    }

    @Test("An ES256 token with a DER signature (as Java signers make) is accepted; raw is too", arguments: [true, false])
    func derAndRawSignaturesAreAccepted(der: Bool) async throws {
        let privateKey = P256.Signing.PrivateKey()
        try await withSimulator({
            $0.tokenKeys.append(ProviderTokenKey(keyID: "KEY0000DER", teamID: TestSimulator.teamID, publicKey: privateKey.publicKey))
        }) { sim in
            let token = try jwt(keyID: "KEY0000DER", teamID: TestSimulator.teamID, issuedAt: sim.clock.now, signedWith: privateKey, der: der)
            let client = try await sim.connect()
            #expect(try await client.send(sim.push(authorization: .header("bearer " + token))).status == 200)
        }
    }

    @Test func newTokenWithinTwentyMinutesIsTooManyProviderTokenUpdates() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)

            sim.clock.advance(by: 19 * 60)
            let renewed = try sim.bearer()
            expectRejection(
                try await client.send(sim.push(authorization: .header(renewed))), status: 429, reason: "TooManyProviderTokenUpdates")
            // The connection's token is still the first one, and it still works.
            #expect(try await client.send(sim.push()).status == 200)

            sim.clock.advance(by: 2 * 60)
            #expect(try await client.send(sim.push(authorization: .header(renewed))).status == 200)
            #expect(sim.state.stats().rejectedByReason == ["TooManyProviderTokenUpdates": 1])
        }
    }

    @Test func newTokenOnAnotherConnectionIsNotAnUpdate() async throws {
        try await withSimulator { sim in
            let first = try await sim.connect()
            #expect(try await first.send(sim.push()).status == 200)
            sim.clock.advance(by: 60)
            let second = try await sim.connect()
            #expect(try await second.send(sim.push(authorization: .header(try sim.bearer()))).status == 200)
        }
    }

    @Test func sameTokenServesManyRequestsOnOneConnection() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            for minute in 0..<20 {
                sim.clock.advance(by: TimeInterval(minute == 0 ? 0 : 2 * 60))
                #expect(try await client.send(sim.push()).status == 200)
            }
            #expect(sim.state.stats().accepted == 20)
        }
    }

    @Test func tokenConnectionStartsWithOneStreamAndRaisesTheLimitAfterTheFirstValidToken() async throws {
        try await withSimulator({ $0.maxConcurrentStreams = 500 }) { sim in
            let client = try await sim.connect()
            let first = try #require(try await client.settings(count: 1).first)
            #expect(first.first { $0.parameter == .maxConcurrentStreams }?.value == 1)
            #expect(first.first { $0.parameter == .initialWindowSize }?.value == 65_535)

            #expect(try await client.send(sim.push()).status == 200)
            let events = try await client.events.wait("MAX_CONCURRENT_STREAMS 500") { $0.maxConcurrentStreams.contains(500) }
            #expect(events.maxConcurrentStreams == [1, 500])

            // Now several streams may run at once.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 { group.addTask { try await client.send(sim.push()).status } }
                for try await status in group { #expect(status == 200) }
            }
            #expect(client.events.value.maxConcurrentStreams == [1, 500], "raised once")
        }
    }

    @Test(
        "A rejected token does not lift the one-stream limit",
        arguments: [Authorization.omitted, .header("bearer a.b.c")])
    func rejectedTokenKeepsTheOneStreamLimit(_ authorization: Authorization) async throws {
        try await withSimulator({ $0.maxConcurrentStreams = 500 }) { sim in
            let client = try await sim.connect()
            let response = try await client.send(sim.push(authorization: authorization))
            #expect(response.status == 403)
            // The server writes a raised limit before the answer that caused it, so it would be here by now.
            #expect(client.events.value.maxConcurrentStreams == [1])
            #expect(try await client.send(sim.push()).status == 200)
            _ = try await client.events.wait("MAX_CONCURRENT_STREAMS 500") { $0.maxConcurrentStreams.contains(500) }
        }
    }

    @Test func expiredTokenDoesNotLiftTheOneStreamLimitNorCountAsTheConnectionsToken() async throws {
        try await withSimulator({ $0.maxConcurrentStreams = 500 }) { sim in
            let client = try await sim.connect()
            let stale = try sim.bearer(issuedAt: sim.clock.now.addingTimeInterval(-61 * 60))
            expectRejection(try await client.send(sim.push(authorization: .header(stale))), status: 403, reason: "ExpiredProviderToken")
            #expect(client.events.value.maxConcurrentStreams == [1])
            // What a client does next (node-apn does it on ExpiredProviderToken): a fresh token, on the same connection.
            #expect(try await client.send(sim.push()).status == 200)
            _ = try await client.events.wait("MAX_CONCURRENT_STREAMS 500") { $0.maxConcurrentStreams.contains(500) }
        }
    }

    // MARK: Certificates

    @Test func certificateConnectionPushesToItsTopicsWithoutAToken() async throws {
        try await withSimulator { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: "com.example.app")
            let client = try await sim.connect(certificate: certificate)

            #expect(try await client.send(sim.push(topic: "com.example.app", authorization: .omitted)).status == 200)
            let voip = try await client.send(
                sim.push(topic: "com.example.app.voip", pushType: "voip", authorization: .omitted))
            #expect(voip.status == 200)
            let complication = try await client.send(
                sim.push(topic: "com.example.app.complication", pushType: "complication", authorization: .omitted))
            #expect(complication.status == 200)
            expectRejection(
                try await client.send(sim.push(topic: "com.other.app", authorization: .omitted)), status: 400, reason: "TopicDisallowed")
            #expect(sim.state.notifications().map(\.topic) == ["com.example.app", "com.example.app.voip", "com.example.app.complication"])
        }
    }

    @Test func certificateConnectionIgnoresTheAuthorizationHeader() async throws {
        try await withSimulator { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: "com.example.app")
            let client = try await sim.connect(certificate: certificate)
            #expect(try await client.send(sim.push(authorization: .header("bearer garbage"))).status == 200)
        }
    }

    @Test func certificateWithSeveralTopicsNeedsAnApnsTopic() async throws {
        try await withSimulator { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: "com.example.app")
            let client = try await sim.connect(certificate: certificate)
            expectRejection(try await client.send(sim.push(topic: nil, authorization: .omitted)), status: 400, reason: "MissingTopic")
        }
    }

    @Test(
        "Push types for token auth only are not allowed on a certificate connection",
        arguments: [("location", ".location-query"), ("liveactivity", ".push-type.liveactivity")])
    func tokenOnlyPushTypesAreTopicDisallowedWithACertificate(pushType: String, suffix: String) async throws {
        try await withSimulator { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: "com.example.app")
            let client = try await sim.connect(certificate: certificate)
            let response = try await client.send(
                sim.push(topic: "com.example.app" + suffix, pushType: pushType, priority: "5", authorization: .omitted))
            expectRejection(response, status: 400, reason: "TopicDisallowed")
        }
    }

    @Test func productionCertificateOnADevelopmentSimulatorIsBadCertificateEnvironment() async throws {
        try await withSimulator { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(
                bundleID: "com.example.app", environments: [.production])
            let client = try await sim.connect(certificate: certificate)
            expectRejection(
                try await client.send(sim.push(authorization: .omitted)), status: 403, reason: "BadCertificateEnvironment")
        }
    }

    @Test func developmentCertificateOnAProductionSimulatorIsBadCertificateEnvironment() async throws {
        try await withSimulator({ $0.environment = .production }) { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(
                bundleID: "com.example.app", environments: [.development])
            let client = try await sim.connect(certificate: certificate)
            expectRejection(
                try await client.send(sim.push(authorization: .omitted)), status: 403, reason: "BadCertificateEnvironment")
        }
    }

    @Test func certificateConnectionAdvertisesTheConfiguredStreamLimitFromTheStart() async throws {
        try await withSimulator({ $0.maxConcurrentStreams = 500 }) { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: "com.example.app")
            let client = try await sim.connect(certificate: certificate)
            let first = try #require(try await client.settings(count: 1).first)
            #expect(first.first { $0.parameter == .maxConcurrentStreams }?.value == 500)
            #expect(try await client.send(sim.push(authorization: .omitted)).status == 200)
            #expect(client.events.value.maxConcurrentStreams == [500])
        }
    }

    @Test func clientCertificateFromAnotherAuthorityIsRefusedAtTheTLSHandshake() async throws {
        try await withSimulator { sim in
            let foreignAuthority = try SimulatorCertificateAuthority.generate(commonName: "Not the simulator's CA")
            let certificate = try foreignAuthority.issuePushCertificate(bundleID: "com.example.app")
            let client = try await sim.connect(certificate: certificate)
            // With TLS 1.3 the client finishes its side first; the server's alert then ends the connection, before or
            // after the stream opens.
            await #expect(throws: (any Error).self) {
                try await client.send(sim.push(authorization: .omitted))
            }
            try await client.waitUntilClosed()
            let events = client.events.value
            #expect(events.sawTLSError, "errors: \(events.errors)")
            #expect(events.settings.isEmpty, "the server never spoke HTTP/2")
            #expect(sim.state.stats().connectionsOpened == 0)
        }
    }
}

import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import TernTestSupport
import Testing

extension ClientFaultTests {
    @Suite struct CertificateAuthentication {
        /// Runs a simulator whose CA issued `certificate`, and a client that authenticates with `authentication`.
        private static func withCertificateClient(
            _ authority: SimulatorCertificateAuthority, _ authentication: APNsClientConfiguration.Authentication,
            _ body: (APNsSimulator, APNsClient) async throws -> Void
        ) async throws {
            try await Harness.withSimulatorAndClient(
                configureSimulator: { $0.certificateAuthority = authority },
                configureClient: { $0.authentication = authentication }, body)
        }

        @Test func aPEMPushCertificateAuthenticates() async throws {
            let authority = try SimulatorCertificateAuthority.generate()
            let certificate = try authority.issuePushCertificate(bundleID: Harness.topic)
            try await Self.withCertificateClient(
                authority, .certificate(chainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM)
            ) { simulator, client in
                let outcomes = await Harness.sendConcurrently(client, (0..<20).map { Harness.notification($0) })
                #expect(outcomes.allSatisfy { $0.isDelivered && $0.delivery?.attempts == 1 })
                #expect(simulator.state.stats().accepted == 20)
            }
        }

        @Test func aPKCS12BundleAuthenticates() async throws {
            let authority = try SimulatorCertificateAuthority.generate()
            let certificate = try authority.issuePushCertificate(bundleID: Harness.topic)
            let bundle = try pkcs12Bundle(certificate, passphrase: "secret")
            try await Self.withCertificateClient(authority, .pkcs12(bytes: bundle, passphrase: "secret")) { simulator, client in
                let delivery = try await client.send(Harness.notification(1))
                #expect(delivery.isDelivered)
                #expect(simulator.state.stats().accepted == 1)
            }
        }

        @Test func aCertificatesEndOfValidityIsReadFromPEMAndFromAPKCS12Bundle() throws {
            let authority = try SimulatorCertificateAuthority.generate()
            let certificate = try authority.issuePushCertificate(bundleID: Harness.topic, validFor: 10 * 86400)
            let expected = Date().addingTimeInterval(10 * 86400)
            let pem = APNsClientConfiguration.Authentication.certificate(
                chainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM)
            let fromPEM = try #require(try pem.clientCertificate())
            #expect(abs(fromPEM.notValidAfter.timeIntervalSince(expected)) < 60, "\(fromPEM.notValidAfter) against \(expected)")
            // The certificate itself: it names the app it was issued for.
            #expect(try PushCertificateIdentity.apple(derEncoded: fromPEM.der)?.bundleID == Harness.topic)
            let bundle = APNsClientConfiguration.Authentication.pkcs12(bytes: try pkcs12Bundle(certificate, passphrase: "secret"), passphrase: "secret")
            #expect(try bundle.clientCertificate() == fromPEM)
            // A provider token does not expire.
            #expect(try APNsClientConfiguration.Authentication.token(Harness.key).clientCertificate() == nil)
            // Unreadable: the same error a client would give, naming no key material.
            let garbage = APNsClientConfiguration.Authentication.certificate(chainPEM: "not a certificate", privateKeyPEM: "nor a key")
            let error = #expect(throws: APNsClientError.self) { try garbage.clientCertificate() }
            #expect(error?.code == .invalidCredentials)
        }

        @Test func aWrongPKCS12PassphraseIsInvalidCredentialsWithoutThePassphrase() async throws {
            let authority = try SimulatorCertificateAuthority.generate()
            let certificate = try authority.issuePushCertificate(bundleID: Harness.topic)
            let bundle = try pkcs12Bundle(certificate, passphrase: "secret")
            let wrong = "Wr0ngPassphrase-4711"
            let configuration = APNsClientConfiguration(
                authentication: .pkcs12(bytes: bundle, passphrase: wrong), endpoint: .init(host: "127.0.0.1", port: 2197))
            let error = #expect(throws: APNsClientError.self) {
                _ = try APNsClient(configuration: configuration)
            }
            #expect(error?.code == .invalidCredentials)
            #expect(error?.message.contains(wrong) == false)
            #expect(error?.message.contains("secret") == false)
            #expect(error.map { "\($0)".contains(wrong) } == false)
        }
    }
}

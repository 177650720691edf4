import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
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

        /// `openssl pkcs12 -export` of a PEM certificate and key, with `passphrase`.
        private static func makePKCS12(_ certificate: IssuedCertificate, passphrase: String) throws -> [UInt8] {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tern-p12-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let (certificateURL, keyURL) = try certificate.write(to: directory, name: "push")
            let bundleURL = directory.appendingPathComponent("push.p12")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "openssl", "pkcs12", "-export", "-in", certificateURL.path, "-inkey", keyURL.path, "-out", bundleURL.path,
                "-passout", "pass:\(passphrase)",
            ]
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            try #require(process.terminationStatus == 0, "openssl pkcs12 failed: \(message)")
            return Array(try Data(contentsOf: bundleURL))
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
            let bundle = try Self.makePKCS12(certificate, passphrase: "secret")
            try await Self.withCertificateClient(authority, .pkcs12(bytes: bundle, passphrase: "secret")) { simulator, client in
                let delivery = try await client.send(Harness.notification(1))
                #expect(delivery.isDelivered)
                #expect(simulator.state.stats().accepted == 1)
            }
        }

        @Test func aWrongPKCS12PassphraseIsInvalidCredentialsWithoutThePassphrase() async throws {
            let authority = try SimulatorCertificateAuthority.generate()
            let certificate = try authority.issuePushCertificate(bundleID: Harness.topic)
            let bundle = try Self.makePKCS12(certificate, passphrase: "secret")
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

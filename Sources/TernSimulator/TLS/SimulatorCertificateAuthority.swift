import Crypto
import Foundation
import SwiftASN1
import TernAPNs
import X509

/// The simulator's own certificate authority: it signs the simulator's server certificate (which clients trust
/// through the CA file) and the push client certificates that `tern simulator issue-cert` writes.
///
/// The CA is kept in a state directory and reused, so certificates issued yesterday still work today.
public struct SimulatorCertificateAuthority: Sendable {
    public let certificate: Certificate
    // Kept as PEM text: swift-crypto 3's key types are not Sendable.
    private let privateKeyPEM: String

    public var certificatePEM: String { (try? certificate.serializeAsPEM().pemString) ?? "" }

    private var privateKey: P256.Signing.PrivateKey {
        // Written by this type from a valid key.
        try! P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
    }

    /// A new CA, valid for ten years.
    public static func generate(commonName: String = "Tern APNs Simulator CA") throws -> SimulatorCertificateAuthority {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName {
            CommonName(commonName)
            OrganizationName("Tern")
        }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                SubjectKeyIdentifier(hash: .init(key.publicKey))
            },
            issuerPrivateKey: .init(key)
        )
        return SimulatorCertificateAuthority(certificate: certificate, privateKeyPEM: key.pemRepresentation)
    }

    public init(certificatePEM: String, privateKeyPEM: String) throws {
        do {
            self.certificate = try Certificate(pemEncoded: certificatePEM)
            _ = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw APNsCredentialError("the simulator CA files do not hold a certificate and a P-256 key")
        }
        self.privateKeyPEM = privateKeyPEM
    }

    private init(certificate: Certificate, privateKeyPEM: String) {
        self.certificate = certificate
        self.privateKeyPEM = privateKeyPEM
    }

    /// Loads `ca.pem` and `ca-key.pem` from `directory`, creating them (and the directory) the first time.
    public static func loadOrCreate(in directory: URL) throws -> SimulatorCertificateAuthority {
        let certificateURL = directory.appendingPathComponent("ca.pem")
        let keyURL = directory.appendingPathComponent("ca-key.pem")
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: certificateURL.path), fileManager.fileExists(atPath: keyURL.path) {
            return try SimulatorCertificateAuthority(
                certificatePEM: String(contentsOf: certificateURL, encoding: .utf8),
                privateKeyPEM: String(contentsOf: keyURL, encoding: .utf8))
        }
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let authority = try generate()
        try writeOwnerOnly(authority.privateKeyPEM, to: keyURL)
        try writeOwnerOnly(authority.certificatePEM, to: certificateURL)
        return authority
    }

    /// A server certificate for the given DNS names and IP addresses, valid for a year.
    public func issueServerCertificate(
        dnsNames: [String] = ["localhost"], ipAddresses: [String] = ["127.0.0.1", "::1"]
    ) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        var names: [GeneralName] = dnsNames.map { .dnsName($0) }
        for address in ipAddresses {
            if let bytes = Self.ipAddressBytes(address) { names.append(.ipAddress(ASN1OctetString(contentBytes: bytes[...]))) }
        }
        let subject = try DistinguishedName { CommonName(dnsNames.first ?? "localhost") }
        let certificate = try sign(
            subject: subject, publicKey: key.publicKey, validFor: 365 * 86400,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            })
        return IssuedCertificate(certificate: certificate, privateKeyPEM: key.pemRepresentation)
    }

    /// A push client certificate like Apple's "Apple Push Notification service SSL" certificate for `bundleID`:
    /// subject `CN=Apple Push Services: <bundle>, UID=<bundle>`, topics `<bundle>`, `<bundle>.voip` and
    /// `<bundle>.complication`, and the environment extensions asked for.
    public func issuePushCertificate(
        bundleID: String,
        environments: Set<APNsEnvironment> = [.development, .production],
        validFor: TimeInterval = 365 * 86400
    ) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName {
            CommonName("Apple Push Services: \(bundleID)")
            OrganizationName("Tern Simulator")
        }
        var subjectWithUID = subject
        subjectWithUID.append(
            RelativeDistinguishedName(.init(type: PushCertificateOID.userID, utf8String: bundleID)))
        let topics = try PushCertificateIdentity.encodeTopics([
            (bundleID, "app"), (bundleID + ".voip", "voip"), (bundleID + ".complication", "complication"),
        ])
        var nullValue = DER.Serializer()
        try nullValue.serialize(ASN1Null())
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([.clientAuth])
        }
        try extensions.append(Certificate.Extension(oid: PushCertificateOID.topics, critical: false, value: topics[...]))
        if environments.contains(.development) {
            try extensions.append(
                Certificate.Extension(oid: PushCertificateOID.development, critical: false, value: nullValue.serializedBytes[...]))
        }
        if environments.contains(.production) {
            try extensions.append(
                Certificate.Extension(oid: PushCertificateOID.production, critical: false, value: nullValue.serializedBytes[...]))
        }
        let certificate = try sign(subject: subjectWithUID, publicKey: key.publicKey, validFor: validFor, extensions: extensions)
        return IssuedCertificate(certificate: certificate, privateKeyPEM: key.pemRepresentation)
    }

    private func sign(
        subject: DistinguishedName, publicKey: P256.Signing.PublicKey, validFor: TimeInterval, extensions: Certificate.Extensions
    ) throws -> Certificate {
        let now = Date()
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(validFor),
            issuer: certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(privateKey)
        )
    }

    /// Writes `text` to `url` with mode 600 whatever the umask: a key must stay secret, and a certificate that others
    /// could replace (the CA clients trust with `--ca-file`) is as bad.
    static func writeOwnerOnly(_ text: String, to url: URL) throws {
        let fileManager = FileManager.default
        try? fileManager.removeItem(at: url)
        guard fileManager.createFile(atPath: url.path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw APNsCredentialError("cannot write \(url.path)")
        }
    }

    private static func ipAddressBytes(_ address: String) -> [UInt8]? {
        if address.contains(":") {
            var storage = in6_addr()
            guard inet_pton(AF_INET6, address, &storage) == 1 else { return nil }
            return withUnsafeBytes(of: &storage) { Array($0) }
        }
        var storage = in_addr()
        guard inet_pton(AF_INET, address, &storage) == 1 else { return nil }
        return withUnsafeBytes(of: &storage) { Array($0) }
    }
}

/// A certificate with its private key, as PEM text.
public struct IssuedCertificate: Sendable {
    public let certificate: Certificate
    public let privateKeyPEM: String

    init(certificate: Certificate, privateKeyPEM: String) {
        self.certificate = certificate
        self.privateKeyPEM = privateKeyPEM
    }

    /// A certificate and key given as PEM (the first certificate of a chain is used).
    public init(certificatePEM: String, privateKeyPEM: String) throws {
        do {
            self.certificate = try Certificate(pemEncoded: certificatePEM)
        } catch {
            throw APNsCredentialError("the server certificate is not a PEM certificate")
        }
        self.privateKeyPEM = privateKeyPEM
    }

    public var certificatePEM: String { (try? certificate.serializeAsPEM().pemString) ?? "" }

    /// Writes `<name>.pem` and `<name>-key.pem` (both mode 600) into `directory`; returns their paths.
    @discardableResult
    public func write(to directory: URL, name: String) throws -> (certificate: URL, privateKey: URL) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let certificateURL = directory.appendingPathComponent("\(name).pem")
        let keyURL = directory.appendingPathComponent("\(name)-key.pem")
        try SimulatorCertificateAuthority.writeOwnerOnly(certificatePEM, to: certificateURL)
        try SimulatorCertificateAuthority.writeOwnerOnly(privateKeyPEM, to: keyURL)
        return (certificateURL, keyURL)
    }
}

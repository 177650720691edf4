import Crypto
import Foundation
import SwiftASN1
import TernAPNs
import Testing
import X509

/// What an Apple push certificate says about itself, read from its DER: the app it names and the topics it covers.
@Suite struct PushCertificateTests {
    /// A self-signed certificate with `subject`'s attributes and, when given, Apple's topics extension.
    static func certificate(uid: String?, commonName: String, topics: [(String, String)]?) throws -> [UInt8] {
        let key = P256.Signing.PrivateKey()
        var subject = try DistinguishedName { CommonName(commonName) }
        if let uid { subject.append(RelativeDistinguishedName(.init(type: PushCertificateOID.userID, utf8String: uid))) }
        var extensions = Certificate.Extensions()
        if let topics {
            let value = try PushCertificateIdentity.encodeTopics(topics.map { (topic: $0.0, kind: $0.1) })
            try extensions.append(Certificate.Extension(oid: PushCertificateOID.topics, critical: false, value: value[...]))
        }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-60), notValidAfter: now.addingTimeInterval(86400), issuer: subject,
            subject: subject, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    @Test func anAppleCertificateNamesItsAppAndTopics() throws {
        let der = try Self.certificate(
            uid: "com.example.app", commonName: "Apple Push Services: com.example.app",
            topics: [("com.example.app", "app"), ("com.example.app.voip", "voip"), ("com.example.app.complication", "complication")])
        let identity = try #require(try PushCertificateIdentity.apple(derEncoded: der))
        #expect(identity.bundleID == "com.example.app")
        #expect(identity.topics == ["com.example.app", "com.example.app.voip", "com.example.app.complication"])
        #expect(identity.covers("com.example.app"))
        #expect(identity.covers("com.example.app.voip"))
        #expect(!identity.covers("com.example.other"))
        #expect(!identity.covers("com.example"), "a prefix of the bundle id is another app")
    }

    @Test func aVoIPServicesCertificateCoversItsAppThroughTheSuffixedTopic() throws {
        let der = try Self.certificate(
            uid: "com.example.app.voip", commonName: "VoIP Services: com.example.app", topics: [("com.example.app.voip", "voip")])
        let identity = try #require(try PushCertificateIdentity.apple(derEncoded: der))
        #expect(identity.covers("com.example.app"))
        #expect(!identity.covers("com.example.application"))
        #expect(!identity.covers("com.example.app.vo"), "only a push type's suffix makes a topic the app's")
    }

    @Test func aCertificateWithoutTopicsCoversItsUIDOnly() throws {
        let der = try Self.certificate(uid: "com.example.app", commonName: "Apple Production IOS Push Services: com.example.app", topics: nil)
        let identity = try #require(try PushCertificateIdentity.apple(derEncoded: der))
        #expect(identity.topics == ["com.example.app"])
        #expect(identity.covers("com.example.app") && !identity.covers("com.example.other"))
    }

    @Test func aCertificateThatNamesNoAppIsNotApples() throws {
        // A custom gateway's client certificate: no UID, so its topics cannot be told.
        let der = try Self.certificate(uid: nil, commonName: "gateway client 7", topics: nil)
        #expect(try PushCertificateIdentity.apple(derEncoded: der) == nil)
        #expect(throws: (any Error).self) { try PushCertificateIdentity.apple(derEncoded: [0x30, 0x03, 0x02, 0x01]) }
    }
}

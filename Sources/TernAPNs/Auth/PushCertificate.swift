import Foundation
import SwiftASN1
import X509

/// What a push client certificate says about itself: the topics it may push to and the environments it is for.
///
/// Apple's certificates name the app in the subject (`UID=<bundle id>`), list topics in extension
/// `1.2.840.113635.100.6.3.6` (a SEQUENCE of topic strings, each followed by a SEQUENCE holding its kind), and mark
/// environments with `…6.3.1` (development) and `…6.3.2` (production).
public struct PushCertificateIdentity: Hashable, Sendable {
    public var bundleID: String
    public var topics: [String]
    public var environments: Set<APNsEnvironment>

    public init(bundleID: String, topics: [String], environments: Set<APNsEnvironment>) {
        self.bundleID = bundleID
        self.topics = topics
        self.environments = environments
    }

    /// Reads the identity from a certificate. A certificate without the topics extension pushes to its UID only;
    /// one without environment extensions is taken as valid in both (like Apple's older universal certificates).
    public init(certificate: Certificate) throws {
        var uid: String?
        var commonName: String?
        for rdn in certificate.subject {
            for attribute in rdn {
                if attribute.type == PushCertificateOID.userID { uid = String(attribute.value) }
                if attribute.type == .RDNAttributeType.commonName { commonName = String(attribute.value) }
            }
        }
        let prefix = "Apple Push Services: "
        guard let bundleID = uid ?? commonName.map({ $0.hasPrefix(prefix) ? String($0.dropFirst(prefix.count)) : $0 }) else {
            throw APNsCredentialError("the certificate names no app: its subject has neither UID nor CN")
        }
        self.bundleID = bundleID
        if let topicsExtension = certificate.extensions[oid: PushCertificateOID.topics] {
            self.topics = try Self.parseTopics(topicsExtension.value)
        } else {
            self.topics = [bundleID]
        }
        var environments: Set<APNsEnvironment> = []
        if certificate.extensions[oid: PushCertificateOID.development] != nil { environments.insert(.development) }
        if certificate.extensions[oid: PushCertificateOID.production] != nil { environments.insert(.production) }
        self.environments = environments.isEmpty ? [.development, .production] : environments
    }

    /// The identity of an Apple push certificate (DER): nil for a certificate that does not name its app in a `UID`
    /// (a custom gateway's, say), whose topics cannot be told.
    /// - Throws: when the bytes are not a certificate, or its topics extension cannot be read.
    public static func apple(derEncoded bytes: [UInt8]) throws -> PushCertificateIdentity? {
        let certificate = try Certificate(derEncoded: bytes)
        let namesItsApp = certificate.subject.contains { rdn in rdn.contains { $0.type == PushCertificateOID.userID } }
        return namesItsApp ? try PushCertificateIdentity(certificate: certificate) : nil
    }

    /// Whether it may push to the app whose bundle id is `topic`: one of its topics is the bundle id, or the bundle id
    /// with a push type's suffix (a VoIP Services certificate lists `<bundle>.voip` only).
    public func covers(_ topic: String) -> Bool {
        let forms = Set(APNsPushType.allKnown.compactMap { $0.topicSuffix.map { topic + $0 } })
        return forms.contains(bundleID) || topics.contains { forms.contains($0) }
    }

    static func parseTopics(_ bytes: ArraySlice<UInt8>) throws -> [String] {
        let root = try DER.parse(bytes)
        return try DER.sequence(root, identifier: .sequence) { nodes in
            var topics: [String] = []
            while let node = nodes.next() {
                if node.identifier == ASN1UTF8String.defaultIdentifier {
                    topics.append(String(try ASN1UTF8String(derEncoded: node)))
                }
                // The SEQUENCE after each topic holds its kind (`app`, `voip`, `complication`); the topic's suffix
                // already says the same, so it is skipped.
            }
            return topics
        }
    }

    /// The DER value of the topics extension.
    public static func encodeTopics(_ topics: [(topic: String, kind: String)]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            for entry in topics {
                try coder.serialize(ASN1UTF8String(entry.topic))
                try coder.appendConstructedNode(identifier: .sequence) { inner in
                    try inner.serialize(ASN1UTF8String(entry.kind))
                }
            }
        }
        return serializer.serializedBytes
    }
}

/// The object identifiers of Apple's push certificates.
public enum PushCertificateOID {
    public static let topics: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 6]
    public static let development: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 1]
    public static let production: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 2]
    public static let userID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
}

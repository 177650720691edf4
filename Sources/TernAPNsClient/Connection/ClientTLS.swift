import Foundation
import NIOSSL

/// The TLS context of a provider connection: the credentials' certificate (if any) and the endpoint's trust roots.
enum ClientTLS {
    /// - Throws: ``APNsClientError`` (`invalidCredentials`) for unreadable PEM or PKCS#12, never showing key bytes.
    static func context(
        authentication: APNsClientConfiguration.Authentication, endpoint: APNsClientConfiguration.Endpoint,
        applicationProtocols: [String]
    ) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = applicationProtocols
        if let roots = endpoint.trustRootsPEM {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(roots.utf8)))
            } catch {
                throw APNsClientError.invalidCredentials("the endpoint's trusted CA is not PEM certificates")
            }
        }
        if let identity = try clientIdentity(authentication) {
            tls.certificateChain = identity.chain.map { .certificate($0) }
            tls.privateKey = .privateKey(identity.key)
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw APNsClientError.invalidCredentials("TLS cannot be set up with these credentials: \(error)")
        }
    }

    /// The client certificate's chain (leaf first) and its key; nil for a provider token.
    /// - Throws: ``APNsClientError`` (`invalidCredentials`) for unreadable PEM or PKCS#12, never showing key bytes.
    static func clientIdentity(
        _ authentication: APNsClientConfiguration.Authentication
    ) throws -> (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? {
        switch authentication {
        case .token:
            return nil
        case .certificate(let chainPEM, let privateKeyPEM):
            do {
                let chain = try NIOSSLCertificate.fromPEMBytes(Array(chainPEM.utf8))
                guard !chain.isEmpty else { throw APNsClientError.invalidCredentials("no certificate") }
                return (chain, try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem))
            } catch {
                throw APNsClientError.invalidCredentials("the client certificate or its key is not PEM")
            }
        case .pkcs12(let bytes, let passphrase):
            do {
                let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: Array(passphrase.utf8))
                guard !bundle.certificateChain.isEmpty else { throw APNsClientError.invalidCredentials("no certificate") }
                return (bundle.certificateChain, bundle.privateKey)
            } catch {
                throw APNsClientError.invalidCredentials("the PKCS#12 bundle cannot be opened (wrong passphrase or not PKCS#12)")
            }
        }
    }

    /// The name to check the server's certificate against: nil for an IP address.
    static func serverHostname(_ host: String) -> String? {
        host.first?.isNumber == true || host.contains(":") ? nil : host
    }
}

/// The client certificate of certificate credentials (the chain's first), as read once from its PEM or PKCS#12 bundle.
public struct ClientCertificate: Sendable, Hashable {
    /// The certificate, DER-encoded: what it says about itself (`PushCertificateIdentity`) is read from it.
    public var der: [UInt8]
    /// When it stops being valid. APNs refuses an expired push certificate at the TLS handshake, so every notification
    /// would fail; Apple's last a year.
    public var notValidAfter: Date
}

extension APNsClientConfiguration.Authentication {
    /// The client certificate; nil for a provider token, which does not expire (its key is revoked, if ever, in Apple's
    /// developer account) and is not parsed here.
    /// - Throws: ``APNsClientError`` (`invalidCredentials`) when the certificate or bundle cannot be read.
    public func clientCertificate() throws -> ClientCertificate? {
        if case .token = self { return nil }
        guard let identity = try ClientTLS.clientIdentity(self), let leaf = identity.chain.first else { return nil }
        do {
            return ClientCertificate(der: try leaf.toDERBytes(), notValidAfter: Date(timeIntervalSince1970: TimeInterval(leaf.notValidAfter)))
        } catch {
            throw APNsClientError.invalidCredentials("the client certificate cannot be read")
        }
    }
}

extension APNsClientConfiguration.Endpoint {
    /// Whether `pem` holds at least one certificate this client can trust as an endpoint's root: what a connection
    /// would otherwise find out at its first notification.
    public static func isReadableTrustRoots(_ pem: String) -> Bool {
        (try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))?.isEmpty == false
    }
}

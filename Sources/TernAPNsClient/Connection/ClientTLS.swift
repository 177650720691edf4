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
        switch authentication {
        case .token:
            break
        case .certificate(let chainPEM, let privateKeyPEM):
            do {
                tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(chainPEM.utf8)).map { .certificate($0) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem))
            } catch {
                throw APNsClientError.invalidCredentials("the client certificate or its key is not PEM")
            }
        case .pkcs12(let bytes, let passphrase):
            do {
                let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: Array(passphrase.utf8))
                tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
                tls.privateKey = .privateKey(bundle.privateKey)
            } catch {
                throw APNsClientError.invalidCredentials("the PKCS#12 bundle cannot be opened (wrong passphrase or not PKCS#12)")
            }
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw APNsClientError.invalidCredentials("TLS cannot be set up with these credentials: \(error)")
        }
    }

    /// The name to check the server's certificate against: nil for an IP address.
    static func serverHostname(_ host: String) -> String? {
        host.first?.isNumber == true || host.contains(":") ? nil : host
    }
}

extension APNsClientConfiguration.Endpoint {
    /// Whether `pem` holds at least one certificate this client can trust as an endpoint's root: what a connection
    /// would otherwise find out at its first notification.
    public static func isReadableTrustRoots(_ pem: String) -> Bool {
        (try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))?.isEmpty == false
    }
}

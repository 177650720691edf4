import Foundation
import TernAPNs
import TernAPNsClient

/// Where to send and with which credentials, as `tern send` and `tern feedback` take them on the command line.
enum ProviderOptions {
    typealias InputError = CommandInputError

    /// `--host`/`--port` (default `defaultPort`), or one of Apple's hosts by `--environment`; `--ca-file` to trust.
    static func endpoint(
        host: String?, port: Int?, environment: String?, caFile: String?, defaultPort: Int,
        apple: (APNsEnvironment) -> APNsClientConfiguration.Endpoint
    ) throws(CommandInputError) -> APNsClientConfiguration.Endpoint {
        var trustRoots: String?
        if let caFile {
            let pem = try readInputFile(caFile, option: "--ca-file")
            guard pem.contains("-----BEGIN CERTIFICATE-----") else {
                throw InputError("--ca-file", "'\(caFile)' holds no PEM certificate")
            }
            trustRoots = pem
        }
        if let host {
            if environment != nil {
                throw InputError("--environment", "picks one of Apple's hosts; leave it out with --host")
            }
            guard !host.isEmpty, !host.contains(where: { $0.isWhitespace || $0 == "/" }) else {
                throw InputError("--host", "'\(host)' is not a host name or address")
            }
            let port = port ?? defaultPort
            guard (1...65_535).contains(port) else { throw InputError("--port", "must be 1…65535, not \(port)") }
            return .init(host: host, port: port, trustRootsPEM: trustRoots)
        }
        if port != nil { throw InputError("--port", "goes with --host") }
        let appleEnvironment: APNsEnvironment
        do {
            appleEnvironment = try APNsEnvironment(environment ?? "development")
        } catch {
            throw InputError("--environment", "must be production or development, not '\(environment ?? "")'")
        }
        var endpoint = apple(appleEnvironment)
        endpoint.trustRootsPEM = trustRoots
        return endpoint
    }

    /// `--proxy`: an HTTP proxy to reach the endpoint through (a CONNECT tunnel), or nil.
    static func proxy(_ url: String?) throws(CommandInputError) -> HTTPProxy? {
        guard let url else { return nil }
        do {
            return try HTTPProxy(url: url)
        } catch {
            throw InputError("--proxy", error.message)
        }
    }

    /// Exactly one kind of credentials: `--key-file/--key-id/--team-id`, `--cert/--cert-key` or `--p12` with its
    /// passphrase. - Returns: them, and the option to name if the client later refuses them.
    static func authentication(
        keyFile: String?, keyID: String?, teamID: String?, cert: String?, certKey: String?, p12: String?, passphrase: String?,
        passphraseEnv: String?
    ) throws(CommandInputError) -> (APNsClientConfiguration.Authentication, option: String) {
        let tokenKind = [("--key-file", keyFile), ("--key-id", keyID), ("--team-id", teamID)]
        let certKind = [("--cert", cert), ("--cert-key", certKey)]
        let p12Kind = [("--p12", p12), ("--passphrase", passphrase), ("--passphrase-env", passphraseEnv)]
        let kinds = [tokenKind, certKind, p12Kind].filter { kind in kind.contains { $0.1 != nil } }
        guard !kinds.isEmpty else {
            throw InputError(
                "--key-file", "credentials missing: give --key-file/--key-id/--team-id (token), --cert/--cert-key or --p12")
        }
        guard kinds.count == 1 else {
            let first = kinds[0].first { $0.1 != nil }!.0
            let second = kinds[1].first { $0.1 != nil }!.0
            throw InputError(second, "choose one kind of authentication: \(first) and \(second) do not go together")
        }
        switch kinds[0][0].0 {
        case "--key-file":
            for (option, value) in tokenKind where value == nil {
                throw InputError(option, "token auth needs --key-file, --key-id and --team-id")
            }
            return (.token(try loadSigningKey(file: keyFile!, keyID: keyID!, teamID: teamID!)), "--key-file")
        case "--cert":
            guard let cert else { throw InputError("--cert", "--cert-key needs --cert (the certificate, PEM)") }
            guard let certKey else { throw InputError("--cert-key", "--cert needs --cert-key (its private key, PEM)") }
            let chain = try readInputFile(cert, option: "--cert")
            guard chain.contains("-----BEGIN CERTIFICATE-----") else { throw InputError("--cert", "'\(cert)' holds no PEM certificate") }
            let key = try readInputFile(certKey, option: "--cert-key")
            guard key.contains("PRIVATE KEY-----") else { throw InputError("--cert-key", "'\(certKey)' holds no PEM private key") }
            return (.certificate(chainPEM: chain, privateKeyPEM: key), "--cert")
        default:
            guard let p12 else { throw InputError("--p12", "a passphrase needs --p12 (the PKCS#12 bundle)") }
            if passphrase != nil, passphraseEnv != nil {
                throw InputError("--passphrase-env", "give --passphrase or --passphrase-env, not both")
            }
            var secret = passphrase ?? ""
            if let passphraseEnv {
                guard let value = ProcessInfo.processInfo.environment[passphraseEnv] else {
                    throw InputError("--passphrase-env", "the environment variable '\(passphraseEnv)' is not set")
                }
                secret = value
            }
            guard let bytes = FileManager.default.contents(atPath: p12) else {
                throw InputError("--p12", "cannot read '\(p12)'")
            }
            return (.pkcs12(bytes: Array(bytes), passphrase: secret), "--p12")
        }
    }

    /// A warning for standard error when the client certificate has ended or ends within 30 days: APNs refuses an
    /// expired one at the TLS handshake, which alone reads as a connection error. Nil for a token key, or a certificate
    /// with a month or more left.
    static func certificateWarning(_ authentication: APNsClientConfiguration.Authentication, option: String, now: Date = Date()) -> String? {
        guard let expiry = (try? authentication.clientCertificate())?.notValidAfter else { return nil }
        let date = expiry.formatted(.iso8601)
        if expiry <= now { return "warning: \(option): the certificate expired on \(date); APNs refuses it at the TLS handshake" }
        let days = Int(expiry.timeIntervalSince(now) / 86400)
        guard days < 30 else { return nil }
        return "warning: \(option): the certificate expires on \(date), in \(days) day\(days == 1 ? "" : "s"); APNs refuses it after that"
    }
}

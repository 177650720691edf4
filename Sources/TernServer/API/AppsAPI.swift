import Foundation
import Hummingbird
import TernAPNs
import TernAPNsClient
import TernStore
import TernWeb

/// `POST/GET/PATCH/DELETE /v1/apps[/{app}]`, with the admin token.
struct AppsAPI {
    let store: any TernStore
    let authorization: Authorization
    let serverKey: ServerKey
    let clients: ClientDirectory
    let cache: AppCache
    /// The built-in simulator's CA, which issues the push certificate of a simulator app on the legacy transport.
    /// The embedded APNs for apps in the `simulator` environment, if it runs.
    var simulator: (any EmbeddedAPNs)?
    /// Reads the legacy feedback service on request (`POST /v1/apps/{app}/feedback`).
    var feedback: FeedbackPoller?
    /// Where webhooks may point.
    var webhookPolicy = WebhookAddressPolicy(allowPrivateNetworks: false)
    /// Dates apps' creation and changes.
    var clock: any WallClock = SystemWallClock()
    /// Told when an app is deleted: its devices' open connections end, on every node.
    var appDeleted: @Sendable (_ app: String) async -> Void = { _ in }
    /// Told when an app is changed or deleted, after this node closed its own clients of it: the other nodes close
    /// theirs.
    var appChanged: @Sendable (_ app: String) async -> Void = { _ in }
    /// What each app's credentials show, made once for each version of the app.
    let summaries = CredentialsSummaries()

    struct CreateRequest: Decodable {
        var id: String
        var topic: String
        var environment: String
        var endpoint: EndpointInput?
        /// Required except for the `simulator` environment, where Tern makes a key the built-in simulator trusts.
        var credentials: AppCredentials?
        var webhookURL: String?
        /// What the webhook posts: `token.deactivated` (the default) and `push.opened`.
        var webhookEvents: [String]?
        /// Seconds a push may keep its inbox message at most (default and highest: 30 days).
        var inboxMaxTTL: Int?
        /// Unexpired messages one user's inbox keeps at most (default 1,000); the oldest go first.
        var inboxCap: Int?
        /// `http2` (default) or `legacy`: the binary gateway, with a certificate, and its feedback service polled.
        var transport: String?
        /// For `legacy`: seconds between reads of the feedback service (default 12 hours, at least 5 minutes).
        var feedbackInterval: Int?
        /// `signed` (default): a device binds itself to a user only with an alias token from the app's backend.
        /// `open`: with any alias (for apps with nothing private per user).
        var userBinding: String?
        /// Recipients a second a broadcast (tags or everyone) is throttled to when it gives no `ratePerSecond`.
        var broadcastRatePerSecond: Int?
    }

    struct EndpointInput: Codable {
        var host: String
        var port: Int
        var caPEM: String?
        /// For the legacy transport: the feedback service's port (default: the gateway's port + 1).
        var feedbackPort: Int?
    }

    struct UpdateRequest: Decodable {
        var topic: String?
        var environment: String?
        var endpoint: EndpointInput?
        var credentials: AppCredentials?
        var webhookURL: String?
        var webhookEvents: [String]?
        /// Seconds a push may keep its inbox message at most (default and highest: 30 days).
        var inboxMaxTTL: Int?
        /// Unexpired messages one user's inbox keeps at most (default 1,000); the oldest go first.
        var inboxCap: Int?
        var transport: String?
        var feedbackInterval: Int?
        var userBinding: String?
        /// As for a new app; 0 removes it (broadcasts go as fast as the nodes do).
        var broadcastRatePerSecond: Int?
        /// Secrets to replace: `appKey`, `masterSecret`, `identitySecret`. The new ones are in the answer, once.
        var rotate: [String]?
    }

    /// An app as the API shows it. Secrets appear only in the answer that made them.
    struct AppView: ResponseEncodable {
        var id: String
        var topic: String
        var environment: String
        var endpoint: EndpointView?
        var credentials: CredentialsSummary
        var webhookURL: String?
        /// What the webhook posts (whether or not a URL is set).
        var webhookEvents: [String]
        var inboxMaxTTL: Int
        var inboxCap: Int
        var transport: String
        var feedbackInterval: Int?
        var feedbackPolledAt: Date?
        var userBinding: String
        var broadcastRatePerSecond: Int?
        /// Whether the app has an identity secret (for signing alias tokens); the secret itself is shown once.
        var hasIdentitySecret: Bool
        var createdAt: Date
        var updatedAt: Date
        var appKey: String?
        var masterSecret: String?
        /// The key the app's backend signs alias tokens with (HS256); shown when made.
        var identitySecret: String?
        /// The key webhook requests are signed with (`X-Tern-Signature`); shown when a webhook URL is set.
        var webhookSecret: String?
        /// In the answer of the `PATCH` that switched `userBinding` from open to signed: the devices whose alias was
        /// bound without proof meanwhile, unbound now (they bind again with an alias token).
        var unboundAliases: Int?
    }

    struct EndpointView: Codable {
        var host: String
        var port: Int
        var customCA: Bool
        var feedbackPort: Int?
    }

    struct AppList: ResponseEncodable {
        var apps: [AppView]
    }

    func register(on router: Router<ServerRequestContext>) {
        let apps = router.group("v1/apps")
        apps.post { request, context -> EditedResponse<AppView> in
            try authorization.requireAdmin(request, context)
            let body = try await JSONBody.decode(CreateRequest.self, from: request)
            return EditedResponse(status: .created, response: try await create(body))
        }
        apps.get { request, context -> AppList in
            try authorization.requireAdmin(request, context)
            return AppList(apps: try views(try await store.apps()))
        }
        apps.get(":app") { request, context -> AppView in
            try authorization.requireAdmin(request, context)
            return try view(try await app(context))
        }
        apps.patch(":app") { request, context -> AppView in
            try authorization.requireAdmin(request, context)
            let body = try await JSONBody.decode(UpdateRequest.self, from: request)
            return try await update(try await app(context), body)
        }
        // Reads a legacy app's feedback service now, instead of waiting for its interval.
        apps.post(":app/feedback") { request, context -> FeedbackPoller.Result in
            try authorization.requireAdmin(request, context)
            let app = try await app(context)
            guard app.transport == AppRecord.legacy, let feedback else {
                throw JSONAPIError.conflict(field: "transport", "app \(app.id) delivers over HTTP/2, which has no feedback service")
            }
            do {
                return try await feedback.poll(app)
            } catch FeedbackPoller.PollError.tooSoon(let retryAfter) {
                let seconds = max(1, Int(retryAfter.timeIntervalSinceNow.rounded(.up)))
                throw JSONAPIError(
                    status: .tooManyRequests, error: "tooSoon",
                    message: "the feedback service was read less than \(Int(FeedbackPoller.minimumSpacing)) s ago; try again in \(seconds) s")
            } catch let error as JSONAPIError {
                throw error
            } catch let error as EndpointUnavailable {
                throw JSONAPIError(status: .serviceUnavailable, error: "simulatorOff", message: error.description)
            } catch {
                throw JSONAPIError(status: .badGateway, error: "feedbackUnavailable", message: "cannot read the feedback service: \(error)")
            }
        }
        apps.delete(":app") { request, context -> HTTPResponse.Status in
            try authorization.requireAdmin(request, context)
            let id = try await app(context).id
            _ = try await store.deleteApp(id)
            cache.evict(id)
            summaries.forget(id)
            await clients.forget(app: id)
            await appChanged(id)
            await appDeleted(id)
            return .noContent
        }
    }

    private func app(_ context: ServerRequestContext) async throws -> AppRecord {
        let id = context.parameters.get("app") ?? ""
        guard let app = try await store.app(id) else { throw JSONAPIError.notFound("no app '\(id)'") }
        return app
    }

    /// Creates an app; the answer carries its new secrets.
    func create(_ body: CreateRequest) async throws -> AppView {
        let now = clock.now
        try Self.validateID(body.id)
        try Self.validateTopic(body.topic)
        let environment = try Self.validateEnvironment(body.environment)
        let endpoint = try Self.validate(environment: environment, endpoint: body.endpoint)
        let transport = try Self.validateTransport(body.transport) ?? AppRecord.http2
        let credentials: AppCredentials
        switch (body.credentials, environment) {
        case (.some, .simulator):
            throw JSONAPIError.badRequest(field: "credentials", "apps on the built-in simulator use its key: leave credentials out")
        case (let given?, _): credentials = given
        case (nil, .simulator): credentials = try simulatorCredentials(topic: body.topic, transport: transport)
        case (nil, _): throw JSONAPIError.badRequest(field: "credentials", "credentials are required (token key, certificate or PKCS#12)")
        }
        let certificate = try Self.check(credentials, transport: transport, now: now)
        try Self.checkTopic(certificate, topic: body.topic, field: credentials.certificateField)
        try Self.validateWebhook(body.webhookURL, policy: webhookPolicy)
        let appKey = Secrets.generate(prefix: "tak_")
        let masterSecret = Secrets.generate(prefix: "tms_")
        let identitySecret = Secrets.generate(prefix: Secrets.identityPrefix)
        var record = AppRecord(
            id: body.id, topic: body.topic, environment: environment, endpoint: endpoint,
            sealedCredentials: AppCredentialsVault(serverKey: serverKey).seal(credentials), appKeyHash: Secrets.hash(appKey),
            masterSecretHash: Secrets.hash(masterSecret), webhookURL: body.webhookURL.flatMap { $0.isEmpty ? nil : $0 }, createdAt: now,
            updatedAt: now)
        record.webhookEvents = try Self.validateWebhookEvents(body.webhookEvents) ?? record.webhookEvents
        record.inboxMaxTTL = try Self.validateInboxMaxTTL(body.inboxMaxTTL) ?? record.inboxMaxTTL
        record.inboxCap = try Self.validateInboxCap(body.inboxCap) ?? record.inboxCap
        record.transport = transport
        record.feedbackInterval = try Self.validateFeedbackInterval(body.feedbackInterval) ?? record.feedbackInterval
        record.userBinding = try Self.validateUserBinding(body.userBinding) ?? .signed
        record.broadcastRatePerSecond = try Self.validateBroadcastRate(body.broadcastRatePerSecond, removable: false) ?? nil
        record.sealedIdentitySecret = serverKey.seal(Array(identitySecret.utf8))
        record.webhookSecretSalt = ServerKey.webhookSalt()
        do {
            try await store.createApp(record)
        } catch StoreError.conflict {
            throw JSONAPIError.conflict(field: "id", "an app '\(body.id)' exists already")
        }
        var shown = try view(record)
        shown.appKey = appKey
        shown.masterSecret = masterSecret
        shown.identitySecret = identitySecret
        if record.webhookURL != nil { shown.webhookSecret = serverKey.webhookSecret(app: record) }
        return shown
    }

    /// Changes an app (`PATCH /v1/apps/{app}`; the console rotates secrets this way); new secrets are in the answer, once.
    func update(_ app: AppRecord, _ body: UpdateRequest) async throws -> AppView {
        var updated = app
        if let topic = body.topic {
            try Self.validateTopic(topic)
            updated.topic = topic
        }
        if body.environment != nil || body.endpoint != nil {
            let environment = try body.environment.map(Self.validateEnvironment) ?? app.environment
            updated.endpoint = try Self.validate(
                environment: environment,
                endpoint: body.endpoint
                    ?? app.endpoint.map { EndpointInput(host: $0.host, port: $0.port, caPEM: $0.caPEM, feedbackPort: $0.feedbackPort) })
            updated.environment = environment
        }
        updated.transport = try Self.validateTransport(body.transport) ?? updated.transport
        updated.feedbackInterval = try Self.validateFeedbackInterval(body.feedbackInterval) ?? updated.feedbackInterval
        if let credentials = body.credentials {
            guard updated.environment != .simulator else {
                throw JSONAPIError.badRequest(field: "credentials", "apps on the built-in simulator use its key: leave credentials out")
            }
            let certificate = try Self.check(credentials, transport: updated.transport, now: clock.now)
            try Self.checkTopic(certificate, topic: updated.topic, field: credentials.certificateField)
            updated.sealedCredentials = AppCredentialsVault(serverKey: serverKey).seal(credentials)
        } else if updated.environment == .simulator,
            app.environment != .simulator || updated.transport != app.transport || updated.topic != app.topic
        {
            // The built-in simulator's certificate names its topic: a new topic gets a new one.
            updated.sealedCredentials = AppCredentialsVault(serverKey: serverKey).seal(
                try simulatorCredentials(topic: updated.topic, transport: updated.transport))
        } else if updated.transport != app.transport || updated.topic != app.topic {
            let kept = try AppCredentialsVault(serverKey: serverKey).open(app.sealedCredentials)
            if updated.transport != app.transport { try Self.check(kept, transport: updated.transport) }
            if updated.topic != app.topic { try Self.checkTopic(kept.certificate, topic: updated.topic, field: "topic") }
        }
        if let webhookURL = body.webhookURL {
            try Self.validateWebhook(webhookURL, policy: webhookPolicy)
            updated.webhookURL = webhookURL.isEmpty ? nil : webhookURL
        }
        updated.webhookEvents = try Self.validateWebhookEvents(body.webhookEvents) ?? updated.webhookEvents
        updated.inboxMaxTTL = try Self.validateInboxMaxTTL(body.inboxMaxTTL) ?? updated.inboxMaxTTL
        updated.inboxCap = try Self.validateInboxCap(body.inboxCap) ?? updated.inboxCap
        updated.userBinding = try Self.validateUserBinding(body.userBinding) ?? updated.userBinding
        updated.broadcastRatePerSecond = try Self.validateBroadcastRate(body.broadcastRatePerSecond, removable: true) ?? updated.broadcastRatePerSecond
        var appKey: String?
        var masterSecret: String?
        var identitySecret: String?
        var webhookSecretRotated = false
        for (index, secret) in (body.rotate ?? []).enumerated() {
            switch secret {
            case "appKey":
                appKey = Secrets.generate(prefix: "tak_")
                updated.appKeyHash = Secrets.hash(appKey!)
            case "masterSecret":
                masterSecret = Secrets.generate(prefix: "tms_")
                updated.masterSecretHash = Secrets.hash(masterSecret!)
            case "identitySecret":
                identitySecret = Secrets.generate(prefix: Secrets.identityPrefix)
                updated.sealedIdentitySecret = serverKey.seal(Array(identitySecret!.utf8))
            case "webhookSecret":
                updated.webhookSecretSalt = ServerKey.webhookSalt()
                webhookSecretRotated = true
            default:
                throw JSONAPIError.badRequest(
                    field: "rotate[\(index)]",
                    "rotate takes appKey, masterSecret, identitySecret and webhookSecret, not '\(secret.prefix(64))'")
            }
        }
        updated.updatedAt = max(clock.now, app.updatedAt.addingTimeInterval(0.001))
        try await store.updateApp(updated)
        cache.evict(app.id)
        // Binding only with tokens now: the bindings made without one go, or anyone who bound their phone to a user
        // while the app was open would keep getting that user's pushes and reading their inbox.
        let unbound = app.userBinding == .open && updated.userBinding == .signed
            ? try await store.unbindUnprovenAliases(app: app.id, at: clock.now) : nil
        await clients.forget(app: app.id)
        await appChanged(app.id)
        var shown = try view(updated)
        shown.unboundAliases = unbound
        shown.appKey = appKey
        shown.masterSecret = masterSecret
        shown.identitySecret = identitySecret
        // Shown when made, when the URL is set (whoever sets it needs the key) and when rotated.
        if (body.webhookURL != nil && updated.webhookURL != nil) || webhookSecretRotated {
            shown.webhookSecret = serverKey.webhookSecret(app: updated)
        }
        return shown
    }

    /// The views of every app there is.
    func views(_ apps: [AppRecord]) throws -> [AppView] {
        summaries.keep(only: Set(apps.map(\.id)))
        return try apps.map { try view($0) }
    }

    func view(_ app: AppRecord) throws -> AppView {
        let credentials = try summaries.summary(of: app) { try AppCredentialsVault(serverKey: serverKey).open(app.sealedCredentials).summary }
        return AppView(
            id: app.id, topic: app.topic, environment: app.environment.rawValue,
            endpoint: app.endpoint.map {
                EndpointView(
                    host: $0.host, port: $0.port, customCA: $0.caPEM != nil,
                    feedbackPort: app.transport == AppRecord.legacy ? $0.feedbackPort ?? $0.port + 1 : nil)
            },
            credentials: credentials, webhookURL: app.webhookURL, webhookEvents: app.webhookEvents.sorted().map(\.rawValue),
            inboxMaxTTL: app.inboxMaxTTL, inboxCap: app.inboxCap,
            transport: app.transport, feedbackInterval: app.transport == AppRecord.legacy ? app.feedbackInterval : nil,
            feedbackPolledAt: app.feedbackPolledAt, userBinding: app.userBinding.rawValue, broadcastRatePerSecond: app.broadcastRatePerSecond,
            hasIdentitySecret: app.sealedIdentitySecret != nil,
            createdAt: app.createdAt, updatedAt: app.updatedAt)
    }

    /// What an app on the built-in simulator authenticates with: its provider-token key, or for the legacy
    /// transport a push certificate from its CA.
    private func simulatorCredentials(topic: String, transport: String) throws -> AppCredentials {
        guard transport == AppRecord.legacy else { return SimulatorIdentity.credentials(serverKey) }
        guard let simulator else {
            throw JSONAPIError.badRequest(field: "transport", "the built-in simulator is off, so it cannot issue a certificate")
        }
        let certificate = try simulator.issueLegacyCertificate(topic: topic)
        return .certificate(certificatePEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM)
    }

    // MARK: Validation

    static func validateID(_ id: String) throws(JSONAPIError) {
        let allowed = id.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") }
        guard (1...64).contains(id.utf8.count), allowed, id.first != "-" else {
            throw .badRequest(field: "id", "id must be 1-64 lowercase letters, digits or '-', not starting with '-'")
        }
    }

    static func validateTopic(_ topic: String) throws(JSONAPIError) {
        guard (1...255).contains(topic.utf8.count), !topic.contains(where: { $0.isWhitespace || $0.isNewline }),
            !APNsRequestMetadata.hasControlCharacter(topic)
        else {
            throw .badRequest(field: "topic", "topic must be the app's bundle id (1-255 characters, no spaces or control characters)")
        }
    }

    static func validateEnvironment(_ text: String) throws(JSONAPIError) -> AppEnvironment {
        guard let environment = AppEnvironment(rawValue: text) else {
            let all = AppEnvironment.allCases.map(\.rawValue).joined(separator: ", ")
            throw .badRequest(field: "environment", "environment must be one of \(all), not '\(text)'")
        }
        return environment
    }

    static func validate(environment: AppEnvironment, endpoint: EndpointInput?) throws(JSONAPIError) -> AppRecord.Endpoint? {
        guard environment == .custom else {
            if endpoint != nil { throw .badRequest(field: "endpoint", "endpoint goes with environment custom only") }
            return nil
        }
        guard let endpoint else { throw .badRequest(field: "endpoint", "environment custom needs an endpoint {host, port}") }
        guard !endpoint.host.isEmpty, endpoint.host.utf8.count <= 253, !endpoint.host.contains(where: { $0.isWhitespace }),
            !APNsRequestMetadata.hasControlCharacter(endpoint.host)
        else {
            throw .badRequest(field: "endpoint.host", "host must be a host name or address")
        }
        guard (1...65_535).contains(endpoint.port) else { throw .badRequest(field: "endpoint.port", "port must be 1-65535") }
        if let pem = endpoint.caPEM, !APNsClientConfiguration.Endpoint.isReadableTrustRoots(pem) {
            throw .badRequest(field: "endpoint.caPEM", "caPEM must be PEM certificates")
        }
        if let feedbackPort = endpoint.feedbackPort, !(1...65_535).contains(feedbackPort) {
            throw .badRequest(field: "endpoint.feedbackPort", "feedbackPort must be 1-65535")
        }
        return AppRecord.Endpoint(host: endpoint.host, port: endpoint.port, caPEM: endpoint.caPEM, feedbackPort: endpoint.feedbackPort)
    }

    static func validateTransport(_ value: String?) throws(JSONAPIError) -> String? {
        guard let value else { return nil }
        guard [AppRecord.http2, AppRecord.legacy].contains(value) else {
            throw .badRequest(field: "transport", "transport must be http2 or legacy, not '\(value)'")
        }
        return value
    }

    static func validateUserBinding(_ value: String?) throws(JSONAPIError) -> UserBinding? {
        guard let value else { return nil }
        guard let binding = UserBinding(rawValue: value) else {
            throw .badRequest(field: "userBinding", "userBinding must be signed (alias tokens from your backend) or open, not '\(value.prefix(64))'")
        }
        return binding
    }

    static func validateFeedbackInterval(_ value: Int?) throws(JSONAPIError) -> Int? {
        guard let value else { return nil }
        guard (AppRecord.minimumFeedbackInterval...(7 * 86_400)).contains(value) else {
            throw .badRequest(
                field: "feedbackInterval",
                "feedbackInterval is \(AppRecord.minimumFeedbackInterval)-604800 seconds (5 minutes to 7 days; Apple suggested daily)")
        }
        return value
    }

    /// Credentials must build a client (the key parses, the certificate and key load, the bundle opens), and the
    /// legacy transport takes a certificate. New credentials (`now` given) must not be an expired certificate: APNs
    /// refuses one at the TLS handshake, so every notification would fail.
    /// - Returns: the credentials' certificate, read once here for the checks that follow (nil for a token key).
    @discardableResult
    static func check(_ credentials: AppCredentials, transport: String = AppRecord.http2, now: Date? = nil) throws(JSONAPIError) -> ClientCertificate? {
        if transport == AppRecord.legacy, case .token = credentials {
            throw .badRequest(field: "transport", "the legacy binary protocol takes a certificate (certificate or pkcs12), not a token key")
        }
        let authentication = try credentials.authentication()
        do {
            _ = try APNsClient(configuration: APNsClientConfiguration(authentication: authentication, endpoint: .production))
        } catch {
            throw .badRequest(
                field: credentials.materialField, "the credentials cannot be used: \((error as? APNsClientError)?.message ?? "unreadable")")
        }
        let certificate = credentials.certificate
        if let now, let expiry = certificate?.notValidAfter, expiry <= now {
            throw .badRequest(
                field: credentials.certificateField,
                "the certificate expired on \(expiry.formatted(.iso8601)): APNs refuses it; make a new push certificate in Apple's developer account, or use a token key (.p8), which does not expire")
        }
        return certificate
    }

    /// An Apple push certificate names the topics it may push to (`PushCertificateIdentity`): one that is not for the
    /// app's topic (another app's certificate) would have APNs refuse every notification. A certificate that names no
    /// app (a custom gateway's) is not checked.
    static func checkTopic(_ certificate: ClientCertificate?, topic: String, field: String) throws(JSONAPIError) {
        guard let certificate, let identity = try? PushCertificateIdentity.apple(derEncoded: certificate.der) else { return }
        guard identity.covers(topic) else {
            throw .badRequest(
                field: field,
                "the certificate is for \(identity.bundleID) (topics \(identity.topics.joined(separator: ", "))), not this app's topic \(topic): APNs would refuse every notification")
        }
    }

    static func validateInboxMaxTTL(_ value: Int?) throws(JSONAPIError) -> Int? {
        guard let value else { return nil }
        guard (60...AppRecord.defaultInboxMaxTTL).contains(value) else {
            throw .badRequest(field: "inboxMaxTTL", "inboxMaxTTL is 60-\(AppRecord.defaultInboxMaxTTL) seconds (at most 30 days)")
        }
        return value
    }

    /// A broadcast rate as given: nil when not given; `.some(nil)` to remove it (0, where `removable`).
    static func validateBroadcastRate(_ value: Int?, removable: Bool) throws(JSONAPIError) -> Int?? {
        guard let value else { return nil }
        if value == 0, removable { return .some(nil) }
        guard (1...PushesAPI.fastestThrottle).contains(value) else {
            throw .badRequest(
                field: "broadcastRatePerSecond",
                "broadcastRatePerSecond is 1-\(PushesAPI.fastestThrottle) recipients a second\(removable ? " (0 removes it)" : "")")
        }
        return value
    }

    /// The kinds of events the webhook is to post, as given: nil when not given.
    static func validateWebhookEvents(_ names: [String]?) throws(JSONAPIError) -> Set<WebhookEventKind>? {
        guard let names else { return nil }
        let known = WebhookEventKind.allCases.map(\.rawValue).joined(separator: " and ")
        guard !names.isEmpty else {
            throw .badRequest(field: "webhookEvents", "webhookEvents names at least one of \(known) (to post none, set webhookURL to \"\")")
        }
        var kinds: Set<WebhookEventKind> = []
        for (index, name) in names.enumerated() {
            guard let kind = WebhookEventKind(rawValue: name) else {
                throw .badRequest(field: "webhookEvents[\(index)]", "webhookEvents takes \(known), not '\(name.prefix(64))'")
            }
            kinds.insert(kind)
        }
        return kinds
    }

    static func validateInboxCap(_ value: Int?) throws(JSONAPIError) -> Int? {
        guard let value else { return nil }
        guard (1...100_000).contains(value) else { throw .badRequest(field: "inboxCap", "inboxCap is 1-100000 messages") }
        return value
    }

    static func validateWebhook(_ url: String?, policy: WebhookAddressPolicy) throws(JSONAPIError) {
        guard let url, !url.isEmpty else { return }
        guard url.utf8.count <= 2048, let parsed = URL(string: url), let scheme = parsed.scheme, ["http", "https"].contains(scheme),
            let host = parsed.host, !host.isEmpty
        else {
            throw .badRequest(field: "webhookURL", "webhookURL must be an http(s) URL")
        }
        if let port = parsed.port, !(1...65_535).contains(port) {
            throw .badRequest(field: "webhookURL", "webhookURL's port must be 1-65535")
        }
        // No top-level domain is a number, so a host (not an IPv6 address) ending in one is an IPv4 address, and only
        // four decimal numbers mean one address to every resolver ("127.1", "0x7f000001", "0177.0.0.1" read otherwise).
        if !host.contains(":"), let last = host.split(separator: ".", omittingEmptySubsequences: false).last,
            let first = last.utf8.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first), !Self.isDottedDecimalIPv4(host)
        {
            throw .badRequest(field: "webhookURL", "webhookURL's host ends in a number: write an IPv4 address as four decimal numbers 0-255")
        }
        if let refused = policy.refusal(host: host) {
            throw .badRequest(field: "webhookURL", "webhookURL may not point at \(refused)")
        }
    }

    /// Whether `host` is four decimal numbers 0-255 without leading zeros, separated by dots.
    static func isDottedDecimalIPv4(_ host: String) -> Bool {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { part in
                guard (1...3).contains(part.utf8.count), part.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                    part.utf8.count == 1 || part.utf8.first != UInt8(ascii: "0"), let value = Int(part)
                else { return false }
                return value <= 255
            }
    }
}

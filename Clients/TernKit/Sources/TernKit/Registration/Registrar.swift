import Foundation

/// What a registration did.
public struct Registration: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// The server was told.
        case sent
        /// Nothing changed since the last registration, within a day: nothing was sent.
        case upToDate
        /// The server knew this device id under a secret this installation lost (a wiped keychain): the device
        /// registered under a new id, and the server moved the token there.
        case newDevice(previousDeviceID: String)
    }

    public var deviceID: String
    /// The user the device is bound to, as the server last said.
    public var alias: String?
    /// The device's tags, when the server was asked.
    public var tags: [String]?
    public var outcome: Outcome
    /// The device was bound to a user and lost the binding (with its old id, or because the server deleted the
    /// device and made it again): have the backend mint a new alias token and call ``Tern/signIn(aliasToken:)``.
    public var needsSignIn: Bool
}

/// Registers the device: when the policy says so, with the identity from the keychain, keeping the secret the first
/// answer carries before anything else, and starting over under a new device id (once) when the server no longer
/// takes this installation's secret. One registration at a time, so two can never race to create the same device.
actor Registrar {
    let client: TernClient
    let identities: any IdentityStore
    let states: any StateStore
    let policy: RegistrationPolicy
    let now: @Sendable () -> Date

    private var identity: DeviceIdentity?
    /// The facts of the latest registration asked for, so a sign-in or a forced registration can repeat them.
    private(set) var latestFacts: RegistrationFacts?
    private var busy = false
    private var queue: [CheckedContinuation<Void, Never>] = []
    /// Calls waiting for their turn (for the tests: a call is queued once this counts it).
    var waiting: Int { queue.count }

    init(client: TernClient, identities: any IdentityStore, states: any StateStore, policy: RegistrationPolicy, now: @escaping @Sendable () -> Date) {
        self.client = client
        self.identities = identities
        self.states = states
        self.policy = policy
        self.now = now
    }

    /// The device's credentials, once it has registered (nil before).
    func credentials() -> DeviceCredentials? {
        guard let identity = existingIdentity(), let secret = identity.deviceSecret else { return nil }
        return DeviceCredentials(deviceID: identity.deviceID, secret: secret)
    }

    /// The user the device is bound to, as last registered.
    func alias() -> String? {
        existingIdentity().flatMap { state(of: $0)?.alias }
    }

    /// The identity kept, without making one (only a registration does).
    private func existingIdentity() -> DeviceIdentity? {
        if let identity { return identity }
        identity = try? identities.load()
        return identity
    }

    /// Registers if the policy says so (or always, with `force`: the server lost the device or refused its secret).
    func register(_ facts: RegistrationFacts, force: Bool = false) async throws(TernError) -> Registration {
        latestFacts = facts
        return try await exclusively { () async throws(TernError) -> Registration in
            let identity = try loadIdentity()
            let state = state(of: identity)
            if !force, identity.deviceSecret != nil, !policy.needsRegistration(facts, last: state?.lastRegistration, now: now()) {
                return Registration(deviceID: identity.deviceID, alias: state?.alias, tags: nil, outcome: .upToDate, needsSignIn: false)
            }
            return try await send(facts, identity: identity, state: state, alias: nil, aliasToken: nil)
        }
    }

    /// Registers again whatever the policy says, with the latest facts (the channel found the device unknown, or its
    /// secret refused).
    func registerAgain() async throws(TernError) -> Registration {
        guard let facts = latestFacts ?? (try? loadIdentity()).flatMap({ state(of: $0)?.lastRegistration?.facts }) else {
            throw TernError(.notRegistered, "the device has not registered yet")
        }
        return try await register(facts, force: true)
    }

    /// Binds the device to the user the backend's alias token names (its `sub`), with the facts last registered.
    func signIn(aliasToken: String) async throws(TernError) -> Registration {
        let alias = try AliasToken.subject(of: aliasToken)
        return try await exclusively { () async throws(TernError) -> Registration in
            let identity = try loadIdentity()
            let state = state(of: identity)
            guard let facts = latestFacts ?? state?.lastRegistration?.facts else {
                throw TernError(
                    .notRegistered,
                    "signing in needs the APNs token first: call register(deviceToken:) from didRegisterForRemoteNotificationsWithDeviceToken")
            }
            return try await send(facts, identity: identity, state: state, alias: alias, aliasToken: aliasToken)
        }
    }

    /// Unbinds the device from its user.
    func signOut() async throws(TernError) -> RegisteredDevice {
        try await exclusively { () async throws(TernError) -> RegisteredDevice in
            let identity = try loadIdentity()
            guard let secret = identity.deviceSecret else {
                throw TernError(.notRegistered, "the device is not registered: there is nobody to sign out")
            }
            let device = try await client.removeAlias(DeviceCredentials(deviceID: identity.deviceID, secret: secret))
            var state = state(of: identity) ?? TernState(deviceID: identity.deviceID)
            state.alias = device.alias
            try save(state)
            return device
        }
    }

    /// Adds and removes tags. - Returns: the device's tags now.
    func updateTags(add: [String], remove: [String]) async throws(TernError) -> [String] {
        try await exclusively { () async throws(TernError) -> [String] in
            guard let credentials = credentials() else {
                throw TernError(.notRegistered, "tags need a registered device: call register(deviceToken:) first")
            }
            return try await client.updateTags(credentials, add: add, remove: remove).tags
        }
    }

    // MARK: Sending

    private func send(
        _ facts: RegistrationFacts, identity: DeviceIdentity, state: TernState?, alias: String?, aliasToken: String?
    ) async throws(TernError) -> Registration {
        do throws(TernError) {
            let device = try await client.register(
                deviceID: identity.deviceID, secret: identity.deviceSecret, facts: facts, alias: alias, aliasToken: aliasToken)
            // A secret in the answer to a device that had one: the server made the device again (it had deleted it),
            // and the user it was bound to is gone with it.
            let madeAgain = identity.deviceSecret != nil && device.deviceSecret != nil
            return try keep(device, identity: identity, facts: facts, outcome: .sent, hadAlias: madeAgain ? state?.alias : nil)
        } catch where error.isWrongDeviceSecret {
            // The server knows this id under a secret this installation does not have (the keychain lost it, or the
            // first answer was never stored). The way back is a new id: the server moves the token there and the old
            // device goes. Once: a refusal of the new id is an error, not a loop.
            let fresh = DeviceIdentity.generate()
            try save(fresh)
            self.identity = fresh
            let device = try await client.register(deviceID: fresh.deviceID, secret: nil, facts: facts, alias: alias, aliasToken: aliasToken)
            return try keep(device, identity: fresh, facts: facts, outcome: .newDevice(previousDeviceID: identity.deviceID), hadAlias: state?.alias)
        }
    }

    /// Keeps what the answer says: the new secret first (it is shown once), then what was registered.
    private func keep(
        _ device: RegisteredDevice, identity: DeviceIdentity, facts: RegistrationFacts, outcome: Registration.Outcome, hadAlias: String?
    ) throws(TernError) -> Registration {
        var identity = identity
        if let secret = device.deviceSecret {
            identity.deviceSecret = secret
            try save(identity)
            self.identity = identity
        }
        guard identity.deviceSecret != nil else {
            throw TernError(.badAnswer, "registering device \(identity.deviceID) answered no deviceSecret, and this installation has none")
        }
        try save(TernState(deviceID: identity.deviceID, lastRegistration: .init(facts: facts, at: now()), alias: device.alias))
        return Registration(
            deviceID: identity.deviceID, alias: device.alias, tags: device.tags, outcome: outcome, needsSignIn: hadAlias != nil && device.alias == nil
        )
    }

    // MARK: Storage

    private func loadIdentity() throws(TernError) -> DeviceIdentity {
        if let identity { return identity }
        do {
            let loaded = try identities.loadOrCreate()
            identity = loaded
            return loaded
        } catch {
            throw TernError(.identity, "\(error)")
        }
    }

    private func save(_ identity: DeviceIdentity) throws(TernError) {
        do {
            try identities.save(identity)
        } catch {
            throw TernError(.identity, "cannot keep the device's identity: \(error)")
        }
    }

    private func state(of identity: DeviceIdentity) -> TernState? {
        // Unreadable state is as good as none: the next registration writes it again.
        guard let state = try? states.load(), state.deviceID == identity.deviceID else { return nil }
        return state
    }

    private func save(_ state: TernState) throws(TernError) {
        do {
            try states.save(state)
        } catch {
            throw TernError(.identity, "cannot keep the registration state: \(error)")
        }
    }

    /// Runs `body` when no other registration runs (an actor alone would let two interleave at their awaits), in the
    /// order the calls came: the call ending hands its turn to the first waiting, which runs without giving it up. (It
    /// marked itself not busy and woke the waiter, and a call arriving before the waiter was back in the actor went
    /// first: an app's sign-in, or its sign-out, could be sent before an earlier call's and be undone by it.)
    private func exclusively<Result>(_ body: () async throws(TernError) -> Result) async throws(TernError) -> Result {
        if busy {
            await withCheckedContinuation { queue.append($0) }
        } else {
            busy = true
        }
        defer {
            if queue.isEmpty { busy = false } else { queue.removeFirst().resume() }
        }
        return try await body()
    }
}

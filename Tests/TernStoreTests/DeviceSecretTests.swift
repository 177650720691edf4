import Foundation
import Testing
import TernStore

/// A registration made by a device proves what it needs in the transaction that writes it: an existing device's
/// secret, and any alias it binds. Refused registrations write nothing and hold nothing else up.
@Suite("Device secrets and alias proofs")
struct DeviceSecretTests {
    static let secretA: [UInt8] = Array(repeating: 0xA1, count: 32)
    static let secretB: [UInt8] = Array(repeating: 0xB2, count: 32)
    static let secretC: [UInt8] = Array(repeating: 0xC3, count: 32)
    static let legacy: [UInt8] = Array(repeating: 0x1E, count: 32)

    /// A registration by the device itself.
    static func byDevice(
        _ deviceID: String, token: String, alias: String? = nil, presenting: [UInt8]?, aliasProof: AliasProof = .none, newSecret: [UInt8] = secretA
    ) -> DeviceRegistration {
        var value = registration(deviceID, token: token, alias: alias)
        value.caller = .device(presentedSecretHash: presenting, legacySecretHash: legacy, aliasProof: aliasProof)
        value.newSecretHash = newSecret
        return value
    }

    @Test("a new device keeps the new secret's hash; registering again needs it, and keeps it", arguments: StoreFactory.all)
    func newDeviceKeepsItsSecret(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let created = try await store.register(Self.byDevice("d1", token: "t1", presenting: nil), app: "demo", at: time(1))
            #expect(created.secretHash == Self.secretA)
            // Again, with the secret and a new token; the new-secret hash offered this time is not taken.
            let again = try await store.register(
                Self.byDevice("d1", token: "t2", presenting: Self.secretA, newSecret: Self.secretB), app: "demo", at: time(2))
            #expect(again.token == "t2")
            #expect(again.secretHash == Self.secretA)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.secretHash == Self.secretA)
        }
    }

    @Test("without the secret, or with another, a device's registration is refused and changes nothing", arguments: StoreFactory.all)
    func wrongSecretIsRefused(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            var owner = registration("d1", token: "t1", alias: "victim")
            owner.newSecretHash = Self.secretA
            let before = try await store.register(owner, app: "demo", at: time(1))
            for presented in [nil, Self.secretB, Self.legacy] {
                await #expect(throws: StoreError.refused(.deviceSecret)) {
                    _ = try await store.register(
                        Self.byDevice("d1", token: "attacker", alias: "victim", presenting: presented, aliasProof: .token), app: "demo", at: time(2))
                }
            }
            #expect(try await store.device(app: "demo", deviceID: "d1") == before)
            #expect(try await store.tokenHistory(app: "demo", deviceID: "d1").isEmpty)
            #expect(try await store.recipients(app: "demo", audience: .tokens(["attacker"]), after: nil, limit: 10).items.first?.deviceID == nil)
        }
    }

    @Test("a device from before random secrets proves itself with its derived secret until it gets a new one", arguments: StoreFactory.all)
    func legacyDeviceUsesDerivedSecret(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            // As registered before the upgrade: no secret hash stored.
            _ = try await store.register(registration("old", token: "t1"), app: "demo", at: time(1))
            #expect(try await store.device(app: "demo", deviceID: "old")?.secretHash == nil)
            await #expect(throws: StoreError.refused(.deviceSecret)) {
                _ = try await store.register(Self.byDevice("old", token: "t2", presenting: Self.secretA), app: "demo", at: time(2))
            }
            let again = try await store.register(Self.byDevice("old", token: "t2", presenting: Self.legacy), app: "demo", at: time(3))
            #expect(again.token == "t2")
            #expect(again.secretHash == nil, "a re-registration does not hand the device a secret it was never told")
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "old", secretHash: Self.secretB, onlyReplacing: StoredSecret(nil), at: time(4)))
            await #expect(throws: StoreError.refused(.deviceSecret)) {
                _ = try await store.register(Self.byDevice("old", token: "t2", presenting: Self.legacy), app: "demo", at: time(5))
            }
            #expect(try await store.register(Self.byDevice("old", token: "t2", presenting: Self.secretB), app: "demo", at: time(6)).token == "t2")
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "nobody", secretHash: Self.secretB, onlyReplacing: nil, at: time(7)) == false)
        }
    }

    /// A rotation the device's secret authorised raced the backend's revocation of that secret: both answered 200,
    /// and the attacker's new secret was the one left. A rotation now holds only while the hash it was authorised
    /// against is still the stored one.
    @Test("a rotation authorised by a secret does not undo one made meanwhile; the backend's always lands", arguments: StoreFactory.all)
    func rotationIsCompareAndSwap(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(Self.byDevice("d", token: "t1", presenting: nil), app: "demo", at: time(1))
            // The backend revokes A (no condition), then the holder of A tries to rotate with what it read before.
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "d", secretHash: Self.secretB, onlyReplacing: nil, at: time(2)))
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "d", secretHash: Self.secretC, onlyReplacing: StoredSecret(Self.secretA), at: time(3)) == false)
            #expect(try await store.device(app: "demo", deviceID: "d")?.secretHash == Self.secretB)
            // The device with the current secret rotates as before.
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "d", secretHash: Self.secretC, onlyReplacing: StoredSecret(Self.secretB), at: time(4)))
            #expect(try await store.device(app: "demo", deviceID: "d")?.secretHash == Self.secretC)
            // A device from before secrets has none stored: its first rotation holds only while there is still none.
            _ = try await store.register(registration("old", token: "t2"), app: "demo", at: time(5))
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "old", secretHash: Self.secretA, onlyReplacing: StoredSecret(nil), at: time(6)))
            #expect(try await store.setDeviceSecret(app: "demo", deviceID: "old", secretHash: Self.secretB, onlyReplacing: StoredSecret(nil), at: time(7)) == false)
        }
    }

    @Test("a device binds an alias only with proof, but keeps the one it has without", arguments: StoreFactory.all)
    func aliasNeedsProof(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            await #expect(throws: StoreError.refused(.aliasBinding)) {
                _ = try await store.register(Self.byDevice("d1", token: "t1", alias: "victim", presenting: nil), app: "demo", at: time(1))
            }
            #expect(try await store.device(app: "demo", deviceID: "d1") == nil, "a refused first registration creates nothing")
            #expect(try await store.devices(app: "demo", alias: "victim").isEmpty)

            let bound = try await store.register(
                Self.byDevice("d1", token: "t1", alias: "alice", presenting: nil, aliasProof: .token), app: "demo", at: time(2))
            #expect(bound.alias == "alice")
            // Every launch sends the same alias again, with no new proof.
            let again = try await store.register(Self.byDevice("d1", token: "t2", alias: "alice", presenting: Self.secretA), app: "demo", at: time(3))
            #expect(again.alias == "alice")
            #expect(again.token == "t2")
            await #expect(throws: StoreError.refused(.aliasBinding)) {
                _ = try await store.register(Self.byDevice("d1", token: "t3", alias: "bob", presenting: Self.secretA), app: "demo", at: time(4))
            }
            #expect(try await store.device(app: "demo", deviceID: "d1")?.token == "t2")
            // The backend binds any alias.
            var backend = registration("d1", token: "t2", alias: "bob")
            backend.caller = .backend
            #expect(try await store.register(backend, app: "demo", at: time(5)).alias == "bob")
        }
    }

    @Test("an alias bound without proof on an open app is kept as such, not kept without proof once the app is signed, and unbound at the switch", arguments: StoreFactory.all)
    func unprovenBindings(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            // Bound on an open app with nothing; registered again the same way, and with the same alias by a later
            // launch after a token proved it elsewhere: d1 stays unproven, d2 is proven by its token.
            _ = try await store.register(Self.byDevice("d1", token: "t1", alias: "alice", presenting: nil, aliasProof: .open), app: "demo", at: time(1))
            _ = try await store.register(Self.byDevice("d1", token: "t1", alias: "alice", presenting: Self.secretA, aliasProof: .open), app: "demo", at: time(2))
            _ = try await store.register(Self.byDevice("d2", token: "t2", alias: "alice", presenting: nil, aliasProof: .open), app: "demo", at: time(3))
            _ = try await store.register(Self.byDevice("d2", token: "t2", alias: "alice", presenting: Self.secretA, aliasProof: .token), app: "demo", at: time(4))
            // A registration without an alias keeps the binding as it was.
            _ = try await store.register(Self.byDevice("d1", token: "t1", presenting: Self.secretA, aliasProof: .open), app: "demo", at: time(5))

            // The app binds only with tokens now: d1 cannot keep alice with nothing, d2 can.
            await #expect(throws: StoreError.refused(.aliasBinding)) {
                _ = try await store.register(Self.byDevice("d1", token: "t1", alias: "alice", presenting: Self.secretA), app: "demo", at: time(6))
            }
            #expect(try await store.register(Self.byDevice("d2", token: "t2", alias: "alice", presenting: Self.secretA), app: "demo", at: time(6)).alias == "alice")
            #expect(try await store.unbindUnprovenAliases(app: "demo", at: time(7)) == 1)
            #expect(try await store.devices(app: "demo", alias: "alice").map(\.deviceID) == ["d2"])
            #expect(try await store.unbindUnprovenAliases(app: "demo", at: time(8)) == 0)
        }
    }

    @Test("the alias a device keeps without proof is the same bytes, not text Swift takes for equal", arguments: StoreFactory.all)
    func keptAliasIsComparedByBytes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            // Bound (with proof) to "\u{212A}ate", KELVIN SIGN and "ate": Swift's `==` takes it for "Kate".
            let lookalike = "\u{212A}ate"
            #expect(lookalike == "Kate" && !lookalike.utf8.elementsEqual("Kate".utf8), "the premise: equal to Swift, not in bytes")
            _ = try await store.register(
                Self.byDevice("d1", token: "t1", alias: lookalike, presenting: nil, aliasProof: .token), app: "demo", at: time(1))
            await #expect(throws: StoreError.refused(.aliasBinding)) {
                _ = try await store.register(Self.byDevice("d1", token: "t1", alias: "Kate", presenting: Self.secretA), app: "demo", at: time(2))
            }
            #expect(try await store.devices(app: "demo", alias: "Kate").isEmpty)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.alias.map { Array($0.utf8) } == Array(lookalike.utf8))
        }
    }

    @Test("refused registrations among 60 at once fail alone; the others are written", arguments: StoreFactory.all)
    func refusalsInAGroupFailAlone(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for n in 0..<20 {
                _ = try await store.register(Self.byDevice("v\(n)", token: "victim\(n)", presenting: nil), app: "demo", at: time(1))
            }
            // 20 honest re-registrations, 20 takeover attempts on other victims, 20 new devices, all at once.
            let outcomes = await withTaskGroup(of: (String, Bool).self) { group in
                for n in 0..<20 {
                    group.addTask {
                        let result = try? await store.register(
                            Self.byDevice("v\(n)", token: n < 10 ? "victim\(n)" : "new\(n)", presenting: Self.secretA), app: "demo", at: time(2))
                        return ("honest", result != nil)
                    }
                    group.addTask {
                        let result = try? await store.register(
                            Self.byDevice("v\((n + 7) % 20)", token: "evil\(n)", presenting: Self.secretB), app: "demo", at: time(2))
                        return ("takeover", result != nil)
                    }
                    group.addTask {
                        let result = try? await store.register(Self.byDevice("n\(n)", token: "fresh\(n)", presenting: nil), app: "demo", at: time(2))
                        return ("new", result != nil)
                    }
                }
                var outcomes: [String: [Bool]] = [:]
                for await (kind, written) in group { outcomes[kind, default: []].append(written) }
                return outcomes
            }
            #expect(outcomes["honest"]?.allSatisfy { $0 } == true)
            #expect(outcomes["new"]?.allSatisfy { $0 } == true)
            #expect(outcomes["takeover"]?.allSatisfy { !$0 } == true)
            for n in 0..<20 {
                #expect(try await store.device(app: "demo", deviceID: "v\(n)")?.token == (n < 10 ? "victim\(n)" : "new\(n)"))
            }
            let evil = try await store.recipients(app: "demo", audience: .tokens((0..<20).map { "evil\($0)" }), after: nil, limit: 100).items
            #expect(evil.allSatisfy { $0.deviceID == nil })
        }
    }
}

import Crypto
import Foundation
import NIOHTTP1
import SQLKit
import TernAPNs
@testable import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// Tried as an attacker would, holding the app key (it ships in every copy of the app) and other users' ids: the
/// two attacks found before device trust existed, a leaked device id, and guessing a device secret. Then the
/// honest stories the trust model must keep working: seed 001's reinstall, a lost secret, and the upgrade.
@Suite(.serialized) struct DeviceTrustTests {
    static let victim = Fixture.device(1)
    static let victimToken = Fixture.token(1)
    static let attackerToken = Fixture.token(666)

    /// The victim's phone registers, bound to its user by the backend's token, and gets a private message.
    static func victimWithAnInbox(_ server: RoutedServer) async throws {
        try await server.register(victim, token: victimToken, alias: "victim-42")
        let push = try await server.push(Fixture.push(audience: #"{"aliases": ["victim-42"]}"#, title: "Your bank code is 991", extra: #", "inbox": {"ttl": 3600}"#))
        #expect(push[path: "counts.accepted"]?.int == 1)
    }

    /// What the victim's user owns now, read with the master secret.
    static func victimState(_ server: RoutedServer) async throws -> [String] {
        [
            try await server.master.get("/v1/apps/demo/devices/\(victim)").text,
            try await server.master.get("/v1/apps/demo/devices?alias=victim-42").text,
            try await server.master.get("/v1/apps/demo/inbox?alias=victim-42").text,
        ]
    }

    @Test func attackOneBecomingAnyUserWithTheAppKeyIsRefusedAndChangesNothing() async throws {
        try await RouterHarness.withServer { server in
            try await Self.victimWithAnInbox(server)
            let before = try await Self.victimState(server)
            let attacker = Fixture.device(2)
            let attempts: [(String, String)] = [
                ("no alias token", Fixture.registration(token: Self.attackerToken, alias: "victim-42")),
                ("a token signed with a guessed secret",
                 Fixture.registration(token: Self.attackerToken, alias: "victim-42", aliasToken: AliasTokens.mint(alias: "victim-42", app: "demo", secret: "tis_guess"))),
                ("the attacker's own token for another alias",
                 Fixture.registration(token: Self.attackerToken, alias: "victim-42", aliasToken: AliasTokens.mint(alias: "attacker", app: "demo", secret: server.identitySecret))),
                ("a token for another app", Fixture.registration(
                    token: Self.attackerToken, alias: "victim-42", aliasToken: AliasTokens.mint(alias: "victim-42", app: "shop", secret: server.identitySecret))),
                ("an expired token", Fixture.registration(
                    token: Self.attackerToken, alias: "victim-42",
                    aliasToken: AliasTokens.mint(alias: "victim-42", app: "demo", secret: server.identitySecret, expiresIn: -3600))),
                ("an unsigned token", Fixture.registration(
                    token: Self.attackerToken, alias: "victim-42",
                    aliasToken: AliasTokens.mint(alias: "victim-42", app: "demo", secret: "", header: #"{"alg":"none"}"#))),
            ]
            for (what, body) in attempts {
                let response = try await server.device.put("/v1/apps/demo/devices/\(attacker)", body)
                #expect(response.status == 403, "\(what): \(response.text)")
                #expect(try response.json()["field"]?.string == "aliasToken", "\(what)")
                #expect(try response.json()["deviceSecret"] == nil)
            }
            // Nothing stored: no attacker device, the victim's user and inbox as they were.
            #expect(try await server.master.get("/v1/apps/demo/devices/\(attacker)").status == 404)
            #expect(try await Self.victimState(server) == before)
            // The attacker can still register as nobody, and then cannot read the victim's inbox.
            let nobody = try await server.device.put("/v1/apps/demo/devices/\(attacker)", Fixture.registration(token: Self.attackerToken))
            #expect(nobody.status == 200)
            let secret = try #require(try nobody.json()["deviceSecret"]?.string)
            let inbox = try await server.device.send(
                .GET, "/v1/apps/demo/inbox?deviceId=\(attacker)&alias=victim-42", headers: [("X-Tern-Device-Secret", secret)])
            #expect(inbox.status == 403)
            #expect(!inbox.text.contains("991"))
            try await Self.expectTheNextPushReachesTheVictimOnly(server)
        }
    }

    /// The next push to the victim's user reaches the victim's token, and no other.
    static func expectTheNextPushReachesTheVictimOnly(_ server: RoutedServer) async throws {
        _ = try await server.push(Fixture.push(audience: #"{"aliases": ["victim-42"]}"#, title: "Your 2FA code is 123456"))
        let codes = try await server.arrivals().filter { $0.payload.contains("2FA") }
        #expect(codes.map(\.token) == [victimToken])
    }

    @Test func attackTwoTakingOverAKnownDeviceIdIsRefusedAndChangesNothing() async throws {
        try await RouterHarness.withServer { server in
            try await Self.victimWithAnInbox(server)
            let before = try await Self.victimState(server)
            let takeover = Fixture.registration(
                token: Self.attackerToken, alias: "attacker", aliasToken: AliasTokens.mint(alias: "attacker", app: "demo", secret: server.identitySecret))
            for headers in [[], [("X-Tern-Device-Secret", "tds_guessed")], [("X-Tern-Device-Secret", "")]] as [[(String, String)]] {
                let response = try await server.device.send(.PUT, "/v1/apps/demo/devices/\(Self.victim)", body: takeover, headers: headers)
                #expect(response.status == 403, "\(response.text)")
                #expect(try response.json()["field"]?.string == "X-Tern-Device-Secret")
                #expect(try response.json()["deviceSecret"] == nil, "a device's secret is never answered to another")
            }
            #expect(try await Self.victimState(server) == before)
            try await Self.expectTheNextPushReachesTheVictimOnly(server)
        }
    }

    @Test func aLeakedDeviceIdWithoutItsSecretGetsNothing() async throws {
        try await RouterHarness.withServer { server in
            try await Self.victimWithAnInbox(server)
            _ = try await server.device.send(.PATCH, "/v1/apps/demo/devices/\(Self.victim)/tags", body: #"{"add": ["vip"]}"#, headers: server.asDevice(Self.victim))
            let before = try await Self.victimState(server)
            let calls: [(HTTPMethod, String, String?)] = [
                (.GET, "/v1/apps/demo/devices/\(Self.victim)", nil),
                (.DELETE, "/v1/apps/demo/devices/\(Self.victim)", nil),
                (.DELETE, "/v1/apps/demo/devices/\(Self.victim)/alias", nil),
                (.PATCH, "/v1/apps/demo/devices/\(Self.victim)/tags", #"{"remove": ["vip"]}"#),
                (.POST, "/v1/apps/demo/devices/\(Self.victim)/secret", nil),
                (.GET, "/v1/apps/demo/devices/\(Self.victim)/tokens", nil),
                (.GET, "/v1/apps/demo/inbox?deviceId=\(Self.victim)", nil),
                (.POST, "/v1/apps/demo/inbox/read?deviceId=\(Self.victim)", #"{"upTo": "00000000-0000-4000-8000-000000000000"}"#),
            ]
            for (method, path, body) in calls {
                let response = try await server.device.send(method, path, body: body)
                #expect(response.status == 403, "\(method) \(path): \(response.text)")
                #expect(!response.text.contains(Self.victimToken) && !response.text.contains("991"))
            }
            #expect(try await Self.victimState(server) == before)
        }
    }

    /// A device id is the app's to choose: once its device is deleted (by itself, or because its token moved to a
    /// new id), anyone may register it afresh, and must find none of the old device's inbox.
    @Test func aDeletedDevicesIdRegisteredAgainFindsNothingOfIt() async throws {
        try await RouterHarness.withServer { server in
            let moved = Fixture.device(4)
            try await server.register(Self.victim, token: Self.victimToken)
            try await server.register(moved, token: Fixture.token(4))
            let push = try await server.push(Fixture.push(
                audience: #"{"devices": ["\#(Self.victim)", "\#(moved)"]}"#, title: "Your bank code is 991", extra: #", "inbox": {"ttl": 3600}"#))
            #expect(push[path: "counts.accepted"]?.int == 2)
            // The victim deletes itself; the other's token moves to a new id (its keychain was wiped).
            #expect(try await server.device.send(.DELETE, "/v1/apps/demo/devices/\(Self.victim)", headers: server.asDevice(Self.victim)).status == 204)
            try await server.register(Fixture.device(5), token: Fixture.token(4))
            #expect(try await server.master.get("/v1/apps/demo/devices/\(moved)").status == 404)

            for (n, id) in [Self.victim, moved].enumerated() {
                let taken = try await server.device.put("/v1/apps/demo/devices/\(id)", Fixture.registration(token: Fixture.token(700 + n)))
                #expect(taken.status == 200, "\(taken.text)")
                let secret = try #require(try taken.json()["deviceSecret"]?.string)
                let inbox = try await server.device.send(.GET, "/v1/apps/demo/inbox?deviceId=\(id)", headers: [("X-Tern-Device-Secret", secret)])
                #expect(inbox.status == 200)
                #expect(try inbox.json()["messages"] == .array([]), "\(inbox.text)")
                #expect(try inbox.json()["unread"]?.int == 0)
                #expect(!inbox.text.contains("991"))
            }
        }
    }

    /// The backend's own user id "\u{212A}ate" (KELVIN SIGN, "ate") is equal to "Kate" by Swift's `==`, not in the
    /// database. Its alias token must not bind another user's "Kate"; such an alias is refused outright (not NFC).
    @Test func anAliasTokenForALookalikeIdDoesNotBindTheUserItLooksLike() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Self.victim, token: Self.victimToken, alias: "Kate")
            let lookalike = "\u{212A}ate"
            let attacker = Fixture.device(2)
            let token = AliasTokens.mint(alias: lookalike, app: "demo", secret: server.identitySecret)
            let asKate = try await server.device.put(
                "/v1/apps/demo/devices/\(attacker)", Fixture.registration(token: Self.attackerToken, alias: "Kate", aliasToken: token))
            #expect(asKate.status == 403, "\(asKate.text)")
            #expect(try asKate.json()["field"]?.string == "aliasToken")
            let asItself = try await server.device.put(
                "/v1/apps/demo/devices/\(attacker)", Fixture.registration(token: Self.attackerToken, alias: lookalike, aliasToken: token))
            #expect(asItself.status == 400, "\(asItself.text)")
            #expect(try asItself.json()["field"]?.string == "alias")
            #expect(try asItself.json()["message"]?.string?.contains("NFC") == true)
            // Nor may the backend send to it: it names no user Tern keeps.
            let push = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"aliases": ["\#(lookalike)"]}"#))
            #expect(push.status == 400, "\(push.text)")

            #expect(try await server.master.get("/v1/apps/demo/devices/\(attacker)").status == 404)
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["Kate"]}"#, title: "Your 2FA code is 123456"))
            #expect(try await server.arrivals().filter { $0.payload.contains("2FA") }.map(\.token) == [Self.victimToken])
        }
    }

    @Test func guessingADeviceSecretIsLimitedWithoutLockingTheDeviceOut() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Self.victim, token: Self.victimToken)
            let path = "/v1/apps/demo/devices/\(Self.victim)"
            var statuses: [Int] = []
            for n in 0..<12 {
                // Guesses through both doors: reads and re-registrations count alike.
                let guess = [("X-Tern-Device-Secret", "tds_guess\(n)")]
                let response = n.isMultiple(of: 2)
                    ? try await server.device.send(.GET, path, headers: guess)
                    : try await server.device.send(.PUT, path, body: Fixture.registration(token: Self.attackerToken), headers: guess)
                statuses.append(Int(response.status))
                if n == 11 {
                    #expect(response.headers.first(name: "Retry-After").flatMap { Int($0) }.map { (1...60).contains($0) } == true)
                    #expect(try response.json()["error"]?.string == "tooManyAttempts")
                }
            }
            #expect(statuses == Array(repeating: 403, count: 10) + [429, 429])
            // The device itself, with its own secret, is not locked out; another device is not limited.
            #expect(try await server.device.send(.GET, path, headers: server.asDevice(Self.victim)).status == 200)
            try await server.register(Self.victim, token: Self.victimToken)
            try await server.register(Fixture.device(2), token: Fixture.token(2))
            #expect(try await server.device.send(.GET, "/v1/apps/demo/devices/\(Fixture.device(2))", headers: [("X-Tern-Device-Secret", "tds_x")]).status == 403)
            #expect(try await server.master.get(path).json()["token"]?.string == Self.victimToken)
        }
    }

    /// Seed 001: the app keeps its device id and secret in the keychain, which survives a reinstall; iOS gives the
    /// reinstalled app a new token. One device, one token, the user kept, one push each.
    @Test func seed001AReinstalledAppKeepsOneDeviceWithItsNewTokenAndItsUser() async throws {
        try await RouterHarness.withServer { server in
            let first = try await server.register(Self.victim, token: Fixture.token(10), alias: "user-42")
            let secret = try #require(first["deviceSecret"]?.string)
            // The reinstall: same id and secret from the keychain, a new token, the same alias with no new token.
            let again = try await server.device.send(
                .PUT, "/v1/apps/demo/devices/\(Self.victim)", body: Fixture.registration(token: Fixture.token(11), alias: "user-42"),
                headers: [("X-Tern-Device-Secret", secret)])
            #expect(again.status == 200, "\(again.text)")
            #expect(try again.json()["deviceSecret"] == nil, "the secret is shown once, when the device is made")
            let devices = try await server.master.get("/v1/apps/demo/devices?alias=user-42").json()["devices"]
            guard case .array(let list)? = devices else { Issue.record("no device list"); return }
            #expect(list.count == 1)
            #expect(list.first?["token"]?.string == Fixture.token(11))
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["user-42"]}"#))
            #expect(try await server.arrivals().map(\.token) == [Fixture.token(11)])
            // Changing the user needs the backend's word again.
            let other = try await server.device.send(
                .PUT, "/v1/apps/demo/devices/\(Self.victim)", body: Fixture.registration(token: Fixture.token(11), alias: "user-43"),
                headers: [("X-Tern-Device-Secret", secret)])
            #expect(other.status == 403)
        }
    }

    /// A keychain wiped with the app: the device registers under a new id; its token moves there and the old
    /// device goes, so the user still gets each push once.
    @Test func aDeviceThatLostItsSecretStartsAgainUnderANewId() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Self.victim, token: Fixture.token(20), alias: "user-42")
            let fresh = Fixture.device(3)
            let answer = try await server.register(fresh, token: Fixture.token(20), alias: "user-42")
            #expect(answer["deviceSecret"]?.string != nil)
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Self.victim)").status == 404)
            _ = try await server.push(Fixture.push(audience: #"{"aliases": ["user-42"]}"#))
            #expect(try await server.arrivals().map(\.token) == [Fixture.token(20)])
            // And the backend may delete a device it knows is gone.
            #expect(try await server.master.delete("/v1/apps/demo/devices/\(fresh)").status == 204)
        }
    }

    @Test func rotatingSecretsRetiresTheOldOnes() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Self.victim, token: Self.victimToken)
            let old = server.asDevice(Self.victim)
            let rotated = try await server.device.send(.POST, "/v1/apps/demo/devices/\(Self.victim)/secret", headers: old)
            let secret = try #require(try rotated.json()["deviceSecret"]?.string)
            #expect(secret.hasPrefix("tds_") && secret.utf8.count >= 4 + 43, "at least 256 random bits")
            #expect(try await server.device.send(.GET, "/v1/apps/demo/devices/\(Self.victim)", headers: old).status == 403)
            #expect(try await server.device.send(.GET, "/v1/apps/demo/devices/\(Self.victim)", headers: [("X-Tern-Device-Secret", secret)]).status == 200)

            // A new identity secret: tokens signed with the old one stop binding users.
            let oldSecret = server.identitySecret
            let patched = try await server.admin.patch("/v1/apps/demo", #"{"rotate": ["identitySecret"]}"#)
            let identity = try #require(try patched.json()["identitySecret"]?.string)
            #expect(identity.hasPrefix("tis_") && identity != oldSecret)
            #expect(try await server.admin.get("/v1/apps/demo").json()["identitySecret"] == nil, "shown once")
            let device = Fixture.device(5)
            let withOld = try await server.device.put(
                "/v1/apps/demo/devices/\(device)",
                Fixture.registration(token: Fixture.token(5), alias: "u", aliasToken: AliasTokens.mint(alias: "u", app: "demo", secret: oldSecret)))
            #expect(withOld.status == 403)
            let withNew = try await server.device.put(
                "/v1/apps/demo/devices/\(device)",
                Fixture.registration(token: Fixture.token(5), alias: "u", aliasToken: AliasTokens.mint(alias: "u", app: "demo", secret: identity)))
            #expect(withNew.status == 200)
            #expect(try withNew.json()["alias"]?.string == "u")
        }
    }

    @Test func anOpenAppBindsAnyAliasAndTheMasterSecretAlwaysMay() async throws {
        try await RouterHarness.withServer { server in
            let created = try await server.admin.post(
                "/v1/apps", #"{"id": "forum", "topic": "com.example.forum", "environment": "simulator", "userBinding": "open"}"#)
            #expect(created.status == 201)
            #expect(try created.json()["userBinding"]?.string == "open")
            let appKey = try #require(try created.json()["appKey"]?.string)
            let open = try await server.api.with(bearer: appKey).put(
                "/v1/apps/forum/devices/\(Fixture.device(1))", Fixture.registration(token: Fixture.token(1), alias: "anyone"))
            #expect(open.status == 200)
            #expect(try open.json()["alias"]?.string == "anyone")
            // The demo app is signed (the default); its backend binds any alias with the master secret.
            #expect(try await server.admin.get("/v1/apps/demo").json()["userBinding"]?.string == "signed")
            let byBackend = try await server.master.put("/v1/apps/demo/devices/\(Fixture.device(2))", Fixture.registration(token: Fixture.token(2), alias: "anyone"))
            #expect(byBackend.status == 200)
            let bad = try await server.admin.patch("/v1/apps/demo", #"{"userBinding": "loose"}"#)
            #expect(bad.status == 400)
            #expect(try bad.json()["field"]?.string == "userBinding")
        }
    }

    /// An app switched from open to signed binding: someone who bound their phone to a user while it was open must not
    /// keep that user's pushes and inbox. The bindings made without an alias token go at the switch; those made with
    /// one, or by the backend, stay.
    @Test func aliasesBoundWithoutProofWhileTheAppWasOpenAreUnboundWhenItBindsOnlyWithTokens() async throws {
        try await RouterHarness.withServer { server in
            #expect(try await server.admin.patch("/v1/apps/demo", #"{"userBinding": "open"}"#).status == 200)
            let token = AliasTokens.mint(alias: "alice", app: "demo", secret: server.identitySecret)
            // 1: an attacker's phone, bound to alice with nothing; 2: alice's, with her token; 3: bob's, by the backend.
            let attacker = try await server.device.put("/v1/apps/demo/devices/\(Fixture.device(1))", Fixture.registration(token: Fixture.token(1), alias: "alice"))
            #expect(attacker.status == 200, "\(attacker.text)")
            let attackerSecret = try #require(try attacker.json()["deviceSecret"]?.string)
            let alice = try await server.device.put(
                "/v1/apps/demo/devices/\(Fixture.device(2))", Fixture.registration(token: Fixture.token(2), alias: "alice", aliasToken: token))
            #expect(alice.status == 200, "\(alice.text)")
            let aliceSecret = try #require(try alice.json()["deviceSecret"]?.string)
            #expect(try await server.master.put("/v1/apps/demo/devices/\(Fixture.device(3))", Fixture.registration(token: Fixture.token(3), alias: "bob")).status == 200)
            // The attacker's phone registers again, as an app does at each launch: still unproven.
            #expect(try await server.device.send(
                .PUT, "/v1/apps/demo/devices/\(Fixture.device(1))", body: Fixture.registration(token: Fixture.token(1), alias: "alice"),
                headers: [("X-Tern-Device-Secret", attackerSecret)]).status == 200)

            let switched = try await server.admin.patch("/v1/apps/demo", #"{"userBinding": "signed"}"#)
            #expect(switched.status == 200, "\(switched.text)")
            #expect(try switched.json()["unboundAliases"]?.int == 1)
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(1))").json()["alias"] == nil)
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(2))").json()["alias"]?.string == "alice")
            #expect(try await server.master.get("/v1/apps/demo/devices/\(Fixture.device(3))").json()["alias"]?.string == "bob")
            let push = try await server.push(Fixture.push(audience: #"{"aliases": ["alice"]}"#))
            #expect(push[path: "counts.targeted"]?.int == 1, "only alice's own phone: \(push)")
            #expect(try await server.arrivals().last?.token == Fixture.token(2))

            // The attacker's phone cannot bind her again without her token; hers keeps her with none.
            let again = try await server.device.send(
                .PUT, "/v1/apps/demo/devices/\(Fixture.device(1))", body: Fixture.registration(token: Fixture.token(1), alias: "alice"),
                headers: [("X-Tern-Device-Secret", attackerSecret)])
            #expect(again.status == 403, "\(again.text)")
            #expect(try again.json()["field"]?.string == "aliasToken")
            #expect(try await server.device.send(
                .PUT, "/v1/apps/demo/devices/\(Fixture.device(2))", body: Fixture.registration(token: Fixture.token(2), alias: "alice"),
                headers: [("X-Tern-Device-Secret", aliceSecret)]).status == 200)
            // A PATCH that does not switch unbinds nothing, and says nothing of it.
            #expect(try await server.admin.patch("/v1/apps/demo", #"{"inboxCap": 10}"#).json()["unboundAliases"] == nil)
        }
    }

    /// A database from before device trust (schema version 4): its devices were given secrets derived from the
    /// server key. After the upgrade they prove themselves with those, their app keeps binding users as before
    /// ('open', with a warning at start), and the device API needs the secret as for any device.
    @Test func devicesFromBeforeTheUpgradeKeepWorkingWithTheirDerivedSecrets() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyBytes = (0..<32).map { UInt8($0 * 7 % 256) }
        try Data((Data(keyBytes).base64EncodedString() + "\n").utf8).write(to: folder.appendingPathComponent("tern.key"))
        // The old schema, with an app and one device as the old server wrote them.
        let store = try await SQLStore.openSQLite(path: folder.appendingPathComponent("tern.db").path, logger: .init(label: "test"))
        try await store.migrate(through: 4)
        let appKey = "tak_old-app-key"
        let serverKey = try ServerKey(bytes: keyBytes)
        let sealed = AppCredentialsVault(serverKey: serverKey).seal(SimulatorIdentity.credentials(serverKey))
        try await store.transaction { db in
            try await db.raw("""
                INSERT INTO apps (id, topic, environment, sealed_credentials, app_key_hash, master_secret_hash, created_at, updated_at)
                VALUES ('legacy', 'com.example.legacy', 'production', \(bind: Data(sealed)), \(bind: Data(SHA256.hash(data: Array(appKey.utf8)))),
                    \(bind: Data(SHA256.hash(data: Array("tms_old".utf8)))), 0, 0)
                """).run()
            try await db.raw("""
                INSERT INTO devices (app_id, device_id, token, environment, alias, token_registered_at, last_registered_at, created_at, updated_at)
                VALUES ('legacy', \(bind: Self.victim), \(bind: Self.victimToken), 'production', 'user-1', 0, 0, 0, 0)
                """).run()
        }
        try await store.close()
        // What the old server answered that device: HMAC-SHA256 of "device:app:id" under the server key.
        let mac = HMAC<SHA256>.authenticationCode(for: Array("device:legacy:\(Self.victim)".utf8), using: SymmetricKey(data: keyBytes))
        let derived = "tds_" + AliasTokens.base64URL(Array(mac))

        try await RouterHarness.withServer(folder: folder, configure: { $0.simulator.enabled = false; $0.demo.enabled = false }) { server in
            let client = server.api.with(bearer: appKey)
            let path = "/v1/apps/legacy/devices/\(Self.victim)"
            #expect(try await client.send(.GET, path, headers: [("X-Tern-Device-Secret", derived)]).status == 200)
            #expect(try await client.send(.GET, path, headers: [("X-Tern-Device-Secret", "tds_wrong")]).status == 403)
            #expect(try await client.get(path).status == 403)
            // Its next launch registers a new token with the derived secret; an open app binds as before.
            let again = try await client.send(
                .PUT, path, body: Fixture.registration(token: Fixture.token(2), alias: "user-1"), headers: [("X-Tern-Device-Secret", derived)])
            #expect(again.status == 200, "\(again.text)")
            #expect(try again.json()["token"]?.string == Fixture.token(2))
            #expect(try await client.put(path, Fixture.registration(token: Fixture.token(3))).status == 403)
            #expect(try await server.admin.get("/v1/apps/legacy").json()["userBinding"]?.string == "open")
            #expect(try await server.admin.get("/v1/apps/legacy").json()["hasIdentitySecret"] == .bool(false))
            // Switching to signed binding without an identity secret yet: a token is refused, saying how to make one.
            // Its user was bound before there were alias tokens: the switch unbinds the device, which binds again with one.
            let switched = try await server.admin.patch("/v1/apps/legacy", #"{"userBinding": "signed"}"#)
            #expect(switched.status == 200)
            #expect(try switched.json()["unboundAliases"]?.int == 1)
            let signed = try await client.send(
                .PUT, path, body: Fixture.registration(token: Fixture.token(2), alias: "user-2", aliasToken: "a.b.c"), headers: [("X-Tern-Device-Secret", derived)])
            #expect(signed.status == 403)
            #expect(try signed.json()["message"]?.string?.contains("identitySecret") == true)
        }
    }
}

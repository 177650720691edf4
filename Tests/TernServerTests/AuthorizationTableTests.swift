import Foundation
import NIOHTTP1
import TernAPNs
import TernTestSupport
import Testing

@testable import TernServer

/// The README's authorization table ("Who may do what"), cell by cell: as values (the one function that decides),
/// then through the API, where each cell is a real request (to the server's router) on a device of its own and a
/// refused one changes nothing.
struct AuthorizationTableTests {
    /// How a request presents itself: the master secret, the app key with the device's secret, without it, with
    /// another's, or no bearer at all.
    enum Credential: String, CaseIterable, Sendable {
        case master
        case appKeyRightSecret
        case appKeyNoSecret
        case appKeyWrongSecret
        case noBearer
    }

    /// The table as the README states it: one row a call; the master secret may make every call.
    static let table: [DeviceCall: (right: Access, none: Access, wrong: Access)] = [
        .registerNew: (.allowed, .allowed, .allowed),
        .registerExisting: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .read: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .delete: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .logout: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .tags: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .rotateSecret: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .inbox: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .tokenHistory: (.needsMaster, .needsMaster, .needsMaster),
        .list: (.needsMaster, .needsMaster, .needsMaster),
        .connect: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .open: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .ack: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .pushToken: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .activityToken: (.allowed, .needsDeviceSecret, .wrongDeviceSecret),
        .readChannel: (.allowed, .allowed, .allowed),
    ]

    static func expected(_ call: DeviceCall, _ credential: Credential) -> Access? {
        let row = table[call]!
        switch credential {
        case .master: return .allowed
        case .appKeyRightSecret: return row.right
        case .appKeyNoSecret: return row.none
        case .appKeyWrongSecret: return row.wrong
        case .noBearer: return nil
        }
    }

    /// The broadcast channel the `readChannel` cells read.
    static func channel(_ server: RoutedServer) async throws -> String {
        let made = try await server.master.put("/v1/apps/demo/broadcast-channels/cells", #"{"storage": "none"}"#)
        #expect(made.status == 200 || made.status == 201, "\(made.text)")
        return "cells"
    }

    @Test func theTableHasARowForEveryCall() {
        #expect(Set(Self.table.keys) == Set(DeviceCall.allCases))
    }

    @Test(arguments: DeviceCall.allCases, SecretProof.allCases)
    func theDecidingFunctionAnswersEachCellAsTheTableSays(call: DeviceCall, proof: SecretProof) {
        let row = Self.table[call]!
        #expect(Authorization.access(call, caller: .master, proof: proof) == .allowed)
        let appKey: Access = switch proof {
        case .right: row.right
        case .none: row.none
        case .wrong: row.wrong
        }
        #expect(Authorization.access(call, caller: .appKey, proof: proof) == appKey)
    }

    @Test(arguments: DeviceCall.allCases, Credential.allCases)
    func eachCellOverHTTP(call: DeviceCall, credential: Credential) async throws {
        let server = try await RouterHarness.shared.value
        // A device of this cell's own, bound to a user of its own, registered by the backend.
        let device = UUID().uuidString.lowercased()
        let alias = "cell-\(device.prefix(8))"
        let token = String(repeating: "c", count: 56) + device.prefix(8)
        var secret = ""
        if call != .registerNew {
            let made = try await server.master.put("/v1/apps/demo/devices/\(device)", Fixture.registration(token: token, alias: alias))
            #expect(made.status == 200, "\(made.text)")
            secret = try #require(try made.json()["deviceSecret"]?.string)
        }
        let before = try await server.master.get("/v1/apps/demo/devices/\(device)").text

        let client: RouterTestClient
        var headers: [(String, String)] = []
        switch credential {
        case .master: client = server.master
        case .appKeyRightSecret: client = server.device; headers = [("X-Tern-Device-Secret", secret)]
        case .appKeyNoSecret: client = server.device
        case .appKeyWrongSecret: client = server.device; headers = [("X-Tern-Device-Secret", "tds_" + String(repeating: "x", count: 43))]
        case .noBearer: client = server.api
        }
        let newToken = String(repeating: "d", count: 56) + String(token.suffix(8))
        let requests: [(HTTPMethod, String, String?, Int)] = switch call {
        case .registerNew, .registerExisting: [(.PUT, "/v1/apps/demo/devices/\(device)", Fixture.registration(token: newToken), 200)]
        case .read: [(.GET, "/v1/apps/demo/devices/\(device)", nil, 200)]
        case .delete: [(.DELETE, "/v1/apps/demo/devices/\(device)", nil, 204)]
        case .logout: [(.DELETE, "/v1/apps/demo/devices/\(device)/alias", nil, 200)]
        case .tags: [(.PATCH, "/v1/apps/demo/devices/\(device)/tags", #"{"add": ["vip"]}"#, 200)]
        case .rotateSecret: [(.POST, "/v1/apps/demo/devices/\(device)/secret", nil, 200)]
        case .inbox: [
            (.GET, "/v1/apps/demo/inbox?deviceId=\(device)", nil, 200),
            (.POST, "/v1/apps/demo/inbox/read?deviceId=\(device)", #"{"upTo": "00000000-0000-4000-8000-000000000000"}"#, 200),
            (.DELETE, "/v1/apps/demo/inbox/00000000-0000-4000-8000-000000000000?deviceId=\(device)", nil, 404),
        ]
        case .tokenHistory: [(.GET, "/v1/apps/demo/devices/\(device)/tokens", nil, 200)]
        case .list: [(.GET, "/v1/apps/demo/devices?alias=\(alias)", nil, 200)]
        // Without an upgrade, the credentials are checked as the WebSocket's would be, then 426.
        case .connect: [(.GET, "/v1/apps/demo/devices/\(device)/connect", nil, 426)]
        case .open: [(.POST, "/v1/apps/demo/devices/\(device)/opens", #"{"messageId": "00000000-0000-4000-8000-000000000000"}"#, 404)]
        case .ack: [(.POST, "/v1/apps/demo/devices/\(device)/acks", #"{"ids": ["00000000-0000-4000-8000-000000000000"]}"#, 200)]
        // Set, then removed: what the device reads afterwards is as before, so the change is checked by the answers.
        case .pushToken: [
            (.PUT, "/v1/apps/demo/devices/\(device)/push-tokens/voip", #"{"token": "\#(String(repeating: "5", count: 56) + token.suffix(8))"}"#, 200),
            (.DELETE, "/v1/apps/demo/devices/\(device)/push-tokens/voip", nil, 204),
        ]
        case .activityToken: [
            (.PUT, "/v1/apps/demo/devices/\(device)/activities/match-7", #"{"token": "\#(String(repeating: "6", count: 56) + token.suffix(8))"}"#, 200),
            (.DELETE, "/v1/apps/demo/devices/\(device)/activities/match-7", nil, 204),
        ]
        // Made by the backend first (its PUT answers 200 when an earlier cell made it).
        case .readChannel: [(.GET, "/v1/apps/demo/broadcast-channels/\(try await Self.channel(server))", nil, 200)]
        }

        let expected = Self.expected(call, credential)
        for (method, path, body, success) in requests {
            let response = try await client.send(method, path, body: body, headers: headers)
            switch expected {
            case nil:
                #expect(response.status == 401, "\(method) \(path): \(response.text)")
            case .allowed?:
                #expect(response.status == success, "\(method) \(path): \(response.text)")
            case let refused?:
                #expect(response.status == 403, "\(method) \(path): \(response.text)")
                let error = try response.json()
                #expect(error["error"]?.string == "forbidden")
                #expect(error["message"]?.string == Authorization.refusal(refused, call: call).message)
            }
        }
        let after = try await server.master.get("/v1/apps/demo/devices/\(device)").text
        let readOnly: Set<DeviceCall> = [.read, .inbox, .tokenHistory, .list, .connect, .open, .ack, .pushToken, .activityToken, .readChannel]
        if call == .rotateSecret {
            // The device looks the same; what changed is whether its old secret still works.
            let old = try await server.device.send(.GET, "/v1/apps/demo/devices/\(device)", headers: [("X-Tern-Device-Secret", secret)])
            #expect(old.status == (expected == .allowed ? 403 : 200), "the old secret after a \(credential) rotation: \(old.text)")
            #expect(after == before)
        } else if expected != .allowed || readOnly.contains(call) {
            #expect(after == before, "a refused or read-only call changed the device")
        } else {
            #expect(after != before, "an allowed change left the device as it was")
        }
    }
}

import Foundation
import TernAPNs
import Testing

@testable import TernSimulator

#if canImport(Glibc)
import Glibc
#endif

/// A simulator given a channels file keeps its broadcast channels across restarts, as Apple does: what it answered
/// is what the file says, a line cut short is left out, and a change the file would not take is refused.
@Suite("Broadcast channels kept across restarts")
struct ChannelJournalTests {
    static let bundle = BroadcastChannelTests.bundle
    static let create = #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#
    static let a = "AAAAAAAAAAAAAAAAAAAAAA=="
    static let b = "BBBBBBBBBBBBBBBBBBBBBB=="
    static let c = "CCCCCCCCCCCCCCCCCCCCCC=="

    static func line(_ op: String, _ id: String, bundle: String = bundle, stores: Bool? = false) -> String {
        let flag = stores.map { #","storesMessages":\#($0)"# } ?? ""
        return #"{"bundleID":"\#(bundle)","id":"\#(id)","op":"\#(op)"\#(flag)}"#
    }

    static func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-channels-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(folder)
    }

    @Test("the lines replay to the channels they leave, in the order they were made; a line cut short or out of form is left out")
    func replay() {
        let text = [
            Self.line("create", Self.a, stores: true),
            Self.line("create", Self.b),
            Self.line("create", Self.c, bundle: "com.example.other"),
            Self.line("delete", Self.a, stores: nil),
            Self.line("create", Self.a),  // made again after its deletion: now the newest
            Self.line("create", Self.b),  // the same id twice
            Self.line("create", "not base64!"),
            Self.line("create", Self.c, stores: nil),  // made without its storage policy
            Self.line("delete", "DDDDDDDDDDDDDDDDDDDDDD==", stores: nil),  // none by that id: nothing to do
            String(Self.line("create", "EEEEEEEEEEEEEEEEEEEEEE==").prefix(30)),  // the process killed mid-line
        ].joined(separator: "\n")
        let contents = ChannelJournal.replay(Data(text.utf8))
        #expect(contents.channels[Self.bundle]?.map(\.id) == [Self.b, Self.a])
        #expect(contents.channels[Self.bundle]?.map(\.storesMessages) == [false, false])
        #expect(contents.channels["com.example.other"]?.map(\.id) == [Self.c])
        #expect(contents.linesSkipped == 4)
        #expect(ChannelJournal.replay(Data()).channels.isEmpty)
    }

    @Test("channels made over the wire are there after a restart, deleted ones are not, and the file is owner-only and compacted")
    func channelsOutliveARestart() async throws {
        try await Self.withFolder { folder in
            let file = folder.appendingPathComponent("channels.jsonl")
            let (kept, deleted) = try await withSimulator({ $0.channelsFile = file }) { sim in
                let client = try await sim.connect()
                var ids: [String] = []
                for _ in 0..<3 {
                    let made = try await client.send(BroadcastChannelTests.manage(sim, "POST", "channels", body: Self.create))
                    #expect(made.status == 201)
                    ids.append(try #require(made.header("apns-channel-id")))
                }
                #expect(try await client.send(BroadcastChannelTests.manage(sim, "DELETE", "channels", channel: ids[1])).status == 204)
                return ([ids[0], ids[2]], ids[1])
            }
            // Three lines made and one deleted, appended as they happened.
            #expect(try String(contentsOf: file, encoding: .utf8).split(separator: "\n").count == 4)

            try await withSimulator({ $0.channelsFile = file }) { sim in
                #expect(sim.state.channels().map(\.id) == kept)
                #expect(sim.state.channels().map(\.storesMessages) == [true, true])
                let client = try await sim.connect()
                #expect(try await client.send(BroadcastChannelTests.broadcast(sim, channel: kept[1])).status == 200)
                BroadcastChannelTests.expectRefusal(
                    try await client.send(BroadcastChannelTests.broadcast(sim, channel: deleted)), 400, "ChannelNotRegistered")
            }
            #expect(try String(contentsOf: file, encoding: .utf8).split(separator: "\n").count == 2, "rewritten with the two it holds")
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            #expect(!FileManager.default.fileExists(atPath: file.path + ".new"))
        }
    }

    @Test("a reset forgets the channels for the next start too")
    func aResetEmptiesTheFile() async throws {
        try await Self.withFolder { folder in
            let file = folder.appendingPathComponent("channels.jsonl")
            try await withSimulator({ $0.channelsFile = file }) { sim in
                let client = try await sim.connect()
                #expect(try await client.send(BroadcastChannelTests.manage(sim, "POST", "channels", body: Self.create)).status == 201)
                sim.state.reset()
            }
            try await withSimulator({ $0.channelsFile = file }) { sim in
                #expect(sim.state.channels().isEmpty)
            }
        }
    }

    @Test("a start that cannot keep the file says where and why, and listens on nothing")
    func aFileThatCannotBeKeptStopsTheStart() async throws {
        try await Self.withFolder { folder in
            // A folder that is not there, and a folder where the file should be.
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("channels.jsonl"), withIntermediateDirectories: false)
            for (name, reason) in [("missing/channels.jsonl", "No such file or directory"), ("channels.jsonl", "Is a directory")] {
                var configuration = try APNsSimulator.Configuration()
                configuration.channelsFile = folder.appendingPathComponent(name)
                let simulator = APNsSimulator(configuration: configuration)
                let error = await #expect(throws: ChannelJournalError.self) { try await simulator.run() }
                #expect(error?.description == "simulator: cannot keep broadcast channels in \(folder.path)/\(name): \(reason)")
                await #expect(throws: ChannelJournalError.self) { try await simulator.waitUntilReady() }
                #expect(simulator.port == 0)
            }
        }
    }

    @Test("two simulators never keep channels in one file: the second is told so, and may once the first has let go")
    func oneSimulatorAFile() async throws {
        try await Self.withFolder { folder in
            let file = folder.appendingPathComponent("channels.jsonl")
            do {
                let (first, _) = try ChannelJournal.load(from: file)
                let error = #expect(throws: ChannelJournalError.self) { try ChannelJournal.load(from: file) }
                #expect(error?.reason == "another simulator keeps its channels there; stop it, or give this one a state folder of its own")
                #expect(first.append(.init(op: .create, bundleID: Self.bundle, id: Self.a, storesMessages: true)))
            }
            let (_, contents) = try ChannelJournal.load(from: file)
            #expect(contents.channels[Self.bundle]?.map(\.id) == [Self.a], "the first let go when it went")
        }
    }

    @Test("a channel the file would not take (a full disk) is answered InternalServerError and neither made nor deleted")
    func aChangeTheFileWouldNotTakeIsRefused() async throws {
        try await withSimulator { sim in
            sim.state.keepChannels(
                with: ChannelJournal(descriptor: open("/dev/full", O_WRONLY | O_CLOEXEC)),
                channels: [Self.bundle: [SimulatedChannel(bundleID: Self.bundle, id: Self.a, storesMessages: false)]])
            let client = try await sim.connect()
            BroadcastChannelTests.expectRefusal(
                try await client.send(BroadcastChannelTests.manage(sim, "POST", "channels", body: Self.create)), 500, "InternalServerError")
            BroadcastChannelTests.expectRefusal(
                try await client.send(BroadcastChannelTests.manage(sim, "DELETE", "channels", channel: Self.a)), 500, "InternalServerError")
            #expect(sim.state.channels().map(\.id) == [Self.a])
        }
    }
}

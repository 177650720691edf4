import Foundation
import Testing

/// Runs the `tern` executable built next to this test bundle, and other commands (curl), with a timeout.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Commands {
    /// `.build/<config>/tern`: the test bundle lives in the same folder.
    static var tern: String {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        var candidate = folder
        // On Linux the bundle is an executable in the products folder; elsewhere it may be nested deeper.
        for _ in 0..<4 {
            let path = candidate.appendingPathComponent("tern").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
            candidate = candidate.deletingLastPathComponent()
        }
        return folder.appendingPathComponent("tern").path
    }

    /// Runs a command to completion (killed after `timeout` seconds) and collects its output.
    /// `environment` adds to (or overrides) this process's variables; `stdin` is written to the command's input.
    static func run(
        _ executable: String, _ arguments: [String], timeout: TimeInterval = 30, environment: [String: String] = [:],
        stdin: Data? = nil
    ) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(stdin)
            try? input.fileHandleForWriting.close()
        }
        let killer = DispatchWorkItem { process.terminate() }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        return CommandResult(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func curl(_ arguments: [String]) throws -> CommandResult {
        try run("/usr/bin/env", ["curl", "--silent", "--show-error", "--max-time", "10"] + arguments)
    }
}

/// A `tern simulator` process, started on free ports, stopped with SIGINT.
final class SimulatorProcess {
    let process = Process()
    let stateDirectory: URL
    private let output = Pipe()
    private(set) var banner = ""
    private(set) var port = 0
    private(set) var controlPort = 0
    private(set) var legacyPort = 0
    private(set) var feedbackPort = 0

    init(arguments: [String] = []) throws {
        stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("tern-cli-\(UUID().uuidString)")
        process.executableURL = URL(fileURLWithPath: Commands.tern)
        process.arguments =
            ["simulator", "--port", "0", "--control-port", "0", "--legacy-port", "0", "--feedback-port", "0", "--state-dir", stateDirectory.path]
            + arguments
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        try readBanner()
    }

    /// Reads stdout until the banner's last line, within 20 seconds.
    private func readBanner() throws {
        let deadline = Date().addingTimeInterval(20)
        let handle = output.fileHandleForReading
        while !banner.contains("Press Ctrl-C"), Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            banner += String(decoding: chunk, as: UTF8.self)
        }
        port = Self.port(after: "https://127.0.0.1:", in: banner) ?? 0
        controlPort = Self.port(after: "http://127.0.0.1:", in: banner) ?? 0
        legacyPort = Self.port(after: "legacy gateway   127.0.0.1:", in: banner) ?? 0
        feedbackPort = Self.port(after: "feedback         127.0.0.1:", in: banner) ?? 0
        guard port > 0, controlPort > 0 else {
            process.terminate()
            throw CLITestError("the simulator printed no ports; output was:\n\(banner)")
        }
    }

    private static func port(after prefix: String, in text: String) -> Int? {
        guard let range = text.range(of: prefix) else { return nil }
        return Int(text[range.upperBound...].prefix(while: \.isNumber))
    }

    /// Runs `tern simulator issue-cert` against this simulator's state folder; returns the PEM paths.
    func issueCertificate(topic: String = "com.example.app") throws -> (certificate: String, privateKey: String) {
        let issue = try Commands.run(Commands.tern, ["simulator", "issue-cert", "--topic", topic, "--state-dir", stateDirectory.path])
        guard issue.status == 0 else { throw CLITestError("issue-cert failed: \(issue.stderr)") }
        return (
            stateDirectory.appendingPathComponent("\(topic).pem").path,
            stateDirectory.appendingPathComponent("\(topic)-key.pem").path
        )
    }

    /// SIGINT, as Ctrl-C; returns the exit status.
    func interrupt() -> Int32 {
        process.interrupt()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { process.terminate() }
        try? FileManager.default.removeItem(at: stateDirectory)
    }
}

struct CLITestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

import Foundation
import Testing

/// `tern bench` end to end: an in-process simulator, the client over real TLS, the summary.
struct BenchCommandTests {
    @Test func aSmallRunDeliversEverythingAndPrintsTheSummary() throws {
        let result = try Commands.run(Commands.tern, ["bench", "-n", "2000", "--connections", "2"], timeout: 120)
        #expect(result.status == 0, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stdout.contains("result      delivered 2,000  rejected 0  errors 0"), "stdout: \(result.stdout)")
        #expect(result.stdout.contains(" notifications/s"), "stdout: \(result.stdout)")
        for part in ["p50 ", "p99 ", "p99.9 ", "max ", "peak RSS "] {
            #expect(result.stdout.contains(part), "no \(part) in: \(result.stdout)")
        }
    }

    @Test func aLegacyRunDeliversEverythingOverTheBinaryGateway() throws {
        let result = try Commands.run(
            Commands.tern, ["bench", "--legacy", "--legacy-format", "enhanced", "-n", "25000", "--connections", "2"], timeout: 120)
        #expect(result.status == 0, "stdout: \(result.stdout) stderr: \(result.stderr)")
        #expect(result.stdout.contains("2 gateway connection(s), enhanced format"), "stdout: \(result.stdout)")
        #expect(result.stdout.contains("result      delivered 25,000  rejected 0  errors 0  connections opened 2"), "stdout: \(result.stdout)")
        #expect(result.stdout.contains("gateway     ") && result.stdout.contains("taken by the simulator  (all 25,000 in"), "stdout: \(result.stdout)")
    }

    @Test func badOptionsAreRefused() throws {
        let result = try Commands.run(Commands.tern, ["bench", "-n", "10", "--port", "2197"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--port goes with --host"), "stderr: \(result.stderr)")
        for (arguments, message) in [
            (["--legacy", "--legacy-format", "binary"], "--legacy-format must be frame, enhanced or simple, not 'binary'"),
            (["--legacy-format", "simple"], "--legacy-format goes with --legacy"),
            (["--legacy", "--concurrency", "10"], "--concurrency goes without --legacy"),
            (["--legacy", "--host", "127.0.0.1"], "--host goes without it"),
        ] {
            let refused = try Commands.run(Commands.tern, ["bench", "-n", "10"] + arguments)
            #expect(refused.status == 64, "\(arguments): \(refused.status)")
            #expect(refused.stderr.contains(message), "\(arguments) stderr: \(refused.stderr)")
        }
    }
}

import ArgumentParser

@main
struct Tern: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tern",
        abstract: "Tern: a self-hosted push notification service for iOS apps.",
        discussion: """
            Start here:
              tern serve                the push service: apps, devices, pushes (SQLite,
                                        a built-in APNs simulator and a demo app)
              tern simulator            run a local APNs (HTTP/2, TLS) to develop and test against
              tern token --help         sign a provider token (JWT) for curl or h2load
              tern send --help          send one notification to APNs or the simulator
                                        (--legacy: over the binary gateway, port 2195)
              tern feedback --help      read the legacy feedback service's dead tokens
              tern bench --help         measure the APNs client against a simulator
            """,
        subcommands: [ServeCommand.self, SimulatorCommand.self, TokenCommand.self, SendCommand.self, FeedbackCommand.self, BenchCommand.self, DeviceCommand.self]
    )

    /// ArgumentParser's own `main()`, except that a first word that is no command is an error whatever follows it:
    /// `tern sevre --help` printed the overview and exited 0, as if the word were not there, so a script with a
    /// mistyped command went on as if it had worked.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let first = arguments.first, !first.hasPrefix("-"), first != "help",
            !configuration.subcommands.contains(where: { $0.configuration.commandName == first })
        {
            exit(withError: ValidationError("'\(first)' is not a tern command (see tern --help)"))
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

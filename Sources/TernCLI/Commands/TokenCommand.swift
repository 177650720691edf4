import ArgumentParser
import Foundation
import TernAPNs

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a signed APNs provider token (JWT) for a .p8 key.",
        discussion: """
            The token is valid for one hour. APNs refuses a connection that changes token more than once every \
            20 minutes, so reuse one token per connection rather than signing one per request.

            Example (against `tern simulator`, whose demo key lives in .tern/simulator):
              tern token --key-file .tern/simulator/SIMKEY0001.p8 --key-id SIMKEY0001 --team-id SIMTEAM001
            """
    )

    @Option(name: .long, help: "The .p8 file (PKCS#8 P-256 private key) from the developer portal.")
    var keyFile: String

    @Option(name: .long, help: "The key's 10-character id.")
    var keyID: String

    @Option(name: .long, help: "Your 10-character team id.")
    var teamID: String

    func run() throws {
        let key: APNsSigningKey
        do {
            key = try loadSigningKey(file: keyFile, keyID: keyID, teamID: teamID)
        } catch {
            throw ValidationError(error.description)
        }
        print(try key.makeToken(issuedAt: Date()).value)
    }
}

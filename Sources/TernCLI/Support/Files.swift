import ArgumentParser
import Foundation
import TernAPNs

/// Reads a text file named on the command line, with an error that names the option.
func readTextFile(_ path: String, option: String) throws -> String {
    do {
        return try String(contentsOfFile: path, encoding: .utf8)
    } catch {
        throw ValidationError("\(option): cannot read '\(path)'")
    }
}

/// A path as the user should see it: relative to the working directory when it lies below it.
func displayPath(_ url: URL) -> String {
    let cwd = FileManager.default.currentDirectoryPath
    let path = url.standardizedFileURL.path
    return path.hasPrefix(cwd + "/") ? String(path.dropFirst(cwd.count + 1)) : path
}

/// Bad command-line input, naming the option at fault: printed as `--option: message`.
struct CommandInputError: Error, CustomStringConvertible {
    let option: String
    let message: String

    init(_ option: String, _ message: String) {
        self.option = option
        self.message = message
    }

    var description: String { "\(option): \(message)" }
}

/// Reads a file named by `option`.
func readInputFile(_ path: String, option: String) throws(CommandInputError) -> String {
    do {
        return try String(contentsOfFile: path, encoding: .utf8)
    } catch {
        throw CommandInputError(option, "cannot read '\(path)'")
    }
}

/// Loads a `.p8` provider-token key given as `--key-file/--key-id/--team-id`; the error names the option at
/// fault and never contains the file's contents.
func loadSigningKey(file: String, keyID: String, teamID: String) throws(CommandInputError) -> APNsSigningKey {
    let pem = try readInputFile(file, option: "--key-file")
    // Apple's are 10 letters or digits, and APNs refuses a token naming any other: said here, before anything is sent.
    for (option, value, what) in [("--key-id", keyID, "key id"), ("--team-id", teamID, "team id")]
    where value.count != 10 || !value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
        throw CommandInputError(option, "the \(what) is 10 letters or digits (from the developer portal), not '\(value)'")
    }
    do {
        return try APNsSigningKey(pem: pem, keyID: keyID, teamID: teamID)
    } catch let error as APNsCredentialError {
        if error.message.hasPrefix("key id") { throw CommandInputError("--key-id", error.message) }
        if error.message.hasPrefix("team id") { throw CommandInputError("--team-id", error.message) }
        throw CommandInputError("--key-file", "\(file): \(error.message)")
    } catch {
        throw CommandInputError("--key-file", "\(file): not a usable key")
    }
}

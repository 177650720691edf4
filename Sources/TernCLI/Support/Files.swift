import ArgumentParser
import Foundation

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

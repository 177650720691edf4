import Foundation
import TernSimulator

/// `openssl pkcs12 -export` of a PEM certificate and its key, with `passphrase`: a .p12 bundle as Keychain Access
/// exports a push certificate.
public func pkcs12Bundle(_ certificate: IssuedCertificate, passphrase: String) throws -> [UInt8] {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tern-p12-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let (certificateURL, keyURL) = try certificate.write(to: directory, name: "push")
    let bundleURL = directory.appendingPathComponent("push.p12")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
        "openssl", "pkcs12", "-export", "-in", certificateURL.path, "-inkey", keyURL.path, "-out", bundleURL.path,
        "-passout", "pass:\(passphrase)",
    ]
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    guard process.terminationStatus == 0 else { throw PKCS12Failure(description: "openssl pkcs12 failed: \(message)") }
    return Array(try Data(contentsOf: bundleURL))
}

/// `openssl pkcs12` did not make the bundle.
public struct PKCS12Failure: Error, CustomStringConvertible {
    public var description: String
}

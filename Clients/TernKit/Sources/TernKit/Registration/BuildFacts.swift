import Foundation

/// Which APNs environment issued this build's tokens, read from the build itself: a development-signed build gets
/// sandbox tokens, which APNs refuses in production (`BadDeviceToken`), and the other way round.
public enum APNsBuildEnvironment {
    /// `development` or `production`.
    ///
    /// - Parameters:
    ///   - provisioningProfile: the build's embedded provisioning profile (`embedded.mobileprovision`), if it has
    ///     one. App Store and TestFlight builds have none, and their tokens are production tokens.
    ///   - isSimulator: the simulator's tokens are sandbox tokens.
    public static func environment(provisioningProfile: Data?, isSimulator: Bool) -> String {
        if isSimulator { return "development" }
        guard let profile = provisioningProfile, let entitlements = entitlements(in: profile) else { return "production" }
        // iOS names the entitlement `aps-environment`, macOS `com.apple.developer.aps-environment`.
        let value = (entitlements["aps-environment"] ?? entitlements["com.apple.developer.aps-environment"]) as? String
        return value == "development" ? "development" : "production"
    }

    /// This build's environment (the bundle's profile), read once per bundle.
    public static func current(bundle: Bundle = .main) -> String {
        if let known = cache.withLock({ $0[bundle.bundlePath] }) { return known }
        let environment = read(bundle)
        cache.withLock { $0[bundle.bundlePath] = environment }
        return environment
    }

    private static let cache = Locked<[String: String]>([:])

    private static func read(_ bundle: Bundle) -> String {
        #if targetEnvironment(simulator)
        let isSimulator = true
        #else
        let isSimulator = false
        #endif
        let profileURL =
            bundle.url(forResource: "embedded", withExtension: "mobileprovision")
            ?? bundle.bundleURL.appendingPathComponent("Contents/embedded.provisionprofile")
        return environment(provisioningProfile: try? Data(contentsOf: profileURL), isSimulator: isSimulator)
    }

    /// The `Entitlements` of a provisioning profile: a property list inside a signed (CMS) envelope, found by its
    /// XML markers without taking the envelope apart.
    static func entitlements(in profile: Data) -> [String: Any]? {
        guard let start = profile.range(of: Data("<?xml".utf8)),
            let end = profile.range(of: Data("</plist>".utf8), in: start.lowerBound..<profile.endIndex)
        else { return nil }
        let plist = profile.subdata(in: start.lowerBound..<end.upperBound)
        guard let root = try? PropertyListSerialization.propertyList(from: plist, options: [], format: nil) as? [String: Any] else { return nil }
        return root["Entitlements"] as? [String: Any]
    }
}

extension RegistrationFacts {
    /// The facts of this installation now: the token as `didRegisterForRemoteNotificationsWithDeviceToken` gave
    /// it, the build's APNs environment, the app's version (`1.4 (87)`), the user's language (`ko-KR`) and time zone.
    public static func current(deviceToken: Data, bundle: Bundle = .main) -> RegistrationFacts {
        let short = bundle.object(forInfoDictionaryKey: "CFBundleShortVersionString") as? String
        let build = bundle.object(forInfoDictionaryKey: "CFBundleVersion") as? String
        let version: String? =
            switch (short, build) {
            case (let short?, let build?) where short != build: "\(short) (\(build))"
            case (let short?, _): short
            case (nil, let build?): build
            case (nil, nil): nil
            }
        return RegistrationFacts(
            token: hex(deviceToken), environment: APNsBuildEnvironment.current(bundle: bundle), appVersion: version.map { String($0.prefix(64)) },
            locale: locale(preferredLanguages: Locale.preferredLanguages, current: .current), timezone: TimeZone.current.identifier)
    }

    /// The locale Tern picks a push's language by: the user's first preferred language (`ko-KR`, `zh-Hans-CN`), else
    /// the app's locale, with `-` between its parts.
    ///
    /// Not `Locale.current` first: its language is the best of the app's own localizations, so a Korean user of an
    /// app localized only in English has `en_KR`, and would get a push's English text where it gives Korean.
    static func locale(preferredLanguages: [String], current: Locale) -> String {
        (preferredLanguages.first ?? current.identifier).replacingOccurrences(of: "_", with: "-")
    }
}

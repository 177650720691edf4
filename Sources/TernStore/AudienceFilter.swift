import Foundation

/// Which of an audience's devices a push goes to, by what each registered (a push's `audience.filters`): an app
/// version at least one and below another, one of some languages, a registration since some time. A device passes
/// when it meets every condition given, as it is registered when its part of the audience is handed out; a device
/// that registered no app version or no locale meets no condition on it.
public struct AudienceFilter: Sendable, Equatable {
    /// The app versions taken: from `atLeast` (included) to `below` (excluded); either may be left out.
    public let appVersions: VersionRange?
    /// Language tags (``LanguageTags``): a device passes when its locale's lookup finds one of them, as it would find
    /// one of a push's localizations (`zh-Hans` takes `zh-Hans-CN` and `zh-CN`, `ko` takes `ko-KR`).
    public let languages: [String]?
    /// The languages as the lookup compares them (``LanguageTags/key(_:)``), made once rather than for each device.
    private let languageKeys: Set<String>?
    /// The devices registered at or after this time: the ones in use since about a day before it (an app built with
    /// TernKit registers at launch when a day has passed since its last registration, or sooner when something
    /// changed).
    public let registeredSince: Date?

    public struct VersionRange: Sendable, Equatable {
        public var atLeast: AppVersion?
        public var below: AppVersion?

        public init(atLeast: AppVersion?, below: AppVersion?) {
            self.atLeast = atLeast
            self.below = below
        }

        public func contains(_ version: AppVersion) -> Bool {
            if let atLeast, version < atLeast { return false }
            if let below, version >= below { return false }
            return true
        }
    }

    public init(appVersions: VersionRange? = nil, languages: [String]? = nil, registeredSince: Date? = nil) {
        self.appVersions = appVersions
        self.languages = languages
        languageKeys = languages.map { Set($0.map(LanguageTags.key)) }
        self.registeredSince = registeredSince
    }

    /// Whether a device registered so passes.
    public func admits(locale: String?, appVersion: String?, lastRegisteredAt: Date?) -> Bool {
        admits(lastRegisteredAt: lastRegisteredAt) && admits(locale: locale, appVersion: appVersion)
    }

    /// Whether a device last registered then passes the condition on time (any, without one).
    public func admits(lastRegisteredAt: Date?) -> Bool {
        guard let registeredSince else { return true }
        guard let lastRegisteredAt else { return false }
        return lastRegisteredAt >= registeredSince
    }

    /// Whether the conditions on the app version and the language are met (all, without any): what a device's
    /// registration says apart from its time, which many devices share.
    public func admits(locale: String?, appVersion: String?) -> Bool {
        if let appVersions {
            guard let version = appVersion.flatMap(AppVersion.init(registered:)), appVersions.contains(version) else { return false }
        }
        if let languageKeys {
            guard let locale, LanguageTags.lookup(LanguageTags.key(locale)).contains(where: languageKeys.contains) else { return false }
        }
        return true
    }

    /// Whether any condition looks at the app version or the language.
    public var looksAtVersionOrLanguage: Bool { appVersions != nil || languages != nil }

    /// Whether the device passes as it is registered now.
    public func admits(_ device: DeviceRecord) -> Bool {
        admits(locale: device.locale, appVersion: device.appVersion, lastRegisteredAt: device.lastRegisteredAt)
    }
}

/// An app's version as its devices register it (TernKit sends `CFBundleShortVersionString`): numbers joined by dots,
/// compared number by number, with missing ones read as 0 (`2.3` is `2.3.0`, and below `2.10`).
public struct AppVersion: Sendable, Comparable, CustomStringConvertible {
    /// The numbers, without trailing zeros.
    public let numbers: [Int]
    public let description: String

    /// The most numbers a version has, and the longest each is.
    static let mostNumbers = 4
    static let longestNumber = 9

    public static let rule = "an app version: 1-4 numbers of up to 9 digits, joined by '.' (2, 2.3, 2.3.1)"

    /// A version as a push's filter gives it, exactly as ``rule`` says.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...Self.mostNumbers).contains(parts.count) else { return nil }
        var numbers: [Int] = []
        for part in parts {
            guard (1...Self.longestNumber).contains(part.utf8.count), part.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let number = Int(part)
            else { return nil }
            numbers.append(number)
        }
        while numbers.last == 0 { numbers.removeLast() }
        self.numbers = numbers
        description = text
    }

    /// The version a device registered: the numbers and dots it begins with (`2.3.1 (45)` is `2.3.1`, `2.3-beta` is
    /// `2.3`); nil if it begins with no number.
    public init?(registered text: String) {
        var end = text.startIndex
        var numbers = 0
        var digits = 0
        for (index, character) in zip(text.indices, text) {
            if character.isASCII, character.isNumber {
                if digits == 0 { numbers += 1 }
                digits += 1
            } else if character == ".", digits > 0, numbers < Self.mostNumbers {
                digits = 0
                continue
            } else {
                break
            }
            guard digits <= Self.longestNumber else { return nil }
            end = text.index(after: index)
        }
        guard end > text.startIndex else { return nil }
        self.init(String(text[..<end]))
    }

    public static func < (lhs: AppVersion, rhs: AppVersion) -> Bool {
        for (left, right) in zip(lhs.numbers, rhs.numbers) where left != right { return left < right }
        return lhs.numbers.count < rhs.numbers.count
    }

    public static func == (lhs: AppVersion, rhs: AppVersion) -> Bool { lhs.numbers == rhs.numbers }
}

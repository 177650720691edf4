import Foundation

/// Language tags, and which of several languages a device takes from the locale it registered (`locale`: TernKit
/// sends the user's first preferred language, such as `ko-KR` or `zh-Hans-CN`; a backend may send `en_US`): which of a
/// push's `localizations` it gets, and whether it is among the languages of an audience's `filters`.
///
/// The lookup of RFC 4647 (section 3.4): the locale's own tag, then the tag with its last subtag dropped, one at a
/// time, so `zh-Hans-CN` takes `zh-Hans-CN`, else `zh-Hans`, else `zh`; `zh-CN`, given without its script, looks
/// for `zh-CN` and then the same (``lookup(_:)``). Case and `_` or `-` do not matter. A device with no locale takes
/// none.
public enum LanguageTags {
    /// The longest tag taken.
    public static let longestTag = 35

    public static let tagRule = "a language tag: 2-3 letters, then up to three subtags of 1-8 letters or digits, joined by '-' (ko, zh-Hans, pt-BR)"

    /// Whether `tag` is a language tag as ``tagRule`` says.
    public static func isValidTag(_ tag: String) -> Bool {
        guard tag.utf8.count <= longestTag else { return false }
        let parts = tag.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count), (2...3).contains(parts[0].utf8.count),
            parts[0].utf8.allSatisfy({ isLetter($0) })
        else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.utf8.count) && part.utf8.allSatisfy { isLetter($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }
    }

    /// A tag or a device's locale as the lookup compares them: lowercased, `_` read as `-`, without a locale's
    /// keywords (`en_US@calendar=gregorian` is `en-us`).
    public static func key(_ tag: String) -> String {
        let base = tag.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return base.replacingOccurrences(of: "_", with: "-").lowercased()
    }

    /// The language (a ``key(_:)``) that a device of `locale` gets, among those `has` says the push gives; nil for the
    /// notification's own texts.
    public static func pick(locale: String?, has: (String) -> Bool) -> String? {
        guard let locale else { return nil }
        return lookup(key(locale)).first(where: has)
    }

    /// The tags a locale (a ``key(_:)``) looks for, in turn: itself, then with its last subtag dropped, one at a time.
    ///
    /// Chinese given without its script (`zh-CN`, `zh-TW`: from an older system, or a backend that registers devices
    /// itself) also looks for the script its region writes, before plain `zh`: `zh-cn`, `zh-hans-cn`, `zh-hans`, `zh`.
    /// A push that gives `zh-Hans` and `zh-Hant` then reaches those devices in their script, not in the notification's
    /// own texts.
    public static func lookup(_ key: String) -> [String] {
        let parts = key.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        func chain(_ parts: [String]) -> [String] {
            (0..<parts.count).reversed().map { parts[...$0].joined(separator: "-") }.filter { !$0.isEmpty }
        }
        guard parts.count >= 2, parts[0] == "zh", let script = chineseScripts[parts[1]] else { return chain(parts) }
        var scripted = parts
        scripted.insert(script, at: 1)
        return Array(chain(parts).dropLast()) + chain(scripted)
    }

    /// The script each region's Chinese is written in, for a Chinese locale given without one (CLDR's likely subtags).
    private static let chineseScripts = ["cn": "hans", "sg": "hans", "my": "hans", "tw": "hant", "hk": "hant", "mo": "hant"]

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}

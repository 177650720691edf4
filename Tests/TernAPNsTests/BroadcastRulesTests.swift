import TernAPNs
import Testing

/// The one set of rules the client, the simulator and the API judge broadcasts and channels by.
@Suite("APNsBroadcastRules")
struct BroadcastRulesTests {
    @Test("a channel id is 1-256 characters of standard base64, padding included")
    func channelIDs() {
        for id in ["dHN0LXNyY2gtY2hubA==", "a+b/c=", String(repeating: "A", count: 256)] {
            #expect(APNsBroadcastRules.isValidChannelID(id), "\(id)")
        }
        for id in ["", String(repeating: "A", count: 257), "url-safe_id", "with space", "ünï", "a\r\nb"] {
            #expect(!APNsBroadcastRules.isValidChannelID(id), "\(id)")
        }
    }

    @Test("a bundle id in a path is 1-155 letters, digits, '.' and '-'")
    func bundleIDs() {
        for id in ["com.example.app", "com.example-2.App9", String(repeating: "a", count: 155)] {
            #expect(APNsBroadcastRules.isValidBundleID(id), "\(id)")
        }
        for id in ["", String(repeating: "a", count: 156), "com/example", "com.example?x", "com example", "..%2F"] {
            #expect(!APNsBroadcastRules.isValidBundleID(id), "\(id)")
        }
    }
}

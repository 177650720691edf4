import Foundation
import TernKit
import Testing

/// When an app talks to Tern on launch: when the token, environment, version or locale changed, or a day passed.
struct RegistrationPolicyTests {
    private let facts = RegistrationFacts(token: "ab", environment: "production", appVersion: "1.0", locale: "ko-KR")
    private let noon = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func theFirstLaunchRegisters() {
        #expect(RegistrationPolicy().needsRegistration(facts, last: nil, now: noon))
    }

    @Test func aLaunchWithNothingChangedWithinADayDoesNot() {
        let last = RegistrationPolicy.Record(facts: facts, at: noon)
        #expect(!RegistrationPolicy().needsRegistration(facts, last: last, now: noon.addingTimeInterval(3600)))
        #expect(RegistrationPolicy().needsRegistration(facts, last: last, now: noon.addingTimeInterval(24 * 3600)))
        // A clock set back: register rather than go quiet.
        #expect(RegistrationPolicy().needsRegistration(facts, last: last, now: noon.addingTimeInterval(-60)))
    }

    @Test(arguments: [
        RegistrationFacts(token: "cd", environment: "production", appVersion: "1.0", locale: "ko-KR"),
        RegistrationFacts(token: "ab", environment: "development", appVersion: "1.0", locale: "ko-KR"),
        RegistrationFacts(token: "ab", environment: "production", appVersion: "1.1", locale: "ko-KR"),
        RegistrationFacts(token: "ab", environment: "production", appVersion: "1.0", locale: "zh-CN"),
    ])
    func anyChangeRegistersAtOnce(_ changed: RegistrationFacts) {
        let last = RegistrationPolicy.Record(facts: facts, at: noon)
        #expect(RegistrationPolicy().needsRegistration(changed, last: last, now: noon.addingTimeInterval(1)))
    }

    @Test func tokensAreLowercaseHexOfTheBytesApplesCallbackGives() {
        #expect(RegistrationFacts.hex(Data([0x00, 0x0f, 0xab, 0xff])) == "000fabff")
    }

    @Test func retriesBackOffWithJitterUpToTheMaximum() {
        let backoff = RetryBackoff(initial: 1, maximum: 60)
        #expect(backoff.delay(afterFailures: 1, unit: 0) == 0.5)
        #expect(backoff.delay(afterFailures: 1, unit: 1) == 1)
        #expect(backoff.delay(afterFailures: 4, unit: 1) == 8)
        #expect(backoff.delay(afterFailures: 30, unit: 1) == 60)
        #expect(backoff.delay(afterFailures: 30, unit: 0) == 30)
    }
}

import TernAPNs

/// Random version-4 UUIDs in APNs' lowercase form, made without a system call.
///
/// Foundation's `UUID()` reads the kernel's random source and formats with `sprintf`; at two ids per response that
/// was the simulator's largest cost. These ids only need to be unique and well-formed, not unpredictable, so a
/// per-connection wyrand generator seeded from the system generator serves.
struct FastUUIDGenerator {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    private mutating func nextWord() -> UInt64 {
        state &+= 0xa076_1d64_78bd_642f
        let product = state.multipliedFullWidth(by: state ^ 0xe703_7ed1_a0b4_28db)
        return product.high ^ product.low
    }

    /// A new id: `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    mutating func next() -> String {
        var high = nextWord()
        var low = nextWord()
        high = (high & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000  // version 4
        low = (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000  // variant 10
        return UUIDText.format(high: high, low: low)
    }
}

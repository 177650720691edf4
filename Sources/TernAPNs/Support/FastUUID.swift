import Foundation

/// Random version-4 UUIDs, made without a system call.
///
/// Foundation's `UUID()` opens, reads and closes the kernel's random source for every id: at one id per request (the
/// simulator's responses, the server's fan-out) that was a few percent of the CPU. These ids only need to be unique
/// and well-formed, not unpredictable, so a wyrand generator seeded from the system generator serves; keep one per
/// connection or per batch (it is a value, not shared).
public struct FastUUIDGenerator: Sendable {
    private var state: UInt64

    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    private mutating func nextWord() -> UInt64 {
        state &+= 0xa076_1d64_78bd_642f
        let product = state.multipliedFullWidth(by: state ^ 0xe703_7ed1_a0b4_28db)
        return product.high ^ product.low
    }

    /// The next id's 128 bits, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    public mutating func nextWords() -> (high: UInt64, low: UInt64) {
        Self.version4(high: nextWord(), low: nextWord())
    }

    /// 128 random bits as a version-4 UUID's: the version and variant bits set.
    static func version4(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64) {
        ((high & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000, (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000)
    }

    /// A new id in APNs' lowercase form.
    public mutating func next() -> String {
        let (high, low) = nextWords()
        return UUIDText.format(high: high, low: low)
    }

    /// A new id.
    public mutating func nextUUID() -> UUID {
        let (high, low) = nextWords()
        return UUID(high: high, low: low)
    }
}

extension UUID {
    /// A random version-4 UUID from the system's generator (`getrandom(2)`), which needs no file descriptor: the ids
    /// that must not repeat (a push's, a node's, a connection's). Foundation's `UUID()` reads `/dev/urandom`, and with
    /// every descriptor of the process in use it returned the all-zero id (but for its version and variant bits): a
    /// push was stored under it, and every later push was refused as existing already.
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        let (high, low) = FastUUIDGenerator.version4(high: generator.next(), low: generator.next())
        return UUID(high: high, low: low)
    }
}

/// Bytes received and not parsed yet, read from the front. Compacts itself so it never holds more than what is
/// unread plus a little.
struct ByteQueue: Sendable {
    private var bytes: [UInt8] = []
    private var start = 0

    var count: Int { bytes.count - start }

    mutating func append(contentsOf more: some Sequence<UInt8>) {
        if start > 0, start >= bytes.count / 2 {
            bytes.removeFirst(start)
            start = 0
        }
        bytes.append(contentsOf: more)
    }

    /// The byte `offset` places from the front.
    subscript(offset: Int) -> UInt8 { bytes[start + offset] }

    func uint16(at offset: Int) -> UInt16 { UInt16(self[offset]) << 8 | UInt16(self[offset + 1]) }

    func uint32(at offset: Int) -> UInt32 { (0..<4).reduce(0) { $0 << 8 | UInt32(self[offset + $1]) } }

    func slice(_ offset: Int, _ length: Int) -> [UInt8] { Array(bytes[(start + offset)..<(start + offset + length)]) }

    mutating func consume(_ length: Int) { start += length }
}

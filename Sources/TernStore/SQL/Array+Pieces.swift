extension Array {
    /// The array in consecutive pieces of at most `size` elements, in order: statements that bind a value per
    /// element take a piece each, to stay well under the databases' limits on bound parameters.
    func pieces(of size: Int) -> [[Element]] {
        precondition(size > 0, "a piece holds at least one element")
        return stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}

import SQLKit
import TernAPNs

/// A value a TEXT column keeps as one word of a fixed set (`production`, `replaced`, …). The store writes
/// ``storedWord``; reading any other text is ``StoreError/unreadable(_:)`` naming the column, never a crash.
protocol StoredWord: Equatable {
    /// Every value, in the order an error message lists them.
    static var allStored: [Self] { get }
    var storedWord: String { get }
}

extension StoredWord {
    /// The value `word` stands for, or nil if it stands for none.
    init?(storedWord word: String) {
        guard let value = Self.allStored.first(where: { $0.storedWord == word }) else { return nil }
        self = value
    }

    /// Reads `word`, a value of `column`. - Throws: ``StoreError/unreadable(_:)`` when it stands for none.
    init(storedWord word: String, column: String) throws {
        guard let value = Self(storedWord: word) else {
            let expected = Self.allStored.map(\.storedWord).joined(separator: ", ")
            throw StoreError.unreadable("column \(column) holds '\(word.prefix(64))', which is none of \(expected)")
        }
        self = value
    }
}

/// Kept as `production` or `development`, exactly (the API's `sandbox` synonym is never stored).
extension APNsEnvironment: StoredWord {
    // Stored, not computed: a computed list was an array made for every row read.
    static let allStored: [APNsEnvironment] = [.production, .development]
    var storedWord: String { rawValue }
}

extension AppEnvironment: StoredWord {
    static let allStored: [AppEnvironment] = allCases
    var storedWord: String { rawValue }
}

extension TokenReplacementReason: StoredWord {
    static let allStored: [TokenReplacementReason] = allCases
    var storedWord: String { rawValue }
}

extension PushTokenKind: StoredWord {
    static let allStored: [PushTokenKind] = allCases
    var storedWord: String { rawValue }
}

extension SQLRow {
    /// A NOT NULL TEXT column of words. - Throws: ``StoreError/unreadable(_:)`` for text that is none of them.
    func word<Value: StoredWord>(_ column: String, as type: Value.Type) throws -> Value {
        try Value(storedWord: try decode(column: column, as: String.self), column: column)
    }

    /// A TEXT column of words that may be NULL (nil). - Throws: ``StoreError/unreadable(_:)`` for text that is none of
    /// them.
    func optionalWord<Value: StoredWord>(_ column: String, as type: Value.Type) throws -> Value? {
        try decode(column: column, as: String?.self).map { try Value(storedWord: $0, column: column) }
    }
}

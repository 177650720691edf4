import Testing

import TernAPNs

/// The legacy binary protocol's bytes: commands 0, 1 and 2, the error response, feedback tuples.
struct LegacyCodecTests {
    private let token = Array(repeating: UInt8(0xAB), count: 32)
    private let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

    @Test func theSimpleFormatIsCommandZeroWithLengthPrefixedTokenAndPayload() throws {
        let bytes = try LegacyNotification(token: [1, 2, 3], payload: [0x7B, 0x7D]).encoded(as: .simple)
        #expect(bytes == [0, 0, 3, 1, 2, 3, 0, 2, 0x7B, 0x7D])
    }

    @Test func theEnhancedFormatCarriesIdentifierAndExpiryBigEndian() throws {
        let notification = LegacyNotification(token: [9], payload: [0x7B, 0x7D], identifier: 0x0102_0304, expiration: 0x0A0B_0C0D)
        #expect(try notification.encoded(as: .enhanced) == [1, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0, 1, 9, 0, 2, 0x7B, 0x7D])
    }

    @Test func theFrameFormatHasFiveItemsAndItsLength() throws {
        let notification = LegacyNotification(token: [7, 8], payload: [0x7B, 0x7D], identifier: 5, expiration: 6, priority: 5)
        let items: [UInt8] = [1, 0, 2, 7, 8] + [2, 0, 2, 0x7B, 0x7D] + [3, 0, 4, 0, 0, 0, 5] + [4, 0, 4, 0, 0, 0, 6] + [5, 0, 1, 5]
        #expect(try notification.encoded(as: .frame) == [2, 0, 0, 0, UInt8(items.count)] + items)
    }

    @Test func encodingRefusesWhatTheGatewayWouldRefuse() {
        #expect(throws: LegacyCodecError.self) { try LegacyNotification(token: [], payload: [1]).encoded(as: .frame) }
        #expect(throws: LegacyCodecError.self) { try LegacyNotification(token: Array(repeating: 1, count: 101), payload: [1]).encoded(as: .frame) }
        #expect(throws: LegacyCodecError.self) { try LegacyNotification(token: [1], payload: Array(repeating: 1, count: 257)).encoded(as: .enhanced) }
        #expect(throws: Never.self) { try LegacyNotification(token: [1], payload: Array(repeating: 1, count: 2048)).encoded(as: .frame) }
        #expect(throws: LegacyCodecError.self) { try LegacyNotification(token: [1], payload: Array(repeating: 1, count: 2049)).encoded(as: .frame) }
        #expect(throws: LegacyCodecError.self) { try LegacyNotification(token: [1], payload: [1], priority: 7).encoded(as: .frame) }
    }

    @Test func theErrorResponseRoundTripsForEveryStatus() throws {
        for status in LegacyStatus.all {
            let response = LegacyErrorResponse(status: status, identifier: 0xDEAD_BEEF)
            #expect(response.encoded == [8, status.rawValue, 0xDE, 0xAD, 0xBE, 0xEF])
            #expect(try LegacyErrorResponse(decoding: response.encoded) == response)
            #expect(status.name != "unknown")
        }
        #expect(LegacyStatus(rawValue: 42).name == "unknown")
        #expect(throws: LegacyCodecError.self) { try LegacyErrorResponse(decoding: [8, 1, 0, 0, 0]) }
        #expect(throws: LegacyCodecError.self) { try LegacyErrorResponse(decoding: [9, 1, 0, 0, 0, 0]) }
    }

    @Test(arguments: LegacyCommand.allCases)
    func theGatewayDecoderReadsEachFormatInAnyChunking(_ command: LegacyCommand) throws {
        let notifications = (1...20).map { number in
            LegacyNotification(
                token: Array(repeating: UInt8(number), count: 32), payload: payload, identifier: command == .simple ? 0 : UInt32(number),
                expiration: command == .simple ? 0 : 1_800_000_000, priority: command == .frame && number % 2 == 0 ? 5 : 10)
        }
        let stream = try notifications.flatMap { try $0.encoded(as: command) }
        var generator = SystemRandomNumberGenerator()
        for chunking in ["one byte", "random"] {
            var decoder = LegacyGatewayDecoder()
            var decoded: [LegacyNotification] = []
            var offset = 0
            while offset < stream.count {
                let size = chunking == "one byte" ? 1 : Int.random(in: 1...97, using: &generator)
                decoder.feed(stream[offset..<min(offset + size, stream.count)])
                offset += size
                while let event = try decoder.next() {
                    guard case .notification(let notification, let format) = event else {
                        Issue.record("unexpected \(event)")
                        return
                    }
                    #expect(format == command)
                    decoded.append(notification)
                }
            }
            #expect(decoded == notifications, "\(chunking)")
            #expect(decoder.buffered == 0)
        }
    }

    @Test func theGatewayDecoderRejectsLikeApple() throws {
        func first(_ bytes: [UInt8]) throws -> LegacyGatewayDecoder.Event? {
            var decoder = LegacyGatewayDecoder()
            decoder.feed(bytes)
            return try decoder.next()
        }
        // Enhanced, token length 33 is fine (variable tokens); 101 is not.
        let badSize: [UInt8] = [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 101]
        #expect(try first(badSize) == .rejected(.invalidTokenSize, identifier: 7, command: .enhanced))
        let noPayload: [UInt8] = [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 1, 0xAA, 0, 0]
        #expect(try first(noPayload) == .rejected(.missingPayload, identifier: 7, command: .enhanced))
        let bigPayload: [UInt8] = [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 1, 0xAA, 1, 1]
        #expect(try first(bigPayload) == .rejected(.invalidPayloadSize, identifier: 7, command: .enhanced))
        // A frame with only a payload and an identifier: the token is missing.
        let frameItems: [UInt8] = [2, 0, 1, 0x7B] + [3, 0, 4, 0, 0, 0, 9]
        #expect(try first([2, 0, 0, 0, UInt8(frameItems.count)] + frameItems) == .rejected(.missingDeviceToken, identifier: 9, command: .frame))
        // After a rejection the gateway closes: nothing more comes out.
        var decoder = LegacyGatewayDecoder()
        decoder.feed(badSize + (try LegacyNotification(token: token, payload: payload).encoded(as: .enhanced)))
        #expect(try decoder.next() != nil)
        #expect(try decoder.next() == nil)
    }

    @Test func garbageIsAnErrorNotAHangOrACrash() throws {
        var unknown = LegacyGatewayDecoder()
        unknown.feed([0x47, 0x45, 0x54, 0x20])  // "GET "
        #expect(throws: LegacyCodecError.self) { try unknown.next() }
        var huge = LegacyGatewayDecoder()
        huge.feed([2, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: LegacyCodecError.self) { try huge.next() }
        var overrun = LegacyGatewayDecoder()
        overrun.feed([2, 0, 0, 0, 4, 1, 0, 9, 0])  // an item longer than its frame
        #expect(throws: LegacyCodecError.self) { try overrun.next() }
        var truncated = LegacyGatewayDecoder()
        truncated.feed(try LegacyNotification(token: token, payload: payload).encoded(as: .frame).dropLast())
        #expect(try truncated.next() == nil, "a truncated notification waits for the rest")
        // Random bytes: every outcome is an event, nil or an error, and the decoder stops.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var decoder = LegacyGatewayDecoder()
            decoder.feed((0..<Int.random(in: 1...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            // Each call consumes bytes, rejects, fails or waits: the decoder never loops on the same bytes.
            var calls = 0
            while calls < 1000 {
                calls += 1
                guard let event = try? decoder.next() else { break }
                if case .rejected = event { break }
            }
            #expect(calls < 1000)
        }
    }

    @Test func feedbackTuplesEncodeAndDecodeOneByteAtATimeAndInRandomChunks() throws {
        let tuples = (1...50).map { FeedbackTuple(timestamp: 1_700_000_000 + UInt32($0), token: Array(repeating: UInt8($0), count: $0 % 3 == 0 ? 64 : 32)) }
        let stream = try tuples.flatMap { try $0.encoded() }
        #expect(try tuples[0].encoded() == [0x65, 0x53, 0xF1, 0x01, 0, 32] + Array(repeating: 1, count: 32))
        var generator = SystemRandomNumberGenerator()
        for round in 0..<20 {
            var decoder = FeedbackDecoder()
            var decoded: [FeedbackTuple] = []
            var offset = 0
            while offset < stream.count {
                let size = round == 0 ? 1 : Int.random(in: 1...120, using: &generator)
                decoder.feed(stream[offset..<min(offset + size, stream.count)])
                offset += size
                decoded += try decoder.tuples()
            }
            try decoder.finish()
            #expect(decoded == tuples)
        }
    }

    @Test func aTruncatedOrGarbageFeedbackStreamIsAClearError() throws {
        var truncated = FeedbackDecoder()
        truncated.feed(try FeedbackTuple(timestamp: 1, token: token).encoded().dropLast(5))
        #expect(try truncated.next() == nil)
        #expect(throws: LegacyCodecError.self) { try truncated.finish() }
        var garbage = FeedbackDecoder()
        garbage.feed([0, 0, 0, 1, 0, 0, 0xAA])  // a token of length 0
        #expect(throws: LegacyCodecError.self) { try garbage.next() }
        var tooLong = FeedbackDecoder()
        tooLong.feed([0, 0, 0, 1, 0xFF, 0xFF])
        #expect(throws: LegacyCodecError.self) { try tooLong.next() }
    }
}

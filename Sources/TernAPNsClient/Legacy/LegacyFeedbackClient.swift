import Logging
import NIOCore
import NIOPosix
import NIOSSL
import TernAPNs

/// Reads the legacy feedback service: connects with the client certificate, reads to the end of the stream and
/// returns the (token, timestamp) tuples, however the bytes were chunked. The service clears its list once read,
/// so the caller must keep or apply what it gets.
public enum LegacyFeedbackClient {
    /// - Throws: ``APNsClientError`` (`connectionFailed` when no connection could be made, or the stream held
    ///   something other than whole tuples or more than ``LegacyClientConfiguration/feedbackMaxTuples`` of them, in
    ///   which case nothing read is returned; `timedOut` past ``LegacyClientConfiguration/feedbackTimeout``,
    ///   `invalidCredentials`, `invalidConfiguration`).
    public static func fetch(
        _ configuration: LegacyClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> [FeedbackTuple] {
        try configuration.validate()
        let sslContext = try ClientTLS.context(
            authentication: configuration.authentication, endpoint: configuration.endpoint, applicationProtocols: [])
        let eventLoop = eventLoopGroup.next()
        let promise = eventLoop.makePromise(of: [FeedbackTuple].self)
        let hostname = ClientTLS.serverHostname(configuration.endpoint.host)
        let endpoint = "\(configuration.endpoint.host):\(configuration.endpoint.port)"
        let connect = EndpointConnector.connect(
            on: eventLoop, host: configuration.endpoint.host, port: configuration.endpoint.port, proxy: configuration.proxy,
            timeout: .seconds(10)
        ) { channel in
            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
            try channel.pipeline.syncOperations.addHandler(FeedbackReadHandler(promise: promise, maxTuples: configuration.feedbackMaxTuples))
        }
        connect.whenFailure { error in
            promise.fail(APNsClientError.connectionFailed("cannot connect to the feedback service at \(endpoint): \(error)"))
        }
        let timeout = eventLoop.scheduleTask(in: configuration.feedbackTimeout.timeAmount) {
            promise.fail(APNsClientError(code: .timedOut, message: "the feedback service at \(endpoint) did not finish in time"))
            connect.whenSuccess { $0.close(promise: nil) }
        }
        defer { timeout.cancel() }
        return try await promise.futureResult.get()
    }
}

/// Feeds what the service sends to a ``FeedbackDecoder`` and completes at end of stream.
///
/// Memory stays bounded however much arrives: each read is decoded at once (so the decoder holds at most one read
/// and a partial tuple), and past `maxTuples` the read fails, drops what it held and closes the connection.
final class FeedbackReadHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let promise: EventLoopPromise<[FeedbackTuple]>
    private let maxTuples: Int
    private var decoder = FeedbackDecoder()
    private var tuples: [FeedbackTuple] = []
    private var failure: APNsClientError?

    init(promise: EventLoopPromise<[FeedbackTuple]>, maxTuples: Int) {
        self.promise = promise
        self.maxTuples = maxTuples
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard failure == nil else { return }
        decoder.feed(unwrapInboundIn(data).readableBytesView)
        do {
            while let tuple = try decoder.next() {
                guard tuples.count < maxTuples else {
                    return fail(
                        APNsClientError.connectionFailed(
                            "the feedback service sent more than \(maxTuples) tuples; a real list is shorter, so none are used"),
                        context: context)
                }
                tuples.append(tuple)
            }
        } catch {
            fail(APNsClientError.connectionFailed("the feedback stream is not feedback tuples: \(error)"), context: context)
        }
    }

    private func fail(_ error: APNsClientError, context: ChannelHandlerContext) {
        failure = error
        tuples = []
        decoder = FeedbackDecoder()
        // Answer now, not at channelInactive: NIOSSL's close waits up to its shutdown timeout (5 s) for the peer's
        // close_notify, which a peer that never stops sending does not send. Meanwhile read nothing more, so what it
        // keeps sending costs neither memory nor CPU.
        promise.fail(error)
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let failure {
            promise.fail(failure)
        } else {
            do {
                try decoder.finish()
                promise.succeed(tuples)
            } catch {
                promise.fail(APNsClientError.connectionFailed("the feedback stream ended early: \(error)"))
            }
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOSSL reports an unclean close at the end of a stream that was otherwise whole; the decoder judges that.
        if !(error is NIOSSLError && (error as? NIOSSLError) == .uncleanShutdown) {
            failure = failure ?? APNsClientError.connectionFailed("the feedback connection failed: \(error)")
        }
        context.close(promise: nil)
    }
}

import Foundation

/// Delivery receipts from a Notification Service Extension: APNs never says whether a notification reached the
/// phone; the extension runs when it does (for a push with `mutableContent`) and tells Tern.
///
/// A receipt is the acknowledgement of the notification's device message (`tern.id`, which an `auto` push that fell
/// back to APNs carries): the server counts it (`ackedAfterFallback`) and does not send the message over the channel
/// again. Tern takes acknowledgements over the channel only, so the extension opens a connection for the moment it
/// takes, resuming after the message (`?after=`, so the server sends nothing older), acknowledges it and closes.
///
/// That connection replaces one the app has open (one connection per device): the app's channel then stops with
/// ``ChannelStop/replaced`` until it next comes to the foreground. An app in the foreground mostly gets its messages
/// over the channel, so this is rare; but it is why receipts are opt-in.
///
/// The extension reads the device's identity where the app keeps it: a keychain access group both share
/// (`KeychainIdentityStore(service:accessGroup:)`).
public struct DeliveryReceipts: Sendable {
    public enum Outcome: Sendable, Equatable {
        /// The acknowledgement was sent.
        case sent
        /// The notification carries no device message (`tern.id`): nothing to acknowledge.
        case notADeviceMessage
        /// The app has not registered this device yet (no identity, or no secret).
        case notRegistered
        case failed(String)
    }

    public let configuration: TernConfiguration
    public let identityStore: any IdentityStore
    public let transport: any ChannelTransport
    public let client: TernClient

    public init(
        configuration: TernConfiguration, identityStore: any IdentityStore, transport: any ChannelTransport = URLSessionChannelTransport(),
        httpTransport: any HTTPTransport = URLSessionHTTPTransport()
    ) {
        self.configuration = configuration
        self.identityStore = identityStore
        self.transport = transport
        client = TernClient(configuration: configuration, transport: httpTransport)
    }

    /// Reports that `payload`'s notification arrived. Give it a few seconds at most: the extension has about 30 in
    /// all, and the notification waits for the content handler.
    public func reportDelivery(of payload: TernPayload, timeout: TimeInterval = 5) async -> Outcome {
        guard let messageID = payload.messageID else { return .notADeviceMessage }
        // load, never create: an extension must not make a second identity beside the app's.
        guard let identity = try? identityStore.load(), let secret = identity.deviceSecret else { return .notRegistered }
        let device = DeviceCredentials(deviceID: identity.deviceID, secret: secret)
        do {
            let request = try client.channelRequest(device, after: payload.sequence)
            let transport = self.transport
            let size = configuration.channel.maximumFrameSize
            return try await withThrowingTaskGroup(of: Outcome.self) { group in
                group.addTask {
                    let connection = try await transport.connect(request, maximumFrameSize: size)
                    defer { connection.close() }
                    for frame in ChannelFrame.acks([messageID]) { try await connection.send(frame) }
                    return .sent
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                    return .failed("no connection within \(timeout) s")
                }
                defer { group.cancelAll() }
                return try await group.next() ?? .failed("cancelled")
            }
        } catch {
            return .failed("\(error)")
        }
    }
}

import Foundation

/// Delivery receipts from a Notification Service Extension: APNs never says whether a notification reached the
/// phone; the extension runs when it does (for a push with `mutableContent`) and tells Tern.
///
/// A receipt is the acknowledgement of the notification's device message (`tern.id`, which an `auto` push that fell
/// back to APNs carries), made with `POST …/devices/{id}/acks`: the server counts it (`ackedAfterFallback`) and does
/// not send the message over the channel again. A push that came through APNs alone is acknowledged by its id
/// (`tern.pushId`), and the push counts it (`received`). It is a plain request, not a channel connection, so the app's
/// own connection (one per device) stays as it is.
///
/// The extension reads the device's identity where the app keeps it: a keychain access group both share
/// (`KeychainIdentityStore(service:accessGroup:)`).
public struct DeliveryReceipts: Sendable {
    public enum Outcome: Sendable, Equatable {
        /// The acknowledgement was taken (or the message or push was acknowledged already).
        case sent
        /// The notification carries no Tern id (neither `tern.id` nor `tern.pushId`): nothing to acknowledge.
        case notFromTern
        /// The app has not registered this device yet (no identity, or no secret).
        case notRegistered
        case failed(String)
    }

    public let configuration: TernConfiguration
    public let identityStore: any IdentityStore
    public let client: TernClient

    public init(configuration: TernConfiguration, identityStore: any IdentityStore, httpTransport: any HTTPTransport = URLSessionHTTPTransport()) {
        self.configuration = configuration
        self.identityStore = identityStore
        client = TernClient(configuration: configuration, transport: httpTransport)
    }

    /// Reports that `payload`'s notification arrived. The request has the configuration's timeout: the extension has
    /// about 30 s in all, and the notification waits for the content handler.
    public func reportDelivery(of payload: TernPayload) async -> Outcome {
        guard payload.messageID != nil || payload.pushID != nil else { return .notFromTern }
        // load, never create: an extension must not make a second identity beside the app's.
        guard let identity = try? identityStore.load(), let secret = identity.deviceSecret else { return .notRegistered }
        let device = DeviceCredentials(deviceID: identity.deviceID, secret: secret)
        do throws(TernError) {
            if let messageID = payload.messageID {
                try await client.acknowledge(device, messageIDs: [messageID])
            } else if let pushID = payload.pushID {
                try await client.acknowledge(device, pushID: pushID)
            }
            return .sent
        } catch {
            return .failed("\(error)")
        }
    }
}

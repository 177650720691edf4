#if canImport(UserNotifications)
import UserNotifications

/// The UserNotifications glue: what the app's `UNUserNotificationCenterDelegate` passes on. Not compiled on Linux;
/// each method reads the notification where it arrives (on the main actor) and hands TernKit a ``TernPayload``.
extension OpenedNotification {
    /// The open a notification response reports (a tap, or one of the notification's actions).
    public init(_ response: UNNotificationResponse) {
        self.init(payload: TernPayload(userInfo: response.notification.request.content.userInfo), actionIdentifier: response.actionIdentifier)
    }
}

extension Tern {
    /// For `userNotificationCenter(_:willPresent:) async -> UNNotificationPresentationOptions`: a notification that
    /// arrived while the app is in the foreground. Nothing is shown for a message the app already has (it came over
    /// the channel first); anything else is shown with `options`.
    @MainActor
    public func willPresent(
        _ notification: UNNotification, options: UNNotificationPresentationOptions = [.banner, .list, .sound, .badge]
    ) async -> UNNotificationPresentationOptions {
        let payload = TernPayload(userInfo: notification.request.content.userInfo)
        if case .duplicate = await receive(payload) { return [] }
        return options
    }

    /// For `userNotificationCenter(_:didReceive:) async`: the user opened a notification. It is routed once the app
    /// is ready (``Tern/openedNotifications``, ``Tern/ready(_:)``).
    @MainActor
    public func didReceive(_ response: UNNotificationResponse) {
        opened(OpenedNotification(response))
    }
}
#endif

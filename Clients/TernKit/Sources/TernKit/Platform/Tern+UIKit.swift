#if canImport(UIKit) && os(iOS)
import UIKit

/// The UIKit glue: what the app delegate passes on. Not compiled on Linux; each method reads what UIKit hands over
/// on the main actor and returns at once or awaits TernKit's answer.
extension Tern {
    /// From `application(_:didFinishLaunchingWithOptions:)`: follows the app's state (the channel is open while the
    /// app is active) and takes the notification that launched the app, if one did, to route it once the app is
    /// ready (seed 004 #7: no guessed delay).
    @MainActor
    public func didFinishLaunching(options: [UIApplication.LaunchOptionsKey: Any]?) {
        if let userInfo = options?[.remoteNotification] as? [AnyHashable: Any] {
            opened(OpenedNotification(payload: TernPayload(userInfo: userInfo)))
        }
        let center = NotificationCenter.default
        // The observers live as long as the app: TernKit is made once, at launch.
        _ = center.addObserver(forName: UIApplication.didBecomeActiveNotification, object: nil, queue: .main) { [self] _ in
            setForeground(true)
        }
        _ = center.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: .main) { [self] _ in
            setForeground(false)
        }
        setForeground(UIApplication.shared.applicationState == .active)
    }

    /// From `application(_:didReceiveRemoteNotification:) async -> UIBackgroundFetchResult`: a notification with
    /// `content-available` (a wake push, an `auto` fallback, the server's badge update).
    @MainActor
    public func didReceiveRemoteNotification(_ userInfo: [AnyHashable: Any]) async -> UIBackgroundFetchResult {
        let payload = TernPayload(userInfo: userInfo)
        return await receive(payload).hasNewData ? .newData : .noData
    }
}
#endif

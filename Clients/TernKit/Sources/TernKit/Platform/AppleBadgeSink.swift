#if canImport(UserNotifications)
import UserNotifications
#if canImport(UIKit)
import UIKit
#endif

/// Sets the app icon's badge: through UserNotifications on iOS 16 and macOS 13 or later, through `UIApplication`
/// on iOS 15. Not compiled on Linux.
public struct AppleBadgeSink: BadgeSink {
    public init() {}

    public func setBadge(_ count: Int) async {
        if #available(iOS 16.0, macOS 13.0, *) {
            // Fails only without permission to badge, which the app asked for; nothing to do then.
            try? await UNUserNotificationCenter.current().setBadgeCount(count)
        } else {
            #if os(iOS)
            await MainActor.run { UIApplication.shared.applicationIconBadgeNumber = count }
            #endif
        }
    }
}

extension Tern {
    /// The badge sink for this platform (``AppleBadgeSink``).
    public static func appleBadgeSink() -> any BadgeSink {
        AppleBadgeSink()
    }
}
#endif

/// One language's texts in a push's `notification.localizations`. Each replaces the notification's field of the same
/// name for the devices whose locale picks the language; a field it leaves out stays the notification's.
struct LocalizedTexts: Codable, Sendable, Equatable {
    var title: String?
    var subtitle: String?
    var body: String?

    /// The notification with these texts in place of its own.
    func applied(to notification: NotificationInput) -> NotificationInput {
        var localized = notification
        localized.localizations = nil
        if let title { localized.title = title }
        if let subtitle { localized.subtitle = subtitle }
        if let body { localized.body = body }
        return localized
    }
}

/// A push's languages (`notification.localizations`); which one a device gets is ``LanguageTags``' lookup.
enum Localizations {
    /// The most languages one push gives.
    static let limit = 100
}

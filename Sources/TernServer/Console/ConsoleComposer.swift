import Foundation
import TernAPNs
import TernStore

/// The composer's page: the form as sent (or empty), its choices, and the server's preview of it.
struct ComposeView {
    var form: [String: String]
    var audienceKinds: [Choice]
    var matches: [Choice]
    /// Whether any of the audience's filters is filled in (their part of the form starts open).
    var filtered: Bool
    var rawPayload: Bool
    var contentAvailable: Bool
    var mutableContent: Bool
    var inbox: Bool
    var wake: Bool
    var interruptionLevels: [Choice]
    var pushTypes: [Choice]
    var priorities: [Choice]
    var deliveries: [Choice]
    var audience: String
    var preview: ComposePreview

    init(form: ConsoleForm, preview: ComposePreview) {
        self.form = ConsoleFormat.values(form)
        audienceKinds = Choice.list(ConsoleRequests.audienceKinds, selected: form["audience.kind"] ?? "tags")
        matches = Choice.list([("any", "any of the tags"), ("all", "all of the tags")], selected: form["audience.match"] ?? "any")
        filtered = form.fields.contains { $0.0.hasPrefix("audience.filters.") && !$0.1.trimmingCharacters(in: .whitespaces).isEmpty }
        rawPayload = form["content"] == "payload"
        contentAvailable = form.isChecked("notification.contentAvailable")
        mutableContent = form.isChecked("notification.mutableContent")
        inbox = form.isChecked("inbox")
        wake = form.isChecked("wake")
        interruptionLevels = Choice.list(
            [("", "(not set)")] + APNsInterruptionLevel.all.map { ($0.rawValue, $0.rawValue) }, selected: form["notification.interruptionLevel"])
        pushTypes = Choice.list(
            [("", "(from the content: alert, or background)")] + APNsPushType.allKnown.map { ($0.rawValue, $0.rawValue) },
            selected: form["apns.pushType"])
        priorities = Choice.list([("", "(the push type's default)"), ("10", "10: now"), ("5", "5: when it saves power"), ("1", "1: lowest")], selected: form["apns.priority"])
        deliveries = Choice.list(
            [("", "apns (the default)"), ("online", "online: the device's connection"), ("auto", "auto: online, else APNs")], selected: form["delivery"])
        audience = preview.audience
        self.preview = preview
    }
}

/// What the composer shows beside the form (and `…/preview` answers its script): the payload exactly as the
/// server stores it for sending, its size against APNs' limit for the push type, the APNs headers, and how many
/// devices the audience reaches.
struct ComposePreview: Encodable {
    var payload = ""
    var bytes = 0
    var limit = APNsPushType.alert.maximumPayloadSize
    /// Where the meter turns to a warning (90% of the limit).
    var high = APNsPushType.alert.maximumPayloadSize * 9 / 10
    var size = "—"
    var problem: String?
    var note = ""
    var headers = ""
    var audience = ""

    /// Shows what ``PushesAPI/content(_:app:pushID:)`` rendered for `app`.
    mutating func show(_ content: PushContent, app: AppRecord) {
        let topic = app.topic
        payload = String(decoding: content.payload, as: UTF8.self)
        bytes = content.payload.count
        limit = PushesAPI.payloadLimit(pushType: content.pushType, app: app)
        high = limit * 9 / 10
        size = "\(bytes.formatted()) of \(limit.formatted()) bytes"
        var notes: [String] = []
        if content.badge?.isPerRecipient == true {
            notes.append("Each recipient's badge is worked out when it is sent and added to aps (at most 16 bytes more; the limit was checked with the widest).")
        }
        if let localized = content.localizedPayloads, !localized.isEmpty {
            let languages = localized.keys.sorted()
            notes.append(
                "Also in \(languages.count == 1 ? "one other language" : "\(languages.count) other languages") (\(languages.joined(separator: ", "))): "
                    + "a device gets the one its locale picks, else this payload; the largest is \((localized.values.map(\.count).max() ?? 0).formatted()) bytes.")
        }
        if payload.contains(PushContent.previewPushID) {
            notes.append(
                (content.inbox != nil ? "tern.pushId and tern.messageId are" : "tern.pushId is")
                    + " the push's id, known once it is sent: the app reports the user's open with it.")
        }
        switch content.online?.mode {
        case .online?:
            notes.append(
                "Delivery online: connected devices get the notification over their connection, the others when they connect; APNs sends "
                    + (content.online?.wake == true ? "only a silent wake-up." : "nothing."))
        case .auto?:
            notes.append("Delivery auto: this payload goes through APNs to a device that is offline or does not acknowledge in time.")
        case nil:
            break
        }
        note = notes.joined(separator: " ")
        var lines = [
            "apns-push-type: \(content.pushType)",
            "apns-topic: \(topic)\((try? APNsPushType(headerValue: content.pushType))?.topicSuffix ?? "")",
            "apns-priority: \(content.priority)",
            "apns-collapse-id: \(content.collapseID ?? "(the push's id)")",
        ]
        if let expiration = content.expiration { lines.append("apns-expiration: \(expiration)") }
        headers = lines.joined(separator: "\n")
    }
}

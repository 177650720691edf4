import Foundation
import TernAPNs
import TernStore
import TernWeb

/// A submitted HTML form (`application/x-www-form-urlencoded`): each name's values in the order sent.
struct ConsoleForm: Sendable, Equatable {
    private(set) var fields: [(name: String, value: String)] = []

    init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    /// Reads `a=1&b=x+y&b=%C3%A9`; a malformed escape is kept as written (the browser never sends one).
    init(urlEncoded body: String) {
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                let spaced = text.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            fields.append((decode(parts[0]), parts.count > 1 ? decode(parts[1]) : ""))
        }
    }

    /// The first value of `name`, if sent.
    subscript(_ name: String) -> String? { fields.first { $0.name == name }?.value }

    /// The first value of `name`, trimmed, or nil when it is missing or blank (an empty input means "not given").
    func given(_ name: String) -> String? {
        guard let value = self[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }

    /// Every value of `name` (a group of checkboxes).
    func all(_ name: String) -> [String] { fields.filter { $0.name == name }.map(\.value) }

    /// Whether a checkbox named `name` was ticked.
    func isChecked(_ name: String) -> Bool { self[name] != nil }

    static func == (lhs: ConsoleForm, rhs: ConsoleForm) -> Bool {
        lhs.fields.map(\.name) == rhs.fields.map(\.name) && lhs.fields.map(\.value) == rhs.fields.map(\.value)
    }
}

/// Turns the console's forms into the JSON bodies the API takes, and decodes them with the API's own decoder, so a
/// form is checked exactly as the same request to the API would be, with the same messages and field names. A form
/// field is named after its place in the JSON body (`notification.title`, `apns.priority`); a blank field is left
/// out, as a client would leave out the key.
enum ConsoleRequests {
    /// `POST /v1/apps`'s body from the console's "new app" form.
    static func createApp(_ form: ConsoleForm) throws(JSONAPIError) -> AppsAPI.CreateRequest {
        var body = FormJSON()
        for name in ["id", "topic", "environment", "webhookURL", "transport", "userBinding"] { body.string(name, form.given(name)) }
        for name in ["inboxMaxTTL", "inboxCap", "feedbackInterval", "broadcastRatePerSecond"] { body.number(name, form.given(name)) }
        if form.isChecked("webhookOpens") {
            body.set("webhookEvents", .value(.array(WebhookEventKind.allCases.map { .string($0.rawValue) })))
        }
        if form.given("environment") == AppEnvironment.custom.rawValue {
            body.string("endpoint.host", form.given("endpoint.host"))
            body.number("endpoint.port", form.given("endpoint.port"))
            body.string("endpoint.caPEM", form.given("endpoint.caPEM"))
            body.number("endpoint.feedbackPort", form.given("endpoint.feedbackPort"))
        }
        // A type picks which of the credential fields go in: those of another type stay in the page, not the body.
        if let type = form.given("credentials.type") {
            body.string("credentials.type", type)
            let fields: [String] =
                switch type {
                case "token": ["keyPEM", "keyID", "teamID"]
                case "certificate": ["certificatePEM", "privateKeyPEM"]
                case "pkcs12": ["base64", "passphrase"]
                default: []
                }
            for field in fields { body.string("credentials.\(field)", form["credentials.\(field)"] ?? "") }
        }
        return try decode(AppsAPI.CreateRequest.self, body)
    }

    /// `PATCH /v1/apps/{app}`'s body for the secrets ticked in the "rotate" form.
    static func rotate(_ form: ConsoleForm) throws(JSONAPIError) -> AppsAPI.UpdateRequest {
        let secrets = form.all("rotate")
        guard !secrets.isEmpty else { throw .badRequest(field: "rotate", "tick the secrets to replace") }
        var body = FormJSON()
        body.set("rotate", .value(.array(secrets.map(JSONValue.string))))
        return try decode(AppsAPI.UpdateRequest.self, body)
    }

    /// `POST …/pushes`'s body from the composer.
    static func push(_ form: ConsoleForm) throws(JSONAPIError) -> PushesAPI.PushRequest {
        try decode(PushesAPI.PushRequest.self, pushBody(form))
    }

    /// The composer's choices of audience: the API's kinds, each with its label.
    static let audienceKinds = [
        ("tags", "Tags"), ("aliases", "Users (aliases)"), ("devices", "Device ids"), ("tokens", "Tokens"), ("all", "Everyone"),
        ("activity", "A Live Activity (its id)"),
    ]

    /// The composer's fields as the JSON body of `POST …/pushes` (what the composer also shows, for a client to copy).
    static func pushBody(_ form: ConsoleForm) throws(JSONAPIError) -> FormJSON {
        var body = FormJSON()
        let kind = form.given("audience.kind") ?? "tags"
        // One of the names it knows, not anything sent: it becomes part of a path below, whose every dot is a level.
        guard audienceKinds.contains(where: { $0.0 == kind }) else {
            throw .badRequest(field: "audience.kind", "the audience is one of \(audienceKinds.map(\.0).joined(separator: ", "))")
        }
        switch kind {
        case "all":
            body.set("audience.all", .value(.bool(true)))
        case "activity":
            // The id on the first line, as given (the API checks it); the users to narrow it to on the lines after.
            let lines = (form["audience.values"] ?? "").split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            body.set("audience.activity", .value(.string(lines.first ?? "")))
            if lines.count > 1 { body.set("audience.aliases", .value(.array(lines.dropFirst().map(JSONValue.string)))) }
        case let kind:
            // One per line; ids, tokens and tags may also be separated by commas or spaces (an alias may hold both).
            let text = form["audience.values"] ?? ""
            let separators: (Character) -> Bool = kind == "aliases" ? { $0.isNewline } : { $0.isNewline || $0 == "," || $0 == " " }
            let values = text.split(whereSeparator: separators).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            body.set("audience.\(kind)", .value(.array(values.map(JSONValue.string))))
            if kind == "tags" { body.string("audience.match", form.given("audience.match")) }
        }
        // Filters, whichever audience: the API says which ones take none.
        body.string("audience.filters.appVersion.atLeast", form.given("audience.filters.appVersion.atLeast"))
        body.string("audience.filters.appVersion.below", form.given("audience.filters.appVersion.below"))
        if let languages = form.given("audience.filters.languages") {
            let tags = languages.split(whereSeparator: { $0 == "," || $0 == " " || $0.isNewline }).map(String.init)
            body.set("audience.filters.languages", .value(.array(tags.map(JSONValue.string))))
        }
        body.string("audience.filters.registeredSince", form.given("audience.filters.registeredSince"))
        if form.given("content") == "payload" {
            try body.json("payload", form.given("payload"))
        } else {
            for name in ["title", "subtitle", "body", "sound", "category", "threadID", "interruptionLevel"] {
                body.string("notification.\(name)", form.given("notification.\(name)"))
            }
            if let badge = form.given("notification.badge") {
                body.set("notification.badge", .value(Int(badge).map(JSONValue.int) ?? .string(badge)))
            }
            for name in ["contentAvailable", "mutableContent"] where form.isChecked("notification.\(name)") {
                body.set("notification.\(name)", .value(.bool(true)))
            }
            try body.json("notification.data", form.given("notification.data"))
            try body.json("notification.localizations", form.given("notification.localizations"))
            // A notification with nothing in it is still one: the API says what it lacks.
            if body.member("notification") == nil { body.set("notification", .object([])) }
        }
        body.string("apns.pushType", form.given("apns.pushType"))
        body.number("apns.priority", form.given("apns.priority"))
        body.number("apns.expiration", form.given("apns.expiration"))
        body.string("apns.collapseID", form.given("apns.collapseID"))
        if form.isChecked("inbox") {
            body.set("inbox", .object([]))
            body.number("inbox.ttl", form.given("inbox.ttl"))
        }
        body.string("delivery", form.given("delivery"))
        if form.isChecked("wake") { body.set("wake", .value(.bool(true))) }
        body.number("ackTimeout", form.given("ackTimeout"))
        body.string("idempotencyKey", form.given("idempotencyKey"))
        body.string("sendAt", form.given("sendAt"))
        body.number("ratePerSecond", form.given("ratePerSecond"))
        body.string("broadcastChannel", form.given("broadcastChannel"))
        return body
    }

    /// `POST …/broadcast-channels/{name}/broadcasts`'s body from a channel's page: an update or end of the Live
    /// Activity, stamped `now`, with its content state (JSON), an optional alert and the priority.
    static func broadcast(_ form: ConsoleForm, now: Date) throws(JSONAPIError) -> BroadcastsAPI.BroadcastRequest {
        var body = FormJSON()
        body.string("payload.aps.event", form.given("event") ?? "update")
        body.set("payload.aps.timestamp", .value(.int(Int(now.timeIntervalSince1970))))
        try body.json("payload.aps.content-state", form.given("contentState"))
        body.string("payload.aps.alert.title", form.given("alertTitle"))
        body.string("payload.aps.alert.body", form.given("alertBody"))
        body.number("priority", form.given("priority"))
        return try decode(BroadcastsAPI.BroadcastRequest.self, body)
    }

    /// Decodes `body` as the API decodes a request's: the strict decoder, its errors as the API's 400s.
    static func decode<T: Decodable>(_ type: T.Type, _ body: FormJSON) throws(JSONAPIError) -> T {
        do {
            return try StrictJSONDecoder().decode(T.self, from: body.serialized())
        } catch {
            throw JSONAPIError(decoding: error)
        }
    }
}

/// A JSON object built from form fields by their dotted names. JSON typed in a field (custom data, a raw payload) goes
/// in as written, once the API's strict parser has read it, so the body the decoder sees is what a client would send.
struct FormJSON: Sendable, Equatable {
    indirect enum Node: Sendable, Equatable {
        case value(JSONValue)
        /// JSON text, already checked.
        case raw(String)
        case object([(String, Node)])

        static func == (lhs: Node, rhs: Node) -> Bool {
            switch (lhs, rhs) {
            case (.value(let a), .value(let b)): a == b
            case (.raw(let a), .raw(let b)): a == b
            case (.object(let a), .object(let b)): a.map(\.0) == b.map(\.0) && a.map(\.1) == b.map(\.1)
            default: false
            }
        }
    }

    private(set) var root: [(String, Node)] = []

    init(_ members: [(String, Node)] = []) {
        root = members
    }

    static func == (lhs: FormJSON, rhs: FormJSON) -> Bool { Node.object(lhs.root) == Node.object(rhs.root) }

    /// Sets the member at a dotted `path`, making the objects on the way.
    mutating func set(_ path: String, _ node: Node) {
        func set(_ members: inout [(String, Node)], _ keys: ArraySlice<Substring>) {
            let key = String(keys.first!)
            let index = members.firstIndex { $0.0 == key }
            if keys.count == 1 {
                if let index { members[index].1 = node } else { members.append((key, node)) }
                return
            }
            var inner: [(String, Node)] = []
            if let index, case .object(let existing) = members[index].1 { inner = existing }
            set(&inner, keys.dropFirst())
            if let index { members[index].1 = .object(inner) } else { members.append((key, .object(inner))) }
        }
        set(&root, path.split(separator: ".")[...])
    }

    /// The member at a dotted path, if set.
    func member(_ path: String) -> Node? {
        var node = Node.object(root)
        for key in path.split(separator: ".") {
            guard case .object(let members) = node, let next = members.first(where: { $0.0 == key })?.1 else { return nil }
            node = next
        }
        return node
    }

    mutating func string(_ path: String, _ value: String?) {
        if let value { set(path, .value(.string(value))) }
    }

    /// A number typed in a field; anything else goes in as the text typed, which the decoder refuses with the API's
    /// message for that field.
    mutating func number(_ path: String, _ value: String?) {
        guard let value else { return }
        if let integer = Int64(value) {
            set(path, .value(.int(Int(integer))))
        } else if let double = Double(value), double.isFinite {
            set(path, .value(.double(double)))
        } else {
            set(path, .value(.string(value)))
        }
    }

    /// JSON typed in a field. - Throws: the API's 400 for a body that is not valid JSON, naming the field.
    mutating func json(_ path: String, _ text: String?) throws(JSONAPIError) {
        guard let text else { return }
        do {
            _ = try StrictJSON.parse(Array(text.utf8))
        } catch {
            throw .badRequest(field: path, "the body is not valid JSON: \(error.description)")
        }
        set(path, .raw(text))
    }

    /// The object as JSON text.
    func serialized() -> [UInt8] {
        var out: [UInt8] = []
        func write(_ node: Node) {
            switch node {
            case .value(let value): out += (try? value.serialized()) ?? Array("null".utf8)
            case .raw(let text): out += Array(text.utf8)
            case .object(let members):
                out.append(UInt8(ascii: "{"))
                for (index, (key, member)) in members.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    out += (try? JSONValue.string(key).serialized()) ?? []
                    out.append(UInt8(ascii: ":"))
                    write(member)
                }
                out.append(UInt8(ascii: "}"))
            }
        }
        write(.object(root))
        return out
    }
}

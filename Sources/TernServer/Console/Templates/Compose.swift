extension ConsoleTemplates {
    /// Every field `POST …/pushes` takes, named after its place in the JSON body. The preview beside it is the
    /// server's: the script sends the form to `…/preview` as you type and shows the payload PushContent renders, its
    /// size against APNs' limit, and how many devices the audience reaches now.
    static let compose = """
        {{<layout}}{{$main}}
        \(problem)
        <form method="post" action="/console/apps/{{chrome.app.id}}/pushes" class="composer" id="composer" data-preview="/console/apps/{{chrome.app.id}}/preview" novalidate>
        <input type="hidden" name="csrf" value="{{chrome.csrf}}">
        <div class="compose-fields">
          <fieldset>
            <legend>Audience</legend>
            <div class="choices" role="radiogroup" aria-label="Send to">
              {{#view.audienceKinds}}<span><input type="radio" id="audience-{{value}}" name="audience.kind" value="{{value}}"{{#selected}} checked{{/selected}}> <label for="audience-{{value}}">{{label}}</label></span>{{/view.audienceKinds}}
            </div>
            <p><label for="audience-values">Tags, aliases, device ids or tokens (one a line); a Live Activity's id, then the users to narrow it to</label>
              <textarea id="audience-values" name="audience.values" rows="3" spellcheck="false" aria-describedby="audience-estimate">{{view.form.audience_values}}</textarea></p>
            <p><label for="audience-match">With several tags, devices having</label>
              <select id="audience-match" name="audience.match">{{#view.matches}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.matches}}</select></p>
            <details class="filters"{{#view.filtered}} open{{/view.filtered}}>
              <summary>Only the devices that registered…</summary>
              <div class="grid">
                <p><label for="filter-at-least">App version at least</label><input id="filter-at-least" name="audience.filters.appVersion.atLeast" value="{{view.form.audience_filters_appVersion_atLeast}}" placeholder="2.3"></p>
                <p><label for="filter-below">App version below</label><input id="filter-below" name="audience.filters.appVersion.below" value="{{view.form.audience_filters_appVersion_below}}" placeholder="3.0"></p>
                <p><label for="filter-languages">Languages (their locale picks one)</label><input id="filter-languages" name="audience.filters.languages" value="{{view.form.audience_filters_languages}}" placeholder="ko, zh-Hans"></p>
                <p><label for="filter-since">Registered since (RFC 3339)</label><input id="filter-since" name="audience.filters.registeredSince" value="{{view.form.audience_filters_registeredSince}}" placeholder="2026-11-01T00:00:00Z"></p>
              </div>
            </details>
            <p class="estimate" id="audience-estimate" role="status" aria-live="polite" data-field="audience">{{view.audience}}</p>
          </fieldset>
          <fieldset>
            <legend>Content</legend>
            <div class="choices" role="radiogroup" aria-label="Content">
              <span><input type="radio" id="content-notification" name="content" value="notification"{{^view.rawPayload}} checked{{/view.rawPayload}}> <label for="content-notification">Notification</label></span>
              <span><input type="radio" id="content-payload" name="content" value="payload"{{#view.rawPayload}} checked{{/view.rawPayload}}> <label for="content-payload">Raw payload</label></span>
            </div>
            <div class="grid" data-content="notification">
              <p><label for="title">Title</label><input id="title" name="notification.title" value="{{view.form.notification_title}}"></p>
              <p><label for="subtitle">Subtitle</label><input id="subtitle" name="notification.subtitle" value="{{view.form.notification_subtitle}}"></p>
              <p class="wide"><label for="body">Body</label><textarea id="body" name="notification.body" rows="2">{{view.form.notification_body}}</textarea></p>
              <p><label for="badge">Badge</label><input id="badge" name="notification.badge" value="{{view.form.notification_badge}}" aria-describedby="badge-hint"><small id="badge-hint">a number, unread or +N</small></p>
              <p><label for="sound">Sound</label><input id="sound" name="notification.sound" value="{{view.form.notification_sound}}"></p>
              <p><label for="category">Category</label><input id="category" name="notification.category" value="{{view.form.notification_category}}"></p>
              <p><label for="threadID">Thread id</label><input id="threadID" name="notification.threadID" value="{{view.form.notification_threadID}}"></p>
              <p><label for="interruptionLevel">Interruption level</label><select id="interruptionLevel" name="notification.interruptionLevel">{{#view.interruptionLevels}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.interruptionLevels}}</select></p>
              <p><input type="checkbox" id="contentAvailable" name="notification.contentAvailable" value="true"{{#view.contentAvailable}} checked{{/view.contentAvailable}}> <label for="contentAvailable">Content available (wakes the app)</label></p>
              <p><input type="checkbox" id="mutableContent" name="notification.mutableContent" value="true"{{#view.mutableContent}} checked{{/view.mutableContent}}> <label for="mutableContent">Mutable content (service extension)</label></p>
              <p class="wide"><label for="data">Custom data (a JSON object, beside aps)</label><textarea id="data" name="notification.data" rows="3" spellcheck="false">{{view.form.notification_data}}</textarea></p>
              <p class="wide"><label for="localizations">Other languages (a JSON object by language tag, each with its title, subtitle or body: each device gets the one its locale picks)</label><textarea id="localizations" name="notification.localizations" rows="3" spellcheck="false" placeholder='{"ko": {"title": "…", "body": "…"}, "zh-Hans": {"body": "…"}}'>{{view.form.notification_localizations}}</textarea></p>
            </div>
            <p data-content="payload"><label for="payload">Raw payload (JSON, with aps)</label><textarea id="payload" name="payload" rows="5" spellcheck="false">{{view.form.payload}}</textarea></p>
          </fieldset>
          <fieldset>
            <legend>APNs</legend>
            <div class="grid">
              <p><label for="pushType">Push type</label><select id="pushType" name="apns.pushType">{{#view.pushTypes}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.pushTypes}}</select></p>
              <p><label for="priority">Priority</label><select id="priority" name="apns.priority">{{#view.priorities}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.priorities}}</select></p>
              <p><label for="expiration">Expiration (epoch seconds; 0: now or never)</label><input id="expiration" name="apns.expiration" inputmode="numeric" value="{{view.form.apns_expiration}}"></p>
              <p><label for="collapseID">Collapse id</label><input id="collapseID" name="apns.collapseID" value="{{view.form.apns_collapseID}}"></p>
              <p><label for="broadcastChannel">Broadcast channel the started activity follows (a start's raw payload)</label><input id="broadcastChannel" name="broadcastChannel" value="{{view.form.broadcastChannel}}" autocomplete="off" spellcheck="false"></p>
            </div>
          </fieldset>
          <fieldset>
            <legend>Inbox and delivery</legend>
            <div class="grid">
              <p><input type="checkbox" id="inbox" name="inbox" value="true"{{#view.inbox}} checked{{/view.inbox}}> <label for="inbox">Keep it in the users' inboxes</label></p>
              <p><label for="inbox-ttl">Inbox TTL, seconds</label><input id="inbox-ttl" name="inbox.ttl" inputmode="numeric" value="{{view.form.inbox_ttl}}"></p>
              <p><label for="delivery">Delivery</label><select id="delivery" name="delivery">{{#view.deliveries}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.deliveries}}</select></p>
              <p><input type="checkbox" id="wake" name="wake" value="true"{{#view.wake}} checked{{/view.wake}}> <label for="wake">Wake offline devices (online)</label></p>
              <p><label for="ackTimeout">Acknowledgement timeout, seconds (auto)</label><input id="ackTimeout" name="ackTimeout" inputmode="decimal" value="{{view.form.ackTimeout}}"></p>
              <p><label for="idempotencyKey">Idempotency key</label><input id="idempotencyKey" name="idempotencyKey" value="{{view.form.idempotencyKey}}"></p>
              <p><label for="sendAt">Send at (RFC 3339, like 2026-12-01T09:00:00Z; empty: now)</label><input id="sendAt" name="sendAt" value="{{view.form.sendAt}}"></p>
              <p><label for="ratePerSecond">Recipients a second at most (empty: a broadcast takes the app's rate, if it has one; 0: not throttled)</label><input id="ratePerSecond" name="ratePerSecond" inputmode="numeric" value="{{view.form.ratePerSecond}}"></p>
            </div>
          </fieldset>
        </div>
        <aside class="preview" aria-labelledby="preview-title">
          <h2 id="preview-title">Payload preview</h2>
          <p class="meter"><meter id="payload-meter" min="0" max="{{view.preview.limit}}" high="{{view.preview.high}}" optimum="0" value="{{view.preview.bytes}}" data-field="meter"></meter>
            <span id="payload-size" data-field="size" role="status" aria-live="polite">{{view.preview.size}}</span></p>
          <p class="error" data-field="problem" role="alert"{{^view.preview.problem}} hidden{{/view.preview.problem}}>{{view.preview.problem}}</p>
          <pre id="payload-preview" data-field="payload" tabindex="0" aria-label="The APNs payload">{{view.preview.payload}}</pre>
          <p class="note" data-field="note">{{view.preview.note}}</p>
          <h3>Headers</h3>
          <pre data-field="headers">{{view.preview.headers}}</pre>
        </aside>
        <p class="send"><button type="submit" id="send">Send</button></p>
        </form>
        {{/main}}{{/layout}}
        """
}

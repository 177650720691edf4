extension ConsoleTemplates {
    /// A bar chart (``ConsoleChart``): accepted above the axis in one colour, failed stacked on it in another. Each
    /// bar's title says its numbers, so the chart reads without the colours.
    static let chart = """
        <figure class="chart">
        <svg viewBox="0 0 {{viewWidth}} {{viewHeight}}" role="img" aria-labelledby="{{id}}-title" data-chart="{{id}}" preserveAspectRatio="none">
        <title id="{{id}}-title">{{summary}}</title>
        <g class="bars">{{#bars}}<g><title>{{label}}: {{accepted}} accepted, {{failed}} failed</title><rect class="accepted" x="{{x}}" y="{{acceptedY}}" width="{{barWidth}}" height="{{acceptedHeight}}"></rect><rect class="failed" x="{{x}}" y="{{failedY}}" width="{{barWidth}}" height="{{failedHeight}}"></rect></g>{{/bars}}</g>
        <line class="axis" x1="0" y1="{{viewHeight}}" x2="{{viewWidth}}" y2="{{viewHeight}}"></line>
        </svg>
        <figcaption><span class="key accepted"></span> accepted <span class="key failed"></span> failed · highest bar {{highest}} · {{caption}}</figcaption>
        </figure>
        """

    static let overview = """
        {{<layout}}{{$main}}
        <p class="lede">This node over the last hour, refreshed every two seconds.</p>
        <div id="overview" data-source="/console/overview/data">
        <section class="stats" aria-label="Now">
          <div class="stat"><span class="label">Devices connected</span> <span class="value" data-field="deviceConnections">{{view.deviceConnections}}</span></div>
          <div class="stat"><span class="label">APNs connections</span> <span class="value" data-field="apnsConnections">{{view.apnsConnections}}</span></div>
          <div class="stat"><span class="label">Notifications, last hour</span> <span class="value" data-field="notifications">{{view.notifications}}</span></div>
          <div class="stat"><span class="label">Pushes completed, last hour</span> <span class="value" data-field="pushesCompleted">{{view.pushesCompleted}}</span></div>
          <div class="stat"><span class="label">Opened, last hour</span> <span class="value" data-field="opens">{{view.opens}}</span></div>
        </section>
        <section aria-labelledby="per-minute">
          <h2 id="per-minute">Notifications per minute</h2>
          {{#view.chart}}\(chart){{/view.chart}}
        </section>
        <section aria-labelledby="answers">
          <h2 id="answers">APNs answers, last hour</h2>
          <div class="table-wrap"><table>
            <thead><tr><th scope="col">Answer</th><th scope="col" class="num">Count</th></tr></thead>
            <tbody data-field="answers">{{#view.answers}}<tr><td>{{reason}}</td><td class="num">{{count}}</td></tr>{{/view.answers}}{{^view.answers}}<tr><td colspan="2">None yet</td></tr>{{/view.answers}}</tbody>
          </table></div>
        </section>
        </div>
        {{#view.hasApps}}
        <section aria-labelledby="your-apps">
          <h2 id="your-apps">Apps</h2>
          <ul class="links">{{#view.apps}}<li><a href="/console/apps/{{.}}/devices">{{.}}</a></li>{{/view.apps}}</ul>
        </section>
        {{/view.hasApps}}
        {{/main}}{{/layout}}
        """

    static let apps = """
        {{<layout}}{{$main}}
        <section aria-labelledby="list">
        <h2 id="list">Every app</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">App</th><th scope="col">Topic</th><th scope="col">Environment</th><th scope="col">Transport</th><th scope="col">Credentials</th><th scope="col">User binding</th><th scope="col">Created</th></tr></thead>
          <tbody>
          {{#view.apps}}<tr><td><a href="/console/apps/{{id}}">{{id}}</a></td><td>{{topic}}</td><td>{{environment}}</td><td>{{transport}}</td><td>{{credentials}}</td><td>{{userBinding}}</td><td><time datetime="{{createdAt}}">{{createdAt}}</time></td></tr>{{/view.apps}}
          {{^view.apps}}<tr><td colspan="7">No apps yet.</td></tr>{{/view.apps}}
          </tbody>
        </table></div>
        </section>
        <section aria-labelledby="new">
        <h2 id="new">New app</h2>
        \(problem)
        <form method="post" action="/console/apps" class="card" novalidate>
          <input type="hidden" name="csrf" value="{{chrome.csrf}}">
          <div class="grid">
            <p><label for="id">App id</label><input id="id" name="id" value="{{view.form.id}}" required aria-describedby="id-hint" autocomplete="off" spellcheck="false">
              <small id="id-hint">1-64 lowercase letters, digits or -</small></p>
            <p><label for="topic">Topic (bundle id)</label><input id="topic" name="topic" value="{{view.form.topic}}" required autocomplete="off" spellcheck="false"></p>
            <p><label for="environment">Environment</label><select id="environment" name="environment" aria-describedby="environment-hint">{{#view.environments}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/view.environments}}</select>
              <small id="environment-hint">simulator: the built-in APNs simulator, no Apple credentials</small></p>
            <p><label for="transport">Transport</label><select id="transport" name="transport">{{#view.transports}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/view.transports}}</select></p>
            <p><label for="userBinding">User binding</label><select id="userBinding" name="userBinding">{{#view.bindings}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/view.bindings}}</select></p>
            <p><label for="webhookURL">Webhook URL (optional)</label><input id="webhookURL" name="webhookURL" type="url" value="{{view.form.webhookURL}}" aria-describedby="webhookURL-hint">
              <small id="webhookURL-hint">gets the tokens APNs reports dead</small></p>
            <p><input type="checkbox" id="webhookOpens" name="webhookOpens" value="on"{{#view.webhookOpens}} checked{{/view.webhookOpens}}> <label for="webhookOpens">The webhook also gets the pushes users open (push.opened)</label></p>
            <p><label for="inboxMaxTTL">Inbox max TTL, seconds (optional)</label><input id="inboxMaxTTL" name="inboxMaxTTL" inputmode="numeric" value="{{view.form.inboxMaxTTL}}"></p>
            <p><label for="inboxCap">Inbox cap, messages (optional)</label><input id="inboxCap" name="inboxCap" inputmode="numeric" value="{{view.form.inboxCap}}"></p>
            <p><label for="broadcastRatePerSecond">Broadcasts: recipients a second at most (optional; a push to tags or everyone that gives no rate)</label><input id="broadcastRatePerSecond" name="broadcastRatePerSecond" inputmode="numeric" value="{{view.form.broadcastRatePerSecond}}"></p>
          </div>
          <fieldset>
            <legend>Custom endpoint (environment custom)</legend>
            <div class="grid">
              <p><label for="endpoint-host">Host</label><input id="endpoint-host" name="endpoint.host" value="{{view.form.endpoint_host}}"></p>
              <p><label for="endpoint-port">Port</label><input id="endpoint-port" name="endpoint.port" inputmode="numeric" value="{{view.form.endpoint_port}}"></p>
              <p class="wide"><label for="endpoint-ca">CA certificates (PEM, optional)</label><textarea id="endpoint-ca" name="endpoint.caPEM" rows="3">{{view.form.endpoint_caPEM}}</textarea></p>
            </div>
          </fieldset>
          <fieldset>
            <legend>APNs credentials (not for the simulator)</legend>
            <p><label for="credentials-type">Kind</label><select id="credentials-type" name="credentials.type">{{#view.credentialTypes}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.credentialTypes}}</select></p>
            <div class="grid">
              <p class="wide"><label for="keyPEM">Token key (.p8, PEM)</label><textarea id="keyPEM" name="credentials.keyPEM" rows="3" autocomplete="off"></textarea></p>
              <p><label for="keyID">Key id</label><input id="keyID" name="credentials.keyID" value="{{view.form.credentials_keyID}}" autocomplete="off"></p>
              <p><label for="teamID">Team id</label><input id="teamID" name="credentials.teamID" value="{{view.form.credentials_teamID}}" autocomplete="off"></p>
              <p class="wide"><label for="certificatePEM">Certificate (PEM)</label><textarea id="certificatePEM" name="credentials.certificatePEM" rows="3" autocomplete="off"></textarea></p>
              <p class="wide"><label for="privateKeyPEM">Private key (PEM)</label><textarea id="privateKeyPEM" name="credentials.privateKeyPEM" rows="3" autocomplete="off"></textarea></p>
              <p class="wide"><label for="base64">PKCS#12 (base64)</label><textarea id="base64" name="credentials.base64" rows="2" autocomplete="off"></textarea></p>
              <p><label for="passphrase">PKCS#12 passphrase</label><input id="passphrase" name="credentials.passphrase" type="password" autocomplete="off"></p>
            </div>
          </fieldset>
          <button type="submit">Create the app</button>
        </form>
        </section>
        {{/main}}{{/layout}}
        """

    static let app = """
        {{<layout}}{{$main}}
        {{#view.app}}
        {{#certificateWarning}}<div class="error" role="alert" id="certificate-warning"><p>{{.}}</p></div>{{/certificateWarning}}
        {{#certificateEnvironmentWarning}}<div class="error" role="alert" id="certificate-environment-warning"><p>{{.}}</p></div>{{/certificateEnvironmentWarning}}
        <dl class="facts">
          <dt>Topic</dt><dd>{{topic}}</dd>
          <dt>Environment</dt><dd>{{environment}}</dd>
          {{#endpoint}}<dt>Endpoint</dt><dd>{{.}}</dd>{{/endpoint}}
          <dt>Transport</dt><dd>{{transport}}</dd>
          <dt>Credentials</dt><dd>{{credentials}}</dd>
          {{#certificate}}<dt>Certificate valid until</dt><dd>{{.}}</dd>{{/certificate}}
          {{#certificateFor}}<dt>Certificate for</dt><dd>{{.}}</dd>{{/certificateFor}}
          <dt>User binding</dt><dd>{{userBinding}}</dd>
          <dt>Identity secret</dt><dd>{{identitySecret}}</dd>
          <dt>Webhook URL</dt><dd>{{webhookURL}}</dd>
          <dt>Webhook posts</dt><dd id="webhook-events">{{webhookEvents}}</dd>
          <dt>Inbox</dt><dd>{{inbox}}</dd>
          <dt>Broadcasts</dt><dd id="broadcasts">{{broadcasts}}</dd>
          <dt>Created</dt><dd><time datetime="{{createdAt}}">{{createdAt}}</time></dd>
          <dt>Changed</dt><dd><time datetime="{{updatedAt}}">{{updatedAt}}</time></dd>
        </dl>
        {{/view.app}}
        <section aria-labelledby="rotate">
        <h2 id="rotate">Rotate secrets</h2>
        <p>New secrets replace the old ones at once; they are shown once, on the next page. Sessions signed in with an
        old master secret end.</p>
        \(problem)
        <form method="post" action="/console/apps/{{view.app.id}}/rotate" class="card">
          <input type="hidden" name="csrf" value="{{chrome.csrf}}">
          <fieldset>
            <legend>Secrets to replace</legend>
            <p><input type="checkbox" id="rotate-appKey" name="rotate" value="appKey"> <label for="rotate-appKey">App key (every installed app must get the new one)</label></p>
            <p><input type="checkbox" id="rotate-masterSecret" name="rotate" value="masterSecret"> <label for="rotate-masterSecret">Master secret (your backend's)</label></p>
            <p><input type="checkbox" id="rotate-identitySecret" name="rotate" value="identitySecret"> <label for="rotate-identitySecret">Identity secret (signs alias tokens)</label></p>
            <p><input type="checkbox" id="rotate-webhookSecret" name="rotate" value="webhookSecret"> <label for="rotate-webhookSecret">Webhook secret (signs the webhook's requests)</label></p>
          </fieldset>
          <button type="submit" class="danger">Rotate</button>
        </form>
        </section>
        {{/main}}{{/layout}}
        """

    static let secrets = """
        {{<layout}}{{$main}}
        <div class="notice" role="status"><p><strong>Copy these now.</strong> Tern keeps only their hashes: they are not shown again.</p></div>
        <dl class="facts secrets">
          {{#view.secrets}}<dt>{{label}}</dt><dd><code class="secret">{{value}}</code> <small>{{purpose}}</small></dd>{{/view.secrets}}
        </dl>
        <p><a href="/console/apps/{{view.app}}">Go to the app {{view.app}}</a></p>
        {{/main}}{{/layout}}
        """

    static let devices = """
        {{<layout}}{{$main}}
        <form method="get" action="/console/apps/{{chrome.app.id}}/devices" class="card search" role="search">
          <p><label for="by">Find by</label><select id="by" name="by">{{#view.kinds}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.kinds}}</select></p>
          <p class="grow"><label for="q">Alias, tag, token or device id</label><input id="q" name="q" value="{{view.query}}" autocomplete="off" spellcheck="false"{{#problem}} aria-invalid="true" aria-describedby="problem"{{/problem}}></p>
          <p><button type="submit">Find</button></p>
        </form>
        \(problem)
        {{#view.searched}}
        <section aria-labelledby="found">
        <h2 id="found">{{view.resultSummary}}</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Device</th><th scope="col">Alias</th><th scope="col">Token</th><th scope="col">Environment</th><th scope="col">Tags</th><th scope="col">State</th><th scope="col">Registered</th></tr></thead>
          <tbody>
          {{#view.devices}}<tr><td><a href="/console/apps/{{chrome.app.id}}/devices/{{deviceId}}">{{deviceId}}</a></td><td>{{alias}}</td><td><code class="token" title="{{token}}">{{shortToken}}</code></td><td>{{environment}}</td><td>{{tags}}</td><td>{{state}}</td><td><time datetime="{{lastRegisteredAt}}">{{lastRegisteredAt}}</time></td></tr>{{/view.devices}}
          {{^view.devices}}<tr><td colspan="7">No device.</td></tr>{{/view.devices}}
          </tbody>
        </table></div>
        {{#view.next}}<p><a href="/console/apps/{{chrome.app.id}}/devices?by=tag&amp;q={{view.query}}&amp;after={{view.next}}">Next page</a></p>{{/view.next}}
        </section>
        {{/view.searched}}
        {{/main}}{{/layout}}
        """

    static let device = """
        {{<layout}}{{$main}}
        {{#view.device}}
        <dl class="facts">
          <dt>State</dt><dd>{{state}}</dd>
          <dt>Token</dt><dd><code class="token">{{token}}</code></dd>
          {{#view.pushTokens}}<dt>{{label}}</dt><dd><code class="token">{{token}}</code> {{state}}</dd>{{/view.pushTokens}}
          {{#view.activities}}<dt>Live Activity {{activityID}}</dt><dd><code class="token">{{token}}</code> {{state}}</dd>{{/view.activities}}
          <dt>Environment</dt><dd>{{environment}}</dd>
          <dt>Alias</dt><dd>{{alias}}</dd>
          <dt>Tags</dt><dd>{{tags}}</dd>
          <dt>Locale, time zone</dt><dd>{{locale}} {{timezone}}</dd>
          <dt>App version</dt><dd>{{appVersion}}</dd>
          <dt>First registered</dt><dd><time datetime="{{createdAt}}">{{createdAt}}</time></dd>
          <dt>Last registered</dt><dd><time datetime="{{lastRegisteredAt}}">{{lastRegisteredAt}}</time></dd>
        </dl>
        <p><a class="button" href="/console/apps/{{chrome.app.id}}/compose?audience.kind=devices&amp;audience.values={{deviceId}}">Send a push to this device</a></p>
        {{/view.device}}
        <section aria-labelledby="history">
        <h2 id="history">Token history</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Token</th><th scope="col">Environment</th><th scope="col">First registered</th><th scope="col">Replaced</th><th scope="col">Why</th></tr></thead>
          <tbody>
          {{#view.history}}<tr><td><code class="token">{{token}}</code></td><td>{{environment}}</td><td>{{firstRegisteredAt}}</td><td>{{replacedAt}}</td><td>{{reason}}</td></tr>{{/view.history}}
          {{^view.history}}<tr><td colspan="5">The device has had one token.</td></tr>{{/view.history}}
          </tbody>
        </table></div>
        </section>
        <section aria-labelledby="events">
        <h2 id="events">Token events</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">When</th><th scope="col">Token</th><th scope="col">Why it was deactivated</th><th scope="col">APNs' timestamp</th></tr></thead>
          <tbody>
          {{#view.events}}<tr><td>{{occurredAt}}</td><td><code class="token">{{token}}</code></td><td>{{reason}}</td><td>{{apnsTimestamp}}</td></tr>{{/view.events}}
          {{^view.events}}<tr><td colspan="4">No token of this device was deactivated.</td></tr>{{/view.events}}
          </tbody>
        </table></div>
        </section>
        {{/main}}{{/layout}}
        """

    static let tokenEvents = """
        {{<layout}}{{$main}}
        <p class="lede">Tokens deactivated, oldest first: APNs said so (410 with its timestamp, or a bad token), or the feedback service listed them.</p>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">Device</th><th scope="col">Token</th><th scope="col">Why</th><th scope="col">APNs' timestamp</th></tr></thead>
          <tbody>
          {{#view.events}}<tr><td>{{id}}</td><td>{{occurredAt}}</td><td><a href="/console/apps/{{chrome.app.id}}/devices/{{deviceId}}">{{deviceId}}</a></td><td><code class="token" title="{{token}}">{{shortToken}}</code></td><td>{{reason}}</td><td>{{apnsTimestamp}}</td></tr>{{/view.events}}
          {{^view.events}}<tr><td colspan="6">No token events.</td></tr>{{/view.events}}
          </tbody>
        </table></div>
        {{#view.next}}<p><a href="/console/apps/{{chrome.app.id}}/token-events?after={{view.next}}">Next page</a></p>{{/view.next}}
        {{/main}}{{/layout}}
        """

    static let activities = """
        {{<layout}}{{$main}}
        <p class="lede">The Live Activities devices follow now (each registered the activity's token), by id: an update to one reaches its devices. Each is forgotten 12 hours after it started.</p>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Activity</th><th scope="col">Devices</th><th scope="col">First started</th><th scope="col">Last token</th><th scope="col"><span class="visually-hidden">Send</span></th></tr></thead>
          <tbody>
          {{#view.activities}}<tr><td>{{activityId}}</td><td>{{devices}}</td><td>{{firstStartedAt}}</td><td>{{lastRegisteredAt}}</td><td><a href="/console/apps/{{chrome.app.id}}/compose?audience.kind=activity&amp;audience.values={{activityId}}">Update it</a></td></tr>{{/view.activities}}
          {{^view.activities}}<tr><td colspan="5">No device follows a Live Activity.</td></tr>{{/view.activities}}
          </tbody>
        </table></div>
        {{#view.next}}<p><a href="/console/apps/{{chrome.app.id}}/activities?after={{view.next}}">Next page</a></p>{{/view.next}}
        {{#view.firstPage}}
        <h2>Broadcast channels</h2>
        <p>Channels (iOS 18) the app's backend made through Tern: one broadcast to a channel updates the Live Activity on every device subscribed to it (<code>PUT/POST …/broadcast-channels</code> in the API).</p>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Name</th><th scope="col">Channel id</th><th scope="col">Keeps for offline devices</th><th scope="col">Environment</th><th scope="col">Made</th><th scope="col">Last broadcast</th></tr></thead>
          <tbody>
          {{#view.channels}}<tr><td><a href="/console/apps/{{chrome.app.id}}/broadcast-channels/{{name}}">{{name}}</a></td><td><code>{{channelId}}</code></td><td>{{storage}}</td><td>{{environment}}</td><td>{{createdAt}}</td><td>{{lastBroadcast}}</td></tr>{{/view.channels}}
          {{^view.channels}}<tr><td colspan="6">The app has no broadcast channel.</td></tr>{{/view.channels}}
          </tbody>
        </table></div>
        {{#view.nextChannels}}<p><a href="/console/apps/{{chrome.app.id}}/activities?channelsAfter={{view.nextChannels}}">More channels</a></p>{{/view.nextChannels}}
        <h3 id="make-channel">Make a channel</h3>
        \(problem)
        <form method="post" action="/console/apps/{{chrome.app.id}}/broadcast-channels" class="card" novalidate>
          <input type="hidden" name="csrf" value="{{chrome.csrf}}">
          <p><label for="channel-name">Name (the backend's for it, such as the match's id: 1-128 letters, digits, '.', '_', ':' and '-')</label><input id="channel-name" name="name" value="{{view.form.name}}" required autocomplete="off" spellcheck="false"></p>
          <p><label for="storage">Keeps for offline devices</label><select id="storage" name="storage">{{#view.storages}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.storages}}</select></p>
          <p><small>Made at APNs in the app's environment (the API takes another).</small></p>
          <button type="submit">Make the channel</button>
        </form>
        {{/view.firstPage}}
        {{/main}}{{/layout}}
        """

    /// A broadcast channel: a broadcast to it (as `POST …/broadcast-channels/{name}/broadcasts`, stamped now) and
    /// its latest broadcasts with APNs' answers.
    static let channel = """
        {{<layout}}{{$main}}
        {{#view.channel}}
        <dl class="facts">
          <dt>Channel id</dt><dd><code id="channel-id">{{channelId}}</code></dd>
          <dt>Keeps for offline devices</dt><dd>{{storage}}</dd>
          <dt>Environment</dt><dd>{{environment}}</dd>
          <dt>Made</dt><dd>{{createdAt}}</dd>
        </dl>
        {{/view.channel}}
        <section aria-labelledby="broadcast">
        <h2 id="broadcast">Broadcast</h2>
        <p>One request to APNs updates or ends the Live Activity on every device subscribed to the channel. The timestamp is now.</p>
        \(problem)
        <form method="post" action="/console/apps/{{chrome.app.id}}/broadcast-channels/{{view.channel.name}}/broadcasts" class="card" novalidate>
          <input type="hidden" name="csrf" value="{{chrome.csrf}}">
          <p><label for="event">Event</label><select id="event" name="event">{{#view.events}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.events}}</select></p>
          <p><label for="contentState">Content state (a JSON object: the activity's ContentState)</label><textarea id="contentState" name="contentState" rows="4" spellcheck="false" required>{{view.form.contentState}}</textarea></p>
          <p><label for="alertTitle">Alert title (optional)</label><input id="alertTitle" name="alertTitle" value="{{view.form.alertTitle}}"></p>
          <p><label for="alertBody">Alert body (optional)</label><input id="alertBody" name="alertBody" value="{{view.form.alertBody}}"></p>
          <p><label for="priority">Priority</label><select id="priority" name="priority">{{#view.priorities}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/view.priorities}}</select></p>
          <button type="submit">Broadcast</button>
        </form>
        </section>
        <section aria-labelledby="history">
        <h2 id="history">Latest broadcasts</h2>
        <div class="table-wrap"><table id="broadcasts">
          <thead><tr><th scope="col">Sent</th><th scope="col">Event</th><th scope="col">Content state</th><th scope="col">Priority</th><th scope="col">APNs</th><th scope="col">Unique id</th></tr></thead>
          <tbody>
          {{#view.sent}}<tr id="broadcast-{{id}}"><td>{{sentAt}}</td><td>{{event}}</td><td><code>{{state}}</code></td><td>{{priority}}</td><td>{{#delivered}}delivered{{/delivered}}{{^delivered}}<strong>{{result}}</strong>: {{reason}}{{/delivered}}</td><td><code>{{uniqueID}}</code></td></tr>{{/view.sent}}
          {{^view.sent}}<tr><td colspan="6">Nothing broadcast to this channel yet.</td></tr>{{/view.sent}}
          </tbody>
        </table></div>
        {{#view.next}}<p><a href="/console/apps/{{chrome.app.id}}/broadcast-channels/{{view.channel.name}}?before={{view.next}}">Older broadcasts</a></p>{{/view.next}}
        </section>
        <section aria-labelledby="delete">
        <h2 id="delete">Delete the channel</h2>
        <p>APNs forgets it: the Live Activities subscribed to it get no more broadcasts, and its history here goes with it.</p>
        <form method="post" action="/console/apps/{{chrome.app.id}}/broadcast-channels/{{view.channel.name}}/delete" class="card" novalidate>
          <input type="hidden" name="csrf" value="{{chrome.csrf}}">
          <p><label for="confirm">Type the channel's name, {{view.channel.name}}, to delete it</label><input id="confirm" name="confirm" required autocomplete="off" spellcheck="false"></p>
          <button type="submit" class="danger">Delete the channel</button>
        </form>
        </section>
        {{/main}}{{/layout}}
        """

    static let pushes = """
        {{<layout}}{{$main}}
        <p><a class="button" href="/console/apps/{{chrome.app.id}}/compose">Compose a push</a></p>
        <section aria-labelledby="over-time">
          <h2 id="over-time">Accepted and failed, push by push</h2>
          {{#view.chart}}\(chart){{/view.chart}}
        </section>
        <section aria-labelledby="recent">
        <h2 id="recent">Recent pushes</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Created</th><th scope="col">Push</th><th scope="col">Status</th><th scope="col" class="num">Targeted</th><th scope="col" class="num">Accepted</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Opened</th><th scope="col">Failures by reason</th><th scope="col">Stop</th></tr></thead>
          <tbody>
          {{#view.pushes}}<tr><td><time datetime="{{createdAt}}">{{createdAt}}</time></td><td><a href="/console/apps/{{chrome.app.id}}/pushes/{{id}}">{{shortID}}</a></td><td><span class="status {{status}}">{{status}}</span>{{#sendAt}} for <time datetime="{{.}}">{{.}}</time>{{/sendAt}}{{#ratePerSecond}}, {{.}} a second{{/ratePerSecond}}</td><td class="num">{{targeted}}</td><td class="num">{{accepted}}</td><td class="num">{{failed}}</td><td class="num">{{opened}}</td><td>{{failedByReason}}</td><td>{{#stoppable}}<form method="post" action="/console/apps/{{chrome.app.id}}/pushes/{{id}}/cancel" class="stop"><input type="hidden" name="csrf" value="{{chrome.csrf}}"><button type="submit" aria-label="Stop push {{shortID}}">Stop</button></form>{{/stoppable}}</td></tr>{{/view.pushes}}
          {{^view.pushes}}<tr><td colspan="9">No pushes yet.</td></tr>{{/view.pushes}}
          </tbody>
        </table></div>
        </section>
        {{/main}}{{/layout}}
        """

    static let push = """
        {{<layout}}{{$main}}
        {{#view.push}}
        <div id="push" data-source="/console/apps/{{chrome.app.id}}/pushes/{{id}}/status" data-status="{{status}}">
        <p class="lede">Status: <strong class="status {{status}}" data-field="status" role="status" aria-live="polite">{{status}}</strong></p>
        <dl class="facts counts">
          {{#audience}}<dt>Audience</dt><dd>{{.}}</dd>{{/audience}}
          <dt>Recipients answered</dt><dd data-field="targeted">{{targeted}}</dd>
          <dt>Accepted</dt><dd data-field="accepted">{{accepted}}</dd>
          <dt>Failed</dt><dd data-field="failed">{{failed}}</dd>
          <dt>Tokens pruned</dt><dd data-field="pruned">{{pruned}}</dd>
          <dt>Inbox messages dropped</dt><dd data-field="inboxDropped">{{inboxDropped}}</dd>
          {{#received}}<dt>Received</dt><dd data-field="received" title="devices whose Notification Service Extension reported its arrival">{{count}}</dd>{{/received}}
          <dt>Opened</dt><dd data-field="opened" title="devices whose app reported the user's open">{{opened}}</dd>
          {{#online}}<dt>Delivered online</dt><dd>{{deliveredOnline}}</dd><dt>Acknowledged</dt><dd>{{acked}}</dd><dt>Fell back to APNs</dt><dd>{{fellBackToAPNs}}</dd>{{/online}}
          <dt>Created</dt><dd><time datetime="{{createdAt}}">{{createdAt}}</time></dd>
          {{#sendAt}}<dt>Scheduled for</dt><dd><time datetime="{{.}}">{{.}}</time></dd>{{/sendAt}}
          {{#ratePerSecond}}<dt>Throttled to</dt><dd>{{.}} recipients a second</dd>{{/ratePerSecond}}
          <dt>Finished</dt><dd data-field="finishedAt">{{finishedAt}}</dd>
          {{#cancelledAt}}<dt>Cancelled</dt><dd>{{.}}: no recipient was handed out after it</dd>{{/cancelledAt}}
          <dt>Push id</dt><dd><code>{{id}}</code></dd>
        </dl>
        {{#stoppable}}
        <form method="post" action="/console/apps/{{chrome.app.id}}/pushes/{{id}}/cancel" class="stop">
          <input type="hidden" name="csrf" value="{{chrome.csrf}}">
          <button type="submit">Stop this push</button>
          <span class="hint">No more of its audience is handed out; the recipients handed out already still get it. A scheduled push is not sent at all.</span>
        </form>
        {{/stoppable}}
        </div>
        {{/view.push}}
        <section aria-labelledby="by-reason">
        <h2 id="by-reason">Failures by reason</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Reason</th><th scope="col" class="num">Count</th><th scope="col">Cause</th></tr></thead>
          <tbody>{{#view.reasons}}<tr><td>{{reason}}</td><td class="num">{{count}}</td><td>{{#detail}}{{.}}{{/detail}}{{^detail}}—{{/detail}}</td></tr>{{/view.reasons}}{{^view.reasons}}<tr><td colspan="3">No failures.</td></tr>{{/view.reasons}}</tbody>
        </table></div>
        </section>
        {{#view.failures}}
        <section aria-labelledby="failures">
        <h2 id="failures">Failures (the first {{view.failureLimit}})</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">When</th><th scope="col">Device</th><th scope="col">Token</th><th scope="col">Status</th><th scope="col">Reason</th></tr></thead>
          <tbody>{{#view.failures}}<tr><td>{{at}}</td><td>{{#deviceId}}<a href="/console/apps/{{chrome.app.id}}/devices/{{.}}">{{.}}</a>{{/deviceId}}</td><td><code class="token" title="{{token}}">{{shortToken}}</code></td><td>{{status}}</td><td>{{reason}}</td></tr>{{/view.failures}}</tbody>
        </table></div>
        </section>
        {{/view.failures}}
        {{/main}}{{/layout}}
        """
}

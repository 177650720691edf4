/// The console's Mustache templates, one string per page, kept in Swift so `tern` is one file to install (no
/// resource bundle beside it). Every page fills the layout's `main` block. `{{x}}` escapes HTML; the console never
/// uses `{{{x}}}` or `{{&x}}` (a test checks), so no value can become markup.
///
/// Each page renders a ``ConsolePage``: `chrome` (the title, the signed-in principal, the CSRF token, which
/// navigation entry is current) and `view`, the page's own values.
enum ConsoleTemplates {
    /// Every template by name: the pages and the layout they extend.
    static let all: [String: String] = [
        "layout": layout,
        "sign-in": signIn,
        "overview": overview,
        "apps": apps,
        "app": app,
        "secrets": secrets,
        "devices": devices,
        "device": device,
        "compose": compose,
        "pushes": pushes,
        "push": push,
        "token-events": tokenEvents,
        "activities": activities,
        "channel": channel,
        "error": error,
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        {{#chrome.csrf}}<meta name="csrf-token" content="{{chrome.csrf}}">{{/chrome.csrf}}
        <title>{{chrome.title}} · Tern console</title>
        <link rel="stylesheet" href="/console/static/console.css">
        <script src="/console/static/console.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#main">Skip to the content</a>
        <header class="top">
          <a class="brand" href="/console">Tern</a>
          {{#chrome.signedIn}}
          <nav aria-label="Console">
            <ul>
              <li><a href="/console"{{#chrome.overview}} aria-current="page"{{/chrome.overview}}>Overview</a></li>
              <li><a href="/console/apps"{{#chrome.appsPage}} aria-current="page"{{/chrome.appsPage}}>Apps</a></li>
            </ul>
          </nav>
          <form class="sign-out" method="post" action="/console/sign-out">
            <input type="hidden" name="csrf" value="{{chrome.csrf}}">
            <span class="who">{{chrome.principal}}</span>
            <button type="submit" class="secondary">Sign out</button>
          </form>
          {{/chrome.signedIn}}
        </header>
        {{#chrome.app}}
        <nav class="app-nav" aria-label="App {{id}}">
          <span class="app-name">App <strong>{{id}}</strong></span>
          <ul>
            <li><a href="/console/apps/{{id}}/devices"{{#devices}} aria-current="page"{{/devices}}>Devices</a></li>
            <li><a href="/console/apps/{{id}}/compose"{{#compose}} aria-current="page"{{/compose}}>Compose</a></li>
            <li><a href="/console/apps/{{id}}/pushes"{{#pushes}} aria-current="page"{{/pushes}}>Pushes</a></li>
            <li><a href="/console/apps/{{id}}/token-events"{{#events}} aria-current="page"{{/events}}>Token events</a></li>
            <li><a href="/console/apps/{{id}}/activities"{{#activities}} aria-current="page"{{/activities}}>Live Activities</a></li>
            {{#canManage}}<li><a href="/console/apps/{{id}}"{{#settings}} aria-current="page"{{/settings}}>Settings</a></li>{{/canManage}}
          </ul>
        </nav>
        {{/chrome.app}}
        <main id="main" tabindex="-1">
        <h1>{{chrome.title}}</h1>
        {{$main}}{{/main}}
        </main>
        </body>
        </html>

        """

    /// A refusal in the API's words, at the top of a form: what is wrong and which field.
    static let problem = """
        {{#problem}}<div class="error" role="alert" id="problem"><p><strong>{{message}}</strong></p>{{#field}}<p>Field: <code>{{field}}</code></p>{{/field}}</div>{{/problem}}
        """

    static let signIn = """
        {{<layout}}{{$main}}
        <p>Sign in with the admin token (every app) or an app's master secret (that app only). Both were printed by
        <code>tern serve</code> when it made them.</p>
        \(problem)
        <form method="post" action="/console/sign-in" class="card narrow">
          <label for="secret">Admin token or master secret</label>
          <input id="secret" name="secret" type="password" autocomplete="current-password" required autofocus{{#problem}} aria-invalid="true" aria-describedby="problem"{{/problem}}>
          <button type="submit">Sign in</button>
        </form>
        {{/main}}{{/layout}}
        """

    static let error = """
        {{<layout}}{{$main}}
        <div class="error" role="alert"><p>{{view.message}}</p></div>
        <p><a href="/console">Back to the overview</a></p>
        {{/main}}{{/layout}}
        """
}

/// The console's static files, served from `/console/static/` (the Content-Security-Policy allows scripts and styles
/// from there only).
enum ConsoleAssets {
    /// The console's one script: the composer's live preview, a push followed to completion, the live overview. Plain
    /// JavaScript; every page works without it, less the live parts. It only ever sets text (`textContent`) and SVG
    /// attributes, never markup.
    static let script = """
        "use strict";
        (function () {
          var csrfMeta = document.querySelector('meta[name="csrf-token"]');
          var csrf = csrfMeta ? csrfMeta.getAttribute("content") : "";

          function signInAgain(response) {
            if (response.status === 401) { window.location.assign("/console/sign-in"); return true; }
            return false;
          }

          function getJSON(url) {
            return fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin", cache: "no-store" })
              .then(function (response) {
                if (signInAgain(response)) { throw new Error("signed out"); }
                return response.json();
              });
          }

          function setField(root, name, value) {
            var element = root.querySelector('[data-field="' + name + '"]');
            if (element) { element.textContent = value === null || value === undefined ? "" : String(value); }
            return element;
          }

          var svgNS = "http://www.w3.org/2000/svg";
          function drawChart(chart) {
            var svg = document.querySelector('svg[data-chart="' + chart.id + '"]');
            if (!svg) { return; }
            var bars = svg.querySelector("g.bars");
            while (bars.firstChild) { bars.removeChild(bars.firstChild); }
            chart.bars.forEach(function (bar) {
              var group = document.createElementNS(svgNS, "g");
              var title = document.createElementNS(svgNS, "title");
              title.textContent = bar.label + ": " + bar.accepted + " accepted, " + bar.failed + " failed";
              group.appendChild(title);
              [["accepted", bar.acceptedY, bar.acceptedHeight], ["failed", bar.failedY, bar.failedHeight]].forEach(function (part) {
                var rect = document.createElementNS(svgNS, "rect");
                rect.setAttribute("class", part[0]);
                rect.setAttribute("x", bar.x);
                rect.setAttribute("y", part[1]);
                rect.setAttribute("width", bar.barWidth);
                rect.setAttribute("height", part[2]);
                group.appendChild(rect);
              });
              bars.appendChild(group);
            });
            var label = svg.querySelector("title");
            if (label) { label.textContent = chart.summary; }
          }

          // The composer: the server renders the payload as it would send it, and counts the audience.
          var composer = document.getElementById("composer");
          if (composer) {
            var timer = null;
            var sequence = 0;
            var showContent = function () {
              var chosen = composer.querySelector('input[name="content"]:checked');
              var kind = chosen ? chosen.value : "notification";
              composer.querySelectorAll("[data-content]").forEach(function (section) {
                section.hidden = section.getAttribute("data-content") !== kind;
              });
            };
            var preview = function () {
              var mine = ++sequence;
              var body = new URLSearchParams(new FormData(composer));
              body.delete("csrf");
              fetch(composer.getAttribute("data-preview"), {
                method: "POST", credentials: "same-origin", cache: "no-store", body: body,
                headers: { "Accept": "application/json", "X-CSRF-Token": csrf }
              }).then(function (response) {
                if (signInAgain(response)) { throw new Error("signed out"); }
                return response.json();
              }).then(function (answer) {
                if (mine !== sequence) { return; }
                setField(composer, "payload", answer.payload);
                setField(composer, "size", answer.size);
                setField(composer, "note", answer.note);
                setField(composer, "headers", answer.headers);
                setField(composer, "audience", answer.audience);
                var meter = composer.querySelector('[data-field="meter"]');
                if (meter) { meter.value = answer.bytes; }
                var problem = setField(composer, "problem", answer.problem);
                if (problem) { problem.hidden = !answer.problem; }
              }).catch(function () {});
            };
            var schedule = function () {
              if (timer) { clearTimeout(timer); }
              timer = setTimeout(preview, 250);
            };
            composer.addEventListener("input", schedule);
            composer.addEventListener("change", function () { showContent(); schedule(); });
            showContent();
            preview();
          }

          // A push: followed every second until it is completed, then the page is read again for its failures.
          var push = document.getElementById("push");
          if (push && push.getAttribute("data-status") !== "completed") {
            var follow = function () {
              getJSON(push.getAttribute("data-source")).then(function (state) {
                ["status", "targeted", "accepted", "failed", "pruned", "inboxDropped", "opened", "finishedAt"].forEach(function (name) {
                  setField(push, name, state[name]);
                });
                var status = push.querySelector('[data-field="status"]');
                if (status) { status.className = "status " + state.status; }
                if (state.status === "completed") {
                  window.location.reload();
                } else {
                  setTimeout(follow, 1000);
                }
              }).catch(function () { setTimeout(follow, 3000); });
            };
            setTimeout(follow, 500);
          }

          // The overview: every two seconds.
          var overview = document.getElementById("overview");
          if (overview) {
            var refresh = function () {
              getJSON(overview.getAttribute("data-source")).then(function (data) {
                ["deviceConnections", "apnsConnections", "notifications", "pushesCompleted", "opens"].forEach(function (name) {
                  setField(overview, name, data[name]);
                });
                drawChart(data.chart);
                var rows = overview.querySelector('[data-field="answers"]');
                if (rows) {
                  while (rows.firstChild) { rows.removeChild(rows.firstChild); }
                  var answers = data.answers.length ? data.answers : [{ reason: "None yet", count: "" }];
                  answers.forEach(function (answer) {
                    var row = document.createElement("tr");
                    var reason = document.createElement("td");
                    reason.textContent = answer.reason;
                    var count = document.createElement("td");
                    count.className = "num";
                    count.textContent = answer.count;
                    row.appendChild(reason);
                    row.appendChild(count);
                    rows.appendChild(row);
                  });
                }
                setTimeout(refresh, 2000);
              }).catch(function () { setTimeout(refresh, 5000); });
            };
            setTimeout(refresh, 2000);
          }
        })();

        """
}

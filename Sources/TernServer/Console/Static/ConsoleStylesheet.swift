extension ConsoleAssets {
    /// The console's one stylesheet (no inline styles: the Content-Security-Policy allows only this file). Colours
    /// keep a contrast of at least 4.5:1 on their backgrounds; below 720 px the layout is one column.
    static let stylesheet = """
        :root { --ink: #1b1f24; --muted: #4a5360; --line: #c9d0d8; --paper: #ffffff; --wash: #f3f5f8; --accent: #0b57d0;
          --accent-ink: #ffffff; --ok: #1a7f37; --bad: #b3261e; --warn-wash: #fff4ce; --bad-wash: #fde8e7; --focus: #ff9f1a; }
        * { box-sizing: border-box; }
        html { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 16px; color: var(--ink); background: var(--wash); }
        body { margin: 0; line-height: 1.45; }
        a { color: var(--accent); }
        a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible, pre:focus-visible, main:focus-visible {
          outline: 3px solid var(--focus); outline-offset: 2px; }
        .skip { position: absolute; left: -999px; top: 0; background: var(--paper); padding: .5rem 1rem; z-index: 10; }
        .skip:focus { left: .5rem; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .6rem 1.25rem; background: var(--ink); color: #fff; }
        header.top a { color: #fff; }
        .brand { font-weight: 700; font-size: 1.15rem; text-decoration: none; }
        nav ul { list-style: none; display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: 0; padding: 0; }
        nav a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
        .sign-out { margin-left: auto; display: flex; align-items: center; gap: .75rem; }
        .who { font-size: .9rem; color: #e3e7ec; }
        .app-nav { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .5rem 1.25rem; background: var(--paper); border-bottom: 1px solid var(--line); }
        main { max-width: 1200px; margin: 0 auto; padding: 1rem 1.25rem 3rem; }
        h1 { font-size: 1.6rem; margin: .5rem 0 1rem; }
        h2 { font-size: 1.2rem; margin: 1.5rem 0 .5rem; }
        h3 { font-size: 1rem; margin: 1rem 0 .25rem; }
        .lede { color: var(--muted); }
        .card { background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; }
        .narrow { max-width: 28rem; }
        label { display: block; font-weight: 600; margin-bottom: .2rem; }
        input[type="checkbox"] + label, input[type="radio"] + label { display: inline; font-weight: 400; }
        input:not([type="checkbox"]):not([type="radio"]), select, textarea { width: 100%; font: inherit; padding: .45rem .5rem;
          border: 1px solid #7a8594; border-radius: 6px; background: var(--paper); color: var(--ink); }
        textarea { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9rem; }
        input[aria-invalid="true"] { border-color: var(--bad); border-width: 2px; }
        small { display: block; color: var(--muted); font-size: .85rem; }
        button, .button { display: inline-block; font: inherit; font-weight: 600; padding: .5rem 1.1rem; border-radius: 6px; border: 1px solid var(--accent);
          background: var(--accent); color: var(--accent-ink); cursor: pointer; text-decoration: none; }
        button.secondary { background: transparent; color: #fff; border-color: #fff; padding: .25rem .7rem; }
        button.danger { background: var(--bad); border-color: var(--bad); }
        fieldset { border: 1px solid var(--line); border-radius: 8px; margin: 0 0 1rem; padding: .5rem 1rem 1rem; background: var(--paper); }
        legend { font-weight: 700; padding: 0 .3rem; }
        .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: 0 1rem; }
        .grid .wide { grid-column: 1 / -1; }
        .choices { display: flex; flex-wrap: wrap; gap: .25rem 1.25rem; margin: .25rem 0 .5rem; }
        .search { display: flex; flex-wrap: wrap; gap: 0 1rem; align-items: flex-end; }
        .search p { margin: .25rem 0; }
        .search .grow { flex: 1 1 16rem; }
        .error { background: var(--bad-wash); border-left: 4px solid var(--bad); padding: .5rem .75rem; color: #5c0f0b; }
        .error p { margin: .2rem 0; }
        .notice { background: var(--warn-wash); border-left: 4px solid #8a6100; padding: .5rem .75rem; }
        .table-wrap { overflow-x: auto; background: var(--paper); border: 1px solid var(--line); border-radius: 8px; }
        table { border-collapse: collapse; width: 100%; font-size: .92rem; }
        th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { background: var(--wash); }
        .num { text-align: right; font-variant-numeric: tabular-nums; }
        code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .88rem; }
        code.token { word-break: break-all; }
        code.secret { word-break: break-all; background: var(--wash); padding: .1rem .3rem; user-select: all; }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; background: var(--paper); border: 1px solid var(--line);
          border-radius: 8px; padding: 1rem; margin: 0 0 1rem; }
        .facts dt { font-weight: 600; }
        .facts dd { margin: 0; word-break: break-word; }
        .stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); gap: 1rem; }
        .stat { background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; }
        .stat .label { display: block; color: var(--muted); font-size: .9rem; }
        .stat .value { display: block; font-size: 1.8rem; font-weight: 700; font-variant-numeric: tabular-nums; }
        .status.completed { color: var(--ok); }
        .status.scheduled, .status.pending, .status.sending { color: #8a6100; }
        .chart { margin: 0; background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: .75rem; }
        .chart svg { width: 100%; height: 10rem; display: block; }
        .chart rect.accepted { fill: var(--ok); }
        .chart rect.failed { fill: var(--bad); }
        .chart .axis { stroke: var(--muted); stroke-width: 1; }
        .chart figcaption { color: var(--muted); font-size: .85rem; margin-top: .4rem; }
        .key { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; vertical-align: -1px; }
        .key.accepted { background: var(--ok); }
        .key.failed { background: var(--bad); }
        .composer { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1.25rem; align-items: start; }
        .compose-fields { grid-column: 1; grid-row: 1; }
        .composer .send { grid-column: 1; grid-row: 2; margin: 0; }
        .preview { grid-column: 2; grid-row: 1 / span 2; position: sticky; top: 1rem; background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; }
        .preview h2 { margin-top: 0; }
        .preview pre { background: var(--wash); border-radius: 6px; padding: .6rem; white-space: pre-wrap; word-break: break-all; font-size: .85rem; max-height: 22rem; overflow: auto; }
        .meter meter { width: 100%; height: 1.1rem; }
        .estimate { font-weight: 600; }
        .note { color: var(--muted); font-size: .9rem; }
        .links { display: flex; flex-wrap: wrap; gap: .5rem 1.25rem; padding: 0; list-style: none; }
        [hidden] { display: none !important; }
        @media (max-width: 720px) {
          html { font-size: 15px; }
          main { padding: .75rem .75rem 2rem; }
          .composer { grid-template-columns: 1fr; }
          .compose-fields, .preview, .composer .send { grid-column: 1; grid-row: auto; }
          .preview { position: static; }
          .facts { grid-template-columns: 1fr; }
          .facts dd { margin-bottom: .4rem; }
          .sign-out { margin-left: 0; width: 100%; justify-content: space-between; }
          th, td { padding: .4rem; }
        }

        """
}

/* The DAG view: the nightly benchmark's history, a panel per watched metric, with the baseline
   and threshold band the newest run was judged against and the runs the gate flagged. Draws the
   "view" the provider's /api/dags/{dag}/benchmark endpoint returns. */
(function () {
  "use strict";
  var V = window.PathwaysView;
  var el = V.el;
  var svg = V.svg;

  var W = 560;
  var H = 236;
  var M = { left: 62, right: 14, top: 12, bottom: 40 };

  function chart(panel, view) {
    var n = view.runs.length;
    var plotW = W - M.left - M.right;
    var plotH = H - M.top - M.bottom;
    var pad = n > 1 ? Math.min(24, plotW / (2 * n)) : 0;
    function x(position) { return M.left + (n > 1 ? pad + (position / (n - 1)) * (plotW - 2 * pad) : plotW / 2); }
    function y(value) { return M.top + (1 - (value - panel.y_min) / (panel.y_max - panel.y_min)) * plotH; }
    var node = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": panel.title, "data-metric": panel.metric });
    V.niceTicks(panel.y_min, panel.y_max, 4).forEach(function (tick) {
      node.appendChild(svg("line", { class: "grid", x1: M.left, x2: W - M.right, y1: y(tick), y2: y(tick) }));
      node.appendChild(svg("text", { class: "tick", x: M.left - 6, y: y(tick) + 4, "text-anchor": "end", text: V.number(tick) }));
    });
    view.ticks.forEach(function (position) {
      node.appendChild(svg("text", { class: "tick", x: x(position), y: H - M.bottom + 16, "text-anchor": "middle", text: view.runs[position].label }));
    });
    if (panel.baseline !== null && panel.limit !== null) {
      var top = y(Math.max(panel.baseline, panel.limit));
      var bottom = y(Math.min(panel.baseline, panel.limit));
      node.appendChild(svg("rect", { class: "band", x: M.left, width: plotW, y: top, height: Math.max(bottom - top, 1), tip: "threshold band: " + panel.band_note }));
      node.appendChild(svg("line", { class: "baseline", x1: M.left, x2: W - M.right, y1: y(panel.baseline), y2: y(panel.baseline), tip: "baseline " + V.number(panel.baseline) }));
    }
    var path = "";
    var previous = null;
    panel.points.forEach(function (p) {
      path += (previous !== null && p.position === previous + 1 ? " L" : " M") + x(p.position).toFixed(1) + " " + y(p.value).toFixed(1);
      previous = p.position;
    });
    if (path) node.appendChild(svg("path", { class: "series", d: path.trim() }));
    panel.points.forEach(function (p) {
      var run = view.runs[p.position];
      var tip = run.label + " · " + p.run_id + "\n" + panel.metric + " " + V.number(p.value) +
        (p.baseline_then !== null ? " (baseline then " + V.number(p.baseline_then) + ": " + p.status_then + ")" : " (no baseline yet)") +
        (p.regressed ? "\nflagged as regressed" : "");
      node.appendChild(svg("circle", {
        class: "point" + (p.regressed ? " regressed" : ""), cx: x(p.position), cy: y(p.value), r: p.regressed ? 5.5 : 4,
        "data-run-id": p.run_id, tip: tip
      }));
      if (p.current) node.appendChild(svg("circle", { class: "current", cx: x(p.position), cy: y(p.value), r: 9 }));
    });
    return node;
  }

  function legend(view) {
    return el("ul", { class: "legend" }, [
      el("li", {}, [el("span", { class: "swatch dot" }), "runs of " + view.engine]),
      el("li", {}, [el("span", { class: "swatch dot regressed" }), "flagged as regressed"]),
      el("li", {}, [el("span", { class: "swatch ring" }), view.current_label]),
      el("li", {}, [el("span", { class: "swatch baseline" }), "baseline it was compared with"]),
      el("li", {}, [el("span", { class: "swatch band" }), "threshold band (worse side)"])
    ]);
  }

  function engines(view, query) {
    if (view.engines.length < 2) return null;
    return el("nav", { class: "engines" }, ["Engine: "].concat(view.engines.map(function (e) {
      var params = new URLSearchParams(query);
      params.set("engine", e.engine);
      return el("a", { href: "?" + params.toString(), "aria-current": e.engine === view.engine ? "page" : null }, [e.engine + " (" + e.runs + ")"]);
    })));
  }

  function runsTable(view) {
    return el("details", { class: "card" }, [
      el("summary", {}, ["Every run of " + view.engine + " (" + view.runs.length + ")"]),
      el("table", { class: "runs" }, [
        el("thead", {}, [el("tr", {}, ["run", "recorded", "regressed in", "checkpoint"].map(function (h) { return el("th", {}, [h]); }))]),
        el("tbody", {}, view.runs.slice().reverse().map(function (run) {
          return el("tr", { class: run.regressions.length ? "regressed" : null }, [
            el("td", {}, [el("code", {}, [run.run_id])]),
            el("td", {}, [run.when]),
            el("td", {}, [run.regressions.join(", ") || "–"]),
            el("td", {}, [run.checkpoint ? el("code", {}, [run.checkpoint]) : "–"])
          ]);
        }))
      ])
    ]);
  }

  function render(body, query) {
    var view = body.view;
    if (!view.has_history) return V.showStatus(view.message, "empty");
    var main = document.getElementById("view");
    main.textContent = "";
    var verdictClass = view.verdict && view.verdict.indexOf("REGRESSION") === 0 ? "verdict regressed" : "verdict";
    [
      el("header", {}, [
        el("h1", {}, ["Benchmark history · engine ", el("code", { id: "engine" }, [view.engine])]),
        el("p", { class: "meta" }, [view.message + " · " + view.regressed_runs + " flagged as regressed · baseline: median of up to " + view.window + " earlier unflagged runs of " + view.engine]),
        view.verdict ? el("p", { class: verdictClass }, [view.current_label.charAt(0).toUpperCase() + view.current_label.slice(1) + " (" + view.current_run_id + "): " + view.verdict]) : null,
        view.history_uri ? el("p", { class: "muted" }, ["history ", el("code", {}, [view.history_uri]), " · from ", el("code", {}, [body.task_id])]) : null,
        engines(view, query)
      ]),
      legend(view),
      el("div", { class: "panels" }, view.panels.map(function (panel) {
        return el("figure", { class: "card panel", "data-metric": panel.metric }, [
          el("figcaption", {}, [el("strong", {}, [panel.title]), el("span", { class: "muted" }, [panel.band_note])]),
          chart(panel, view)
        ]);
      })),
      runsTable(view)
    ].forEach(function (part) { if (part) main.appendChild(part); });
    V.fitFrame();
    document.body.setAttribute("data-ready", "true");
  }

  var parts = V.pathParts();
  var query = new URLSearchParams(window.location.search);
  var forward = new URLSearchParams();
  ["engine", "run_id"].forEach(function (key) { if (query.get(key)) forward.set(key, query.get(key)); });
  var suffix = forward.toString() ? "?" + forward.toString() : "";
  V.getJSON("/api/dags/" + V.segment(parts[1]) + "/benchmark" + suffix).then(function (body) { render(body, forward.toString()); }, function (error) {
    V.showStatus(error.message, error.status === 404 ? "empty" : "error");
    document.body.setAttribute("data-ready", "error");
  });
})();

/* The task-instance view: a PathwaysJobOperator task's workloads along time, its disruptions
   with their evidence, and where its chip time went. Draws the "view" the provider's
   /api/dags/{dag}/runs/{run}/tasks/{task}/workload endpoint returns. */
(function () {
  "use strict";
  var V = window.PathwaysView;
  var el = V.el;
  var svg = V.svg;

  var WIDTH = 1000;
  var GUTTER = 112;
  var RIGHT = 24;
  var TICK_CHAR = 7;  // the width of a tick label's character, in viewBox units (11 px text)
  var AXIS = 26;
  var NAME = 17;
  var LANE = 28;
  var GAP = 12;

  function header(view) {
    var facts = [
      view.backend + " · " + view.namespace,
      el("span", { class: "badge state-" + String(view.state).toLowerCase() }, [view.state]),
      view.wall_time_text ? "wall time " + view.wall_time_text : null,
      view.resubmissions ? view.resubmissions + (view.resubmissions === 1 ? " resubmission" : " resubmissions") : "no resubmission",
      view.restarts ? view.restarts + " JobSet restart" + (view.restarts === 1 ? "" : "s") : null
    ].filter(Boolean);
    var meta = el("p", { class: "meta" }, []);
    facts.forEach(function (fact, i) {
      if (i) meta.appendChild(document.createTextNode("  ·  "));
      meta.appendChild(typeof fact === "string" ? document.createTextNode(fact) : fact);
    });
    return el("header", {}, [
      el("h1", {}, ["Workload ", el("code", {}, [view.name])]),
      meta,
      view.summary ? el("p", { class: "summary" }, [view.summary]) : null,
      view.queue_text ? el("p", { class: "muted", id: "queue-place" }, ["last seen in Kueue's queue: " + view.queue_text]) : null,
      view.started ? el("p", { class: "muted" }, ["first submitted " + view.started]) : null
    ]);
  }

  function goodput(g) {
    var held = g.held_seconds;
    var bar = svg("svg", { class: "goodput-bar", viewBox: "0 0 " + WIDTH + " 26", preserveAspectRatio: "none", role: "img", "aria-label": "where the held chip time went" });
    var x = 0;
    g.parts.forEach(function (part) {
      var width = part.share ? part.share * WIDTH : 0;
      if (width > 0) bar.appendChild(svg("rect", { class: "gp gp-" + part.key, x: x, y: 0, width: width, height: 26, tip: part.text }));
      x += width;
    });
    var legend = el("ul", { class: "legend" }, g.parts.map(function (part) {
      var item = el("li", {}, [el("span", { class: "swatch gp-" + part.key }), part.text]);
      if (part.key === "lost" && part.seconds > 0) {
        item.appendChild(el("ul", { class: "lost" }, g.lost_parts.map(function (lost) { return el("li", {}, [lost.text]); })));
      }
      return item;
    }));
    var chips = g.chips !== null ? g.chips + " chips × " + g.held_text + " held" : g.held_text + " held";
    return el("section", { class: "card", id: "goodput" }, [
      el("h2", {}, ["Goodput"]),
      el("div", { class: "figures" }, [
        el("div", { class: "figure" }, [el("span", { class: "big", id: "goodput-figure" }, [g.goodput_text]), el("span", { class: "label" }, ["productive ÷ held"])]),
        el("div", { class: "figure" }, [el("span", { class: "big" }, [g.chip_hours !== null ? V.number(g.chip_hours) : "–"]), el("span", { class: "label" }, ["chip-hours (" + chips + ")"])]),
        el("div", { class: "figure" }, [el("span", { class: "big" }, [g.queued_text]), el("span", { class: "label" }, ["queued (no chips held)"])])
      ]),
      held > 0 ? bar : null,
      legend
    ]);
  }

  function timeline(view) {
    var span = Math.max(view.span_seconds, 1);
    var height = AXIS + view.lanes.length * (NAME + LANE + GAP) + 4;
    var plot = WIDTH - GUTTER - RIGHT;
    function x(offset) { return GUTTER + (Math.max(0, offset) / span) * plot; }
    function laneY(index) { return AXIS + index * (NAME + LANE + GAP) + NAME; }
    var chart = svg("svg", { class: "timeline", viewBox: "0 0 " + WIDTH + " " + height, role: "img", "aria-label": "the workloads along time" });
    var ticks = V.niceTicks(0, span, 5);
    ticks.forEach(function (tick) {
      chart.appendChild(svg("line", { class: "grid", x1: x(tick), x2: x(tick), y1: AXIS - 6, y2: height - 4 }));
    });
    V.tickLabels(ticks, x, function (tick) { return tick === 0 ? "0" : "+" + V.duration(tick); }, 2, WIDTH - 2, TICK_CHAR).forEach(function (label) {
      chart.appendChild(svg("text", { class: "tick", x: label.x, y: AXIS - 10, "text-anchor": label.anchor, text: label.text }));
    });
    view.lanes.forEach(function (lane, index) {
      var y = laneY(index);
      var late = x(lane.start) > WIDTH - 320;
      chart.appendChild(svg("text", { class: "lane-name", x: late ? x(lane.end) : x(lane.start), y: y - 5, "text-anchor": late ? "end" : "start", text: lane.workload }));
      chart.appendChild(svg("text", { class: "lane-attempt", x: GUTTER - 12, y: y + 12, "text-anchor": "end", text: "attempt " + lane.attempt }));
      if (lane.resumed_from_step !== null) {
        chart.appendChild(svg("text", { class: "lane-sub", x: GUTTER - 12, y: y + 25, "text-anchor": "end", text: "from step " + lane.resumed_from_step }));
      }
      lane.segments.forEach(function (seg) {
        var left = x(seg.start);
        var width = Math.max(x(seg.end) - left, 2);
        var group = svg("g", { class: "segment", "data-kind": seg.kind });
        group.appendChild(svg("rect", { class: "seg seg-" + seg.kind, x: left, y: y, width: width, height: LANE, rx: 3, tip: seg.label + " · " + V.duration(seg.end - seg.start) }));
        if (width > 110) group.appendChild(svg("text", { class: "seg-label", x: left + 6, y: y + 19, text: seg.label }));
        chart.appendChild(group);
      });
    });
    view.disruptions.forEach(function (d, i) {
      if (d.at === null || d.lane === null) return;
      var cx = x(d.at);
      var cy = laneY(d.lane) + LANE / 2;
      var marker = svg("g", { class: "disruption-marker", "data-index": i });
      marker.appendChild(svg("line", { x1: cx, x2: cx, y1: laneY(d.lane) - 4, y2: laneY(d.lane) + LANE + 4 }));
      marker.appendChild(svg("path", { d: "M" + cx + " " + (cy - 9) + " l9 9 l-9 9 l-9 -9 z", tip: d.headline + (d.evidence.length ? "\n" + d.evidence.join("\n") : "") }));
      marker.appendChild(svg("text", { x: cx, y: cy + 4, "text-anchor": "middle", text: String(i + 1) }));
      chart.appendChild(marker);
    });
    var kinds = {};
    view.lanes.forEach(function (lane) { lane.segments.forEach(function (seg) { kinds[seg.kind] = true; }); });
    var legend = el("ul", { class: "legend" }, Object.keys(kinds).map(function (kind) {
      return el("li", {}, [el("span", { class: "swatch seg-" + kind }), kind]);
    }).concat(view.disruptions.length ? [el("li", {}, [el("span", { class: "swatch diamond" }), "disruption"])] : []));
    return el("section", { class: "card", id: "timeline" }, [el("h2", {}, ["Timeline"]), chart, legend]);
  }

  function disruptions(view) {
    if (!view.disruptions.length) return el("section", { class: "card", id: "disruptions" }, [el("h2", {}, ["Disruptions"]), el("p", {}, ["No disruptions."])]);
    return el("section", { class: "card", id: "disruptions" }, [
      el("h2", {}, ["Disruptions (" + view.disruptions.length + ")"]),
      el("ol", { class: "disruptions" }, view.disruptions.map(function (d) {
        return el("li", { class: "disruption", "data-kind": d.kind }, [
          el("p", { class: "headline" }, [el("strong", {}, [d.kind]), d.when ? el("span", { class: "muted" }, ["  " + d.when]) : null]),
          el("p", {}, [d.headline]),
          d.evidence.length ? el("p", { class: "muted" }, ["Evidence:"]) : null,
          d.evidence.length ? el("ul", { class: "evidence" }, d.evidence.map(function (line) { return el("li", {}, [el("code", {}, [line])]); })) : null
        ]);
      }))
    ]);
  }

  function checkpoint(view) {
    var c = view.checkpoint;
    var steps = view.lanes.filter(function (lane) { return lane.resumed_from_step !== null; }).map(function (lane) {
      return lane.workload + " resumed from step " + lane.resumed_from_step;
    });
    var items = steps.map(function (text) { return el("li", {}, [text]); });
    if (c) items.push(el("li", {}, ["newest committed: ", el("strong", {}, ["step " + c.step]), c.uri ? el("code", {}, ["  " + c.uri]) : null]));
    if (!items.length) return null;
    return el("section", { class: "card", id: "checkpoints" }, [el("h2", {}, ["Checkpoints"]), el("ul", {}, items)]);
  }

  function phases(view) {
    if (!view.lanes.length) return null;
    var rows = [];
    view.lanes.forEach(function (lane) {
      lane.segments.forEach(function (seg) {
        rows.push(el("tr", {}, [el("td", {}, [lane.workload]), el("td", {}, [seg.label]), el("td", { class: "num" }, ["+" + V.duration(seg.start)]), el("td", { class: "num" }, [V.duration(seg.end - seg.start)])]));
      });
    });
    return el("details", { class: "card" }, [
      el("summary", {}, ["Every phase"]),
      el("table", { class: "phases" }, [
        el("thead", {}, [el("tr", {}, ["workload", "phase", "from", "for"].map(function (h) { return el("th", {}, [h]); }))]),
        el("tbody", {}, rows)
      ])
    ]);
  }

  function render(body) {
    var view = body.view;
    if (!view.is_workload) return V.showStatus(view.message, "empty");
    var main = document.getElementById("view");
    main.textContent = "";
    [
      header(view),
      view.notes.length ? el("ul", { class: "notes" }, view.notes.map(function (n) { return el("li", {}, [n]); })) : null,
      view.goodput ? goodput(view.goodput) : null,
      view.lanes.length ? timeline(view) : null,
      disruptions(view),
      checkpoint(view),
      phases(view)
    ].forEach(function (part) { if (part) main.appendChild(part); });
    V.fitFrame();
    document.body.setAttribute("data-ready", "true");
  }

  var parts = V.pathParts();
  var mapIndex = new URLSearchParams(window.location.search).get("map_index");
  if (!/^-?\d+$/.test(mapIndex || "")) mapIndex = "-1";
  var url = "/api/dags/" + V.segment(parts[1]) + "/runs/" + V.segment(parts[3]) + "/tasks/" + V.segment(parts[5]) + "/workload?map_index=" + mapIndex;
  V.getJSON(url).then(render, function (error) {
    V.showStatus(error.message, error.status === 404 ? "empty" : "error");
    document.body.setAttribute("data-ready", "error");
  });
})();

/* The Pathways view's shared drawing helpers. The data arrives already laid out by the
   provider's view model (pathways_airflow/ui/view_model.py): this file only turns it into
   elements, and never decides what a number means. No framework and nothing fetched from
   elsewhere, so the page works where the api-server has no way out. */
(function () {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";

  function append(node, children) {
    (Array.isArray(children) ? children : [children]).forEach(function (child) {
      if (child === null || child === undefined || child === false) return;
      node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    });
    return node;
  }

  function setAttrs(node, attrs) {
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, String(value));
    });
    return node;
  }

  /* An HTML element: el("p", {class: "x"}, ["text", child]). */
  function el(tag, attrs, children) {
    return append(setAttrs(document.createElement(tag), attrs), children || []);
  }

  /* An SVG element, with a <title> tooltip when attrs.tip is given. */
  function svg(tag, attrs, children) {
    var tip = attrs && attrs.tip;
    var copy = {};
    Object.keys(attrs || {}).forEach(function (key) { if (key !== "tip") copy[key] = attrs[key]; });
    var node = append(setAttrs(document.createElementNS(SVG_NS, tag), copy), children || []);
    if (tip) append(node, setAttrs(document.createElementNS(SVG_NS, "title"), { text: tip }));
    return node;
  }

  function root() {
    return document.body.getAttribute("data-root") || "";
  }

  /* The path after the mount root, split and decoded: ["dags", id, "runs", id, ...]. */
  function pathParts() {
    var path = window.location.pathname;
    var base = root();
    if (base && path.indexOf(base) === 0) path = path.slice(base.length);
    return path.split("/").filter(Boolean).map(decodeURIComponent);
  }

  function segment(value) {
    return encodeURIComponent(value);
  }

  var REFUSED = {
    401: "Sign in to Airflow to see this view.",
    403: "You are not allowed to read this DAG's results."
  };

  /* GET a JSON endpoint of the view with the browser's Airflow session; rejects with a sentence. */
  function getJSON(path) {
    return fetch(root() + path, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (response) {
      if (response.ok) return response.json();
      return response.json().catch(function () { return {}; }).then(function (body) {
        var detail = body && typeof body.detail === "string" ? body.detail : "";
        var error = new Error(REFUSED[response.status] || detail || "The view's data could not be loaded (HTTP " + response.status + ").");
        error.status = response.status;
        throw error;
      });
    });
  }

  function showStatus(message, kind) {
    var main = document.getElementById("view");
    main.textContent = "";
    main.appendChild(el("p", { class: "status " + (kind || ""), id: "status", role: kind === "error" ? "alert" : null }, [message]));
  }

  /* Round numbers for an axis between lo and hi, about `count` of them. */
  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    var raw = (hi - lo) / Math.max(1, count);
    var power = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * power; }).filter(function (s) { return s >= raw; })[0] || raw;
    var ticks = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
    return ticks;
  }

  function number(value) {
    if (value === null || value === undefined) return "–";
    var abs = Math.abs(value);
    if (abs >= 1000) return value.toLocaleString("en-US", { maximumFractionDigits: 0 });
    if (abs >= 10) return value.toFixed(1);
    return Number(value.toPrecision(3)).toString();
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    if (seconds < 10) return seconds.toFixed(1) + " s";
    var whole = Math.round(seconds);
    if (whole < 60) return whole + " s";
    if (whole < 3600) return Math.floor(whole / 60) + " min " + String(whole % 60).padStart(2, "0") + " s";
    return Math.floor(whole / 3600) + " h " + String(Math.floor((whole % 3600) / 60)).padStart(2, "0") + " min";
  }

  /* Tick labels along a horizontal axis that stay inside [left, right]: a label at an edge leans
     inward, and one that would run into the label before it is left out (its grid line stays).
     Each is {tick, x, anchor, text, start, end}; widths are estimated at charWidth per character. */
  function tickLabels(ticks, x, text, left, right, charWidth) {
    var lastEnd = -Infinity;
    var out = [];
    ticks.forEach(function (tick) {
      var label = text(tick);
      var half = label.length * charWidth / 2;
      var at = x(tick);
      var anchor = at + half > right ? "end" : at - half < left ? "start" : "middle";
      var start = anchor === "end" ? at - 2 * half : anchor === "start" ? at : at - half;
      if (start < lastEnd + charWidth) return;
      lastEnd = start + 2 * half;
      out.push({ tick: tick, x: at, anchor: anchor, text: label, start: start, end: lastEnd });
    });
    return out;
  }

  /* Size the Airflow tab's frame to the view, so the page scrolls once instead of a nested
     scroll inside a frame that cuts the view off (the frame is the same origin as its page). */
  function fitFrame() {
    var frame = window.frameElement;
    if (!frame) return;
    var fit = function () { frame.style.height = document.documentElement.scrollHeight + "px"; };
    fit();
    window.addEventListener("resize", fit);
  }

  window.PathwaysView = {
    el: el,
    svg: svg,
    pathParts: pathParts,
    segment: segment,
    getJSON: getJSON,
    showStatus: showStatus,
    niceTicks: niceTicks,
    tickLabels: tickLabels,
    fitFrame: fitFrame,
    number: number,
    duration: duration
  };
})();

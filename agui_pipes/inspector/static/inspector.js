// agui-pipes inspector page: plain DOM and SVG, no build step, no external assets.
//
// Events are untrusted input: every piece of event text goes through
// textContent / createTextNode / setAttribute, never innerHTML.
(function () {
  "use strict";

  var SVGNS = "http://www.w3.org/2000/svg";
  var ROW_H = 22;          // events table row height (px), matches .row in the CSS
  var PAGE = 200;          // events fetched per request
  var MAX_PAGES = 30;      // event pages kept in memory
  var LANE_H = 22;         // timeline row height
  var LABEL_MAX = 300;     // timeline label column width, at most (35% of a narrow page)
  var LABEL_W = LABEL_MAX;
  var AXIS_H = 22;
  var RIGHT_PAD = 28;      // room right of the plot for the last axis label
  var POLL_MS = 2000;      // how often the run list (and a live run) is refreshed

  // ---- small DOM helpers -------------------------------------------------

  function $(id) { return document.getElementById(id); }

  // h("div", {class: "x", "data-testid": "y", onclick: f}, child, "text", ...)
  function h(tag, attrs) {
    var el = document.createElement(tag);
    setAttrs(el, attrs);
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function s(tag, attrs) {
    var el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function setAttrs(el, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k.slice(0, 2) === "on" && typeof v === "function") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, String(v));
    });
  }

  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }

  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }

  function pretty(value) {
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }

  // Tool-call arguments arrive as a JSON string; show them indented when they parse.
  function prettyArgs(text) {
    if (typeof text !== "string") return pretty(text);
    var value;
    try { value = JSON.parse(text); } catch (e) { return text; }
    var flat = JSON.stringify(value);
    return flat.length <= 100 ? flat : JSON.stringify(value, null, 2);
  }

  function showError(message) {
    var el = $("error");
    el.textContent = message;
    el.hidden = !message;
  }

  function api(path) {
    return fetch("api/" + path, { headers: { Accept: "application/json" } }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) throw new Error((body && body.error) || ("HTTP " + r.status + " for api/" + path));
        return body;
      });
    });
  }

  // Lane ids carry a "kind:" prefix (and "#n" when an id repeats); the
  // transcript and the tests speak in raw AG-UI ids.
  function rawId(laneId) {
    var m = /^(?:run|message|reasoning|tool_call|step|subagent):(.*?)(?:#\d+)?$/.exec(String(laneId));
    return m ? m[1] : String(laneId);
  }

  function laneRawId(lane) {
    return lane.kind === "subagent" && lane.owner ? lane.owner : rawId(lane.id);
  }

  function debounce(fn, ms) {
    var t = null;
    return function () {
      var args = arguments;
      clearTimeout(t);
      t = setTimeout(function () { fn.apply(null, args); }, ms);
    };
  }

  // ---- page state ----------------------------------------------------------

  var S = {
    runId: null,
    side: "input",           // "input": the stream as received; "output": after the chain
    summary: null,
    view: "timeline",
    selected: null,          // selected event index
  };

  function runPath(rest) {
    var path = "runs/" + encodeURIComponent(S.runId) + "/" + rest;
    if (S.side !== "output") return path;
    return path + (path.indexOf("?") >= 0 ? "&" : "?") + "side=output";
  }

  // Ids from the stream key these maps: a prototype-less object has no
  // "constructor" or "__proto__" of its own to collide with.
  function dict() { return Object.create(null); }

  // ---- tabs ------------------------------------------------------------------

  var VIEWS = ["timeline", "events", "pipeline", "result", "compare", "send"];

  function setView(name) {
    S.view = name;
    VIEWS.forEach(function (v) {
      $("view-" + v).hidden = v !== name;
      var tab = document.querySelector('.tabs button[data-view="' + v + '"]');
      tab.setAttribute("aria-selected", v === name ? "true" : "false");
    });
    if (history.replaceState) history.replaceState(null, "", "#" + name);
    if (name === "send") Send.show();
    if (name === "compare") Compare.show();
    if (!S.summary) return;
    if (name === "timeline") Timeline.draw();
    if (name === "events") Events.render();
    if (name === "pipeline") Pipeline.show();
    if (name === "result") Result.show();
  }

  // ---- runs and summary --------------------------------------------------------

  var runsKey = null;

  function loadRuns() {
    return api("runs").then(function (body) {
      var sel = $("run-select");
      document.querySelector('.tabs button[data-view="send"]').hidden = !body.send;
      S.runs = body.runs;
      S.canSend = !!body.send;
      if (body.sendsTo) $("sd-target").textContent = body.sendsTo;
      // Rebuilt only when the list changed: the poll must not close an open dropdown.
      var key = JSON.stringify(body.runs);
      if (key !== runsKey) {
        runsKey = key;
        clear(sel);
        body.runs.forEach(function (run) {
          sel.appendChild(h("option", { value: run.id },
            run.label + " — " + run.events + " events, " + run.outcome));
        });
      }
      if (!body.runs.length) {
        $("run-info").textContent = "no runs yet: they appear here as the server serves them";
        return null;
      }
      var keep = body.runs.some(function (r) { return r.id === S.runId; });
      var id = keep ? S.runId : body.runs[0].id;
      sel.value = id;
      return id;
    });
  }

  function runInfo(summary) {
    $("run-export").setAttribute("href", "api/" + runPath("export"));
    var info = summary.events + " events · " + summary.outcome;
    if (summary.violations.length) info += " · " + summary.violations.length + " violation(s)";
    if (summary.warnings.length) info += " · " + summary.warnings.length + " warning(s)";
    $("run-info").textContent = info;
    $("run-info").setAttribute("data-outcome", summary.outcome);
  }

  function openRun(id) {
    S.runId = id;
    S.selected = null;
    return api(runPath("summary")).then(function (summary) {
      S.summary = summary;
      showError("");
      runInfo(summary);
      var tabPipe = document.querySelector('.tabs button[data-view="pipeline"]');
      tabPipe.title = summary.stages ? "" : "start with --config CHAIN.yaml to see the stages";
      // Without a chain the stream is the same on both sides (under serve --inspect,
      // what was recorded is already what the client was sent).
      var side = $("side-select");
      side.disabled = !summary.stages && S.side === "input";
      side.title = side.disabled ? "no chain: the stream is the same on both sides" : "";
      Timeline.reset();
      Events.reset();
      Pipeline.reset();
      Result.reset();
      setView(S.view);
    });
  }

  // ---- timeline -------------------------------------------------------------

  var Timeline = (function () {
    var domain = [0, 1];     // visible x range (index or ms)
    var full = [0, 1];
    var times = null;        // Float64Array of t per index when the time axis is loaded
    var timesFor = null;
    var loadingTimes = false;
    var width = 800;
    var lanes = [];
    var laneIndex = dict();

    function axis() { return $("tl-axis").value === "time" && times ? "time" : "index"; }

    function xOf(index) {
      if (axis() === "time") {
        var t = times[index];
        return isNaN(t) ? nearestTime(index) : t;
      }
      return index;
    }

    // Events without a timestamp inside a timed file: borrow the previous one.
    function nearestTime(index) {
      for (var i = index; i >= 0; i--) if (!isNaN(times[i])) return times[i];
      return 0;
    }

    function extent() {
      var n = S.summary.events;
      if (axis() === "time") {
        var lo = Infinity, hi = -Infinity;
        for (var i = 0; i < n; i++) {
          var t = times[i];
          if (!isNaN(t)) { if (t < lo) lo = t; if (t > hi) hi = t; }
        }
        if (lo === Infinity) return [0, 1];
        return [lo, hi > lo ? hi : lo + 1];
      }
      return [0, Math.max(n - 1, 1)];
    }

    // keepView: a live run's summary was refreshed; keep the zoom the user chose.
    function reset(keepView) {
      var wasFull = domain[0] === full[0] && domain[1] === full[1];
      lanes = S.summary.lanes.slice();
      laneIndex = dict();
      lanes.forEach(function (l) { laneIndex[l.id] = l; });
      var timeOpt = $("tl-axis").querySelector('option[value="time"]');
      timeOpt.disabled = !S.summary.timed;
      if (timesFor !== S.runId) { times = null; timesFor = null; }
      if (!keepView) $("tl-axis").value = S.summary.timed && S.summary.events <= 50000 ? "time" : "index";
      if (!S.summary.timed) $("tl-axis").value = "index";
      if ($("tl-axis").value === "time") {
        if (keepView) times = null;  // new events: their times are fetched again
        loadTimes();
      }
      full = extent();
      if (!keepView || wasFull) domain = full.slice();
    }

    // The summary gives lane bounds as event indexes; a time axis needs every
    // event's t, fetched once in pages of 1000.
    function loadTimes() {
      if (times || loadingTimes || !S.summary.timed) return;
      var n = S.summary.events, run = S.runId, offset = 0;
      var buf = new Float64Array(n);
      buf.fill(NaN);
      loadingTimes = true;
      $("tl-range").textContent = "loading timestamps…";
      function next() {
        if (run !== S.runId) { loadingTimes = false; return; }
        if (offset >= n) {
          times = buf; timesFor = run; loadingTimes = false;
          full = extent(); domain = full.slice(); draw();
          return;
        }
        api(runPath("events?offset=" + offset + "&limit=1000")).then(function (body) {
          body.rows.forEach(function (r) { if (typeof r.t === "number") buf[r.index] = r.t; });
          offset += 1000;
          next();
        }).catch(function (e) { loadingTimes = false; showError(e.message); });
      }
      next();
    }

    function px(x) { return LABEL_W + (x - domain[0]) / (domain[1] - domain[0]) * (width - LABEL_W - RIGHT_PAD); }

    function draw() {
      if (!S.summary || S.view !== "timeline") return;
      var scroller = $("tl-scroll"), inner = $("tl-inner");
      // Fitted to the page on every draw (a resize redraws): no horizontal overflow at 360 px.
      width = Math.max(scroller.clientWidth, 240);
      LABEL_W = Math.min(LABEL_MAX, Math.max(110, Math.floor(width * 0.35)));
      var total = lanes.length;
      var height = AXIS_H + total * LANE_H;
      inner.style.height = height + "px";
      // Only the lanes in view are drawn: a 100k-event file can have thousands.
      var top = scroller.scrollTop;
      var first = Math.max(0, Math.floor((top - AXIS_H) / LANE_H) - 5);
      var last = Math.min(total, Math.ceil((top + scroller.clientHeight) / LANE_H) + 5);
      var svg = s("svg", { width: width, height: height, "data-testid": "timeline-svg" });
      var axisG = s("g", { class: "tl-axis", transform: "translate(0," + top + ")" });
      var rowsG = s("g", {});
      for (var i = first; i < last; i++) rowsG.appendChild(lane(lanes[i], i));
      svg.appendChild(rowsG);
      S.summary.violations.forEach(function (v) {
        if (v.index === null || v.index === undefined) return;
        var x = px(xOf(v.index));
        if (x < LABEL_W || x > width) return;
        svg.appendChild(s("line", { class: "tl-mark", x1: x, x2: x, y1: AXIS_H, y2: height,
          "data-testid": "timeline-violation" }, s("title", {}, "violation at #" + v.index + ": " + v.message)));
      });
      axisG.appendChild(s("rect", { x: 0, y: 0, width: width, height: AXIS_H, fill: "#fff" }));
      ticks().forEach(function (t) {
        var x = px(t);
        axisG.appendChild(s("line", { x1: x, x2: x, y1: AXIS_H - 5, y2: AXIS_H }));
        axisG.appendChild(s("text", { x: x + 2, y: 12 }, label(t)));
      });
      svg.appendChild(axisG);
      clear(inner);
      inner.appendChild(svg);
      $("tl-range").setAttribute("data-lo", String(domain[0]));
      $("tl-range").setAttribute("data-hi", String(domain[1]));
      $("tl-range").textContent = (axis() === "time" ? "ms " : "events ") +
        label(domain[0]) + " – " + label(domain[1]) + " · " + total + " lanes";
    }

    function label(v) {
      if (axis() === "time") {
        var rel = v - full[0];
        return rel >= 1000 ? (rel / 1000).toFixed(rel >= 10000 ? 1 : 2) + "s" : Math.round(rel) + "ms";
      }
      return String(Math.round(v));
    }

    function ticks() {
      var span = domain[1] - domain[0];
      var step = Math.pow(10, Math.floor(Math.log10(span / 8 || 1)));
      if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
      if (axis() === "index") step = Math.max(1, step);
      var out = [];
      for (var t = Math.ceil(domain[0] / step) * step; t <= domain[1] && out.length < 40; t += step) out.push(t);
      return out;
    }

    function lane(l, i) {
      var y = AXIS_H + i * LANE_H;
      var parent = l.parent === null || l.parent === undefined ? null : laneIndex[l.parent];
      var g = s("g", { "data-testid": "lane", "data-lane": l.id, "data-kind": l.kind,
        "data-raw-id": laneRawId(l), "data-depth": l.depth,
        "data-parent-raw-id": parent ? laneRawId(parent) : null });
      g.appendChild(s("rect", { class: "tl-row-bg", x: 0, y: y, width: width, height: LANE_H,
        fill: i % 2 ? "#f6f7f9" : "#fff" }));
      var indent = 8 + Math.min(l.depth, 6) * (LABEL_W < 200 ? 6 : 14);
      var narrow = LABEL_W < 200;
      var textX = narrow ? indent : indent + 62;
      var room = Math.floor((LABEL_W - textX - 8) / 6.6);  // ~6.6 px per character at 12px
      if (!narrow) g.appendChild(s("text", { class: "tl-label kind", x: indent, y: y + 15 }, kindLabel(l.kind)));
      var text = laneText(l);
      g.appendChild(s("text", { class: "tl-label", x: textX, y: y + 15, "data-testid": "lane-label" },
        clip(text, room), s("title", {}, l.label + (l.preview ? ": " + l.preview : ""))));
      var endIndex = l.end === null || l.end === undefined ? S.summary.events - 1 : l.end;
      var x0 = Math.max(px(xOf(l.start)), LABEL_W);
      var x1 = Math.min(px(xOf(endIndex)), width);
      if (x1 >= LABEL_W && x0 <= width) {
        var w = Math.max(x1 - x0, 3);
        var bar = s("rect", { class: "tl-bar k-" + l.kind, x: x0, y: y + 4, width: w, height: LANE_H - 8,
          rx: 2, "data-testid": "lane-bar", "data-start": l.start, opacity: l.end === null ? 0.55 : 1 },
          s("title", {}, l.kind + " " + l.label + ": events " + l.start + "–" +
            (l.end === null ? "(open)" : l.end) + (l.tick_count ? ", " + l.tick_count + " deltas" : "")));
        bar.addEventListener("click", function (ev) {
          if (dragMoved) return;
          ev.stopPropagation();
          Events.selectIndex(l.start, true);
        });
        g.appendChild(bar);
        if (l.ticks && l.ticks.length && w >= 6) {
          var d = [];
          for (var k = 0; k < l.ticks.length; k++) {
            var tx = px(xOf(l.ticks[k]));
            if (tx >= x0 && tx <= x0 + w) d.push("M" + tx.toFixed(1) + " " + (y + 6) + "v" + (LANE_H - 12));
          }
          if (d.length) g.appendChild(s("path", { class: "tl-ticks", d: d.join("") }));
        }
      }
      return g;
    }

    function kindLabel(kind) { return kind === "tool_call" ? "tool call" : kind; }

    // What a row shows: the start of its text (a message's words, a call's arguments)
    // next to what it is, rather than its id.
    function laneText(l) {
      if (!l.preview) return l.label;
      if (l.kind === "message" || l.kind === "reasoning") {
        var who = String(l.label).split(" ")[0];
        return who + ": \u201c" + l.preview + "\u201d";
      }
      if (l.kind === "tool_call") return l.label + "(" + l.preview + ")";
      return l.label + ": " + l.preview;
    }

    function legend() {
      var box = $("tl-legend");
      clear(box);
      ["run", "message", "reasoning", "tool_call", "step", "subagent"].forEach(function (k) {
        box.appendChild(h("span", { class: "legend-item", "data-testid": "legend-item", "data-kind": k },
          h("span", { class: "swatch sw-" + k }), kindLabel(k)));
      });
    }
    function clip(text, n) { text = String(text); return text.length > n ? text.slice(0, n - 1) + "…" : text; }

    // wheel: zoom around the cursor; drag: pan.
    var dragging = null, dragMoved = false;
    function install() {
      var sc = $("tl-scroll");
      sc.addEventListener("wheel", function (ev) {
        if (!S.summary || ev.shiftKey) return;
        ev.preventDefault();
        var rect = sc.getBoundingClientRect();
        var frac = Math.min(Math.max((ev.clientX - rect.left - LABEL_W) / (width - LABEL_W - RIGHT_PAD), 0), 1);
        var span = domain[1] - domain[0];
        var factor = ev.deltaY > 0 ? 1.25 : 0.8;
        var minSpan = axis() === "index" ? 5 : 1;
        var fullSpan = full[1] - full[0];
        var ns = Math.min(Math.max(span * factor, minSpan), fullSpan);
        var anchor = domain[0] + frac * span;
        setDomain(anchor - frac * ns, ns);
      }, { passive: false });
      sc.addEventListener("mousedown", function (ev) {
        if (ev.button !== 0) return;
        dragging = { x: ev.clientX, d0: domain.slice() };
        dragMoved = false;
      });
      window.addEventListener("mousemove", function (ev) {
        if (!dragging) return;
        var dx = ev.clientX - dragging.x;
        if (Math.abs(dx) > 3) { dragMoved = true; sc.classList.add("dragging"); }
        if (!dragMoved) return;
        var span = dragging.d0[1] - dragging.d0[0];
        setDomain(dragging.d0[0] - dx / (width - LABEL_W - RIGHT_PAD) * span, span);
      });
      window.addEventListener("mouseup", function () {
        sc.classList.remove("dragging");
        dragging = null;
        setTimeout(function () { dragMoved = false; }, 0);
      });
      legend();
      sc.addEventListener("scroll", function () { draw(); });
      window.addEventListener("resize", function () { draw(); });
      // The scroller also changes size without a window resize (the header wrapping).
      if (window.ResizeObserver) {
        var lastW = -1;
        new ResizeObserver(function () {
          if (sc.clientWidth !== lastW) { lastW = sc.clientWidth; draw(); }
        }).observe(sc);
      }
      $("tl-reset").addEventListener("click", function () { domain = full.slice(); draw(); });
      $("tl-fit").addEventListener("click", fitVisible);
      $("tl-axis").addEventListener("change", function () {
        if (axis() === "index" && $("tl-axis").value === "time") { loadTimes(); return; }
        full = extent(); domain = full.slice(); draw();
      });
    }

    // Zoom to the lanes scrolled into view: in a long file they are slivers at full zoom.
    function fitVisible() {
      var sc = $("tl-scroll");
      var first = Math.max(0, Math.floor((sc.scrollTop - AXIS_H) / LANE_H));
      var last = Math.min(lanes.length, Math.ceil((sc.scrollTop + sc.clientHeight - AXIS_H) / LANE_H));
      var lo = Infinity, hi = -Infinity;
      for (var i = first; i < last; i++) {
        var l = lanes[i];
        var end = l.end === null || l.end === undefined ? S.summary.events - 1 : l.end;
        lo = Math.min(lo, xOf(l.start));
        hi = Math.max(hi, xOf(end));
      }
      if (lo === Infinity) return;
      var span = Math.max(hi - lo, axis() === "index" ? 5 : 1);
      var pad = span * 0.03;
      lo = Math.max(full[0], lo - pad);
      span = Math.min(span + 2 * pad, full[1] - full[0]);
      setDomain(lo, span);
    }

    function setDomain(start, span) {
      var lo = Math.max(full[0], Math.min(start, full[1] - span));
      domain = [lo, lo + span];
      draw();
    }

    return { reset: reset, draw: draw, install: install,
             domain: function () { return domain.slice(); } };
  })();

  // ---- events table (virtualised) -------------------------------------------

  var Events = (function () {
    var pages = new Map();     // page number -> rows (or a pending promise)
    var total = 0;
    var filterKey = "";
    var generation = 0;        // bumps when the filters change; stale responses are dropped
    var selectedPos = null;    // the selected row's position in the filtered list

    function query() {
      var parts = [];
      var t = $("ev-type").value, id = $("ev-id").value.trim(), q = $("ev-q").value.trim();
      if (t) parts.push("type=" + encodeURIComponent(t));
      if (id) parts.push("id=" + encodeURIComponent(id));
      if (q) parts.push("q=" + encodeURIComponent(q));
      return parts.join("&");
    }

    function reset() {
      var sel = $("ev-type"), keep = sel.value;
      clear(sel);
      sel.appendChild(h("option", { value: "" }, "(all types)"));
      Object.keys(S.summary.types).sort().forEach(function (t) {
        sel.appendChild(h("option", { value: t }, t + " (" + S.summary.types[t] + ")"));
      });
      sel.value = S.summary.types[keep] ? keep : "";
      problems();
      refilter();
      clear($("ev-detail"));
      $("ev-detail").appendChild(h("p", { class: "muted" }, "Click an event to see its JSON."));
    }

    function problems() {
      var box = $("ev-problems");
      clear(box);
      var items = [];
      S.summary.violations.forEach(function (v) {
        items.push(h("button", { type: "button", class: "problem violation", "data-testid": "problem-violation",
          "data-index": v.index, onclick: function () { selectIndex(v.index, true); } },
          "#" + v.index + " " + v.rule + ": " + v.message));
      });
      S.summary.warnings.forEach(function (w) {
        var at = w.index === null || w.index === undefined ? "" : "#" + w.index + " ";
        items.push(h("button", { type: "button", class: "problem warning", "data-testid": "problem-warning",
          "data-index": w.index === null ? "" : w.index,
          onclick: function () { if (w.index !== null && w.index !== undefined) selectIndex(w.index, true); } },
          at + w.code + ": " + w.message));
      });
      items.slice(0, 200).forEach(function (b) { box.appendChild(b); });
      if (items.length > 200) box.appendChild(h("div", { class: "muted" }, (items.length - 200) + " more not listed"));
      box.hidden = !items.length;
    }

    function refilter() {
      generation++;
      selectedPos = null;
      pages = new Map();
      filterKey = query();
      total = -1;
      $("ev-scroll").scrollTop = 0;
      fetchPage(0).then(function () { render(); });
    }

    // A live run grew: drop the cached pages, keep the filters and the scroll position.
    function refresh() {
      generation++;
      pages = new Map();
      var p = Math.floor($("ev-scroll").scrollTop / ROW_H / PAGE);
      fetchPage(p).then(function () { render(); });
    }

    function missing(from, to) {
      var out = [];
      for (var p = Math.floor(from / PAGE); p <= Math.floor(Math.max(to - 1, 0) / PAGE); p++) {
        if (!pages.has(p)) out.push(p);
      }
      return out;
    }

    // Keep the page cache bounded (a 100k-event file is 500 pages): drop the
    // fetched pages farthest from the view.
    function evict(around) {
      if (pages.size <= MAX_PAGES) return;
      var loaded = [];
      pages.forEach(function (rows, p) { if (Array.isArray(rows)) loaded.push(p); });
      loaded.sort(function (a, b) { return Math.abs(b - around) - Math.abs(a - around); });
      for (var i = 0; i < loaded.length && pages.size > MAX_PAGES; i++) pages.delete(loaded[i]);
    }

    function fetchPage(p) {
      if (pages.has(p)) return Promise.resolve(pages.get(p));
      var gen = generation;
      var sep = filterKey ? "&" + filterKey : "";
      var promise = api(runPath("events?offset=" + p * PAGE + "&limit=" + PAGE + sep)).then(function (body) {
        if (gen !== generation) return null;
        total = body.total;
        pages.set(p, body.rows);
        return body.rows;
      }).catch(function (e) {
        // Remembered as failed (not refetched in a loop); a filter change retries.
        if (gen === generation) { pages.set(p, "failed"); showError(e.message); }
        return null;
      });
      pages.set(p, promise);
      return promise;
    }

    function render() {
      if (!S.summary || S.view !== "events" || total < 0) return;
      var sc = $("ev-scroll"), spacer = $("ev-spacer");
      spacer.style.height = total * ROW_H + "px";
      $("ev-count").textContent = total + (filterKey ? " matching" : "") + " of " + S.summary.events + " events";
      var first = Math.max(0, Math.floor(sc.scrollTop / ROW_H) - 10);
      var last = Math.min(total, Math.ceil((sc.scrollTop + sc.clientHeight) / ROW_H) + 10);
      // The pages in view first; once they are here, the neighbours within a page
      // of the view, so scrolling on finds its rows already fetched more often.
      var visible = missing(first, last);
      var wanted = visible.length ? visible
        : missing(Math.max(0, first - PAGE), Math.min(total, last + PAGE));
      wanted.forEach(function (p) { fetchPage(p).then(function () { render(); }); });
      evict(Math.floor(first / PAGE));
      var frag = document.createDocumentFragment();
      for (var i = first; i < last; i++) {
        var pg = pages.get(Math.floor(i / PAGE));
        var row = Array.isArray(pg) ? pg[i % PAGE] : null;
        frag.appendChild(row ? rowEl(row, i) : h("div", { class: "row ev-row pending", style: "top:" + i * ROW_H + "px" },
          h("span", { class: "c-idx" }, "…")));
      }
      clear(spacer);
      spacer.appendChild(frag);
    }

    function rowEl(r, pos) {
      var flags = r.flags || [];
      var cls = "row ev-row";
      if (flags.indexOf("violation") >= 0) cls += " violation";
      else if (flags.indexOf("warning") >= 0) cls += " warning";
      if (r.index === S.selected) cls += " selected";
      var ids = Object.keys(r.ids || {}).map(function (k) { return k + "=" + r.ids[k]; }).join(" ");
      var flag = flags.indexOf("violation") >= 0 ? h("span", { class: "c-flag flag-violation", title: "violation" }, "✖")
        : flags.indexOf("warning") >= 0 ? h("span", { class: "c-flag flag-warning", title: "warning" }, "⚠")
        : h("span", { class: "c-flag" });
      return h("div", { class: cls, style: "top:" + pos * ROW_H + "px", "data-testid": "event-row",
        "data-index": r.index, "data-type": r.type, "data-flags": flags.join(" "),
        onclick: function () { selectedPos = pos; selectIndex(r.index, false); } },
        h("span", { class: "c-idx" }, r.index),
        flag,
        h("span", { class: "c-type" }, r.type),
        h("span", { class: "c-ids", title: ids }, ids),
        h("span", { class: "c-owner" }, r.owner || ""),
        h("span", { class: "c-sum", title: r.summary }, r.summary));
    }

    // Select an event; `reveal` also clears the filters and scrolls the table to it
    // (from the timeline, the problems list and the pipeline).
    // ArrowUp / ArrowDown in the table move the selection through the (filtered) rows.
    function step(delta) {
      if (selectedPos === null || total <= 0) return;
      var pos = Math.min(Math.max(selectedPos + delta, 0), total - 1);
      fetchPage(Math.floor(pos / PAGE)).then(function (rows) {
        var row = Array.isArray(rows) ? rows[pos % PAGE] : null;
        if (!row) return;
        selectedPos = pos;
        var sc = $("ev-scroll"), y = pos * ROW_H;
        if (y < sc.scrollTop) sc.scrollTop = y;
        else if (y + ROW_H > sc.scrollTop + sc.clientHeight) sc.scrollTop = y + ROW_H - sc.clientHeight;
        selectIndex(row.index, false);
      });
    }

    function selectIndex(index, reveal) {
      S.selected = index;
      if (reveal) {
        if (S.view !== "events") setView("events");
        if (filterKey) {
          $("ev-type").value = ""; $("ev-id").value = ""; $("ev-q").value = "";
          refilter();
        }
        var sc = $("ev-scroll");
        sc.scrollTop = Math.max(0, index * ROW_H - sc.clientHeight / 3);
        selectedPos = index;  // no filters: positions are indexes
      }
      render();
      var detail = $("ev-detail");
      api(runPath("events/" + index)).then(function (body) {
        if (S.selected !== index) return;
        clear(detail);
        detail.appendChild(h("h3", {}, "#" + body.index + " " + body.type));
        (body.violations || []).forEach(function (v) {
          detail.appendChild(h("p", { class: "violation", "data-testid": "detail-violation" },
            "✖ violation (" + v.rule + "): " + v.message));
        });
        (body.warnings || []).forEach(function (w) {
          detail.appendChild(h("p", { class: "warning", "data-testid": "detail-warning" },
            "⚠ " + w.code + ": " + w.message));
        });
        detail.appendChild(h("pre", { "data-testid": "event-json" }, pretty(body.json)));
      }).catch(function (e) { showError(e.message); });
    }

    function install() {
      $("ev-scroll").addEventListener("scroll", function () { render(); });
      $("ev-scroll").addEventListener("keydown", function (ev) {
        if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
          ev.preventDefault();
          step(ev.key === "ArrowDown" ? 1 : -1);
        }
      });
      window.addEventListener("resize", function () { render(); });
      $("ev-type").addEventListener("change", refilter);
      var later = debounce(refilter, 250);
      $("ev-id").addEventListener("input", later);
      $("ev-q").addEventListener("input", later);
    }

    return { reset: reset, refresh: refresh, problems: problems, render: render, install: install, selectIndex: selectIndex };
  })();

  // ---- pipeline ------------------------------------------------------------------

  var Pipeline = (function () {
    var stage = 0, kind = "", loaded = 0, total = 0, generation = 0, selectedRow = null;
    var KINDS = ["", "passed", "changed", "merged", "dropped", "added"];

    // Opens on what is worth a look: the first stage that did something, showing the
    // rows it changed (else dropped, merged, added) rather than the events it passed.
    function reset() {
      stage = 0; kind = ""; loaded = 0; total = 0; generation++; selectedRow = null;
      var stages = S.summary && S.summary.stages;
      if (!stages) return;
      for (var n = 0; n < stages.length; n++) {
        var k = ["changed", "dropped", "merged", "added"].filter(function (x) { return stages[n][x] > 0; })[0];
        if (k) { stage = n; kind = k; return; }
      }
    }

    function show() {
      var stages = S.summary.stages;
      $("pl-none").hidden = !!stages;
      var table = $("pl-stages");
      clear(table);
      clear($("pl-rows"));
      clear($("pl-kinds"));
      $("pl-title").textContent = "";
      $("pl-count").textContent = "";
      $("pl-more").hidden = true;
      if (!stages) return;
      table.appendChild(h("tr", {}, ["stage", "in", "out", "passed", "changed", "merged", "dropped", "added"].map(function (c) {
        return h("th", {}, c);
      })));
      stages.forEach(function (st, n) {
        var cells = [h("td", {}, h("button", { type: "button", "data-testid": "stage-name",
          onclick: function () { pick(n, ""); } }, n + 1 + ". " + st.name)),
          h("td", {}, st["in"]), h("td", {}, st.out)];
        ["passed", "changed", "merged", "dropped", "added"].forEach(function (k) {
          cells.push(h("td", {}, st[k] ? h("button", { type: "button", "data-testid": "stage-count-" + k,
            onclick: function () { pick(n, k); } }, st[k]) : "0"));
        });
        table.appendChild(h("tr", { "data-testid": "stage", "data-stage": n, class: n === stage ? "selected" : "" }, cells));
        if (st.error) {
          table.appendChild(h("tr", { class: "stage-error" }, h("td", { colspan: 8, "data-testid": "stage-error" },
            "✖ the stage raised and stopped here: " + st.error)));
        }
      });
      pick(stage, kind);
    }

    function pick(n, k) {
      stage = n; kind = k; loaded = 0; total = 0; generation++; selectedRow = null;
      Array.prototype.forEach.call($("pl-stages").querySelectorAll("tr[data-stage]"), function (tr) {
        tr.className = Number(tr.getAttribute("data-stage")) === n ? "selected" : "";
      });
      $("pl-title").textContent = "stage " + (n + 1) + ": " + S.summary.stages[n].name;
      var kinds = $("pl-kinds");
      clear(kinds);
      KINDS.forEach(function (kk) {
        kinds.appendChild(h("button", { type: "button", "aria-pressed": kk === kind ? "true" : "false",
          "data-testid": "kind-" + (kk || "all"), onclick: function () { pick(stage, kk); } }, kk || "all"));
      });
      clear($("pl-rows"));
      clear($("pl-detail"));
      $("pl-detail").appendChild(h("p", { class: "muted" }, "Click a row to see the event and its diff."));
      more();
    }

    function more() {
      var gen = generation;
      var url = "stages/" + stage + "?offset=" + loaded + "&limit=" + PAGE + (kind ? "&kind=" + kind : "");
      api(runPath(url)).then(function (body) {
        if (gen !== generation) return;
        total = body.total;
        var box = $("pl-rows");
        body.rows.forEach(function (r) { box.appendChild(rowEl(r)); });
        loaded += body.rows.length;
        $("pl-count").textContent = loaded + " of " + total + " rows";
        $("pl-more").hidden = loaded >= total;
      }).catch(function (e) { showError(e.message); });
    }

    function rowEl(r) {
      var inout = (r["in"] === null ? "+" : "in " + r["in"]) + " → " + (r.out.length ? r.out.join(",") : "∅");
      var reasons = (r.reasons || []).map(function (x) { return x.rule + ": " + x.detail; }).join("; ");
      var el = h("div", { class: "row pl-row", "data-testid": "stage-row", "data-kind": r.kind, "data-type": r.type,
        "data-in": r["in"] === null ? "" : r["in"] },
        h("span", { class: "c-kind kind-" + r.kind }, r.kind),
        h("span", { class: "c-inout" }, inout),
        h("span", { class: "c-type" }, r.type),
        h("span", { class: "c-sum", title: r.summary }, r.summary),
        reasons ? h("span", { class: "c-reason", "data-testid": "stage-row-reason", title: reasons }, reasons) : null);
      el.addEventListener("click", function () {
        if (selectedRow) selectedRow.classList.remove("selected");
        selectedRow = el;
        el.classList.add("selected");
        detail(r);
      });
      return el;
    }

    function detail(r) {
      var box = $("pl-detail");
      clear(box);
      box.appendChild(h("h3", {}, r.kind + " · " + r.type));
      if (r.sources && r.sources.length) {
        box.appendChild(h("div", { "data-testid": "stage-sources" }, (r.kind === "merged" ? "merged with inputs " :
          "one output made from inputs ") + r.sources.map(function (i) { return "#" + i; }).join(", ")));
      }
      if (r.reasons && r.reasons.length) {
        box.appendChild(h("ul", { class: "reasons", "data-testid": "stage-reasons" }, r.reasons.map(function (x) {
          return h("li", {}, h("strong", {}, x.rule), " " + x.detail);
        })));
      }
      if (r.diff && r.diff.length) {
        box.appendChild(h("div", {}, "diff (JSON Patch, input → output):"));
        box.appendChild(h("ul", { class: "diff", "data-testid": "stage-diff" }, r.diff.map(function (op) {
          var text = op.op + " " + op.path;
          if (op.from !== undefined) text += " from " + op.from;
          if (op.value !== undefined) text += " = " + JSON.stringify(op.value);
          return h("li", { class: "mono" }, text);
        })));
      }
      if (stage === 0 && r["in"] !== null) {
        // Stage 0's input indexes are the file's events: offer the way there.
        box.appendChild(h("button", { type: "button", "data-testid": "stage-open-event",
          onclick: function () { Events.selectIndex(r["in"], true); } },
          "show event #" + r["in"] + " in the events view"));
      }
      box.appendChild(h("div", {}, r.kind === "added" ? "added event:" : "input event:"));
      box.appendChild(h("pre", { "data-testid": "stage-event-json" }, pretty(r.event)));
    }

    function install() { $("pl-more").addEventListener("click", more); }

    return { reset: reset, show: show, install: install };
  })();

  // ---- result: transcript, state tree, scrubber ---------------------------------

  var Result = (function () {
    var at = null, generation = 0;
    var MAX_MESSAGES = 300;  // the latest top-level messages drawn, unless "show all"
    var showAll = false;

    function reset() {
      showAll = false;
      var n = S.summary.events;
      var sc = $("rs-scrub");
      sc.max = String(Math.max(n - 1, 0));
      at = Math.max(n - 1, 0);
      sc.value = String(at);
    }

    // A live run grew: a scrubber at the end follows it, one set earlier stays put.
    function extend() {
      var sc = $("rs-scrub"), atEnd = Number(sc.value) === Number(sc.max);
      sc.max = String(Math.max(S.summary.events - 1, 0));
      if (atEnd) {
        sc.value = sc.max;
        if (S.view === "result") load(Number(sc.value));
      }
    }

    function show() { load(Number($("rs-scrub").value)); Interrupt.check(); Request.show(); }

    var loadLater = debounce(function (i) { load(i); }, 120);

    function load(index) {
      at = index;
      var gen = ++generation;
      $("rs-at").textContent = "after event #" + index + " of " + (S.summary.events - 1);
      if (!S.summary.events) { clear($("rs-transcript")); clear($("rs-state")); return; }
      api(runPath("fold?at=" + index)).then(function (body) {
        if (gen !== generation) return;
        $("rs-transcript").setAttribute("data-at", body.at);
        $("rs-state").setAttribute("data-at", body.at);
        transcript(body.messages);
        clear($("rs-state"));
        $("rs-state").appendChild(tree(body.state, null, 0));
      }).catch(function (e) { showError(e.message); });
    }

    // Messages owned by a subagent are nested under the tool call (or subagent)
    // that spawned it, as the summary's subagent lanes say.
    function transcript(messages) {
      var box = $("rs-transcript");
      clear(box);
      if (!messages.length) { box.appendChild(h("p", { class: "muted" }, "No messages yet at this point.")); return; }
      var subs = dict(), childrenOf = dict(), spawner = dict();
      var laneById = dict();
      S.summary.lanes.forEach(function (l) { laneById[l.id] = l; });
      S.summary.lanes.forEach(function (l) {
        if (l.kind !== "subagent") return;
        var id = laneRawId(l), parent = laneById[l.parent];
        subs[id] = l;
        if (parent) {
          spawner[id] = laneRawId(parent);
          (childrenOf[laneRawId(parent)] = childrenOf[laneRawId(parent)] || []).push(id);
        }
      });
      var bySub = dict(), results = dict(), top = [];
      messages.forEach(function (m) {
        if (m.role === "tool" && m.toolCallId) results[m.toolCallId] = m;
        if (m.subagentRunId) (bySub[m.subagentRunId] = bySub[m.subagentRunId] || []).push(m);
        else top.push(m);
      });
      var shown = dict();
      function subBlock(id) {
        if (shown[id] || !bySub[id]) return null;
        shown[id] = true;
        var lane = subs[id];
        var block = h("div", { class: "subagent", "data-testid": "transcript-subagent", "data-subagent": id },
          h("div", { class: "who" }, "subagent " + (lane ? lane.label : id)));
        list(bySub[id], block);
        (childrenOf[id] || []).forEach(function (c) { append(block, subBlock(c)); });
        return block;
      }
      function list(msgs, into) {
        msgs.forEach(function (m) {
          if (m.role === "tool" && m.toolCallId && callShown[m.toolCallId]) return;
          into.appendChild(msgEl(m));
        });
      }
      var callShown = dict();
      messages.forEach(function (m) {
        (m.toolCalls || []).forEach(function (c) { callShown[c.id] = true; });
      });
      function msgEl(m) {
        var el = h("div", { class: "msg role-" + m.role, "data-testid": "transcript-message",
          "data-role": m.role, "data-id": m.id }, h("div", { class: "who" }, m.role));
        var content = m.content;
        if (content !== undefined && content !== null && content !== "") {
          el.appendChild(h("div", { class: "body" }, typeof content === "string" ? content : pretty(content)));
        }
        (m.toolCalls || []).forEach(function (c) {
          var fn = c["function"] || {};
          var call = h("div", { class: "toolcall", "data-testid": "transcript-toolcall", "data-id": c.id },
            h("div", {}, h("strong", {}, fn.name || "?"), h("span", { class: "muted" }, "  " + c.id)),
            h("pre", {}, prettyArgs(fn.arguments)));
          var res = results[c.id];
          if (res) {
            call.appendChild(h("div", { class: "result", "data-testid": "transcript-result" },
              h("span", { class: "muted" }, "result"), h("pre", {}, prettyArgs(res.content))));
          }
          el.appendChild(call);
          (childrenOf[c.id] || []).forEach(function (sid) { append(el, subBlock(sid)); });
        });
        return el;
      }
      var shownTop = top, hidden = dict();
      if (!showAll && top.length > MAX_MESSAGES) {
        shownTop = top.slice(top.length - MAX_MESSAGES);
        top.slice(0, top.length - MAX_MESSAGES).forEach(function (m) {
          (m.toolCalls || []).forEach(function (c) { hidden[c.id] = true; });
        });
        box.appendChild(h("button", { type: "button", "data-testid": "transcript-show-all",
          onclick: function () { showAll = true; transcript(messages); } },
          (top.length - MAX_MESSAGES) + " earlier messages not shown: show all"));
      }
      // A subagent spawned by a hidden call is hidden with it.
      function underHidden(id, depth) {
        var up = spawner[id];
        if (up === undefined || depth > 50) return false;
        return hidden[up] === true || underHidden(up, depth + 1);
      }
      list(shownTop, box);
      Object.keys(bySub).forEach(function (id) {
        if (!underHidden(id, 0)) append(box, subBlock(id));
      });
    }

    function scalar(value) {
      if (typeof value === "string") return h("span", { class: "str" }, JSON.stringify(value));
      if (typeof value === "number") return h("span", { class: "num" }, String(value));
      return h("span", { class: "lit" }, String(value));
    }

    function tree(value, key, depth) {
      var keyEl = key === null ? null : h("span", { class: "key" }, key + ": ");
      if (value === null || typeof value !== "object") {
        return h("div", { class: "leaf", "data-testid": "state-leaf", "data-path-key": key === null ? "" : key }, keyEl, scalar(value));
      }
      var isArr = Array.isArray(value);
      var keys = isArr ? value.map(function (_, i) { return i; }) : Object.keys(value);
      var node = h("details", { "data-testid": "state-node" });
      if (depth < 3) node.open = true;
      node.appendChild(h("summary", {}, keyEl,
        h("span", { class: "muted" }, isArr ? "[" + keys.length + "]" : "{" + keys.length + "}")));
      keys.slice(0, 500).forEach(function (k) { node.appendChild(tree(value[k], String(k), depth + 1)); });
      if (keys.length > 500) node.appendChild(h("div", { class: "muted" }, (keys.length - 500) + " more"));
      return node;
    }

    function install() {
      var sc = $("rs-scrub");
      sc.addEventListener("input", function () {
        $("rs-at").textContent = "after event #" + sc.value + " of " + (S.summary.events - 1);
        loadLater(Number(sc.value));
      });
      function step(d) {
        var v = Math.min(Math.max(Number(sc.value) + d, 0), Number(sc.max));
        sc.value = String(v);
        load(v);
      }
      $("rs-prev").addEventListener("click", function () { step(-1); });
      $("rs-next").addEventListener("click", function () { step(1); });
    }

    return { reset: reset, extend: extend, show: show, install: install };
  })();

  // ---- compare: two runs (or a run's two sides), items aligned, folds diffed -----------

  var Compare = (function () {
    var generation = 0;

    // Every run, and its output side when it has a chain, as "id|side".
    function choices() {
      var out = [];
      (S.runs || []).forEach(function (r) {
        out.push({ key: r.id + "|input", text: r.label + (S.summary && S.summary.stages && r.id === S.runId ? " (as received)" : "") });
        if (S.summary && S.summary.stages && r.id === S.runId) out.push({ key: r.id + "|output", text: r.label + " (as the client receives it)" });
      });
      return out;
    }

    function fill(sel, options, want) {
      var keep = sel.value || want;
      clear(sel);
      options.forEach(function (o) { sel.appendChild(h("option", { value: o.key }, o.text)); });
      if (options.some(function (o) { return o.key === keep; })) sel.value = keep;
    }

    function show() {
      var options = choices();
      var left = $("cp-left"), right = $("cp-right");
      // A run with a chain: its two sides; else the current run and the one before it.
      var firstLeft = S.runId + "|input", firstRight = S.runId + "|output";
      if (!(S.summary && S.summary.stages)) {
        var other = (S.runs || []).filter(function (r) { return r.id !== S.runId; })[0];
        firstRight = other ? other.id + "|input" : firstLeft;
      }
      fill(left, options, firstLeft);
      fill(right, options, firstRight);
      if (left.value === right.value && options.length > 1) {
        right.value = options.filter(function (o) { return o.key !== left.value; })[0].key;
      }
      draw();
    }

    function path(key, rest) {
      var parts = key.split("|");
      var p = "runs/" + encodeURIComponent(parts[0]) + "/" + rest;
      return parts[1] === "output" ? p + (p.indexOf("?") >= 0 ? "&" : "?") + "side=output" : p;
    }

    function side(key) {
      return api(path(key, "summary")).then(function (summary) {
        if (!summary.events) return { summary: summary, fold: { messages: [], state: {} } };
        return api(path(key, "fold?at=" + (summary.events - 1))).then(function (fold) {
          return { summary: summary, fold: fold };
        });
      });
    }

    function draw() {
      var body = $("cp-body"), l = $("cp-left").value, r = $("cp-right").value;
      clear(body);
      if (!l || !r || l === r) {
        $("cp-note").textContent = "pick two different runs (or a run's two sides, with --config)";
        return;
      }
      $("cp-note").textContent = "";
      var gen = ++generation;
      Promise.all([side(l), side(r)]).then(function (both) {
        if (gen !== generation) return;
        body.appendChild(verdicts(both[0].summary, both[1].summary));
        body.appendChild(items(both[0].summary, both[1].summary));
        body.appendChild(messages(both[0].fold.messages, both[1].fold.messages));
        body.appendChild(state(both[0].fold.state, both[1].fold.state));
      }).catch(function (e) { showError(e.message); });
    }

    function row(cells, differs, testid, key) {
      return h("tr", { class: differs ? "differs" : "", "data-testid": testid, "data-key": key,
        "data-differs": differs ? "true" : "false" }, cells);
    }

    function verdicts(a, b) {
      var t = h("table", { "data-testid": "compare-verdicts" },
        h("tr", {}, h("th", {}, ""), h("th", {}, "left"), h("th", {}, "right")));
      [["outcome", a.outcome, b.outcome], ["events", a.events, b.events],
       ["violations", a.violations.length, b.violations.length], ["warnings", a.warnings.length, b.warnings.length]]
        .forEach(function (x) {
          t.appendChild(row([h("th", {}, x[0]), h("td", {}, String(x[1])), h("td", {}, String(x[2]))],
            x[1] !== x[2], "compare-verdict", x[0]));
        });
      return t;
    }

    // Items (messages, tool calls, steps, subagents) aligned by their AG-UI id.
    function items(a, b) {
      var order = [], listed = new Set(), left = new Map(), right = new Map();
      function note(lanes, into) {
        lanes.forEach(function (lane) {
          if (lane.kind === "run") return;
          var key = lane.kind + ":" + laneRawId(lane);
          if (!into.has(key)) into.set(key, lane);
          if (!listed.has(key)) { listed.add(key); order.push(key); }
        });
      }
      note(a.lanes, left); note(b.lanes, right);
      var t = h("table", { "data-testid": "compare-items" },
        h("tr", {}, h("th", {}, "item"), h("th", {}, "left"), h("th", {}, "right")));
      order.forEach(function (key) {
        var x = left.get(key), y = right.get(key);
        function cell(lane) {
          if (!lane) return h("td", { class: "missing" }, "—");
          return h("td", {}, (lane.preview ? lane.label + ": " + lane.preview : lane.label) +
            (lane.tick_count ? " (" + lane.tick_count + " deltas)" : ""));
        }
        var differs = !x || !y || x.preview !== y.preview || x.tick_count !== y.tick_count;
        t.appendChild(row([h("td", { class: "mono" }, key), cell(x), cell(y)], differs, "compare-item", key));
      });
      return h("div", {}, h("h3", {}, "items"), t);
    }

    function messages(a, b) {
      var order = [], left = new Map(), right = new Map();
      a.forEach(function (m) { left.set(String(m.id), m); order.push(String(m.id)); });
      b.forEach(function (m) { right.set(String(m.id), m); if (!left.has(String(m.id))) order.push(String(m.id)); });
      var t = h("table", { "data-testid": "compare-messages" },
        h("tr", {}, h("th", {}, "message"), h("th", {}, "left"), h("th", {}, "right")));
      order.forEach(function (id) {
        var x = left.get(id), y = right.get(id);
        function cell(m) { return m ? h("td", {}, h("pre", {}, pretty(m))) : h("td", { class: "missing" }, "—"); }
        t.appendChild(row([h("td", { class: "mono" }, id), cell(x), cell(y)],
          JSON.stringify(x) !== JSON.stringify(y), "compare-message", id));
      });
      return h("div", {}, h("h3", {}, "messages at the end"), t);
    }

    function state(a, b) {
      var keys = [], seen = new Set();
      function add(o) {
        if (o && typeof o === "object" && !Array.isArray(o)) Object.keys(o).forEach(function (k) { if (!seen.has(k)) { seen.add(k); keys.push(k); } });
      }
      add(a); add(b);
      var t = h("table", { "data-testid": "compare-state" },
        h("tr", {}, h("th", {}, "state key"), h("th", {}, "left"), h("th", {}, "right")));
      function value(o, k) {
        return o && typeof o === "object" && Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined;
      }
      keys.forEach(function (k) {
        var x = value(a, k), y = value(b, k);
        function cell(v) { return v === undefined ? h("td", { class: "missing" }, "—") : h("td", {}, h("pre", {}, pretty(v))); }
        t.appendChild(row([h("td", { class: "mono" }, k), cell(x), cell(y)],
          JSON.stringify(x) !== JSON.stringify(y), "compare-state-key", k));
      });
      return h("div", {}, h("h3", {}, "state at the end"), t);
    }

    function install() {
      $("cp-left").addEventListener("change", draw);
      $("cp-right").addEventListener("change", draw);
    }

    return { show: show, install: install };
  })();

  // ---- send: compose a run input, send it to the served agent, watch it live -----------

  var Send = (function () {
    var serial = 0;

    function fresh() {
      serial++;
      var stamp = Date.now().toString(36);
      if (!$("sd-thread").value) $("sd-thread").value = "inspector-" + stamp;
      $("sd-run").value = "run-" + stamp + "-" + serial;
    }

    function show() { if (!$("sd-run").value) fresh(); }

    function field(id, name, want) {
      var value;
      try { value = JSON.parse($(id).value); } catch (e) { throw new Error(name + " is not JSON: " + e.message); }
      if (want === "array" ? !Array.isArray(value) : (value === null || typeof value !== "object" || Array.isArray(value))) {
        throw new Error(name + " must be a JSON " + (want === "array" ? "array" : "object"));
      }
      return value;
    }

    function status(text, bad) {
      var el = $("sd-status");
      el.textContent = text;
      el.className = bad ? "send-status-bad" : "muted";
    }

    // POST a run input, open its run as soon as it is listed, follow it live.
    function sendRun(input, report) {
      var label = input.threadId + " / " + input.runId;
      report("sending " + label + "…", false);
      var done = false;
      function follow() {
        if (done) return;
        loadRuns().then(function () {
          var run = (S.runs || []).filter(function (r) { return r.label === label; })[0];
          if (!run) { setTimeout(follow, 150); return; }
          done = true;  // found: from here on the live poll follows it
          if (run.id === S.runId) { setView("events"); return; }  // the poll opened it first
          $("run-select").value = run.id;
          return openRun(run.id).then(function () { setView("events"); });
        }).catch(function () { setTimeout(follow, 300); });
      }
      follow();
      return fetch("api/send", { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(input) }).then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (!r.ok) { done = true; report((body && body.error) || ("HTTP " + r.status), true); return false; }
          report("sent " + label + ": " + body.events + " events", false);
          return true;
        });
      }).catch(function (e) { done = true; report(e.message, true); return false; });
    }

    function submit(ev) {
      ev.preventDefault();
      var input;
      try {
        input = {
          threadId: $("sd-thread").value.trim(), runId: $("sd-run").value.trim(),
          messages: field("sd-messages", "messages", "array"), tools: field("sd-tools", "tools", "array"),
          context: field("sd-context", "context", "array"), state: field("sd-state", "state", "object"),
          forwardedProps: field("sd-props", "forwardedProps", "object"),
        };
      } catch (e) { status(e.message, true); return; }
      sendRun(input, status).then(function (ok) { if (ok) fresh(); });
    }

    function install() { $("sd-form").addEventListener("submit", submit); }

    return { show: show, install: install, sendRun: sendRun };
  })();

  // ---- the request a run was started with (sent from the page, imported) ----------

  var Request = (function () {
    function show() {
      var box = $("rs-request"), request = S.summary && S.summary.request;
      box.hidden = !request;
      $("rs-request-edit").hidden = !request || !S.canSend;
      if (!request) return;
      var count = function (name) { return Array.isArray(request[name]) ? request[name].length : 0; };
      $("rs-request-head").textContent = "request: " + request.threadId + " / " + request.runId +
        " — " + count("messages") + " message(s), " + count("tools") + " tool(s)";
      $("rs-request-json").textContent = JSON.stringify(request, null, 2);
    }

    // The send tab's fields from the request, with a fresh runId on the same thread.
    function edit() {
      var request = S.summary && S.summary.request;
      if (!request) return;
      var text = function (value, empty) { return JSON.stringify(value === undefined ? empty : value, null, 1); };
      $("sd-thread").value = request.threadId;
      $("sd-run").value = "";
      $("sd-messages").value = text(request.messages, []);
      $("sd-tools").value = text(request.tools, []);
      $("sd-context").value = text(request.context, []);
      $("sd-state").value = text(request.state, {});
      $("sd-props").value = text(request.forwardedProps, {});
      setView("send");
    }

    function install() { $("rs-request-edit").addEventListener("click", edit); }

    return { show: show, install: install };
  })();

  // ---- import a run exported as NDJSON (file input, or a file dropped on the page) ----

  var Import = (function () {
    function upload(file) {
      if (!file) return Promise.resolve();
      showError("");
      $("run-info").textContent = "importing " + file.name + "…";
      return fetch("api/import?name=" + encodeURIComponent(file.name), {
        method: "POST", headers: { "Content-Type": "application/x-ndjson", Accept: "application/json" }, body: file,
      }).then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (!r.ok) throw new Error("import of " + file.name + " refused: " + ((body && body.error) || ("HTTP " + r.status)));
          return loadRuns().then(function () {
            $("run-select").value = body.id;
            return openRun(body.id);
          });
        });
      }).catch(function (e) {
        showError(e.message);
        if (S.summary) runInfo(S.summary);
      });
    }

    function install() {
      var input = $("run-import");
      input.addEventListener("change", function () {
        upload(input.files && input.files[0]).then(function () { input.value = ""; });
      });
      document.addEventListener("dragover", function (ev) {
        if (ev.dataTransfer && Array.prototype.indexOf.call(ev.dataTransfer.types, "Files") >= 0) ev.preventDefault();
      });
      document.addEventListener("drop", function (ev) {
        var files = ev.dataTransfer && ev.dataTransfer.files;
        if (!files || !files.length) return;
        ev.preventDefault();
        upload(files[0]);
      });
    }

    return { install: install, upload: upload };
  })();

  // ---- a pending interrupt: answered from the result view ---------------------------

  var Interrupt = (function () {
    var generation = 0;

    // The run's last RUN_FINISHED, when its outcome is an interrupt, and the page can send.
    function check() {
      var box = $("rs-interrupt"), gen = ++generation;
      box.hidden = true;
      clear(box);
      if (!S.canSend || !S.summary || S.summary.outcome === "live" || !S.summary.types.RUN_FINISHED) return;
      var n = S.summary.types.RUN_FINISHED;
      api(runPath("events?type=RUN_FINISHED&offset=" + (n - 1) + "&limit=1")).then(function (page) {
        if (gen !== generation || !page.rows.length) return null;
        return api(runPath("events/" + page.rows[0].index));
      }).then(function (event) {
        if (!event || gen !== generation) return;
        var outcome = event.json && event.json.outcome;
        if (!outcome || outcome.type !== "interrupt" || !Array.isArray(outcome.interrupts)) return;
        draw(event.json, outcome.interrupts);
      }).catch(function (e) { showError(e.message); });
    }

    // A field per top-level property of responseSchema (strings, numbers, booleans);
    // otherwise, or for anything else, the payload as JSON.
    function fieldsFor(interrupt) {
      var schema = interrupt.responseSchema, props = schema && schema.properties;
      var simple = props && typeof props === "object" && Object.keys(props).every(function (k) {
        var t = props[k] && props[k].type;
        return t === "string" || t === "number" || t === "integer" || t === "boolean";
      });
      var wrap = h("div", { class: "interrupt-fields" });
      if (simple) {
        Object.keys(props).forEach(function (k) {
          var t = props[k].type;
          var input = t === "boolean" ? h("input", { type: "checkbox", "data-field": k, "data-type": t })
            : h("input", { type: t === "string" ? "text" : "number", "data-field": k, "data-type": t });
          wrap.appendChild(h("label", {}, k, input));
        });
      } else {
        wrap.appendChild(h("textarea", { rows: 3, "data-field": "", "data-testid": "interrupt-payload", spellcheck: "false" }, "{}"));
      }
      return wrap;
    }

    function payloadOf(fields) {
      var raw = fields.querySelector("textarea[data-field='']");
      if (raw) return JSON.parse(raw.value);
      var out = Object.create(null), obj = {};
      Array.prototype.forEach.call(fields.querySelectorAll("input[data-field]"), function (input) {
        var k = input.getAttribute("data-field"), t = input.getAttribute("data-type");
        out[k] = t === "boolean" ? input.checked : t === "string" ? input.value : Number(input.value);
      });
      Object.keys(out).forEach(function (k) { obj[k] = out[k]; });
      return obj;
    }

    function draw(finished, interrupts) {
      var box = $("rs-interrupt");
      box.appendChild(h("strong", {}, "pending interrupt" + (interrupts.length > 1 ? "s" : "")));
      var forms = interrupts.map(function (it) {
        var fields = fieldsFor(it);
        box.appendChild(h("div", { "data-testid": "interrupt-item", "data-id": String(it.id) },
          h("div", {}, h("span", { class: "mono" }, String(it.id)),
            it.reason ? "  " + it.reason : "", it.message ? " — " + it.message : ""), fields));
        return { id: it.id, fields: fields };
      });
      var status = h("span", { class: "muted", "data-testid": "interrupt-status" });
      function report(text, bad) { status.textContent = text; status.className = bad ? "send-status-bad" : "muted"; }
      function answer(kind) {
        var resume;
        try {
          resume = forms.map(function (f) {
            var entry = { interruptId: f.id, status: kind };
            if (kind === "resolved") entry.payload = payloadOf(f.fields);
            return entry;
          });
        } catch (e) { report("the payload is not JSON: " + e.message, true); return; }
        Send.sendRun({ threadId: finished.threadId, runId: "resume-" + Date.now().toString(36),
          messages: [], tools: [], context: [], state: {}, forwardedProps: {}, resume: resume }, report);
      }
      box.appendChild(h("div", {},
        h("button", { type: "button", "data-testid": "interrupt-resolve", onclick: function () { answer("resolved"); } }, "resolve"),
        " ",
        h("button", { type: "button", "data-testid": "interrupt-cancel", onclick: function () { answer("cancelled"); } }, "cancel"),
        " ", status));
      box.hidden = false;
    }

    return { check: check };
  })();

  // ---- start ------------------------------------------------------------------------

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll(".tabs button"), function (b) {
      b.addEventListener("click", function () { setView(b.getAttribute("data-view")); });
    });
    Timeline.install();
    Events.install();
    Pipeline.install();
    Result.install();
    Send.install();
    Compare.install();
    Request.install();
    Import.install();
    $("side-select").addEventListener("change", function () {
      S.side = $("side-select").value;
      openRun(S.runId).catch(function (e) { showError(e.message); });
    });
    $("run-select").addEventListener("change", function () {
      openRun($("run-select").value).catch(function (e) { showError(e.message); });
    });
    window.addEventListener("hashchange", function () {
      var name = (location.hash || "").slice(1);
      if (VIEWS.indexOf(name) >= 0 && name !== S.view) setView(name);
    });
    var want = (location.hash || "").slice(1);
    if (VIEWS.indexOf(want) >= 0) S.view = want;
    setView(S.view);
    loadRuns().then(function (id) {
      if (id !== null) return openRun(id);
    }).then(function () {
      document.body.setAttribute("data-ready", "true");
    }).catch(function (e) { showError(e.message); });
    // Live runs (serve --inspect): refresh the run list, and the summary of a live run.
    setInterval(function () {
      if (document.hidden) return;
      var live = S.summary !== null && S.summary.outcome === "live";
      loadRuns().then(function (id) {
        if (S.summary === null && id !== null) return openRun(id);  // the first run arrived
        if (live) return openRunKeepingView();
      }).catch(function () { /* the server went away: keep what is shown */ });
    }, POLL_MS);
  }

  function openRunKeepingView() {
    return api(runPath("summary")).then(function (summary) {
      S.summary = summary;
      runInfo(summary);
      Timeline.reset(true);
      Events.problems();
      Events.refresh();
      Result.extend();
      if (S.view === "timeline") Timeline.draw();
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

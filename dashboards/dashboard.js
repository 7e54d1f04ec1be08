// llmtap dashboard: draws the charts (Plotly, inlined) and fills the tables from the JSON
// the page carries (or, live, from /data.json). Every value reaches the page as text:
// tables through textContent, chart labels with < > & turned into entities, which
// Plotly shows as the characters themselves and never parses as markup.
(function () {
  "use strict";

  var KINDS = [
    ["uncached_input_tokens", "uncached input", "#3b5bdb"],
    ["cache_read_tokens", "cache read", "#12b76a"],
    ["cache_write_tokens", "cache write", "#f79009"],
    ["plain_output_tokens", "output", "#7a5af8"],
    ["reasoning_tokens", "reasoning", "#ee46bc"],
  ];
  var LAYOUT = {
    margin: { l: 60, r: 16, t: 8, b: 60 },
    barmode: "stack",
    legend: { orientation: "h", y: -0.22 },
    font: { family: "system-ui, sans-serif", size: 12 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
  };
  var CONFIG = { displaylogo: false, responsive: true, displayModeBar: false };

  function label(value) {
    return String(value === null || value === undefined ? "(none)" : value)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function layout(extra) {
    return Object.assign({}, LAYOUT, extra || {});
  }

  function draw(id, traces, extra) {
    var node = document.getElementById(id);
    if (!node) { return; }
    var hasData = traces.some(function (t) { return (t.x || t.values || []).length > 0; });
    if (!hasData) {
      node.textContent = "No data yet.";
      node.classList.add("empty");
      node.setAttribute("data-drawn", "empty");
      return;
    }
    node.textContent = "";
    Plotly.react(node, traces, layout(extra), CONFIG);
    node.setAttribute("data-drawn", "chart");
  }

  function tokenRows(rows) {
    return rows.map(function (r) {
      var copy = Object.assign({}, r);
      copy.plain_output_tokens = (r.output_tokens || 0) - (r.reasoning_tokens || 0);
      return copy;
    });
  }

  function stackedTokens(rows, key) {
    rows = tokenRows(rows);
    return KINDS.map(function (kind) {
      return {
        type: "bar", name: kind[1], marker: { color: kind[2] },
        x: rows.map(function (r) { return label(r[key]); }),
        y: rows.map(function (r) { return r[kind[0]] || 0; }),
      };
    });
  }

  function groupBars(rows, xKey, seriesKey, valueKey) {
    var series = {};
    rows.forEach(function (r) {
      var s = label(r[seriesKey]);
      (series[s] = series[s] || { type: "bar", name: s, x: [], y: [] });
      series[s].x.push(label(r[xKey]));
      series[s].y.push(r[valueKey] || 0);
    });
    return Object.keys(series).sort().map(function (k) { return series[k]; });
  }

  function fmt(value, column) {
    if (value === null || value === undefined) { return ""; }
    if (typeof value === "number") {
      if (/rate|share/.test(column)) { return (value * 100).toFixed(1) + "%"; }
      if (/usd/.test(column)) { return "$" + value.toFixed(6); }
      return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toLocaleString("en-US", { maximumFractionDigits: 1 });
    }
    if (typeof value === "boolean") { return value ? "yes" : "no"; }
    if (typeof value === "object") { return JSON.stringify(value); }
    return String(value);
  }

  function fill(id, rows, columns) {
    var table = document.getElementById(id);
    if (!table) { return; }
    table.textContent = "";
    var head = table.createTHead().insertRow();
    columns.forEach(function (c) {
      var th = document.createElement("th");
      th.textContent = c[1];
      head.appendChild(th);
    });
    var body = table.createTBody();
    if (!rows.length) {
      var row = body.insertRow();
      row.className = "empty";
      var cell = row.insertCell();
      cell.colSpan = columns.length;
      cell.textContent = table.getAttribute("data-empty") || "Nothing yet.";
      return;
    }
    rows.forEach(function (r) {
      var tr = body.insertRow();
      columns.forEach(function (c) {
        var td = tr.insertCell();
        var value = r[c[0]];
        td.textContent = fmt(value, c[0]);
        if (typeof value === "number") { td.className = "num"; }
        if (c[2] && c[2](r)) { td.classList.add("bad"); }
      });
    });
  }

  function totals(t) {
    document.querySelectorAll("[data-total]").forEach(function (node) {
      var key = node.getAttribute("data-total");
      node.textContent = key === "cost_usd" ? "$" + t[key] : fmt(t[key], key);
    });
    var notes = { unpriced: t.unpriced ? t.unpriced + " unpriced, " + t.usage_missing + " without usage" : (t.usage_missing ? t.usage_missing + " without usage" : ""),
                  misses: t.misses + " misses" };
    document.querySelectorAll("[data-total-note]").forEach(function (node) {
      node.textContent = notes[node.getAttribute("data-total-note")] || "";
    });
  }

  function render(d) {
    totals(d.totals);
    document.getElementById("generated").textContent = d.generated_at;
    draw("chart-tokens-team", stackedTokens(d.usage_by_team, "team"));
    var days = { xaxis: { type: "category" } };
    draw("chart-tokens-day", stackedTokens(d.usage_by_day, "day"), days);
    draw("chart-cost-team", [{
      type: "bar", name: "cost", marker: { color: "#3b5bdb" },
      x: d.cost_by_team.map(function (r) { return label(r.team); }),
      y: d.cost_by_team.map(function (r) { return r.cost_usd; }),
    }], { showlegend: false });
    draw("chart-cost-day", groupBars(d.cost_by_day_team, "day", "team", "cost_usd"), days);
    draw("chart-hit-rate", [{
      type: "scatter", mode: "lines+markers", name: "hit rate",
      x: d.cache_by_day.map(function (r) { return label(r.day); }),
      y: d.cache_by_day.map(function (r) { return r.hit_rate; }),
    }], { yaxis: { tickformat: ".0%", range: [0, 1] }, xaxis: { type: "category" }, showlegend: false });
    var causes = {};
    d.misses.forEach(function (m) { causes[m.cause] = (causes[m.cause] || 0) + 1; });
    draw("chart-miss-causes", [{
      type: "bar", marker: { color: "#f04438" },
      x: Object.keys(causes).map(label), y: Object.keys(causes).map(function (k) { return causes[k]; }),
    }], { showlegend: false, yaxis: { tickformat: "d" } });
    fill("table-misses", d.misses, [["started_at", "when"], ["team", "team"], ["model", "model"], ["cause", "cause"],
      ["message_index", "message"], ["missed_tokens", "missed tokens"], ["extra_cost_usd", "extra cost"],
      ["exchange_id", "exchange"]]);
    draw("chart-finish", groupBars(d.finish_by_provider, "provider", "finish_reason", "requests"));
    var statuses = ["valid", "invalid_json", "schema_violation", "unknown_tool", "truncated", "args_lost",
      "duplicate_id", "missing_result", "orphan_result"];
    draw("chart-tools", statuses.map(function (s) {
      return { type: "bar", name: s, x: d.tools_by_team.map(function (r) { return label(r.team); }),
               y: d.tools_by_team.map(function (r) { return r[s] || 0; }) };
    }));
    fill("table-offenders", d.offenders.map(function (o) {
      return { tool: o.tool, problems: o.problems, statuses: Object.keys(o.statuses).map(function (k) { return k + " " + o.statuses[k]; }).join(", ") };
    }), [["tool", "tool"], ["problems", "problems"], ["statuses", "which"]]);
    fill("table-problems", d.problems, [["started_at", "when"], ["team", "team"], ["tool", "tool"],
      ["status", "status", function () { return true; }], ["detail", "detail"], ["call_id", "call id"], ["exchange_id", "exchange"]]);
    draw("chart-errors", groupBars(d.errors_by_status.filter(function (r) { return r.errors > 0; }), "provider", "status", "errors"));
    var lat = d.latency_by_model;
    draw("chart-latency", [
      ["ttft_p50_ms", "first token p50"], ["ttft_p95_ms", "first token p95"],
      ["total_p50_ms", "total p50"], ["total_p95_ms", "total p95"],
    ].map(function (k) {
      return { type: "bar", name: k[1], x: lat.map(function (r) { return label(r.model); }),
               y: lat.map(function (r) { return r[k[0]]; }) };
    }), { barmode: "group" });
    fill("table-latency", lat, [["model", "model"], ["requests", "requests"], ["ttfb_p50_ms", "first byte p50"],
      ["ttft_p50_ms", "first token p50"], ["ttft_p95_ms", "first token p95"], ["total_p50_ms", "total p50"],
      ["total_p95_ms", "total p95"]]);
    exchanges(d);
  }

  // -- the exchange table, its filters and the inline detail view -------------------------

  var EXCHANGE_COLUMNS = [["started_at", "when"], ["team", "team"], ["key_last4", "key"], ["protocol", "protocol"],
    ["model", "model"], ["status", "status", function (r) { return r.status >= 400; }], ["finish_reason", "finish"],
    ["input_tokens", "in"], ["cached_tokens", "cached"], ["output_tokens", "out"], ["cost_usd", "cost"],
    ["duration_ms", "ms"], ["problems", "problems", function (r) { return !!r.problems; }], ["id", "id"]];
  var FILTERS = ["team", "model", "provider", "finish"];
  var current = [];

  function problems(r) {
    return [r.tool_problem_kinds, r.cache_miss ? "cache miss: " + r.cache_miss : null].filter(Boolean).join(", ");
  }

  function options(select, values) {
    var keep = select.value;
    Array.from(select.querySelectorAll("option[data-value]")).forEach(function (o) { o.remove(); });
    values.forEach(function (v) {
      var option = document.createElement("option");
      option.value = v; option.textContent = v; option.setAttribute("data-value", "1");
      select.appendChild(option);
    });
    select.value = keep;
  }

  function distinct(rows, key) {
    var seen = {};
    rows.forEach(function (r) { if (r[key] !== null && r[key] !== undefined) { seen[String(r[key])] = true; } });
    return Object.keys(seen).sort();
  }

  function chosen() {
    var form = document.getElementById("filters");
    var out = {};
    Array.from(form.elements).forEach(function (e) { if (e.name && e.value) { out[e.name] = e.value; } });
    return out;
  }

  function matches(r, f) {
    if (f.team && r.team !== f.team) { return false; }
    if (f.model && r.model !== f.model) { return false; }
    if (f.provider && r.provider !== f.provider) { return false; }
    if (f.finish && (r.finish_reason || "unknown") !== f.finish) { return false; }
    if (f.status && !(f.status === "error" ? (r.status >= 400 || r.error_type) : String(r.status) === f.status)) { return false; }
    if (f.tool_problem && !(r.tool_problems > 0 && (f.tool_problem === "any" || (r.tool_problem_kinds || "").indexOf(f.tool_problem) >= 0))) { return false; }
    if (f.cache_miss && !(r.cache_miss && (f.cache_miss === "any" || r.cache_miss === f.cache_miss))) { return false; }
    if (f.search) {
      var text = ((r.detail && r.detail.answer && r.detail.answer.text) || "").toLowerCase();
      if (text.indexOf(f.search.toLowerCase()) < 0) { return false; }
    }
    return true;
  }

  function exchanges(d) {
    current = d.exchanges;
    var form = document.getElementById("filters");
    FILTERS.forEach(function (name) { options(form.elements[name], distinct(current, name === "finish" ? "finish_reason" : name)); });
    options(form.elements.status, distinct(current, "status"));
    options(form.elements.tool_problem, ["invalid_json", "schema_violation", "unknown_tool", "truncated", "args_lost",
      "duplicate_id", "missing_result", "orphan_result"]);
    options(form.elements.cache_miss, ["tools_changed", "system_changed", "message_edited", "ttl_expired",
      "no_breakpoint", "below_minimum", "unexplained"]);
    applyFilters();
  }

  function applyFilters() {
    var f = chosen();
    if (window.LLMTAP_LIVE && Object.keys(f).length) {
      var query = Object.keys(f).map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(f[k]); }).join("&");
      fetch("log.json?" + query, { cache: "no-store" }).then(function (r) { return r.json(); })
        .then(function (rows) { table(rows); }).catch(function () { table(current.filter(function (r) { return matches(r, f); })); });
      return;
    }
    table(current.filter(function (r) { return matches(r, f); }));
  }

  function table(rows) {
    rows.forEach(function (r) { r.problems = problems(r); });
    fill("table-exchanges", rows, EXCHANGE_COLUMNS);
    document.getElementById("exchange-count").textContent = rows.length + " shown";
    var body = document.getElementById("table-exchanges").tBodies[0];
    Array.from(body.rows).forEach(function (tr, i) {
      if (!rows[i]) { return; }
      tr.setAttribute("data-id", rows[i].id);
      tr.addEventListener("click", function () { detail(rows[i]); });
    });
  }

  function pairs(container, title, entries) {
    var shown = entries.filter(function (e) {
      var v = e[1];
      return v !== null && v !== undefined && v !== "" && !(Array.isArray(v) && !v.length) &&
        !(typeof v === "object" && !Array.isArray(v) && !Object.keys(v).length);
    });
    if (!shown.length) { return; }
    var h = document.createElement("h3"); h.textContent = title; container.appendChild(h);
    var dl = document.createElement("dl");
    shown.forEach(function (e) {
      var dt = document.createElement("dt"); dt.textContent = e[0];
      var dd = document.createElement("dd"); dd.textContent = typeof e[1] === "object" ? JSON.stringify(e[1]) : String(e[1]);
      dl.appendChild(dt); dl.appendChild(dd);
    });
    container.appendChild(dl);
  }

  function block(container, title, text) {
    if (!text) { return; }
    var h = document.createElement("h3"); h.textContent = title; container.appendChild(h);
    var pre = document.createElement("pre"); pre.textContent = text; container.appendChild(pre);
  }

  function detail(r) {
    var panel = document.getElementById("detail");
    var body = document.getElementById("detail-body");
    var info = r.detail || {};
    body.textContent = "";
    document.getElementById("detail-title").textContent = r.id;
    pairs(body, "Who and when", [["team", r.team], ["key", r.key_last4 ? "…" + r.key_last4 : null],
      ["started", r.started_at], ["first byte (ms)", info.timing && info.timing.ttfb_ms],
      ["first token (ms)", info.timing && info.timing.ttft_ms], ["total (ms)", r.duration_ms]]);
    var req = info.request || {};
    pairs(body, "Request", [["protocol", r.protocol], ["provider", r.provider], ["model", r.model],
      ["status", r.status], ["stream", req.stream], ["max tokens", req.max_tokens],
      ["messages by role", req.messages_by_role], ["system prompt (chars)", req.system_chars],
      ["tools declared", (req.tools || []).map(function (t) { return t.name; })], ["tool choice", req.tool_choice],
      ["cache breakpoints", req.cache_breakpoints], ["thinking", req.thinking], ["parameters", req.params]]);
    var answer = info.answer || {};
    pairs(body, "Answer", [["finish", r.finish_reason], ["raw finish", answer.finish_reason_raw],
      ["reasoning blocks", answer.reasoning_blocks], ["error", answer.error], ["interrupted", answer.interrupted],
      ["decode error", answer.decode_error]]);
    block(body, "Text" + (answer.text_clipped ? " (clipped)" : ""), answer.text);
    (answer.tool_calls || []).forEach(function (c) {
      pairs(body, "Tool call " + (c.name || "?"), [["id", c.id], ["status", c.status], ["why", c.status_detail],
        ["arguments", c.arguments_raw]]);
    });
    pairs(body, "Usage", Object.keys(info.usage || {}).map(function (k) { return [k, info.usage[k]]; }));
    pairs(body, "Cost", Object.keys(info.cost || {}).map(function (k) { return [k, info.cost[k]]; }));
    pairs(body, "Cache", Object.keys(info.cache || {}).map(function (k) { return [k, info.cache[k]]; }));
    var page = document.getElementById("detail-page");
    page.hidden = !window.LLMTAP_LIVE;
    if (window.LLMTAP_LIVE) { page.setAttribute("href", "exchange/" + encodeURIComponent(r.id)); }
    document.getElementById("detail-conversation").onclick = function () { conversation(r); };
    panel.hidden = false;
  }

  function conversation(r) {
    var key = r.detail && r.detail.conversation;
    var body = document.getElementById("detail-body");
    body.textContent = "";
    document.getElementById("detail-title").textContent = "conversation of " + r.id;
    var turns = current.filter(function (x) { return key ? (x.detail && x.detail.conversation === key) : x.id === r.id; })
      .slice().reverse();
    var totals = { input_tokens: 0, cached_tokens: 0, output_tokens: 0, cost: 0, misses: 0 };
    var rows = turns.map(function (t, i) {
      totals.input_tokens += t.input_tokens || 0; totals.cached_tokens += t.cached_tokens || 0;
      totals.output_tokens += t.output_tokens || 0; totals.cost += parseFloat(t.cost_usd) || 0;
      var cache = (t.detail && t.detail.cache) || {};
      if (cache.verdict === "miss") { totals.misses += 1; }
      return { turn: i + 1, started_at: t.started_at, finish_reason: t.finish_reason, input_tokens: t.input_tokens,
               cached_tokens: t.cached_tokens, output_tokens: t.output_tokens, cost_usd: t.cost_usd,
               cache: cache.verdict === "miss" ? "miss: " + cache.cause : cache.verdict, id: t.id };
    });
    var h = document.createElement("h3");
    h.textContent = turns.length + " turns · " + totals.input_tokens.toLocaleString("en-US") + " in (" +
      totals.cached_tokens.toLocaleString("en-US") + " cached) · " + totals.output_tokens.toLocaleString("en-US") +
      " out · $" + totals.cost.toFixed(6) + " · " + totals.misses + " cache misses";
    body.appendChild(h);
    var tableNode = document.createElement("table");
    tableNode.id = "table-conversation";
    body.appendChild(tableNode);
    fill("table-conversation", rows, [["turn", "#"], ["started_at", "when"], ["finish_reason", "finish"],
      ["input_tokens", "in"], ["cached_tokens", "cached"], ["output_tokens", "out"], ["cost_usd", "cost"],
      ["cache", "cache"], ["id", "id"]]);
  }

  document.getElementById("filters").addEventListener("input", applyFilters);
  document.getElementById("detail-close").addEventListener("click", function () {
    document.getElementById("detail").hidden = true;
  });

  function load() {
    return JSON.parse(document.getElementById("llmtap-data").textContent);
  }

  render(load());
  if (window.LLMTAP_LIVE) {
    setInterval(function () {
      fetch("data.json", { cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) { if (d) { render(d); } })
        .catch(function () { /* the server may be restarting; try again next time */ });
    }, window.LLMTAP_REFRESH_MS);
  }
})();

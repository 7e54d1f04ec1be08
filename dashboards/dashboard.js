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
    fill("table-exchanges", d.exchanges, [["started_at", "when"], ["team", "team"], ["key_last4", "key"],
      ["protocol", "protocol"], ["model", "model"], ["status", "status", function (r) { return r.status >= 400; }],
      ["finish_reason", "finish"], ["input_tokens", "in"], ["cached_tokens", "cached"], ["output_tokens", "out"],
      ["cost_usd", "cost"], ["duration_ms", "ms"], ["tool_call_count", "tools"], ["id", "id"]]);
  }

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

// llmtap dashboard: draws the charts (Plotly, inlined) from the JSON the page carries (or,
// live, from data.json on every refresh). Every value reaches the page as text: chart
// labels with < > & turned into entities, which Plotly shows as the characters themselves
// and never parses as markup. Formats and colours: format.js; the exchange table and its
// detail view: exchanges.js. Not responsible for gathering numbers (data.py).
(function () {
  "use strict";

  var F = LlmtapFormat;
  var KINDS = [  // the parts of a token total, each its own colour (format.js)
    ["uncached_input_tokens", "uncached input"],
    ["cache_read_tokens", "cache read"],
    ["cache_write_tokens", "cache write"],
    ["plain_output_tokens", "output"],
    ["reasoning_tokens", "reasoning"],
  ];
  var LAYOUT = {
    // Legends above the plot: they wrap and push the plot down, never onto the date labels.
    margin: { l: 64, r: 16, t: 8, b: 8 },
    barmode: "stack",
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" },
    font: { family: "system-ui, sans-serif", size: 12 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    hoverlabel: { namelength: -1 },
  };
  var CONFIG = { displaylogo: false, responsive: true, displayModeBar: false };

  function label(value) {
    return String(value === null || value === undefined ? "(none)" : value)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function layout(traces, extra) {
    var out = Object.assign({}, LAYOUT, extra || {});
    out.xaxis = Object.assign({ automargin: true }, out.xaxis || {});
    out.yaxis = Object.assign({ automargin: true }, out.yaxis || {});
    if (out.showlegend === undefined) { out.showlegend = traces.length > 1; }
    return out;
  }

  var emptyText = "";  // over no exchanges at all, every chart says so

  function draw(id, traces, extra) {
    var node = document.getElementById(id);
    if (!node) { return; }
    var hasData = traces.some(function (t) { return (t.x || t.values || []).length > 0; });
    if (!hasData) {
      if (node.getAttribute("data-drawn") === "chart") { Plotly.purge(node); }
      // said plainly: none in the period shown (the banner above says when the last was)
      node.textContent = emptyText || node.getAttribute("data-empty") || "None in this period.";
      node.classList.add("empty");
      node.setAttribute("data-drawn", "empty");
      return;
    }
    // Plotly keeps its own nodes inside `node`: clearing them under a drawn chart leaves
    // Plotly.react diffing against a plot that is no longer there, and it draws nothing
    // (every chart blank after the first refresh). Only the empty text goes.
    if (node.getAttribute("data-drawn") !== "chart") {
      node.textContent = "";
      node.classList.remove("empty");
    }
    Plotly.react(node, traces, layout(traces, extra), CONFIG);
    node.setAttribute("data-drawn", "chart");
  }

  // -- axes ---------------------------------------------------------------------------------

  function niceStep(max) {  // a whole step giving at most ~6 ticks: 1, 2, 5, 10, 20, …
    if (max <= 6) { return 1; }
    var raw = max / 5;
    var magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / magnitude;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
  }

  function stackHeight(traces) {  // the tallest bar, stacked
    var sums = {};
    traces.forEach(function (t) {
      (t.x || []).forEach(function (x, i) { sums[x] = (sums[x] || 0) + (Number(t.y[i]) || 0); });
    });
    return Math.max.apply(null, [0].concat(Object.keys(sums).map(function (k) { return sums[k]; })));
  }

  function countAxis(traces) {  // counts tick at whole numbers only
    return { rangemode: "tozero", tickformat: ",d", tick0: 0, dtick: niceStep(stackHeight(traces)) };
  }

  var MONEY_AXIS = { rangemode: "tozero", tickprefix: "$", separatethousands: true };

  var HOUR_MS = 3600000;
  var DAY_MS = 24 * HOUR_MS;
  var PERIOD_MS = { hour: HOUR_MS, day: DAY_MS, week: 7 * DAY_MS };
  var HOVER = { hour: "%b %-d, %Y %H:%M", day: "%b %-d, %Y", week: "week of %b %-d, %Y" };

  // A period's key (`2026-12-01`, or `2026-12-01 13:00` per hour; wall time in the page's
  // zone) as epoch ms of that wall time read as UTC: the axis shows the wall time as it is.
  function periodStart(key) {
    var text = String(key);
    return Date.parse(text.length > 10 ? text.replace(" ", "T") + ":00Z" : text + "T00:00:00Z");
  }

  // Dates, with the range spelled out: a date axis left to itself over one day zooms to
  // milliseconds (ticks at "23:59:59.9995").
  function periodAxis(d) {
    var period = PERIOD_MS[d.period] ? d.period : "day";
    var axis = { type: "date", hoverformat: HOVER[period] + (period === "hour" ? " " + zoneOf(d) : "") };
    var starts = d.usage_by_day.map(function (r) { return periodStart(r.day); }).filter(isFinite);
    if (!starts.length) { return axis; }
    var half = PERIOD_MS[period] / 2;
    var first = Math.min.apply(null, starts), last = Math.max.apply(null, starts);
    axis.range = [iso(first - half), iso(last + half)];
    if (period === "hour") {  // a tick every 1, 2, 3, 6 or 12 hours: a dozen at most
      var hours = (last - first) / HOUR_MS + 1;
      var step = [1, 2, 3, 6, 12].filter(function (h) { return hours / h <= 12; })[0] || 24;
      hourTicks(axis, first, last, step);
    } else if (period === "day" && last - first <= 14 * DAY_MS) {
      axis.dtick = DAY_MS; axis.tickformat = "%b %-d";
    }
    return axis;
  }

  // Ticks on whole hours of the day (00, 06, 12, … for a step of 6), each "HH:00", the
  // first and each midnight with the date under it: Plotly's own labels put a long first
  // one ("00:00 Oct 4, 2026") that turns them all sideways; a date under every tick is noise.
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  function hourTicks(axis, first, last, step) {
    var vals = [], text = [];
    var at = Math.ceil(first / (step * HOUR_MS)) * step * HOUR_MS;
    for (; at <= last; at += step * HOUR_MS) {
      var when = new Date(at), hh = String(when.getUTCHours()).padStart(2, "0") + ":00";
      var dated = !vals.length || when.getUTCHours() < step;
      vals.push(iso(at));
      text.push(dated ? hh + "<br>" + MONTHS[when.getUTCMonth()] + " " + when.getUTCDate() : hh);
    }
    axis.tickmode = "array"; axis.tickvals = vals; axis.ticktext = text;
  }

  // A bar a period wide (less a gap): Plotly guesses widths from the spacing of the bars,
  // and one period alone has none (a hairline).
  function periodBars(d, traces) {
    var width = (PERIOD_MS[d.period] || DAY_MS) * 0.8;
    return traces.map(function (t) { return Object.assign(t, { width: t.x.map(function () { return width; }) }); });
  }

  function zoneOf(d) { return (d.window && d.window.zone) || "UTC"; }

  function iso(ms) { return new Date(ms).toISOString().slice(0, 19).replace("T", " "); }

  // -- traces -------------------------------------------------------------------------------

  function tokenRows(rows) {
    return rows.map(function (r) {
      var copy = Object.assign({}, r);
      copy.plain_output_tokens = (r.output_tokens || 0) - (r.reasoning_tokens || 0);
      return copy;
    });
  }

  function stackedTokens(rows, key, escape) {
    rows = tokenRows(rows);
    return KINDS.map(function (kind) {
      return {
        type: "bar", name: kind[1], marker: { color: F.color("kind", kind[0]) },
        x: rows.map(function (r) { return escape ? label(r[key]) : r[key]; }),
        y: rows.map(function (r) { return r[kind[0]] || 0; }),
        hovertemplate: "%{y:,d} tokens<extra>" + kind[1] + "</extra>",
      };
    });
  }

  // one trace per `seriesKey` value, coloured by what it means (`kind`: team, status, …)
  function series(rows, xKey, seriesKey, valueKey, kind, options) {
    var out = {};
    options = options || {};
    rows.forEach(function (r) {
      var key = r[seriesKey] === null || r[seriesKey] === undefined ? "(none)" : String(r[seriesKey]);
      if (!out[key]) {
        out[key] = Object.assign({ type: "bar", name: label(key), x: [], y: [], customdata: [],
          marker: { color: F.color(kind, key) } }, options.trace || {});
        if (options.line) { out[key].line = { color: F.color(kind, key), width: 2 }; }
      }
      out[key].x.push(options.rawX ? r[xKey] : label(r[xKey]));
      out[key].y.push(options.value ? options.value(r) : (r[valueKey] || 0));
      out[key].customdata.push(options.text ? options.text(r) : "");
    });
    var names = Object.keys(out);
    names.sort(options.order ? function (a, b) { return options.order(a) - options.order(b) || (a < b ? -1 : 1); } : undefined);
    return names.map(function (k) { return out[k]; });
  }

  var FINISH_ORDER = ["end_turn", "tool_use", "stop_sequence", "pause_turn", "max_tokens", "context_window",
    "content_filter", "refusal", "error", "unknown"];
  function finishOrder(name) { var i = FINISH_ORDER.indexOf(name); return i < 0 ? FINISH_ORDER.length : i; }

  function money(value) { return value === null || value === undefined ? "unpriced" : F.money(value); }
  var MONEY_HOVER = "%{customdata}<extra>%{fullData.name}</extra>";

  // Cost per team: a bar per priced team; a team with nothing priced has no bar but a
  // label "unpriced: N requests" where it would stand, and a partly priced one says how
  // many requests its bar leaves out: never an empty $0 bar.
  function costTeam(d) {
    var rows = d.cost_by_team;
    var trace = {
      type: "bar", name: "cost",
      marker: { color: rows.map(function (r) { return F.color("team", String(r.team)); }) },
      x: rows.map(function (r) { return label(r.team); }),
      y: rows.map(function (r) { return r.cost_usd === null || r.cost_usd === undefined ? null : Number(r.cost_usd); }),
      customdata: rows.map(function (r) {
        return money(r.cost_usd) + (r.unpriced ? " + " + F.count(r.unpriced) + " unpriced requests" : "");
      }),
      hovertemplate: "%{x}: %{customdata}<extra></extra>",
    };
    var annotations = rows.filter(function (r) { return r.unpriced > 0; }).map(function (r) {
      var none = r.cost_usd === null || r.cost_usd === undefined;
      return {
        x: label(r.team), y: none ? 0 : Number(r.cost_usd), yanchor: "bottom", showarrow: false,
        text: (none ? "unpriced: " : "+ unpriced: ") + F.count(r.unpriced) + " request" + (r.unpriced === 1 ? "" : "s"),
        textangle: rows.length > 4 ? -90 : 0, font: { size: 11, color: "#475467" },
        bgcolor: "rgba(255,255,255,0.85)", bordercolor: "#98a2b3", borderwidth: 1, borderpad: 2,
        captureevents: false, name: "unpriced",
      };
    });
    var priced = rows.some(function (r) { return r.cost_usd !== null && r.cost_usd !== undefined; });
    var axis = Object.assign({}, MONEY_AXIS);
    if (!priced) { axis.range = [0, 1]; axis.showticklabels = false; }
    draw("chart-cost-team", rows.length ? [trace] : [], { showlegend: false, yaxis: axis, annotations: annotations });
  }

  function unpricedNote(d) {  // under the cost per period: what it leaves out
    var node = document.getElementById("note-cost-day");
    if (!node) { return; }
    var left = d.cost_by_team.filter(function (r) { return r.unpriced > 0; }).map(function (r) {
      return r.team + " " + F.count(r.unpriced);
    });
    node.textContent = left.length ? "Not drawn, unpriced (requests): " + left.join(", ") + "." : "";
  }

  // Misses by cause, and beside them the requests that were not cacheable (a prefix under
  // the model's minimum: counted apart, never a miss, as `report cache` counts them).
  function cacheVerdicts(d) {
    var ranked = d.miss_causes.map(function (r) { return r.cause; });  // most misses first
    var causes = series(d.miss_causes, "cause", "cause", "misses", "cause", {
      trace: { hovertemplate: "miss, %{x}: %{y:,d}<extra></extra>" },
      order: function (name) { return ranked.indexOf(name); } });
    if (d.not_cacheable) {
      causes.push({ type: "bar", name: "not cacheable", x: ["not cacheable"], y: [d.not_cacheable], customdata: [""],
        marker: { color: F.color("cause", "not_cacheable"), pattern: { shape: "/", fgcolor: "#667085", size: 6 },
                  line: { color: "#667085", width: 1 } },
        hovertemplate: "not cacheable (prefix under the model's minimum; no miss): %{y:,d}<extra></extra>" });
    }
    draw("chart-miss-causes", causes, { showlegend: false, yaxis: countAxis(causes) });
  }

  function charts(d) {
    var period = periodAxis(d);
    var ranked = d.usage_by_team.slice().sort(function (a, b) { return b.requests - a.requests; })
      .map(function (r) { return String(r.team); });
    // colours in the store's order of business, the summed quiet teams last, in their own colour
    F.teamColors((d.teams_ranked || ranked).map(String).concat(d.other_teams ? [d.other_teams] : []), d.other_teams);
    function teamOrder(name) {
      if (name === d.other_teams) { return ranked.length + 1; }
      var i = ranked.indexOf(name); return i < 0 ? ranked.length : i;
    }
    var tokensTeam = stackedTokens(d.usage_by_team, "team", true);
    draw("chart-tokens-team", tokensTeam, { yaxis: countAxis(tokensTeam) });
    var tokensDay = periodBars(d, stackedTokens(d.usage_by_day, "day", false));
    draw("chart-tokens-day", tokensDay, { xaxis: period, yaxis: countAxis(tokensDay) });
    costTeam(d);
    draw("chart-cost-day", periodBars(d, series(d.cost_by_day_team.filter(function (r) {
      return r.cost_usd !== null && r.cost_usd !== undefined;
    }), "day", "team", null, "team", {
      rawX: true, value: function (r) { return Number(r.cost_usd) || 0; },
      text: function (r) { return money(r.cost_usd) + (r.unpriced ? " + " + F.count(r.unpriced) + " unpriced" : ""); },
      trace: { hovertemplate: MONEY_HOVER }, order: teamOrder,
    })), { xaxis: period, yaxis: MONEY_AXIS, legend: Object.assign({}, LAYOUT.legend, { traceorder: "normal" }) });
    unpricedNote(d);
    draw("chart-hit-rate", series(d.cache_by_day_team.filter(function (r) { return r.hit_rate !== null; }), "day", "team",
      "hit_rate", "team", {
      rawX: true, line: true, order: teamOrder,
      trace: { type: "scatter", mode: "lines+markers", hovertemplate: "%{customdata}<extra>%{fullData.name}</extra>" },
      text: function (r) { return F.percent(r.hit_rate) + " of " + F.count(r.input_tokens) + " input tokens"; },
    }), { xaxis: period, yaxis: { tickformat: ".0%", range: [0, 1.02] }, showlegend: true });
    cacheVerdicts(d);
    var finish = series(d.finish_by_provider, "provider", "finish_reason", "requests", "finish", { order: finishOrder });
    draw("chart-finish", finish, { yaxis: countAxis(finish) });
    var statuses = ["valid", "invalid_json", "schema_violation", "unknown_tool", "truncated", "args_lost",
      "unchecked", "duplicate_id", "missing_result", "orphan_result"];
    var tools = statuses.map(function (s) {
      return { type: "bar", name: s, marker: { color: F.color("tool", s) },
        x: d.tools_by_team.map(function (r) { return label(r.team); }),
        y: d.tools_by_team.map(function (r) { return r[s] || 0; }) };
    }).filter(function (t) { return t.y.some(function (v) { return v > 0; }); });
    draw("chart-tools", tools, { yaxis: countAxis(tools), showlegend: true });
    var errors = series(d.errors_by_status.filter(function (r) { return r.errors > 0; }), "provider", "status",
      "errors", "status");
    draw("chart-errors", errors, { yaxis: countAxis(errors), showlegend: true });
    var lat = d.latency_by_model;
    draw("chart-latency", [
      ["ttft_p50_ms", "first token p50"], ["ttft_p95_ms", "first token p95"],
      ["total_p50_ms", "total p50"], ["total_p95_ms", "total p95"],
    ].map(function (k) {
      return { type: "bar", name: k[1], marker: { color: F.color("latency", k[0]) }, x: lat.map(function (r) { return label(r.model); }),
               y: lat.map(function (r) { return r[k[0]]; }), hovertemplate: "%{y:,.0f} ms<extra>" + k[1] + "</extra>" };
    }), { barmode: "group", yaxis: { rangemode: "tozero", ticksuffix: " ms" } });
  }

  // The cards: over no exchanges no figure at all ("—"), never a $0.00 or a 0.0% hit rate.
  function totals(t) {
    var none = !t.requests;
    var dash = "—";
    var shown = { requests: F.count(t.requests), cost_usd: none ? dash : t.cost_text,
      input_tokens: none ? dash : F.count(t.input_tokens), output_tokens: none ? dash : F.count(t.output_tokens),
      hit_rate: t.hit_rate_text || dash, errors: none ? dash : F.count(t.errors),
      tool_problems: none ? dash : F.count(t.tool_problems) };
    document.querySelectorAll("[data-total]").forEach(function (node) {
      node.textContent = shown[node.getAttribute("data-total")];
    });
    var misses = none ? "no exchanges" : t.hit_rate_text === null ? "no input tokens" :
      F.count(t.misses) + " misses" + (t.not_cacheable ? " · " + F.count(t.not_cacheable) + " not cacheable" : "");
    var notes = { unpriced: none ? "no exchanges" : t.cost_note, misses: misses };
    document.querySelectorAll("[data-total-note]").forEach(function (node) {
      node.textContent = notes[node.getAttribute("data-total-note")] || "";
    });
  }

  // The header's period and zone, and over an empty period a banner that says so and
  // when the store's last exchange was.
  function header(d) {
    var w = d.window || {};
    document.getElementById("period").textContent = "Period: " + (w.text || "all exchanges") + " · per " + d.period;
    var zone = document.getElementById("zone");
    if (zone) { zone.textContent = w.zone || "UTC"; }
    var banner = document.getElementById("empty-state");
    var empty = !d.totals.requests;
    emptyText = empty ? "No exchanges in this period." : "";
    banner.hidden = !empty;
    if (empty) {
      banner.textContent = w.latest
        ? "No exchanges in this period. The last exchange recorded was at " + w.latest + " (" + (w.zone || "UTC") + ")."
        : "No exchanges recorded yet: point a client at `llmtap proxy`, or try `llmtap demo`.";
    }
  }

  function render(d) {
    header(d);
    totals(d.totals);
    document.getElementById("generated").textContent = d.generated_at + " (" + zoneOf(d) + ")";
    document.querySelectorAll("[data-period]").forEach(function (node) { node.textContent = d.period; });
    charts(d);
    LlmtapExchanges.tables(d);
  }

  function load() {
    return JSON.parse(document.getElementById("llmtap-data").textContent);
  }

  render(load());
  if (window.LLMTAP_LIVE) {
    setInterval(function () {
      fetch("data.json", { cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) {
          if (d) {
            render(d);
            document.body.setAttribute("data-refreshes", String(Number(document.body.getAttribute("data-refreshes") || 0) + 1));
          }
        })
        .catch(function () { /* the server may be restarting; try again next time */ });
    }, window.LLMTAP_REFRESH_MS);
  }
})();

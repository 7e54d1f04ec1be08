// llmtap dashboard: the tables (misses, tool problems, latency, top conversations) and the
// exchange table with its filters and inline detail view. Every value is set as
// textContent, never as markup; money and percentages in format.js's one format.
// Not responsible for the charts (dashboard.js).
var LlmtapExchanges = (function () {
  "use strict";

  var F = LlmtapFormat;

  function fmt(value, column, row) {
    if (/usd/.test(column)) {
      if (value === null || value === undefined) { return column === "cost_usd" ? (row.price_status || "unpriced") : ""; }
      return F.money(value);
    }
    if (value === null || value === undefined) { return ""; }
    if (typeof value === "number") {
      if (/rate|share/.test(column)) { return F.percent(value); }
      if (/_ms$/.test(column)) { return F.count(Math.round(value)); }
      return F.count(value);
    }
    if (typeof value === "boolean") { return value ? "yes" : "no"; }
    if (typeof value === "object") { return JSON.stringify(value); }
    return String(value);
  }

  var WRAPPED = ["detail", "statuses", "first_prompt", "problems"];

  // columns: [key, heading, flag(row) -> bool (shown as bad), link(row) -> href or null]
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
        var text = fmt(value, c[0], r);
        var href = c[3] && c[3](r);
        if (href) {
          var a = document.createElement("a");
          a.href = href; a.textContent = text; td.appendChild(a);
        } else {
          td.textContent = text;
        }
        if (typeof value === "number" || /usd/.test(c[0])) { td.className = "num"; }
        if (WRAPPED.indexOf(c[0]) >= 0) { td.classList.add("wrap"); }  // prose wraps: ids never get cut
        if (c[2] && c[2](r)) { td.classList.add("bad"); }
      });
    });
  }

  function conversationLink(r) {
    return window.LLMTAP_LIVE && r.conversation_id ? "conversation/" + encodeURIComponent(r.conversation_id) : null;
  }

  function tables(d) {
    fill("table-misses", d.misses, [["started_at", "when (UTC)"], ["team", "team"], ["model", "model"], ["cause", "cause"],
      ["message_index", "message"], ["missed_tokens", "missed tokens"], ["extra_cost_usd", "extra cost"],
      ["exchange_id", "exchange"]]);
    fill("table-offenders", d.offenders.map(function (o) {
      return { tool: o.tool, problems: o.problems, statuses: Object.keys(o.statuses).map(function (k) { return k + " " + o.statuses[k]; }).join(", ") };
    }), [["tool", "tool"], ["problems", "problems"], ["statuses", "which"]]);
    fill("table-problems", d.problems, [["started_at", "when (UTC)"], ["team", "team"], ["tool", "tool"],
      ["status", "status", function () { return true; }], ["detail", "detail"], ["call_id", "call id"], ["exchange_id", "exchange"]]);
    fill("table-latency", d.latency_by_model, [["model", "model"], ["requests", "requests"], ["ttfb_p50_ms", "first byte p50"],
      ["ttft_p50_ms", "first token p50"], ["ttft_p95_ms", "first token p95"], ["total_p50_ms", "total p50"],
      ["total_p95_ms", "total p95"]]);
    var top = document.getElementById("table-conversations");
    if (top && d.conversations_note) { top.setAttribute("data-empty", d.conversations_note); }
    var conversations = d.conversations || [];
    var columns = [["cost_usd", "cost"], ["conversation_id", "conversation", null, conversationLink], ["team", "team"],
      ["model", "model"], ["turns", "turns"], ["input_tokens", "in"], ["cache_read_tokens", "cached"],
      ["output_tokens", "out"], ["unpriced", "unpriced turns", function (r) { return r.unpriced > 0; }],
      ["started_at", "started"], ["ended_at", "ended"]];
    if (conversations.some(function (r) { return r.first_prompt; })) { columns.push(["first_prompt", "first prompt"]); }
    fill("table-conversations", conversations, columns);
    exchanges(d);
  }

  // -- the exchange table, its filters and the inline detail view -------------------------

  // the id early and the prose (problems, which wraps) last: a narrow window cuts no id
  var EXCHANGE_COLUMNS = [["started_at", "when (UTC)"], ["id", "id"], ["team", "team"], ["key_last4", "key"],
    ["model", "model"], ["status", "status", function (r) { return r.status >= 400; }], ["finish_reason", "finish"],
    ["input_tokens", "in"], ["cached_tokens", "cached"], ["output_tokens", "out"], ["cost_usd", "cost"],
    ["duration_ms", "ms"], ["problems", "problems", function (r) { return !!r.problems; }]];
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
      "unchecked", "duplicate_id", "missing_result", "orphan_result"]);
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
    pairs(body, "Cost", Object.keys(info.cost || {}).map(function (k) {
      var v = info.cost[k];
      return [k, /_usd$/.test(k) && v !== null && v !== undefined ? F.money(v) : v];
    }));
    pairs(body, "Cache", Object.keys(info.cache || {}).map(function (k) { return [k, info.cache[k]]; }));
    var page = document.getElementById("detail-page");
    page.hidden = !window.LLMTAP_LIVE;
    if (window.LLMTAP_LIVE) { page.setAttribute("href", "exchange/" + encodeURIComponent(r.id)); }
    document.getElementById("detail-conversation").onclick = function () { conversation(r); };
    panel.hidden = false;
  }

  function conversationCost(totals) {  // exact: the sum of decimal texts, in pico-dollars
    if (!totals.cost.length) { return totals.unpriced ? "unpriced" : F.money("0"); }
    var pico = totals.cost.reduce(function (sum, usd) { return sum + BigInt(picoText(usd)); }, BigInt(0));
    var text = pico.toString().padStart(13, "0");
    var shown = F.money(text.slice(0, -12) + "." + text.slice(-12));
    return totals.unpriced ? shown + " + " + totals.unpriced + " unpriced" : shown;
  }

  function picoText(usd) {  // "0.0123" -> "12300000000"
    var parts = String(usd).split(".");
    return (parts[0] || "0") + ((parts[1] || "") + "000000000000").slice(0, 12);
  }

  function conversation(r) {
    var key = r.detail && r.detail.conversation;
    var body = document.getElementById("detail-body");
    body.textContent = "";
    document.getElementById("detail-title").textContent = "conversation of " + r.id;
    var turns = current.filter(function (x) { return key ? (x.detail && x.detail.conversation === key) : x.id === r.id; })
      .slice().reverse();
    var totals = { input_tokens: 0, cached_tokens: 0, output_tokens: 0, cost: [], unpriced: 0, misses: 0 };
    var rows = turns.map(function (t, i) {
      totals.input_tokens += t.input_tokens || 0; totals.cached_tokens += t.cached_tokens || 0;
      totals.output_tokens += t.output_tokens || 0; if (t.cost_usd === null || t.cost_usd === undefined) { totals.unpriced += 1; } else { totals.cost.push(t.cost_usd); }
      var cache = (t.detail && t.detail.cache) || {};
      if (cache.verdict === "miss") { totals.misses += 1; }
      return { turn: i + 1, started_at: t.started_at, finish_reason: t.finish_reason, input_tokens: t.input_tokens,
               cached_tokens: t.cached_tokens, output_tokens: t.output_tokens, cost_usd: t.cost_usd,
               cache: cache.verdict === "miss" ? "miss: " + cache.cause : cache.verdict, id: t.id };
    });
    var h = document.createElement("h3");
    h.textContent = turns.length + " turns · " + totals.input_tokens.toLocaleString("en-US") + " in (" +
      totals.cached_tokens.toLocaleString("en-US") + " cached) · " + totals.output_tokens.toLocaleString("en-US") +
      " out · " + conversationCost(totals) + " · " + totals.misses + " cache misses";
    body.appendChild(h);
    var tableNode = document.createElement("table");
    tableNode.id = "table-conversation";
    body.appendChild(tableNode);
    fill("table-conversation", rows, [["turn", "#"], ["started_at", "when (UTC)"], ["finish_reason", "finish"],
      ["input_tokens", "in"], ["cached_tokens", "cached"], ["output_tokens", "out"], ["cost_usd", "cost"],
      ["cache", "cache"], ["id", "id"]]);
  }

  document.getElementById("filters").addEventListener("input", applyFilters);
  document.getElementById("detail-close").addEventListener("click", function () {
    document.getElementById("detail").hidden = true;
  });

  return { tables: tables, fill: fill };
})();

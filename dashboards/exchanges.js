// llmtap dashboard: the tables (misses, tool problems, latency, top conversations) and the
// exchange table with its filters and inline detail view. Every value is set as
// textContent, never as markup; money and percentages in format.js's one format. Tables
// fit the window: free text wraps, ids and money never do, and the less needed columns
// fold away on a narrow window (CSS `fold1`, `fold2`; the row's detail still has them);
// past PAGE rows a table pages.
// Not responsible for the charts (dashboard.js).
var LlmtapExchanges = (function () {
  "use strict";

  var F = LlmtapFormat;
  var PAGE = 25;  // rows a table shows at once, unless its reader picks another of SIZES
  var SIZES = [25, 100, 500];

  function size(table) { return table.llmtapSize || PAGE; }
  var NOT_CACHEABLE = "below_minimum";  // the listing's cause of a not-cacheable turn: no miss

  function fmt(value, column, row) {
    if (/usd/.test(column)) {
      if (value === null || value === undefined) { return column === "cost_usd" ? (row.price_status === "usage_missing" ? "no usage" : "unpriced") : ""; }
      return F.money(value);
    }
    if (value === null || value === undefined) { return ""; }
    if (typeof value === "number") {
      if (/rate|share/.test(column)) { return F.percent(value); }
      if (/_ms$/.test(column)) { return F.count(Math.round(value)); }
      return F.count(value);
    }
    return words(value);
  }

  // a value as words, never its JSON: `user 3, assistant 2`, `read_file, run_tests`
  function words(value) {
    if (value === null || value === undefined) { return ""; }
    if (typeof value === "boolean") { return value ? "yes" : "no"; }
    if (typeof value === "number") { return F.count(value); }
    if (Array.isArray(value)) { return value.map(words).filter(Boolean).join(", "); }
    if (typeof value === "object") {
      return Object.keys(value).filter(function (k) { return words(value[k]) !== ""; })
        .map(function (k) { return k + " " + words(value[k]); }).join(", ");
    }
    return String(value);
  }

  // how a column's cells read: prose wraps; ids, money, times and numbers never break
  var WRAPPED = ["detail", "statuses", "first_prompt", "problems", "cause", "status_words"];
  // (a team, a model or a tool is a name: never broken either, as in the terminal tables)
  var WHOLE = /(^id$|_id$|usd$|_at$|^started|^ended|tokens$|^turns$|^requests$|_ms$|^missed|^problems$|^message_index$|^team$|^model$|^tool$|^key_last4$|^finish_reason$|^status$)/;

  function cellClass(key, value) {
    var out = [];
    if (typeof value === "number" || /usd|tokens$|_ms$|^turns$|^requests$|^unpriced$|^message_index$/.test(key)) { out.push("num"); }
    if (WRAPPED.indexOf(key) >= 0) { out.push("wrap"); } else if (WHOLE.test(key)) { out.push("whole"); }
    if (/(^id$|_id$)/.test(key)) { out.push("id"); }
    if (/^(team|model|tool)$/.test(key)) { out.push("name"); }
    return out;
  }

  // columns: [key, heading, flag(row) -> bool (shown as bad), link(row) -> href or null,
  // fold (1: hidden on a narrow window, 2: hidden sooner)]. Past PAGE rows, a pager under it.
  function fill(id, rows, columns, page) {
    var table = document.getElementById(id);
    if (!table) { return; }
    table.textContent = "";
    var head = table.createTHead().insertRow();
    columns.forEach(function (c) {
      var th = document.createElement("th");
      th.textContent = c[1];
      cellClass(c[0], null).forEach(function (k) { th.classList.add(k); });
      if (c[4]) { th.classList.add("fold" + c[4]); }
      head.appendChild(th);
    });
    var body = table.createTBody();
    // the page the reader was on stays across a live refresh (never past the last)
    page = Math.max(0, Math.min(page === undefined ? table.llmtapPage || 0 : page, Math.ceil(rows.length / size(table)) - 1));
    table.llmtapPage = page;
    pager(table, rows, columns, page);
    if (!rows.length) {
      var row = body.insertRow();
      row.className = "empty";
      var cell = row.insertCell();
      cell.colSpan = columns.length;
      cell.textContent = table.getAttribute("data-empty") || "None in this period.";
      return;
    }
    var first = page * size(table);
    rows.slice(first, first + size(table)).forEach(function (r) {
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
        cellClass(c[0], value).forEach(function (k) { td.classList.add(k); });
        if (c[4]) { td.classList.add("fold" + c[4]); }
        if (c[2] && c[2](r)) { td.classList.add("bad"); }
      });
    });
    fit(table);
  }

  // Fold the less needed columns (fold2 first, then fold1) while the table is wider than
  // its section: what folds depends on what the cells hold, not only on the window. Last,
  // a name too long for what is left (a team, a model) may wrap: better than a table that
  // scrolls sideways and hides its money.
  function fit(table) {
    var wrap = table.closest(".table-wrap");
    if (!wrap || !wrap.clientWidth) { return; }
    table.classList.remove("fold-1", "fold-2", "squeeze");
    ["fold-2", "fold-1", "squeeze"].forEach(function (level) {
      if (wrap.scrollWidth > wrap.clientWidth) { table.classList.add(level); }
    });
  }

  window.addEventListener("resize", function () {
    document.querySelectorAll(".table-wrap table").forEach(fit);
  });

  // "rows 101–200 of 3,000" with the pages before and after; none for one page
  function pager(table, rows, columns, page) {
    var wrap = table.closest(".table-wrap") || table;
    var node = wrap.nextElementSibling;
    if (!node || !node.classList.contains("pager")) {
      node = document.createElement("div");
      node.className = "pager";
      wrap.parentNode.insertBefore(node, wrap.nextSibling);
    }
    node.textContent = "";
    var per = size(table);
    var pages = Math.ceil(rows.length / per);
    node.hidden = rows.length <= PAGE;
    if (node.hidden) { return; }
    function turn(to) {
      table.dispatchEvent(new CustomEvent("llmtap-page", { detail: to }));
      fill(table.id, rows, columns, to);
    }
    function button(text, to, name) {
      var b = document.createElement("button");
      b.type = "button"; b.textContent = text; b.setAttribute("data-page", name);
      b.disabled = to < 0 || to >= pages || to === page;
      b.addEventListener("click", function () { turn(to); });
      node.appendChild(b);
    }
    button("« first", 0, "first");
    button("‹ newer", page - 1, "previous");
    var where = document.createElement("span");
    where.className = "where";
    where.textContent = "rows " + F.count(page * per + 1) + "–" + F.count(Math.min(rows.length, (page + 1) * per)) +
      " of " + F.count(rows.length) + " · page " + F.count(page + 1) + " of " + F.count(pages);
    node.appendChild(where);
    button("older ›", page + 1, "next");
    button("last »", pages - 1, "last");
    var choose = document.createElement("label");
    choose.textContent = "rows per page ";
    var select = document.createElement("select");
    select.name = "page-size";
    SIZES.forEach(function (n) {
      var option = document.createElement("option");
      option.value = String(n); option.textContent = String(n); option.selected = n === per;
      select.appendChild(option);
    });
    select.addEventListener("change", function () { table.llmtapSize = Number(select.value); turn(0); });
    choose.appendChild(select);
    node.appendChild(choose);
  }

  function conversationLink(r) {
    return window.LLMTAP_LIVE && r.conversation_id ? "conversation/" + encodeURIComponent(r.conversation_id) : null;
  }

  var zone = "UTC";

  function tables(d) {
    zone = (d.window && d.window.zone) || "UTC";
    var when = "when (" + zone + ")";
    fill("table-misses", d.misses, [["started_at", when], ["team", "team"], ["model", "model", null, null, 1], ["cause", "cause"],
      ["message_index", "message", null, null, 2], ["missed_tokens", "missed tokens"], ["extra_cost_usd", "extra cost"],
      ["exchange_id", "exchange"]]);
    fill("table-offenders", d.offenders.map(function (o) {
      return { tool: o.tool, problems: o.problems, statuses: Object.keys(o.statuses).map(function (k) { return k + " " + o.statuses[k]; }).join(", ") };
    }), [["tool", "tool"], ["problems", "problems"], ["statuses", "which"]]);
    fill("table-problems", d.problems, [["started_at", when], ["team", "team"], ["tool", "tool"],
      ["status", "status", function () { return true; }], ["detail", "detail"], ["call_id", "call id", null, null, 2],
      ["exchange_id", "exchange"]]);
    fill("table-latency", d.latency_by_model, [["model", "model"], ["requests", "requests"], ["ttfb_p50_ms", "first byte p50"],
      ["ttft_p50_ms", "first token p50"], ["ttft_p95_ms", "first token p95"], ["total_p50_ms", "total p50"],
      ["total_p95_ms", "total p95"]]);
    var top = document.getElementById("table-conversations");
    if (top && d.conversations_note) { top.setAttribute("data-empty", d.conversations_note); }
    var conversations = d.conversations || [];
    var columns = [["cost_usd", "cost"], ["conversation_id", "conversation", null, conversationLink], ["team", "team"],
      ["model", "model", null, null, 1], ["turns", "turns"], ["input_tokens", "in"], ["cache_read_tokens", "cached", null, null, 2],
      ["output_tokens", "out"], ["unpriced", "unpriced turns", function (r) { return r.unpriced > 0; }, null, 2],
      ["started_at", "started (" + zone + ")", null, null, 1], ["ended_at", "ended", null, null, 2]];
    if (conversations.some(function (r) { return r.first_prompt; })) { columns.push(["first_prompt", "first prompt"]); }
    fill("table-conversations", conversations, columns);
    exchanges(d);
  }

  // -- the exchange table, its filters and the inline detail view -------------------------

  // the id early and the prose (problems, which wraps) last: a narrow window cuts no id
  function exchangeColumns() {
    return [["started_at", "when (" + zone + ")"], ["id", "id"], ["team", "team"], ["key_last4", "key", null, null, 2],
      ["model", "model", null, null, 1], ["status", "status", function (r) { return r.status >= 400; }],
      ["finish_reason", "finish", null, null, 1], ["input_tokens", "in"], ["cached_tokens", "cached", null, null, 2],
      ["output_tokens", "out"], ["cost_usd", "cost"], ["duration_ms", "ms", null, null, 2],
      ["problems", "problems", function (r) { return !!r.problems; }]];
  }
  var FILTERS = ["team", "model", "provider", "finish"];
  var current = [];

  function problems(r) {
    var cache = !r.cache_miss ? null : r.cache_miss === NOT_CACHEABLE ? "not cacheable" : "cache miss: " + r.cache_miss;
    return [r.tool_problem_kinds, cache].filter(Boolean).join(", ");
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
    if (f.cache_miss && !cacheMatches(r.cache_miss, f.cache_miss)) { return false; }
    if (f.search) {
      var text = ((r.detail && r.detail.answer && r.detail.answer.text) || "").toLowerCase();
      if (text.indexOf(f.search.toLowerCase()) < 0) { return false; }
    }
    return true;
  }

  // "any" is any miss, which a not-cacheable turn (cause below_minimum) is not
  function cacheMatches(cause, wanted) {
    if (!cause) { return false; }
    if (wanted === "not_cacheable") { return cause === NOT_CACHEABLE; }
    return cause !== NOT_CACHEABLE && (wanted === "any" || cause === wanted);
  }

  function exchanges(d) {
    current = d.exchanges;
    var form = document.getElementById("filters");
    FILTERS.forEach(function (name) { options(form.elements[name], distinct(current, name === "finish" ? "finish_reason" : name)); });
    options(form.elements.status, distinct(current, "status"));
    var V = LlmtapVocabulary;  // vocabulary.js, generated from protocols/vocabulary.py
    options(form.elements.tool_problem,
      V.TOOL_STATUSES.filter(function (s) { return s !== "valid"; }).concat(V.TOOL_PROBLEMS));
    options(form.elements.cache_miss, V.MISS_CAUSES.filter(function (c) { return c !== NOT_CACHEABLE; }));
    total = d.exchanges_total === undefined ? current.length : d.exchanges_total;
    kept = d.exchanges_shown || current.length;
    applyFilters();
  }

  var total = 0, kept = 0;

  function applyFilters() {
    var f = chosen();
    if (window.LLMTAP_LIVE && Object.keys(f).length) {
      var asked = Object.assign({}, f);
      if (asked.cache_miss === "not_cacheable") { asked.cache_miss = NOT_CACHEABLE; }
      var query = Object.keys(asked).map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(asked[k]); }).join("&");
      fetch("log.json?" + query, { cache: "no-store" }).then(function (r) { return r.json(); })
        .then(function (rows) { table(rows.filter(function (r) { return !f.cache_miss || cacheMatches(r.cache_miss, f.cache_miss); }), true); })
        .catch(function () { table(current.filter(function (r) { return matches(r, f); }), true); });
      return;
    }
    var filtered = Object.keys(f).length > 0;
    table(current.filter(function (r) { return matches(r, f); }), filtered);
  }

  function table(rows, filtered) {
    rows.forEach(function (r) { r.problems = problems(r); });
    var node = document.getElementById("table-exchanges");
    function hook(page) {
      var body = node.tBodies[0];
      Array.from(body.rows).forEach(function (tr, i) {
        var r = rows[page * size(node) + i];
        if (!r || tr.className === "empty") { return; }
        tr.setAttribute("data-id", r.id);
        tr.addEventListener("click", function () { detail(r); });
      });
    }
    node.removeEventListener("llmtap-page", node.llmtapHook || function () {});
    node.llmtapHook = function (e) { setTimeout(function () { hook(e.detail); }, 0); };
    node.addEventListener("llmtap-page", node.llmtapHook);
    fill("table-exchanges", rows, exchangeColumns());
    hook(node.llmtapPage);
    var count = F.count(rows.length) + (filtered ? " match" : " exchanges");
    if (!filtered && total > rows.length) {
      count += " shown: the newest " + F.count(kept) + " of " + F.count(total) + " in this period (`llmtap log` lists all)";
    }
    document.getElementById("exchange-count").textContent = count;
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
      var dd = document.createElement("dd"); dd.textContent = words(e[1]);
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
      ["started (" + zone + ")", r.started_at], ["first byte (ms)", info.timing && info.timing.ttfb_ms],
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
    var cache = info.cache || {};
    pairs(body, "Cache", [["verdict", cacheWords(cache)]].concat(Object.keys(cache).filter(function (k) {
      return k !== "verdict" && k !== "cause";
    }).map(function (k) { return [k, /_usd$/.test(k) && cache[k] !== null ? F.money(cache[k]) : cache[k]]; })));
    var page = document.getElementById("detail-page");
    page.hidden = !window.LLMTAP_LIVE;
    if (window.LLMTAP_LIVE) { page.setAttribute("href", "exchange/" + encodeURIComponent(r.id)); }
    document.getElementById("detail-conversation").onclick = function () { conversation(r); };
    panel.hidden = false;
  }

  function cacheWords(cache) {
    if (cache.verdict !== "miss") { return cache.verdict; }
    return cache.cause === NOT_CACHEABLE ? "not cacheable (prefix under the model's minimum)" : "miss: " + cache.cause;
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
      if (cache.verdict === "miss" && cache.cause !== NOT_CACHEABLE) { totals.misses += 1; }
      return { turn: i + 1, started_at: t.started_at, finish_reason: t.finish_reason, input_tokens: t.input_tokens,
               cached_tokens: t.cached_tokens, output_tokens: t.output_tokens, cost_usd: t.cost_usd,
               cache: cacheWords(cache), id: t.id };
    });
    var h = document.createElement("h3");
    h.textContent = turns.length + " turns · " + totals.input_tokens.toLocaleString("en-US") + " in (" +
      totals.cached_tokens.toLocaleString("en-US") + " cached) · " + totals.output_tokens.toLocaleString("en-US") +
      " out · " + conversationCost(totals) + " · " + totals.misses + " cache misses";
    body.appendChild(h);
    var wrap = document.createElement("div");
    wrap.className = "table-wrap";
    var tableNode = document.createElement("table");
    tableNode.id = "table-conversation";
    wrap.appendChild(tableNode);
    body.appendChild(wrap);
    fill("table-conversation", rows, [["turn", "#"], ["started_at", "when (" + zone + ")"], ["finish_reason", "finish", null, null, 1],
      ["input_tokens", "in"], ["cached_tokens", "cached", null, null, 2], ["output_tokens", "out"], ["cost_usd", "cost"],
      ["cache", "cache"], ["id", "id"]]);
  }

  document.getElementById("filters").addEventListener("input", function () {
    document.getElementById("table-exchanges").llmtapPage = 0;  // a new filter starts at its newest
    applyFilters();
  });
  document.getElementById("detail-close").addEventListener("click", function () {
    document.getElementById("detail").hidden = true;
  });

  return { tables: tables, fill: fill };
})();

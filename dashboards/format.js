// llmtap dashboard: the formats and colours every chart and table shares.
// money() and percent() are twins of analytics/render.py's money() and percent(), the
// CLI's one format (`$1,234.56`; under a dollar four significant digits, `$0.01235`; zero
// `$0.00`; `74.7%`); tests/dashboards compares them value by value. Money arrives as the
// exact decimal text the store holds and is rounded here digit by digit (half up, as
// Python's Decimal does), never through a float.
// Not responsible for drawing anything (dashboard.js) or for the exchange table (exchanges.js).
var LlmtapFormat = (function () {
  "use strict";

  var NUMBER = /^([+-]?)(\d*)(?:\.(\d*))?(?:e([+-]?\d+))?$/i;

  // "12.50" -> {negative: false, digits: "1250", exponent: -2}; null when not a number
  function decimal(value) {
    var match = NUMBER.exec(String(value).trim());
    if (!match || (match[2] + (match[3] || "")) === "") { return null; }
    var fraction = match[3] || "";
    var digits = (match[2] + fraction).replace(/^0+/, "");
    return { negative: match[1] === "-", digits: digits, exponent: parseInt(match[4] || "0", 10) - fraction.length };
  }

  function increment(digits) {  // "1299" -> "1300", "99" -> "100"
    var out = digits.split("");
    for (var i = out.length - 1; i >= 0; i--) {
      if (out[i] !== "9") { out[i] = String(+out[i] + 1); return out.join(""); }
      out[i] = "0";
    }
    return "1" + out.join("");
  }

  // digits x 10^exponent rounded half up to a multiple of 10^quantum: the integer digits
  function quantize(d, quantum) {
    if (d.exponent >= quantum) { return d.digits + "0".repeat(d.exponent - quantum); }
    var dropped = quantum - d.exponent;
    var kept = d.digits.length > dropped ? d.digits.slice(0, d.digits.length - dropped) : "";
    var first = d.digits.length >= dropped ? d.digits.charAt(d.digits.length - dropped) : "0";
    kept = kept || "0";
    return (first >= "5" ? increment(kept) : kept).replace(/^0+(?=\d)/, "");
  }

  // integer digits with `places` decimals: ("1250", 2) -> "12.50"
  function point(digits, places) {
    if (places <= 0) { return digits; }
    var padded = digits.padStart(places + 1, "0");
    return padded.slice(0, padded.length - places) + "." + padded.slice(padded.length - places);
  }

  function money(value, missing) {
    if (value === null || value === undefined || value === "") { return missing === undefined ? "" : missing; }
    var d = decimal(value);
    if (d === null) { return String(value); }
    if (d.digits === "") { return "$0.00"; }
    var sign = d.negative ? "-" : "";
    var adjusted = d.digits.length - 1 + d.exponent;  // the place of the first digit, as Decimal.adjusted()
    if (adjusted >= 0) {
      var cents = point(quantize(d, -2), 2);
      var whole = cents.slice(0, -3).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
      return sign + "$" + whole + cents.slice(-3);
    }
    var quantum = adjusted - 3;
    var shown = quantize(d, quantum);
    if (shown.length > -quantum) { return sign + "$1.00"; }  // 0.99996 rounds up to a dollar
    return sign + "$" + point(shown, -quantum);
  }

  function percent(ratio, missing) {
    if (ratio === null || ratio === undefined) { return missing === undefined ? "" : missing; }
    var x = Number(ratio) * 100;
    // An exact tie (x ends in .25 or .75, a binary fraction, so x * 4 is exact): Python
    // rounds it to even, toFixed up. Anything else has one nearest value and both agree.
    if (Number.isInteger(x * 4) && !Number.isInteger(x * 2)) {
      var tenths = Math.floor(x * 10);
      return ((tenths % 2 === 0 ? tenths : tenths + 1) / 10).toFixed(1) + "%";
    }
    return x.toFixed(1) + "%";
  }

  function count(value) {
    return Number(value).toLocaleString("en-US", { maximumFractionDigits: 1 });
  }

  // -- colours: one meaning, one colour, on every chart ------------------------------------
  // Every colour below is used for one thing only (tests/dashboards checks it): a team's
  // colour appears nowhere but on that team, and no status, verdict or token kind shares
  // one. Families carry the meaning: red shades are errors and problems, amber a limit
  // reached, green a valid call, blue a natural stop, indigo and violet the token kinds,
  // cool grey what is not known; teams take the hues left over.
  var CATEGORY = {
    kind: {  // the parts of a token total
      uncached_input_tokens: "#3e4784", cache_read_tokens: "#8098f9", cache_write_tokens: "#c7d7fe",
      plain_output_tokens: "#6927da", reasoning_tokens: "#bd9dfe",
    },
    finish: {  // natural stops blue, limits amber, filters orange-red, errors red
      end_turn: "#2e90fa", tool_use: "#1849a9", stop_sequence: "#84caff", pause_turn: "#b2ddff",
      max_tokens: "#f79009", context_window: "#b54708", content_filter: "#e62e05", refusal: "#97180c",
      error: "#d92d20", unknown: "#98a2b3", "(none)": "#a5acba",
    },
    tool: {  // valid green, every problem a shade of red; truncated (a limit) amber; unchecked grey
      valid: "#12b76a", invalid_json: "#f04438", schema_violation: "#fda29b", unknown_tool: "#b42318",
      truncated: "#fdb022", args_lost: "#7a271a", duplicate_id: "#c11574", missing_result: "#912018",
      orphan_result: "#e31b54", unchecked: "#667085",
    },
    cause: {  // the misses that cost money, teal and cyan; not cacheable (no miss) a pale grey, hatched
      tools_changed: "#0e9384", system_changed: "#15b79e", message_edited: "#088ab2", ttl_expired: "#22ccee",
      no_breakpoint: "#107569", unexplained: "#5e8b97", not_cacheable: "#d0d5dd",
    },
    latency: {
      ttft_p50_ms: "#a6ef67", ttft_p95_ms: "#4ca30d", total_p50_ms: "#cdd5df", total_p95_ms: "#344054",
    },
    status: {  // HTTP status: 429 rose, other 4xx pale rose, 5xx rust, 503 and 529 (overloaded) darker
      429: "#f63d68", "4xx": "#fea3b4", "5xx": "#c4320a", 503: "#9e2a12", 529: "#5c1a0b", other: "#b9c0d4",
    },
  };
  // teams, busiest first: eight hues none of the above takes, and one for the rest together
  var TEAM_PALETTE = ["#4e79a7", "#59a14f", "#edc948", "#b07aa1", "#76b7b2", "#ff9da7", "#9c755f", "#2f4b7c"];
  var OTHER_TEAMS = "#bab0ac";
  var UNKNOWN = CATEGORY.finish.unknown;  // a name no table knows
  var teams = {}, teamCount = 0;

  // colours in the order given (busiest first), kept for the life of the page; a name
  // past the palette (never: the page sums the quiet teams into one) takes OTHER_TEAMS
  function teamColors(names, other) {
    names.forEach(function (name) {
      if (name in teams) { return; }
      if (name === other) { teams[name] = OTHER_TEAMS; return; }
      teams[name] = teamCount < TEAM_PALETTE.length ? TEAM_PALETTE[teamCount] : OTHER_TEAMS;
      teamCount += 1;
    });
  }

  function statusGroup(name) {
    var code = Number(name);
    if (code === 529 || code === 503) { return String(code); }  // overloaded, unavailable: dark rust
    if (code >= 500) { return "5xx"; }
    if (code === 429) { return "429"; }
    return code >= 400 ? "4xx" : "other";
  }

  function color(kind, name) {
    if (kind === "team") { return teams[name] || OTHER_TEAMS; }
    if (kind === "status") { return CATEGORY.status[statusGroup(name)]; }
    return (CATEGORY[kind] || {})[name] || UNKNOWN;
  }

  // every colour the page may use and what it means: "kind:name" (tests read it)
  function palette() {
    var out = {};
    Object.keys(CATEGORY).forEach(function (kind) {
      Object.keys(CATEGORY[kind]).forEach(function (name) { (out[CATEGORY[kind][name]] = out[CATEGORY[kind][name]] || []).push(kind + ":" + name); });
    });
    TEAM_PALETTE.forEach(function (c, i) { (out[c] = out[c] || []).push("team:" + i); });
    (out[OTHER_TEAMS] = out[OTHER_TEAMS] || []).push("team:other");
    return out;
  }

  return { money: money, percent: percent, count: count, color: color, teamColors: teamColors, palette: palette };
})();

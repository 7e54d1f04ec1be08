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
  var RED = "#d92d20", GREY = "#98a2b3", BLUE = "#5b7bb8";
  var CATEGORY = {
    // finish reasons: natural stops neutral, limits amber, filters orange, errors red
    end_turn: BLUE, stop_sequence: "#7f9cc9", tool_use: "#0e9384", pause_turn: "#b2ccff",
    max_tokens: "#f79009", context_window: "#dc6803", content_filter: "#e62e05", refusal: "#bc1b06",
    error: RED, unknown: GREY, "(none)": GREY,
    // tool-call statuses: valid green, every problem a shade of red or orange; unchecked (not
    // verified, not malformed) grey
    valid: "#12b76a", invalid_json: RED, schema_violation: "#f04438", unknown_tool: "#fb6514",
    truncated: "#f79009", args_lost: "#b42318", duplicate_id: "#c11574", missing_result: "#912018",
    orphan_result: "#e31b54", unchecked: "#98a2b3",
    // cache-miss causes; below_minimum is not a miss that costs money: grey
    tools_changed: "#7a5af8", system_changed: "#ee46bc", message_edited: "#f79009", ttl_expired: "#2e90fa",
    no_breakpoint: "#f04438", below_minimum: GREY, unexplained: "#667085",
  };
  // teams, busiest first: eight hues far apart, none of them red (errors) or grey (the rest)
  var TEAM_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7"];
  var teams = {};

  function teamColors(names) {  // colours in the order given (busiest first), kept for the life of the page
    names.forEach(function (name) {
      if (!(name in teams)) { teams[name] = TEAM_PALETTE[Object.keys(teams).length % TEAM_PALETTE.length]; }
    });
  }

  function color(kind, name) {
    if (kind === "team") { return teams[name] || GREY; }
    if (kind === "status") {  // HTTP status
      var code = Number(name);
      if (code >= 500) { return code === 529 || code === 503 ? "#7a271a" : "#b42318"; }
      if (code === 429) { return RED; }
      return code >= 400 ? "#f97066" : GREY;
    }
    return CATEGORY[name] || GREY;
  }

  return { money: money, percent: percent, count: count, color: color, teamColors: teamColors };
})();

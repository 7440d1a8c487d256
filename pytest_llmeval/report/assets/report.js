"use strict";
(function () {
  var T0 = performance.now();
  var D = JSON.parse(document.getElementById("llmeval-data").textContent);
  var RECS = D.records || [];
  var ROWH = 30;
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  function fmt(x, d) {
    if (!isNum(x)) return "\u2013";
    if (d === undefined) d = 3;
    return Number(x.toFixed(d)).toString();
  }
  function pct(x) { return isNum(x) ? (100 * x).toFixed(1) + "%" : "\u2013"; }
  function usd(x) { return isNum(x) ? "$" + x.toFixed(x < 0.01 ? 5 : 4) : "\u2013"; }
  function ival(iv, asPct) {
    if (!iv || !isNum(iv.estimate)) return "\u2013";
    var f = asPct ? pct : fmt;
    var s = f(iv.estimate);
    if (isNum(iv.low) && isNum(iv.high)) s += " [" + f(iv.low) + ", " + f(iv.high) + "]";
    else if (isNum(iv.n)) s += " [" + undefinedInterval(iv.n) + "]";
    return s;
  }
  /* an interval with no finite end (one case): the terminal's and the Markdown's words */
  function undefinedInterval(n) {
    return n < 2 ? "n/a (" + n + (n === 1 ? " case)" : " cases)") : "n/a (unbounded)";
  }
  function status(r) {
    if (r.error !== null && r.error !== undefined) return "error";
    if (r.passed === true) return "pass";
    if (r.passed === false) return "fail";
    return "none";
  }
  function keyOf(r) {
    return JSON.stringify([r.file, r.test, r.case_id === undefined ? null : r.case_id, r.scorer,
      r.index, r.sample === undefined ? null : r.sample]);
  }
  function keyOfNoSample(r) {
    return JSON.stringify([r.file, r.test, r.case_id === undefined ? null : r.case_id, r.scorer,
      r.index, null]);
  }
  function label(r) {
    var s = (r.file ? r.file + "::" : "") + r.test;
    if (r.case_id !== null && r.case_id !== undefined) s += "[" + r.case_id + "]";
    return s;
  }

  /* ---- header ---- */
  var run = D.run || {};
  function addRun(k, v) {
    if (v === null || v === undefined || v === "") return;
    var d = el("div"); d.appendChild(el("dt", "", k)); d.appendChild(el("dd", "", v));
    document.getElementById("run").appendChild(d);
  }
  var nPass = 0, nFail = 0, nErr = 0, cost = 0, hasCost = false;
  for (var i = 0; i < RECS.length; i++) {
    var st = status(RECS[i]);
    if (st === "pass") nPass++; else if (st === "fail") nFail++; else if (st === "error") nErr++;
    if (isNum(RECS[i].cost_usd)) { cost += RECS[i].cost_usd; hasCost = true; }
  }
  if (isNum(run.started)) addRun("started", new Date(run.started * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC");
  if (isNum(run.duration_s)) addRun("duration", run.duration_s.toFixed(1) + " s");
  addRun("exit status", run.exitstatus);
  addRun("commit", run.git_commit ? String(run.git_commit).slice(0, 12) : null);
  if (run.judge && run.judge.model) addRun("judge", run.judge.model);
  addRun("cache", run.cache_mode);
  if (run.workers) addRun("workers", run.workers);
  if (run.versions && run.versions["pytest-llmeval"]) addRun("pytest-llmeval", run.versions["pytest-llmeval"]);
  addRun("records", RECS.length);
  addRun("passed", nPass); addRun("failed", nFail); addRun("errors", nErr);
  if (hasCost) addRun("judge cost", usd(cost));

  /* ---- cards ---- */
  var cardsBox = document.getElementById("cards");
  (D.cards || []).forEach(function (c) {
    var card = el("div", "card"); card.setAttribute("data-scorer", c.scorer);
    card.appendChild(el("h3", "", c.scorer));
    var m = el("div", "big mean", c.mean ? fmt(c.mean.estimate) : "\u2013"); card.appendChild(m);
    var ci = c.mean && isNum(c.mean.low) && isNum(c.mean.high)
      ? Math.round((c.mean.confidence || 0.95) * 100) + "% CI [" + fmt(c.mean.low) + ", " + fmt(c.mean.high) + "]"
      : "interval " + (c.mean && isNum(c.mean.n) ? undefinedInterval(c.mean.n) : "n/a");
    card.appendChild(el("div", "mut ci", "mean, " + ci));
    card.appendChild(el("div", "rate", "pass rate " + ival(c.pass_rate, true)));
    card.appendChild(el("div", "mut counts", c.n + " records: " + c.passed + " passed, " + c.failed +
      " failed, " + c.errors + " errors, " + c.cached + " cached"));
    if (c.hist && c.hist.length) {
      var h = el("div", "hist"), mx = Math.max.apply(null, c.hist) || 1;
      c.hist.forEach(function (v, j) {
        var b = el("div"); b.style.height = (100 * v / mx) + "%";
        b.title = v + " scores in bin " + (j + 1); h.appendChild(b);
      });
      card.appendChild(h);
      var ax = el("div", "axis"); ax.appendChild(el("span", "", fmt(c.hist_lo, 2)));
      ax.appendChild(el("span", "", fmt(c.hist_hi, 2))); card.appendChild(ax);
    }
    card.addEventListener("click", function () { setState({scorer: c.scorer}); });
    cardsBox.appendChild(card);
  });

  /* ---- gates: GateOutcome.to_json() ({test, scorer, verdict, note, problem, spec, result})
     or a bare GateResult.to_json() ({spec, verdict, reason, checks, n_cases, ...}) ---- */
  function header(table, names) {
    var tr = el("tr");
    names.forEach(function (h) { tr.appendChild(el("th", "", h)); });
    table.appendChild(tr);
  }
  if (D.gates && D.gates.length) {
    document.getElementById("gates-sec").hidden = false;
    var gt = el("table");
    header(gt, ["verdict", "scorer", "test", "checks", "cases", "notes"]);
    D.gates.forEach(function (g) {
      var spec = g.spec || {}, res = g.result || g, tr = el("tr", "gate");
      var v = String(g.verdict || res.verdict || "?");
      var td = el("td"); td.appendChild(el("span", "badge b-" + v, v)); tr.appendChild(td);
      tr.appendChild(el("td", "", g.scorer || spec.scorer || ""));
      tr.appendChild(el("td", "", g.test || spec.test || spec.source || ""));
      var chk = el("td");
      (res.checks || []).forEach(function (c) {
        var iv = c.interval || {};
        var line = c.metric.replace(/_/g, " ") + " " + (c.side === "max" ? "\u2264 " : "\u2265 ") +
          fmt(c.bound) + ": " + ival(iv, /rate$/.test(c.metric)) + " \u2192 " + c.verdict;
        if (c.needed) line += " (about " + c.needed + " more cases may decide it)";
        chk.appendChild(el("div", "check", line));
      });
      tr.appendChild(chk);
      var cases = res.n_cases === undefined ? "" : String(res.n_cases);
      if (res.n_samples && res.n_samples !== res.n_cases) cases += ", " + res.n_samples + " samples";
      if (res.n_errors) cases += " (" + res.n_errors + " unscored)";
      if (res.flaky && res.flaky.length) cases += ", " + res.flaky.length + " flaky";
      tr.appendChild(el("td", "num", cases));
      var notes = [g.problem, g.note, res.reason].filter(function (x) { return x; });
      if (spec.source && g.test) notes.push("declared by " + spec.source);
      tr.appendChild(el("td", "", notes.join("; ")));
      gt.appendChild(tr);
    });
    document.getElementById("gates").appendChild(gt);
  }

  /* ---- judge agreement: {scorer: ScorerAgreement.to_json()} ---- */
  if (D.agreement && typeof D.agreement === "object" && Object.keys(D.agreement).length) {
    document.getElementById("agree-sec").hidden = false;
    var abox = document.getElementById("agree");
    Object.keys(D.agreement).sort().forEach(function (name) {
      var a = D.agreement[name] || {}, card = el("div", "card agree");
      card.setAttribute("data-scorer", name);
      card.appendChild(el("h3", "", name + (a.uses_judge === false ? " (deterministic)" : "")));
      card.appendChild(el("div", "mut", (a.labelled || 0) + " labelled, " + (a.n || 0) +
        " with both verdicts" + (a.unplaced ? ", " + a.unplaced + " without" : "")));
      var kd = a.kappa_detail || {};
      card.appendChild(el("div", "big kappa", isNum(a.kappa) ? fmt(a.kappa) : "\u2013"));
      card.appendChild(el("div", "mut ci", isNum(a.kappa) && kd.interval
        ? "Cohen's kappa, " + ival(kd.interval, false) : "kappa undefined"));
      card.appendChild(el("div", "rate", "accuracy " + ival(a.accuracy_interval, true)));
      card.appendChild(el("div", "rate", "true-pass rate " + ival(a.true_pass_interval, true)));
      card.appendChild(el("div", "rate", "true-fail rate " + ival(a.true_fail_interval, true)));
      var conf = a.confusion || {}, counts = conf.counts || [[0, 0], [0, 0]];
      var ct = el("table", "confusion");
      header(ct, ["label \\ judge", "pass", "fail"]);
      ["pass", "fail"].forEach(function (lab, i) {
        var tr = el("tr");
        tr.appendChild(el("th", "", lab));
        [0, 1].forEach(function (j) {
          tr.appendChild(el("td", "num " + (i === j ? "agree" : "disagree"), String((counts[i] || [])[j] || 0)));
        });
        ct.appendChild(tr);
      });
      card.appendChild(ct);
      var cors = a.corrected_by_test || (a.corrected ? [a.corrected] : []);
      cors.forEach(function (cor) {
        var where = cors.length > 1 && cor.test ? " in " + cor.test : "";
        card.appendChild(el("div", "rate corrected", cor.interval
          ? "corrected pass rate" + where + " " + ival(cor.interval, true) + " (raw " + fmt(cor.raw) + ", " + cor.n + " unlabelled)"
          : "corrected pass rate" + where + ": not defined (" + (cor.reason || "") + ")"));
      });
      if (isNum(a.spearman) || isNum(a.mae)) {
        card.appendChild(el("div", "mut", "scores: Spearman " + (isNum(a.spearman) ? fmt(a.spearman) : "\u2013") +
          ", mean absolute error " + (isNum(a.mae) ? fmt(a.mae) : "\u2013") + " (" + a.graded + ")"));
      }
      abox.appendChild(card);
      var dis = a.disagreements || [];
      if (dis.length) {
        var dt = el("table", "disagreements");
        dt.setAttribute("data-scorer", name);
        header(dt, ["case", "label", "judge", "output", "judge's reason"]);
        dis.forEach(function (d) {
          var tr = el("tr", "disagreement");
          tr.appendChild(el("td", "", (d.test || "") + (d.case_id != null ? "[" + d.case_id + "]" : "") +
            (d.where ? " " + d.where : "")));
          tr.appendChild(el("td", "", d.label === true ? "pass" : d.label === false ? "fail" : String(d.label)));
          tr.appendChild(el("td", "", (d.passed ? "pass" : "fail") + (isNum(d.score) ? " (" + fmt(d.score) + ")" : "") +
            (d.choice ? " " + d.choice : "")));
          tr.appendChild(el("td", "text", d.output == null ? "" : String(d.output)));
          tr.appendChild(el("td", "text", d.rationale || ""));
          dt.appendChild(tr);
        });
        abox.appendChild(el("h3", "", name + ": disagreements (" + dis.length + ")"));
        abox.appendChild(dt);
      }
    });
  }

  /* ---- per-test statistics: TestStatistics.to_json() ---- */
  if (D.statistics && D.statistics.length) {
    document.getElementById("stats-sec").hidden = false;
    var stt = el("table");
    header(stt, ["test", "scorer", "cases", "samples", "unscored", "mean [CI]", "pass rate [CI]",
      "flaky"]);
    D.statistics.forEach(function (x) {
      var tr = el("tr", "stat");
      tr.appendChild(el("td", "", x.test || ""));
      tr.appendChild(el("td", "", x.scorer || ""));
      tr.appendChild(el("td", "num", x.n_cases));
      tr.appendChild(el("td", "num", x.n_samples));
      tr.appendChild(el("td", "num", x.n_errors));
      tr.appendChild(el("td", "num", ival(x.mean, false)));
      tr.appendChild(el("td", "num", ival(x.pass_rate, true)));
      tr.appendChild(el("td", "num", x.flaky ? x.flaky.length : 0));
      stt.appendChild(tr);
    });
    document.getElementById("stats").appendChild(stt);
  }

  /* ---- comparison ---- */
  var CMP = D.comparison, CASE = {};
  var REGRESSED_KEYS = {};
  if (CMP) {
    document.getElementById("cmp-sec").hidden = false;
    var box = document.getElementById("cmp"), b = CMP.baseline || {};
    var meta = [];
    if (b.git_commit) meta.push("commit " + String(b.git_commit).slice(0, 12));
    if (isNum(b.started)) meta.push("started " + new Date(b.started * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC");
    if (b.path) meta.push(String(b.path));
    box.appendChild(el("p", "mut", "Baseline: " + (meta.join(", ") || "(no metadata)")));
    var ct = el("table"), hr2 = el("tr");
    ["scorer", "baseline mean", "current mean", "diff", "95% CI of diff", "p", "regressed", "improved"].forEach(function (h) { hr2.appendChild(el("th", "", h)); });
    ct.appendChild(hr2);
    (CMP.scorers || []).forEach(function (s) {
      var tr = el("tr", "cmp-scorer");
      tr.appendChild(el("td", "", s.scorer));
      tr.appendChild(el("td", "num", fmt(s.baseline_mean)));
      tr.appendChild(el("td", "num", fmt(s.current_mean)));
      tr.appendChild(el("td", "num " + (s.diff < 0 ? "neg" : s.diff > 0 ? "pos" : ""), isNum(s.diff) ? (s.diff > 0 ? "+" : "") + fmt(s.diff) : "\u2013"));
      tr.appendChild(el("td", "num", isNum(s.ci_low) && isNum(s.ci_high) ? "[" + fmt(s.ci_low) + ", " + fmt(s.ci_high) + "]" : "\u2013"));
      tr.appendChild(el("td", "num", isNum(s.p_value) ? s.p_value.toPrecision(2) : "\u2013"));
      var reg = Array.isArray(s.regressed) ? s.regressed : [], imp = Array.isArray(s.improved) ? s.improved : [];
      reg.forEach(function (k) { REGRESSED_KEYS[typeof k === "string" ? k : JSON.stringify(k)] = true; });
      tr.appendChild(el("td", "num", reg.length)); tr.appendChild(el("td", "num", imp.length));
      ct.appendChild(tr);
    });
    box.appendChild(ct);
    (CMP.cases || []).forEach(function (c) {
      if (c && c.current) CASE[keyOf(c.current)] = c;
      else if (c && c.baseline) CASE["baseline-only:" + keyOf(c.baseline)] = c;
    });
  }
  function caseOf(r) { return CASE[keyOf(r)] || CASE[keyOfNoSample(r)] || null; }
  function deltaOf(r) {
    var c = caseOf(r);
    if (!c) return null;
    if (isNum(c.delta)) return c.delta;
    if (c.baseline && isNum(c.baseline.score) && isNum(r.score)) return r.score - c.baseline.score;
    return null;
  }
  function regressed(r) {
    var c = caseOf(r);
    if (!c) return false;
    var d = deltaOf(r);
    if (isNum(d) && d < 0) return true;
    if (c.baseline && c.baseline.passed === true && r.passed === false) return true;
    if (c.baseline && status(c.baseline) !== "error" && status(r) === "error") return true;
    var k = c.key;
    return REGRESSED_KEYS[typeof k === "string" ? k : JSON.stringify(k)] === true;
  }

  /* ---- table ---- */
  var hasSample = RECS.some(function (r) { return isNum(r.sample) && r.sample > 0; });
  var COLS = [
    ["status", "status"], ["test", "test / case"], ["scorer", "scorer"],
    ["index", hasSample ? "#/sample" : "#"], ["score", "score"], ["bound", "bound"],
    ["delta", "\u0394 baseline"], ["cached", "cached"], ["cost", "cost"]
  ];
  var SORTERS = {
    status: function (r) { return {error: 0, fail: 1, none: 2, pass: 3}[status(r)]; },
    test: function (r) { return label(r); },
    scorer: function (r) { return r.scorer; },
    index: function (r) { return r.index * 100000 + (r.sample || 0); },
    score: function (r) { return isNum(r.score) ? r.score : -Infinity; },
    bound: function (r) { return isNum(r.min) ? r.min : isNum(r.max) ? r.max : -Infinity; },
    delta: function (r) { var d = deltaOf(r); return isNum(d) ? d : Infinity; },
    cached: function (r) { return r.cached ? 1 : 0; },
    cost: function (r) { return isNum(r.cost_usd) ? r.cost_usd : -Infinity; }
  };
  var thead = document.getElementById("thead");
  COLS.forEach(function (c) {
    var s = el("span", "", c[1]); s.setAttribute("data-col", c[0]);
    s.addEventListener("click", function () {
      var cur = state.sort;
      setState({sort: cur === "-" + c[0] ? c[0] : "-" + c[0]});
    });
    thead.appendChild(s);
  });
  var scorerSel = document.getElementById("f-scorer");
  (D.cards || []).forEach(function (c) { var o = el("option", "", c.scorer); o.value = c.scorer; scorerSel.appendChild(o); });

  var state = {filter: "all", scorer: "", q: "", sort: "", open: null};
  var VIEW = [];
  var SEARCH = null;
  function searchText(r) {
    var parts = [label(r), r.scorer, r.rationale || "", r.error || ""];
    if (r.inputs && typeof r.inputs === "object") {
      for (var k in r.inputs) { var v = r.inputs[k]; parts.push(typeof v === "string" ? v : JSON.stringify(v)); }
    }
    return parts.join("\n").toLowerCase();
  }
  function applyView() {
    var f = state.filter, sc = state.scorer, q = state.q.toLowerCase(), out = [];
    if (q && SEARCH === null) { SEARCH = new Array(RECS.length); for (var j = 0; j < RECS.length; j++) SEARCH[j] = searchText(RECS[j]); }
    for (var i = 0; i < RECS.length; i++) {
      var r = RECS[i], s = status(r);
      if (f === "failed" && s !== "fail") continue;
      if (f === "errored" && s !== "error") continue;
      if (f === "passed" && s !== "pass") continue;
      if (f === "regressed" && !regressed(r)) continue;
      if (sc && r.scorer !== sc) continue;
      if (q && SEARCH[i].indexOf(q) < 0) continue;
      out.push(i);
    }
    if (state.sort) {
      var desc = state.sort.charAt(0) === "-", col = desc ? state.sort.slice(1) : state.sort;
      var fn = SORTERS[col];
      if (fn) {
        var keys = new Array(RECS.length);
        out.forEach(function (ix) { keys[ix] = fn(RECS[ix]); });
        out.sort(function (a, b2) {
          var x = keys[a], y = keys[b2], c = x < y ? -1 : x > y ? 1 : a - b2;
          return desc && x !== y ? -c : c;
        });
      }
    }
    VIEW = out;
    document.getElementById("count").textContent = out.length + " of " + RECS.length + " shown";
    document.body.setAttribute("data-shown", String(out.length));
    thead.querySelectorAll("span").forEach(function (s) {
      var col2 = s.getAttribute("data-col"), srt = state.sort.replace(/^-/, "");
      s.className = col2 === srt ? "sorted" + (state.sort.charAt(0) === "-" ? "" : " asc") : "";
    });
    document.getElementById("spacer").style.height = (out.length * ROWH) + "px";
    renderRows(true);
  }
  var viewport = document.getElementById("viewport"), spacer = document.getElementById("spacer");
  var lastFirst = -1;
  function renderRows(force) {
    var h = viewport.clientHeight || 600;
    var first = Math.max(0, Math.floor(viewport.scrollTop / ROWH) - 10);
    var last = Math.min(VIEW.length, first + Math.ceil(h / ROWH) + 20);
    if (!force && first === lastFirst) return;
    lastFirst = first;
    var frag = document.createDocumentFragment();
    for (var p = first; p < last; p++) frag.appendChild(rowEl(VIEW[p], p));
    spacer.textContent = "";
    spacer.appendChild(frag);
  }
  function rowEl(ix, pos) {
    var r = RECS[ix], s = status(r), row = el("div", "row" + (state.open === ix ? " open" : ""));
    row.style.top = (pos * ROWH) + "px";
    row.setAttribute("data-ix", String(ix));
    row.appendChild(el("span", "s-" + s, s === "none" ? "\u2013" : s));
    var lb = el("span", "", label(r)); lb.title = label(r); row.appendChild(lb);
    row.appendChild(el("span", "", r.scorer));
    row.appendChild(el("span", "", String(r.index) + (hasSample ? "/" + (r.sample || 0) : "")));
    row.appendChild(el("span", "num", fmt(r.score)));
    row.appendChild(el("span", "num", isNum(r.min) ? "\u2265 " + fmt(r.min) : isNum(r.max) ? "\u2264 " + fmt(r.max) : ""));
    var d = deltaOf(r);
    row.appendChild(el("span", "num " + (isNum(d) && d < 0 ? "neg" : isNum(d) && d > 0 ? "pos" : ""), isNum(d) ? (d > 0 ? "+" : "") + fmt(d) : ""));
    row.appendChild(el("span", "", r.cached ? "yes" : ""));
    row.appendChild(el("span", "num", isNum(r.cost_usd) ? usd(r.cost_usd) : ""));
    return row;
  }
  // Render on the next animation frame, or after 50 ms where frames are held back (a throttled
  // or headless page): whichever comes first, once per scroll burst.
  var scrollPending = false;
  function renderScrolled() { if (!scrollPending) return; scrollPending = false; renderRows(false); }
  viewport.addEventListener("scroll", function () {
    if (scrollPending) return;
    scrollPending = true;
    window.requestAnimationFrame(renderScrolled);
    setTimeout(renderScrolled, 50);
  });
  spacer.addEventListener("click", function (ev) {
    var row = ev.target.closest(".row");
    if (row) setState({open: Number(row.getAttribute("data-ix"))});
  });

  /* ---- word diff ---- */
  function words(s) { return String(s).split(/(\s+)/).filter(function (w) { return w !== ""; }); }
  function wordDiff(a, b) {
    var x = words(a), y = words(b), pre = 0, suf = 0;
    while (pre < x.length && pre < y.length && x[pre] === y[pre]) pre++;
    while (suf < x.length - pre && suf < y.length - pre && x[x.length - 1 - suf] === y[y.length - 1 - suf]) suf++;
    var xm = x.slice(pre, x.length - suf), ym = y.slice(pre, y.length - suf), ops = [];
    x.slice(0, pre).forEach(function (w) { ops.push(["=", w]); });
    var n = xm.length, m = ym.length;
    if (n * m > 4000000) {
      xm.forEach(function (w) { ops.push(["-", w]); }); ym.forEach(function (w) { ops.push(["+", w]); });
    } else {
      var L = new Array(n + 1);
      for (var i = 0; i <= n; i++) L[i] = new Uint32Array(m + 1);
      for (i = n - 1; i >= 0; i--) for (var j = m - 1; j >= 0; j--)
        L[i][j] = xm[i] === ym[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
      i = 0; j = 0;
      while (i < n && j < m) {
        if (xm[i] === ym[j]) { ops.push(["=", xm[i]]); i++; j++; }
        else if (L[i + 1][j] >= L[i][j + 1]) { ops.push(["-", xm[i]]); i++; }
        else { ops.push(["+", ym[j]]); j++; }
      }
      for (; i < n; i++) ops.push(["-", xm[i]]);
      for (; j < m; j++) ops.push(["+", ym[j]]);
    }
    x.slice(x.length - suf).forEach(function (w) { ops.push(["=", w]); });
    var pre2 = el("pre", "diff");
    var cur = null, curOp = null;
    ops.forEach(function (o) {
      if (o[0] !== curOp) {
        cur = o[0] === "=" ? document.createTextNode("") : el(o[0] === "-" ? "del" : "ins");
        curOp = o[0]; pre2.appendChild(cur);
      }
      if (cur.nodeType === 3) cur.data += o[1]; else cur.textContent += o[1];
    });
    return pre2;
  }

  /* ---- detail ---- */
  var detail = document.getElementById("detail");
  function block(title, text, cls) {
    detail.appendChild(el("h4", "", title));
    var p = el("pre", cls || "", text); detail.appendChild(p); return p;
  }
  var ORDER = ["input", "question", "expected", "reference", "output", "context", "contexts"];
  function showText(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }
  function renderDetail() {
    var ix = state.open;
    detail.textContent = "";
    if (ix === null || !(ix >= 0 && ix < RECS.length)) { detail.hidden = true; return; }
    var r = RECS[ix], s = status(r);
    detail.hidden = false;
    detail.setAttribute("data-ix", String(ix));
    var close = el("button", "close", "close \u2715");
    close.addEventListener("click", function () { setState({open: null}); });
    detail.appendChild(close);
    detail.appendChild(el("h3", "", label(r) + " \u2014 " + r.scorer + " #" + r.index + (hasSample ? " sample " + (r.sample || 0) : "")));
    var kv = el("dl", "kv");
    function add(k, v) { if (v === null || v === undefined || v === "") return; kv.appendChild(el("dt", "", k)); kv.appendChild(el("dd", "", v)); }
    add("status", s === "none" ? "no verdict" : s);
    add("score", fmt(r.score, 4));
    add("bound", isNum(r.min) ? "\u2265 " + fmt(r.min) : isNum(r.max) ? "\u2264 " + fmt(r.max) : null);
    add("where", r.where);
    add("cached", r.cached ? "yes" : "no");
    if (r.gated) add("gated", "a suite gate decides this scorer here; a per-case miss did not fail the test");
    if (r.judge_models && r.judge_models.length) add("judge model", r.judge_models.join(", "));
    add("judge usage", (r.judge_calls || 0) + (r.judge_calls === 1 ? " call, " : " calls, ") + (r.prompt_tokens || 0) + " prompt + " + (r.completion_tokens || 0) + " completion tokens" + (isNum(r.cost_usd) ? ", " + usd(r.cost_usd) : ""));
    var c = caseOf(r);
    if (c && c.baseline) add("baseline score", fmt(c.baseline.score, 4) + " (\u0394 " + fmt(deltaOf(r), 4) + ")");
    detail.appendChild(kv);
    if (r.error) block("error", r.error, "error");
    var inputs = r.inputs && typeof r.inputs === "object" ? r.inputs : null;
    if (inputs) {
      var keys = Object.keys(inputs).sort(function (a, b2) {
        var ia = ORDER.indexOf(a), ib = ORDER.indexOf(b2);
        return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || (a < b2 ? -1 : a > b2 ? 1 : 0);
      });
      keys.forEach(function (k) { block(k, showText(inputs[k]), "in-" + k.replace(/[^A-Za-z0-9_-]/g, "_")); });
    } else {
      detail.appendChild(el("p", "mut", "The judged texts are not in this report."));
    }
    if (r.rationale) block("rationale", r.rationale, "rationale");
    if (r.metadata && Object.keys(r.metadata).length) block("metadata", JSON.stringify(r.metadata, null, 2), "metadata");
    var tr = isNum(r.trace_ix) ? TRACES[r.trace_ix] : null;
    if (tr && typeof tr === "object") renderTrace(r, tr);
    if (c && c.baseline) {
      var bo = c.baseline.inputs && c.baseline.inputs.output, co = inputs && inputs.output;
      if (bo !== undefined && co !== undefined) {
        detail.appendChild(el("h4", "", "output: baseline \u2192 current (word diff)"));
        detail.appendChild(wordDiff(showText(bo), showText(co)));
      }
      if (c.baseline.rationale) block("baseline rationale", c.baseline.rationale, "baseline-rationale");
    }
  }

  /* ---- the case's scores and its span tree (issue 21) ---- */
  var TRACES = D.traces || [];
  function ms(x) { return isNum(x) ? (1000 * x).toFixed(x > 0 && x < 0.001 ? 3 : 1) + " ms" : "\u2013"; }
  function plural(n, one) { return (isNum(n) ? n : 0) + " " + one + (n === 1 ? "" : "s"); }
  function sameCase(a, b) {
    return a.file === b.file && a.test === b.test && (a.case_id === undefined ? null : a.case_id) === (b.case_id === undefined ? null : b.case_id) &&
      (a.sample || 0) === (b.sample || 0);
  }
  function cutNote(e, k) { return e.cut && isNum(e.cut[k]) ? " [" + e.cut[k] + " more chars cut]" : ""; }
  function renderTrace(r, tr) {
    var sec = el("section", "trace");
    sec.appendChild(el("h4", "", "scores of this case"));
    var st = el("table", "case-scores"), hr = el("tr");
    ["scorer", "#", "score", "status"].forEach(function (h) { hr.appendChild(el("th", "", h)); });
    st.appendChild(hr);
    RECS.forEach(function (o) {
      if (!sameCase(o, r)) return;
      var row = el("tr", o === r ? "this" : "");
      row.appendChild(el("td", "", o.scorer)); row.appendChild(el("td", "num", o.index));
      row.appendChild(el("td", "num", fmt(o.score, 4)));
      var s2 = status(o); row.appendChild(el("td", "s-" + s2, s2 === "none" ? "no verdict" : s2));
      st.appendChild(row);
    });
    sec.appendChild(st);
    sec.appendChild(el("h4", "", "trace"));
    var sum = plural(tr.spans, "span") + ": " + plural(tr.model_calls, "model call") + ", " + plural(tr.tool_calls, "tool call") +
      ", " + plural(tr.errors, "error") + "; tokens " + (tr.input_tokens || 0) + " in + " + (tr.output_tokens || 0) + " out; " + ms(tr.duration_s);
    var notes = [];
    if (tr.tree_cut) notes.push(tr.tree_cut + " more spans not kept in the report");
    if (tr.dropped) notes.push(tr.dropped + " dropped by the capture");
    if (tr.unfinished) notes.push(tr.unfinished + " unfinished");
    sec.appendChild(el("p", "trace-sum", sum + (notes.length ? " (" + notes.join(", ") + ")" : "")));
    var tree = Array.isArray(tr.tree) ? tr.tree : [];
    if (tree.length) {
      var t = el("table", "span-tree"), h = el("tr");
      ["span", "start", "duration", "tokens", "detail"].forEach(function (x) { h.appendChild(el("th", "", x)); });
      t.appendChild(h);
      tree.forEach(function (e) {
        if (!e || typeof e !== "object") return;
        var row = el("tr", "k-" + String(e.kind).replace(/[^a-z]/g, "") + (e.error ? " span-error" : ""));
        var name = el("td", "span-name");
        name.style.paddingLeft = (8 + 16 * Math.min(isNum(e.depth) ? e.depth : 0, 30)) + "px";
        name.appendChild(el("span", "kind", e.kind));
        name.appendChild(document.createTextNode(" " + e.name + cutNote(e, "name")));
        row.appendChild(name);
        row.appendChild(el("td", "num", "+" + ms(e.start_s)));
        row.appendChild(el("td", "num", ms(e.duration_s)));
        row.appendChild(el("td", "num", isNum(e.input_tokens) || isNum(e.output_tokens) ? (isNum(e.input_tokens) ? e.input_tokens : "\u2013") + " / " + (isNum(e.output_tokens) ? e.output_tokens : "\u2013") : ""));
        var d = el("td", "span-detail");
        function line(cls, text) { d.appendChild(el("div", cls, text)); }
        if (e.model) line("model", "model " + e.model + cutNote(e, "model"));
        if (e.tool) line("tool", e.tool + cutNote(e, "tool"));
        if (e.arguments !== undefined && e.arguments !== null) line("args", "arguments " + e.arguments + cutNote(e, "arguments"));
        if (e.result !== undefined && e.result !== null) line("result", "result " + e.result + cutNote(e, "result"));
        if (e.from_agent || e.to_agent) line("handoff", (e.from_agent || "?") + " \u2192 " + (e.to_agent || "?"));
        if (e.error) line("error", "error " + e.error + cutNote(e, "error"));
        if (Array.isArray(e.flags) && e.flags.length) line("mut", "flags " + e.flags.join(", "));
        row.appendChild(d);
        t.appendChild(row);
      });
      sec.appendChild(t);
    }
    detail.appendChild(sec);
  }

  /* ---- state via the URL hash ---- */
  function readHash() {
    var h = window.location.hash.replace(/^#/, ""), out = {};
    h.split("&").forEach(function (kv2) {
      if (!kv2) return;
      var p = kv2.indexOf("="), k = p < 0 ? kv2 : kv2.slice(0, p), v = p < 0 ? "" : kv2.slice(p + 1);
      try { out[decodeURIComponent(k)] = decodeURIComponent(v.replace(/\+/g, " ")); } catch (e) { /* ignore a bad escape */ }
    });
    return out;
  }
  function writeHash() {
    var parts = [];
    if (state.filter !== "all") parts.push("filter=" + encodeURIComponent(state.filter));
    if (state.scorer) parts.push("scorer=" + encodeURIComponent(state.scorer));
    if (state.q) parts.push("q=" + encodeURIComponent(state.q));
    if (state.sort) parts.push("sort=" + encodeURIComponent(state.sort));
    if (state.open !== null) parts.push("open=" + state.open);
    var h = parts.length ? "#" + parts.join("&") : " ";
    try { history.replaceState(null, "", h === " " ? window.location.pathname + window.location.search : h); } catch (e) { /* file:// quirks */ }
  }
  function fromHash() {
    var h = readHash();
    state.filter = ["failed", "errored", "regressed", "passed"].indexOf(h.filter) >= 0 ? h.filter : "all";
    state.scorer = h.scorer || "";
    state.q = h.q || "";
    state.sort = h.sort || "";
    state.open = h.open !== undefined && /^\d+$/.test(h.open) ? Number(h.open) : null;
    syncControls();
  }
  function syncControls() {
    document.getElementById("f-status").value = state.filter;
    scorerSel.value = state.scorer;
    document.getElementById("f-q").value = state.q;
  }
  function setState(ch) {
    var needView = false;
    for (var k in ch) { if (k !== "open") needView = true; state[k] = ch[k]; }
    syncControls();
    if (needView) applyView(); else renderRows(true);
    if ("open" in ch) { renderDetail(); if (state.open !== null) detail.scrollTop = 0; }
    writeHash();
  }
  document.getElementById("f-status").addEventListener("change", function (e) { setState({filter: e.target.value}); });
  scorerSel.addEventListener("change", function (e) { setState({scorer: e.target.value}); });
  var qTimer = null;
  document.getElementById("f-q").addEventListener("input", function (e) {
    clearTimeout(qTimer); var v = e.target.value;
    qTimer = setTimeout(function () { setState({q: v}); }, 120);
  });
  window.addEventListener("hashchange", function () { fromHash(); applyView(); renderDetail(); });

  fromHash();
  applyView();
  renderDetail();
  void document.body.offsetHeight; /* force layout so the mark includes it */
  var T1 = performance.now();
  document.body.setAttribute("data-render-ms", (T1 - T0).toFixed(1));
  document.body.setAttribute("data-ready-ms", T1.toFixed(1));
  document.body.setAttribute("data-ready", "1");

  if (readHash().bench) {
    var bench = [["failed", {filter: "failed"}], ["errored", {filter: "errored"}],
      ["regressed", {filter: "regressed"}],
      ["search", {filter: "all", q: "needle"}], ["sort", {q: "", sort: "-score"}],
      ["scorer", {sort: "", scorer: (D.cards && D.cards[0] ? D.cards[0].scorer : "")}],
      ["all", {scorer: "", filter: "all"}]];
    bench.forEach(function (b3) {
      var t = performance.now();
      setState(b3[1]);
      void document.body.offsetHeight;
      document.body.setAttribute("data-bench-" + b3[0] + "-ms", (performance.now() - t).toFixed(1));
      document.body.setAttribute("data-bench-" + b3[0] + "-shown", String(VIEW.length));
    });
  }
})();

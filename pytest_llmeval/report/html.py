"""The HTML report: one self-contained file (inline CSS and JS, no network) rendered from the JSON
report, for ``--llm-eval-html=PATH`` and ``python -m pytest_llmeval report RUN.json -o OUT.html``.

Why a JSON island and not server-side HTML: a run can hold 20,000 records; the page keeps them as
data and renders only the visible table rows (a virtualised list), so it opens fast. Record texts
are untrusted (model outputs); the data is embedded in ``<script type="application/json">`` with
``<``, ``>``, ``&`` escaped as ``\\u003c``/``\\u003e``/``\\u0026`` (so no ``</script>`` can close
the island), and the page writes every text with ``textContent``, never ``innerHTML``.

Keys read (everything but ``records`` is optional; an absent section is simply not shown):

* ``report["run"]``: ``started``, ``finished``, ``duration_s``, ``exitstatus``, ``git_commit``,
  ``workers``, ``cache_mode``, ``platform``, ``versions`` {dist: version}, ``judge`` {``model``,
  ...}.
* ``report["aggregates"]`` {scorer: {``n``, ``mean``, ``passed``, ``failed``, ``errors``,
  ``cache_hits``, ``judge_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``}}.
* ``report["records"][*]``: ``file``, ``test``, ``case_id``, ``scorer``, ``index``, ``sample``?,
  ``score``, ``min``, ``max``, ``passed``, ``cached``, ``rationale``, ``error``, ``where``,
  ``metadata``, ``prompt_tokens``, ``completion_tokens``, ``judge_calls``, ``cost_usd``,
  ``inputs``? {name: text} (the judged texts: ``output``, ``expected``, ``input``, ``context``...,
  possibly truncated).
* ``report["scorer_stats"]``? a list (or {scorer: ...}) of ``ScorerStats.to_json()``
  (``scorer``, ``mean`` {``estimate``, ``low``, ``high``, ``confidence``}, ``pass_rate`` {same});
  when absent the cards' intervals are computed here (cluster-t over cases for the mean, Wilson
  for the pass rate, from ``pytest_llmeval.stats``).
* ``report["gates"]``? a list of ``GateResult.to_json()`` (``spec`` {``scorer``, ``source``...},
  ``verdict``, ``reason``, ``checks`` [{``metric``, ``side``, ``bound``, ``interval``,
  ``verdict``, ``reason``}], ``n_cases``, ``flaky``), optionally with ``test``/``file``.
* ``report["comparison"]``? {``baseline`` {run meta}, ``scorers`` [{``scorer``,
  ``baseline_mean``, ``current_mean``, ``diff``, ``ci_low``, ``ci_high``, ``p_value``,
  ``regressed`` [...], ``improved`` [...]}], ``cases`` [{``key``, ``baseline`` record,
  ``current`` record, ``delta``}]}. A case is matched to a record by the current record's
  (file, test, case_id, scorer, index[, sample]); it counts as regressed when its delta is
  negative, its verdict went from pass to fail, or its key is listed in its scorer's
  ``regressed``.

The page state lives in the URL hash (``#filter=failed&scorer=NAME&q=TEXT&sort=-score&open=N``),
so a filtered view can be linked to, and tests can drive it from ``file://`` URLs. ``#bench=1``
times the filters and sort and writes the figures on ``<body data-bench-*>``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmeval.errors import ReportFormatError

__all__ = ["HISTOGRAM_BINS", "build_cards", "embed_json", "main_report", "render_html", "write_html"]

HISTOGRAM_BINS = 10


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _histogram(scores: Sequence[float], lo: float, hi: float) -> list[int]:
    """Equal-width bins over [lo, hi]; the top edge belongs to the last bin. Multiplying before
    dividing keeps edges exact (0.6 over [0, 1] lands in bin 6, not 5 as 0.6 / 0.1 would)."""
    bins = [0] * HISTOGRAM_BINS
    span = hi - lo
    for s in scores:
        i = 0 if span <= 0 else int((s - lo) * HISTOGRAM_BINS / span)
        bins[min(max(i, 0), HISTOGRAM_BINS - 1)] += 1
    return bins


def _interval_json(iv: Any) -> dict[str, Any] | None:
    if not isinstance(iv, Mapping):
        return None
    return {
        "estimate": _finite(iv.get("estimate")),
        "low": _finite(iv.get("low")),
        "high": _finite(iv.get("high")),
        "confidence": _finite(iv.get("confidence")),
    }


def _given_stats(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    raw = report.get("scorer_stats")
    out: dict[str, Mapping[str, Any]] = {}
    if isinstance(raw, Mapping):
        raw = [{"scorer": k, **v} for k, v in raw.items() if isinstance(v, Mapping)]
    if isinstance(raw, list):
        for item in raw:
            # Per-test stats carry a "test"; the cards are per scorer over the run.
            if isinstance(item, Mapping) and isinstance(item.get("scorer"), str):
                if item.get("test") in (None, ""):
                    out[item["scorer"]] = item
    return out


def build_cards(report: Mapping[str, Any], confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per-scorer card data: counts, mean with its interval, pass rate with its interval and a
    histogram of the scores. Intervals come from ``report["scorer_stats"]`` when the run has them
    (they know about repeated samples); otherwise they are computed here over the records, with
    the cases (file, test, case_id) as clusters, so repeated samples of one case are not counted
    as independent."""
    from pytest_llmeval.stats import cluster_mean_interval, wilson_interval

    records = report.get("records") or []
    by_scorer: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if isinstance(r, Mapping):
            by_scorer.setdefault(str(r.get("scorer")), []).append(r)
    given = _given_stats(report)
    cards: list[dict[str, Any]] = []
    for name in sorted(by_scorer):
        recs = by_scorer[name]
        groups: dict[tuple[Any, Any, Any], list[float]] = {}
        scores: list[float] = []
        passed = failed = errors = cached = 0
        for r in recs:
            if r.get("error") is not None:
                errors += 1
                continue
            s = _finite(r.get("score"))
            if s is not None:
                scores.append(s)
                groups.setdefault((r.get("file"), r.get("test"), r.get("case_id")), []).append(s)
            if r.get("passed") is True:
                passed += 1
            elif r.get("passed") is False:
                failed += 1
            if r.get("cached"):
                cached += 1
        mean_iv: dict[str, Any] | None = None
        rate_iv: dict[str, Any] | None = None
        if name in given:
            mean_iv = _interval_json(given[name].get("mean"))
            rate_iv = _interval_json(given[name].get("pass_rate"))
        if mean_iv is None and scores:
            mean_iv = _interval_json(cluster_mean_interval(list(groups.values()), confidence).to_json())
        if rate_iv is None and passed + failed:
            rate_iv = _interval_json(wilson_interval(passed, passed + failed, confidence).to_json())
        if scores:
            lo, hi = min(scores), max(scores)
            if lo >= 0.0 and hi <= 1.0:
                lo, hi = 0.0, 1.0  # the common [0, 1] scale: bins comparable across scorers
            hist = _histogram(scores, lo, hi)
        else:
            lo = hi = None
            hist = []
        cards.append(
            {
                "scorer": name,
                "n": len(recs),
                "scored": len(scores),
                "passed": passed,
                "failed": failed,
                "errors": errors,
                "cached": cached,
                "mean": mean_iv,
                "pass_rate": rate_iv,
                "hist": hist,
                "hist_lo": lo,
                "hist_hi": hi,
            }
        )
    return cards


def _sanitize(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): _sanitize(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_sanitize(v) for v in x]
    return x


def embed_json(data: Any) -> str:
    """JSON text safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` (so
    no ``</script>`` or ``<!--`` can end or alter the element) and no raw U+2028/U+2029."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # NaN/inf somewhere (JSON has none): null them
        text = json.dumps(
            _sanitize(data), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render_html(report: Mapping[str, Any]) -> str:
    """The whole page for ``report`` (a JSON report dict) as one string."""
    records = report.get("records")
    if not isinstance(records, list):
        raise ReportFormatError("report", "has no 'records' list; is this a pytest-llmeval run?")
    payload = {
        "run": report.get("run") if isinstance(report.get("run"), Mapping) else {},
        "aggregates": report.get("aggregates") or {},
        "records": records,
        "cards": build_cards(report),
        "gates": report.get("gates") if isinstance(report.get("gates"), list) else None,
        "comparison": (
            report.get("comparison") if isinstance(report.get("comparison"), Mapping) else None
        ),
    }
    return (
        _PAGE.replace("/*CSS*/", _CSS)
        .replace("/*JS*/", _JS)
        .replace("/*DATA*/", embed_json(payload))
    )


def write_html(path: Path, report: Mapping[str, Any]) -> None:
    """Render ``report`` to ``path`` atomically (temp file in the same folder, then rename)."""
    text = render_html(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_report(path: Path) -> dict[str, Any]:
    """Read a saved run; a clear ReportFormatError when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportFormatError(str(path), f"cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportFormatError(str(path), f"is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise ReportFormatError(
            str(path),
            "is not a pytest-llmeval JSON report (no 'records' list); write one with "
            "--llm-eval-report=PATH",
        )
    return data


def main_report(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_llmeval report RUN.json [-o OUT.html]``: render a saved run."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmeval report",
        description="Render a saved pytest-llmeval JSON report as a self-contained HTML file.",
    )
    parser.add_argument("run", type=Path, help="the JSON report (--llm-eval-report=PATH)")
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="HTML file to write (default: RUN.html)"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    out: Path = args.output or args.run.with_suffix(".html")
    try:
        write_html(out, load_report(args.run))
    except ReportFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>pytest-llmeval report</title>
<style>/*CSS*/</style>
</head>
<body>
<header id="head"><h1>pytest-llmeval report</h1><dl id="run"></dl></header>
<main>
<section id="cards-sec"><h2>Scorers</h2><div id="cards"></div></section>
<section id="gates-sec" hidden><h2>Gates</h2><div id="gates"></div></section>
<section id="cmp-sec" hidden><h2>Against the baseline</h2><div id="cmp"></div></section>
<section id="cases-sec"><h2>Cases</h2>
<div id="controls">
<label>Show <select id="f-status">
<option value="all">all</option><option value="failed">failed</option>
<option value="errored">errored</option><option value="regressed">regressed</option>
<option value="passed">passed</option></select></label>
<label>Scorer <select id="f-scorer"><option value="">all</option></select></label>
<label>Search <input id="f-q" type="search" placeholder="test, case, text..."></label>
<span id="count"></span>
</div>
<div id="thead" class="row head"></div>
<div id="viewport"><div id="spacer"></div></div>
<section id="detail" hidden></section>
</section>
</main>
<script type="application/json" id="llmeval-data">/*DATA*/</script>
<script>/*JS*/</script>
</body>
</html>
"""

_CSS = """
:root{--fg:#1d2330;--mut:#667085;--bg:#f6f7f9;--card:#fff;--line:#e3e6ea;--pass:#1a7f37;
--fail:#c62828;--err:#b26a00;--inc:#6b5fb5;--acc:#2557d6;--rowh:30px}
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
header{background:#1d2330;color:#fff;padding:14px 24px}
h1{margin:0 0 6px;font-size:20px}
h2{font-size:16px;margin:18px 0 8px}
main{padding:0 24px 24px}
#run{display:flex;flex-wrap:wrap;gap:4px 22px;margin:0}
#run div{display:flex;gap:6px}
#run dt{color:#aab3c5}#run dd{margin:0;font-variant-numeric:tabular-nums}
#cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px}
.card h3{margin:0 0 6px;font-size:15px;word-break:break-all}
.big{font-size:22px;font-weight:600;font-variant-numeric:tabular-nums}
.mut{color:var(--mut);font-size:12px}
.hist{display:flex;align-items:flex-end;gap:2px;height:48px;margin-top:8px;
border-bottom:1px solid var(--line)}
.hist div{flex:1;background:#8aa6e8;min-height:1px}
.axis{display:flex;justify-content:space-between;color:var(--mut);font-size:11px}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;font-weight:600;
color:#fff;background:var(--mut)}
.b-pass{background:var(--pass)}.b-fail{background:var(--fail)}.b-error{background:var(--err)}
.b-inconclusive{background:var(--inc)}
table{border-collapse:collapse;background:var(--card);width:100%}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
#controls{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:8px}
#controls input{width:240px}
#count{color:var(--mut)}
.row{display:grid;grid-template-columns:70px minmax(200px,3fr) minmax(110px,1fr) 70px 80px 90px
 100px 64px 80px;height:var(--rowh);align-items:center;border-bottom:1px solid var(--line);
 background:var(--card)}
.row>span{padding:0 6px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.row.head{font-weight:600;background:#eef1f5;border:1px solid var(--line)}
.row.head span{cursor:pointer;user-select:none}
.row.head span.sorted::after{content:" \\25BE"}.row.head span.sorted.asc::after{content:" \\25B4"}
#viewport{height:60vh;min-height:240px;overflow-y:auto;position:relative;
border:1px solid var(--line);border-top:0}
#spacer{position:relative}
#spacer .row{position:absolute;left:0;right:0;cursor:pointer}
#spacer .row:hover{background:#f1f5ff}
#spacer .row.open{background:#e4ecff}
.s-pass{color:var(--pass);font-weight:600}.s-fail{color:var(--fail);font-weight:600}
.s-error{color:var(--err);font-weight:600}.s-none{color:var(--mut)}
.neg{color:var(--fail)}.pos{color:var(--pass)}
#detail{background:var(--card);border-left:1px solid var(--line);position:fixed;top:0;right:0;
bottom:0;width:min(680px,55vw);overflow-y:auto;padding:12px 16px;box-shadow:-6px 0 24px #0002;
z-index:10}
#detail h3{margin:0 0 8px;font-size:15px;word-break:break-all}
#detail h4{margin:12px 0 4px;font-size:13px;color:var(--mut);text-transform:uppercase}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f8fa;border:1px solid var(--line);
border-radius:6px;padding:8px;margin:0;max-height:320px;overflow:auto;font:12.5px/1.45 ui-monospace,
SFMono-Regular,Menlo,Consolas,monospace}
ins{background:#d6f5dd;text-decoration:none}del{background:#fbd9d9}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}
.kv dt{color:var(--mut)}.kv dd{margin:0}
button.close{float:right}
"""

_JS = r"""
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
    return s;
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
      : "no interval (fewer than two cases)";
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

  /* ---- gates ---- */
  if (D.gates && D.gates.length) {
    document.getElementById("gates-sec").hidden = false;
    var gt = el("table"), hr = el("tr");
    ["verdict", "scorer", "where", "checks", "cases", "reason"].forEach(function (h) { hr.appendChild(el("th", "", h)); });
    gt.appendChild(hr);
    D.gates.forEach(function (g) {
      var spec = g.spec || {}, tr = el("tr", "gate");
      var v = String(g.verdict || "?");
      var td = el("td"); td.appendChild(el("span", "badge b-" + v, v)); tr.appendChild(td);
      tr.appendChild(el("td", "", spec.scorer || g.scorer || ""));
      tr.appendChild(el("td", "", g.test || spec.test || spec.source || ""));
      var chk = el("td");
      (g.checks || []).forEach(function (c) {
        var line = el("div");
        var iv = c.interval || {};
        line.textContent = c.metric + " " + (c.side === "max" ? "\u2264 " : "\u2265 ") + fmt(c.bound) + ": " +
          (c.metric === "pass_rate" ? ival(iv, true) : ival(iv, false)) + " \u2192 " + c.verdict +
          (c.needed ? " (about " + c.needed + " more cases to decide)" : "");
        chk.appendChild(line);
      });
      tr.appendChild(chk);
      tr.appendChild(el("td", "num", (g.n_cases === undefined ? "" : g.n_cases) +
        (g.n_errors ? " (" + g.n_errors + " errors)" : "") + (g.flaky && g.flaky.length ? ", " + g.flaky.length + " flaky" : "")));
      tr.appendChild(el("td", "", g.reason || ""));
      gt.appendChild(tr);
    });
    document.getElementById("gates").appendChild(gt);
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
  var hasSample = RECS.some(function (r) { return r.sample !== undefined && r.sample !== null; });
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
    row.appendChild(el("span", "", String(r.index) + (r.sample !== undefined && r.sample !== null ? "/" + r.sample : "")));
    row.appendChild(el("span", "num", fmt(r.score)));
    row.appendChild(el("span", "num", isNum(r.min) ? "\u2265 " + fmt(r.min) : isNum(r.max) ? "\u2264 " + fmt(r.max) : ""));
    var d = deltaOf(r);
    row.appendChild(el("span", "num " + (isNum(d) && d < 0 ? "neg" : isNum(d) && d > 0 ? "pos" : ""), isNum(d) ? (d > 0 ? "+" : "") + fmt(d) : ""));
    row.appendChild(el("span", "", r.cached ? "yes" : ""));
    row.appendChild(el("span", "num", isNum(r.cost_usd) ? usd(r.cost_usd) : ""));
    return row;
  }
  viewport.addEventListener("scroll", function () { window.requestAnimationFrame(function () { renderRows(false); }); });
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
    detail.appendChild(el("h3", "", label(r) + " \u2014 " + r.scorer + " #" + r.index + (r.sample !== undefined && r.sample !== null ? " sample " + r.sample : "")));
    var kv = el("dl", "kv");
    function add(k, v) { if (v === null || v === undefined || v === "") return; kv.appendChild(el("dt", "", k)); kv.appendChild(el("dd", "", v)); }
    add("status", s === "none" ? "no verdict" : s);
    add("score", fmt(r.score, 4));
    add("bound", isNum(r.min) ? "\u2265 " + fmt(r.min) : isNum(r.max) ? "\u2264 " + fmt(r.max) : null);
    add("where", r.where);
    add("cached", r.cached ? "yes" : "no");
    add("judge usage", (r.judge_calls || 0) + " calls, " + (r.prompt_tokens || 0) + " prompt + " + (r.completion_tokens || 0) + " completion tokens" + (isNum(r.cost_usd) ? ", " + usd(r.cost_usd) : ""));
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
    if (c && c.baseline) {
      var bo = c.baseline.inputs && c.baseline.inputs.output, co = inputs && inputs.output;
      if (bo !== undefined && co !== undefined) {
        detail.appendChild(el("h4", "", "output: baseline \u2192 current (word diff)"));
        detail.appendChild(wordDiff(showText(bo), showText(co)));
      }
      if (c.baseline.rationale) block("baseline rationale", c.baseline.rationale, "baseline-rationale");
    }
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
"""

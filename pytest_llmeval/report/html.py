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
  possibly truncated), ``trace``? (the test's ``TraceSummary.to_json()``, issue 21: its span
  tree is shown in the detail of each of the case's records, beside the case's scores).
* ``report["scorer_stats"]``? a list (or {scorer: ...}) of ``ScorerStats.to_json()``
  (``scorer``, ``mean`` {``estimate``, ``low``, ``high``, ``confidence``}, ``pass_rate`` {same});
  when absent the cards' intervals are computed here (cluster-t over cases for the mean, Wilson
  for the pass rate, from ``pytest_llmeval.core.stats``).
* ``report["gates"]``? a list of gate outcomes, ``GateOutcome.to_json()`` (``test``,
  ``scorer``, ``verdict``, ``note``, ``problem``, ``spec`` {``scorer``, ``source``...},
  ``result``: a ``GateResult.to_json()`` or null); a bare ``GateResult.to_json()`` (``spec``,
  ``verdict``, ``reason``, ``checks`` [{``metric``, ``side``, ``bound``, ``interval``,
  ``verdict``, ``needed``}], ``n_cases``, ``n_samples``, ``n_errors``, ``flaky``) is read too.
* ``report["statistics"]``? per-test ``TestStatistics.to_json()`` (``test``, ``scorer``,
  ``n_cases``, ``n_samples``, ``n_errors``, ``mean`` and ``pass_rate`` intervals, ``flaky``):
  a table. Records may carry ``sample`` (repeat index; a column when any is above 0),
  ``gated`` and ``judge_models`` (shown in the row's detail).
* ``report["agreement"]``? {scorer: ``ScorerAgreement.to_json()``} (issue 20): a card per
  scorer with its confusion matrix (rows the label, columns the judge), accuracy, kappa, the
  true-pass and true-fail rates, the corrected pass rate, and every disagreement with its
  output, label and the judge's reason.
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
import functools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.errors import ReportFormatError
from pytest_llmeval.core.files import write_text_atomic
from pytest_llmeval.core.redaction import redact_text, redact_url

if TYPE_CHECKING:
    from pytest_llmeval.report.view import RunView

__all__ = [
    "HISTOGRAM_BINS",
    "HtmlWriter",
    "build_cards",
    "embed_json",
    "load_report",
    "main_report",
    "render_html",
    "write_html",
]

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
        "n": n if isinstance(n := iv.get("n"), int) and not isinstance(n, bool) else None,
    }


def _given_stats(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    raw = report.get("scorer_stats")
    out: dict[str, Mapping[str, Any]] = {}
    if isinstance(raw, Mapping):
        raw = [{"scorer": k, **v} for k, v in raw.items() if isinstance(v, Mapping)]
    if isinstance(raw, list):
        for item in raw:
            # Per-test stats carry a "test"; the cards are per scorer over the run.
            if (
                isinstance(item, Mapping)
                and isinstance(item.get("scorer"), str)
                and item.get("test") in (None, "")
            ):
                out[item["scorer"]] = item
    return out


def build_cards(report: Mapping[str, Any], confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per-scorer card data: counts, mean with its interval, pass rate with its interval and a
    histogram of the scores. Intervals come from ``report["scorer_stats"]`` when the run has them
    (they know about repeated samples); otherwise they are computed here over the records, with
    the cases (file, test, case_id) as clusters, so repeated samples of one case are not counted
    as independent."""
    from pytest_llmeval.core.stats import cluster_mean_interval, wilson_interval

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
            mean_iv = _interval_json(
                cluster_mean_interval(list(groups.values()), confidence).to_json()
            )
        if rate_iv is None and passed + failed:
            rate_iv = _interval_json(wilson_interval(passed, passed + failed, confidence).to_json())
        lo: float | None = None
        hi: float | None = None
        hist: list[int] = []
        if scores:
            lo, hi = min(scores), max(scores)
            if lo >= 0.0 and hi <= 1.0:
                lo, hi = 0.0, 1.0  # the common [0, 1] scale: bins comparable across scorers
            hist = _histogram(scores, lo, hi)
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


@functools.cache
def _assets() -> tuple[str, str]:
    """The page's stylesheet and script (package data: plain files, so they can be linted and
    read as what they are)."""
    root = resources.files("pytest_llmeval.report").joinpath("assets")
    return (
        root.joinpath("report.css").read_text(encoding="utf-8"),
        root.joinpath("report.js").read_text(encoding="utf-8"),
    )


def _redacted_run(run: Any) -> dict[str, Any]:
    """The run metadata without credentials a URL may carry (``https://user:key@host/?key=``
    shows as ``https://***@host/?key=***``): this version's JSON report holds no secret, and the
    page must not grow one from a report written by an older one or by hand."""
    if not isinstance(run, Mapping):
        return {}
    out = dict(run)
    judge = out.get("judge")
    if isinstance(judge, Mapping) and isinstance(judge.get("base_url"), str):
        out["judge"] = {**judge, "base_url": redact_url(judge["base_url"])}
    return out


def _redacted_records(records: list[Any]) -> tuple[list[Any], list[Any]]:
    """The records with their error texts redacted (as this version writes them), and the
    distinct trace summaries they carry: each record's ``trace`` becomes ``trace_ix``, its
    summary's index in that list (the records of one test share one summary: the page holds it
    once), every text of a summary redacted again (a report written by hand or by an older
    version must not bring a secret into the page)."""
    out = []
    traces: list[Any] = []
    seen: dict[str, int] = {}
    for r in records:
        if isinstance(r, Mapping) and isinstance(r.get("error"), str):
            r = {**r, "error": redact_text(r["error"])}
        if isinstance(r, Mapping) and "trace" in r:
            trace = r["trace"]
            r = {k: v for k, v in r.items() if k != "trace"}
            if isinstance(trace, Mapping):
                key = json.dumps(trace, sort_keys=True, default=repr)
                if key not in seen:
                    seen[key] = len(traces)
                    traces.append(_redacted_texts(trace))
                r["trace_ix"] = seen[key]
        out.append(r)
    return out, traces


def _redacted_texts(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted_texts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted_texts(v) for v in value]
    return value


def render_html(report: Mapping[str, Any]) -> str:
    """The whole page for ``report`` (a JSON report dict) as one string."""
    records = report.get("records")
    if not isinstance(records, list):
        raise ReportFormatError("report", "has no 'records' list; is this a pytest-llmeval run?")
    shown, traces = _redacted_records(records)
    payload = {
        "run": _redacted_run(report.get("run")),
        "aggregates": report.get("aggregates") or {},
        "records": shown,
        "traces": traces,
        "cards": build_cards(report),
        "gates": report.get("gates") if isinstance(report.get("gates"), list) else None,
        "statistics": (
            report.get("statistics") if isinstance(report.get("statistics"), list) else None
        ),
        "comparison": (
            report.get("comparison") if isinstance(report.get("comparison"), Mapping) else None
        ),
        "agreement": (
            report.get("agreement") if isinstance(report.get("agreement"), Mapping) else None
        ),
    }
    css, js = _assets()
    # The data goes in last: nothing in it can be mistaken for a placeholder.
    return (
        _PAGE.replace("/*CSS*/", css).replace("/*JS*/", js).replace("/*DATA*/", embed_json(payload))
    )


def write_html(path: Path, report: Mapping[str, Any]) -> None:
    """Render ``report`` to ``path`` atomically (temp file in the same folder, then rename)."""
    text = render_html(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


@final
class HtmlWriter:
    """``--llm-eval-html PATH`` / ``merge --html PATH``: the page of the view's JSON document
    (the page's script reads that document, so the page is made from the JSON writer's
    rendering of the view, hook changes included)."""

    name = "HTML"

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, view: RunView) -> None:
        write_html(self.path, view.document)


def load_report(path: Path) -> dict[str, Any]:
    """Read a JSON report or a saved run (``.llmeval/runs/NNNN.json``), validated like every
    report file (:func:`pytest_llmeval.stores.run_files.validate_report`); a clear ReportFormatError
    naming the file and the field when it is not a valid one."""
    from pytest_llmeval.core.model import RunFileError
    from pytest_llmeval.stores.run_files import read_json, validate_report

    try:
        report = validate_report(read_json(path), str(path))
    except RunFileError as exc:
        at = f" (field {exc.field})" if exc.field else ""
        raise ReportFormatError(
            str(path),
            f"is not a valid pytest-llmeval JSON report{at}: {exc.problem}; write one with "
            "--llm-eval-report=PATH",
        ) from None
    return dict(report)


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
<section id="stats-sec" hidden><h2>Per-test statistics</h2><div id="stats"></div></section>
<section id="gates-sec" hidden><h2>Gates</h2><div id="gates"></div></section>
<section id="agree-sec" hidden><h2>Judge agreement</h2><div id="agree"></div></section>
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

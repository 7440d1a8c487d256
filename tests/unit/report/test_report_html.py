"""The HTML report: data embedding and escaping, card statistics, the page in a real headless
Chromium (cards, gate verdicts, filters, sorting, a row's detail, the word diff, no script
injection), the --llm-eval-html option and the ``report`` subcommand."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import Node, dump_dom, parse_dom, screenshot
from report_html_support import SCORERS, XSS, _record, _report

from pytest_llmeval.__main__ import main as cli_main
from pytest_llmeval.core.errors import ReportFormatError
from pytest_llmeval.core.stats import cluster_mean_interval, wilson_interval
from pytest_llmeval.report.html import build_cards, embed_json, render_html, write_html


def test_embed_json_cannot_close_the_script_element() -> None:
    text = embed_json({"o": XSS + "<!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"o": XSS + "<!-- & \u2028"}


def test_page_source_has_exactly_our_two_scripts_and_no_raw_record_text() -> None:
    page = render_html(_report())
    assert len(re.findall(r"<script\b", page, flags=re.I)) == 2
    assert "<script>document" not in page and "<img" not in page  # only in escaped form
    assert "\\u003c/script\\u003e\\u003cscript\\u003edocument.title='XSS'" in page
    assert "http://" not in page and "https://" not in page  # nothing to fetch: works offline


def test_nan_in_a_record_is_nulled_not_invalid_json() -> None:
    rep = _report(3, gates=False, comparison=False)
    rep["records"][0]["metadata"] = {"x": float("nan")}
    page = render_html(rep)
    island = page.split('id="llmeval-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(island)["records"][0]["metadata"] == {"x": None}


def test_cards_compute_cluster_interval_wilson_rate_and_histogram() -> None:
    recs = [
        _record(0, scorer="s", case_id="a", score=0.2, passed=False, error=None),
        _record(1, scorer="s", case_id="a", score=0.4, passed=False, error=None, index=1),
        _record(2, scorer="s", case_id="b", score=0.6, passed=True, error=None),
        _record(3, scorer="s", case_id="c", score=0.8, passed=True, error=None),
        _record(4, scorer="s", case_id="d", score=None, passed=None, error="boom"),
    ]
    (card,) = build_cards({"records": recs})
    want = cluster_mean_interval([[0.2, 0.4], [0.6], [0.8]]).to_json()
    assert card["mean"]["estimate"] == pytest.approx(0.5)
    assert card["mean"]["low"] == pytest.approx(want["low"])
    assert card["mean"]["high"] == pytest.approx(want["high"])
    rate = wilson_interval(2, 4).to_json()
    assert card["pass_rate"]["low"] == pytest.approx(rate["low"])
    assert (card["n"], card["scored"], card["passed"], card["failed"], card["errors"]) == (
        5,
        4,
        2,
        2,
        1,
    )
    assert card["hist"] == [0, 0, 1, 0, 1, 0, 1, 0, 1, 0]
    assert (card["hist_lo"], card["hist_hi"]) == (0.0, 1.0)


def test_cards_prefer_the_runs_own_scorer_stats() -> None:
    rep = {
        "records": [_record(0, scorer="s", score=0.3), _record(1, scorer="s", score=0.5)],
        "scorer_stats": [
            {
                "scorer": "s",
                "mean": {"estimate": 0.4, "low": 0.11, "high": 0.69, "confidence": 0.9},
                "pass_rate": None,
            }
        ],
    }
    (card,) = build_cards(rep)
    assert (card["mean"]["low"], card["mean"]["high"], card["mean"]["confidence"]) == (
        0.11,
        0.69,
        0.9,
    )


def test_render_refuses_a_non_report() -> None:
    with pytest.raises(ReportFormatError, match="no 'records' list"):
        render_html({"run": {}})


def test_report_subcommand_renders_a_saved_run(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_report(9)), encoding="utf-8")
    out = tmp_path / "out" / "r.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "report", str(run), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8") == render_html(_report(9))


def test_report_subcommand_explains_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert cli_main(["report", str(bad)]) == 2
    assert f"{bad}: is not a valid pytest-llmeval JSON report: not valid JSON" in (
        capsys.readouterr().err
    )
    bad.write_text('{"records": 3}', encoding="utf-8")
    assert cli_main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a valid pytest-llmeval JSON report (field records): 3 is not of type 'array'" in err
    bad.write_text(
        '{"records": [{"file": "f", "test": "t", "case_id": null, "scorer": "s", '
        '"score": 1e999, "passed": null}]}',
        encoding="utf-8",
    )
    assert cli_main(["report", str(bad)]) == 2
    assert "does not fit a float" in capsys.readouterr().err
    assert cli_main(["report", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli_main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err


def _rows(dom: Node) -> list[list[str]]:
    spacer = dom.by_id("spacer")
    return [
        [c.text for c in row.children if isinstance(c, Node)]
        for row in spacer.find_all("div", "row")
    ]


def test_browser_cards_gates_and_comparison(page: Path) -> None:
    raw = dump_dom(page)
    dom = parse_dom(raw)
    body = dom.find_all("body")[0]
    assert body.attrs.get("data-ready") == "1", "the page script did not finish"
    assert dom.find_all("title")[0].text == "pytest-llmeval report"  # no injected script ran
    cards = {c.attrs["data-scorer"]: c for c in dom.find_all("div", "card")}
    assert sorted(cards) == sorted(SCORERS)
    expected = {c["scorer"]: c for c in build_cards(_report())}
    for name, card in cards.items():
        mean = card.find_all("div", "mean")[0].text
        assert mean == str(round(expected[name]["mean"]["estimate"], 3)).rstrip("0").rstrip(".")
        assert "95% CI [" in card.find_all("div", "ci")[0].text
        assert len(card.find_all("div", "hist")[0].find_all("div")) == 1 + 10
    verdicts = [
        (g.find_all("td")[1].text, g.find_all("span", "badge")[0].text)
        for g in dom.find_all("tr", "gate")
    ]
    assert verdicts == [("llm_judge", "fail"), ("exact_match", "pass"), ("rouge_l", "inconclusive")]
    first_gate = dom.find_all("tr", "gate")[0]
    assert [d.text for d in first_gate.find_all("div", "check")] == [
        "mean \u2265 0.9: 0.5 [0.4, 0.6] \u2192 fail"
    ]
    assert first_gate.find_all("td")[2].text == "tests/test_qa.py::test_answers"
    assert first_gate.find_all("td")[4].text == "20 (2 unscored)"
    (stat,) = dom.find_all("tr", "stat")
    assert [td.text for td in stat.find_all("td")] == [
        "tests/test_qa.py::test_answers",
        "llm_judge",
        "20",
        "20",
        "2",
        "0.458 [0.327, 0.59]",
        "38.9% [20.3%, 61.4%]",
        "1",
    ]
    assert "hidden" not in dom.by_id("gates-sec").attrs
    (cmp_row,) = dom.find_all("tr", "cmp-scorer")
    assert [td.text for td in cmp_row.find_all("td")][:4] == ["llm_judge", "0.6", "0.5", "-0.1"]
    assert dom.by_id("count").text == "60 of 60 shown"
    # virtualised: only the rows in view (plus a margin) exist, the spacer has the full height
    assert 10 < len(_rows(dom)) < 60
    assert "height: 1800px" in dom.by_id("spacer").attrs["style"]
    assert "hidden" in dom.by_id("detail").attrs
    # the injected markup is nowhere an element
    assert not [n for n in dom.by_id("spacer").iter() if n.tag in {"img", "script"}]


def _expected(pred: Any) -> list[dict[str, Any]]:
    return [r for r in _report()["records"] if pred(r)]


@pytest.mark.parametrize(
    ("fragment", "pred"),
    [
        ("filter=failed", lambda r: r["passed"] is False and r["error"] is None),
        ("filter=errored", lambda r: r["error"] is not None),
        ("filter=passed", lambda r: r["passed"] is True),
        # records 0..8 have a baseline 0.1 higher (the errored one, 5, has no delta)
        ("filter=regressed", lambda r: int(r["case_id"][1:]) < 3 and r["error"] is None),
        (
            "scorer=llm_judge&filter=failed",
            lambda r: r["scorer"] == "llm_judge" and r["passed"] is False,
        ),
        ("q=QUESTION%2012", lambda r: "question 12" in r["inputs"]["input"]),
    ],
)
def test_browser_filters_from_the_hash(page: Path, fragment: str, pred: Any) -> None:
    dom = parse_dom(dump_dom(page, fragment))
    want = _expected(pred)
    assert want, "the fixture must make this filter non-trivial"
    assert dom.by_id("count").text == f"{len(want)} of 60 shown"
    rows = _rows(dom)
    shown = [(row[1], row[2]) for row in rows]
    assert shown == [(f"{r['file']}::{r['test']}[{r['case_id']}]", r["scorer"]) for r in want]


def test_browser_sorts_by_score_descending(page: Path) -> None:
    # a tall window, so the virtualised list renders every row
    dom = parse_dom(dump_dom(page, "sort=-score", window="1280,4000"))
    rows = _rows(dom)
    assert len(rows) == 60
    scores = [float(row[4]) for row in rows if row[4] != "\u2013"]
    assert scores == sorted(scores, reverse=True) and len(scores) == 55
    assert [row[0] for row in rows[55:]] == ["error"] * 5  # unscored rows last
    head = [s for s in dom.by_id("thead").find_all("span") if "sorted" in s.classes]
    assert [s.attrs["data-col"] for s in head] == ["score"]


def test_browser_row_detail_shows_texts_and_word_diff(page: Path, tmp_path: Path) -> None:
    dom = parse_dom(dump_dom(page, "open=1"))
    detail = dom.by_id("detail")
    assert "hidden" not in detail.attrs
    assert detail.find_all("pre", "in-input")[0].text == "question 1"
    assert detail.find_all("pre", "in-expected")[0].text == "1 apples"
    assert detail.find_all("pre", "in-output")[0].text == "there are 1 apples in the basket"
    assert detail.find_all("pre", "rationale")[0].text == "rationale 1"
    usage = [dd.text for dd in detail.find_all("dd")]
    assert "1 call, 100 prompt + 20 completion tokens, $0.00020" in usage
    (diff,) = detail.find_all("pre", "diff")
    assert [n.text for n in diff.find_all("del")] == ["pears"]
    assert [n.text for n in diff.find_all("ins")] == ["apples"]
    assert diff.text == "there are 1 pearsapples in the basket"
    # the clicked row is highlighted
    (opened,) = dom.by_id("spacer").find_all("div", "open")
    assert opened.attrs["data-ix"] == "1"
    png = screenshot(page, tmp_path / "report.png", "open=1")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_browser_hostile_output_is_text(page: Path) -> None:
    dom = parse_dom(dump_dom(page, "open=4"))
    assert dom.find_all("title")[0].text == "pytest-llmeval report"
    assert dom.by_id("detail").find_all("pre", "in-output")[0].text == XSS
    assert not [n for n in dom.by_id("detail").iter() if n.tag in {"img", "script"}]


def test_browser_without_gates_or_comparison(tmp_path: Path) -> None:
    path = tmp_path / "plain.html"
    rep = _report(12, gates=False, comparison=False)
    for r in rep["records"]:
        del r["inputs"]
    write_html(path, rep)
    dom = parse_dom(dump_dom(path, "open=0&filter=regressed"))
    assert "hidden" in dom.by_id("gates-sec").attrs
    assert "hidden" in dom.by_id("stats-sec").attrs
    assert "hidden" in dom.by_id("cmp-sec").attrs
    assert dom.by_id("count").text == "0 of 12 shown"
    assert "The judged texts are not in this report." in dom.by_id("detail").text


def test_browser_repeated_samples_and_gated_records(tmp_path: Path) -> None:
    path = tmp_path / "samples.html"
    recs = [
        _record(0, sample=0, gated=True, judge_models=["served-model"]),
        _record(0, sample=1, gated=True, judge_models=[]),
    ]
    write_html(path, {"records": recs})
    dom = parse_dom(dump_dom(path, "open=1"))
    head = [s.text for s in dom.by_id("thead").find_all("span")]
    assert head[3] == "#/sample"
    assert [row[3] for row in _rows(dom)] == ["0/0", "0/1"]
    detail = dom.by_id("detail")
    assert detail.find_all("h3")[0].text.endswith("exact_match #0 sample 1")
    terms = [dt.text for dt in detail.find_all("dt")]
    assert "gated" in terms and "judge model" not in terms
    dom0 = parse_dom(dump_dom(path, "open=0"))
    kv = dict(
        zip(
            [dt.text for dt in dom0.by_id("detail").find_all("dt")],
            [dd.text for dd in dom0.by_id("detail").find_all("dd")],
            strict=True,
        )
    )
    assert kv["judge model"] == "served-model"


def test_credentials_in_the_judge_url_do_not_reach_the_page() -> None:
    """A report written by an older version (or by hand) may hold them: in its judge URL and in
    its records' error texts."""
    rep = _report(3, gates=False, comparison=False)
    url = "https://bob:sk-SECRET1@judge.example:8443/v1?api_key=sk-SECRET2"
    rep["run"]["judge"] = {"model": "m", "base_url": url}
    rep["records"][0]["error"] = f"JudgeError: judge error (endpoint {url}): rejected"
    page = render_html(rep)
    assert "SECRET" not in page and "bob" not in page
    assert "https://***@judge.example:8443/v1?api_key=***" in page
    shown = "https://***@judge.example:8443/v1?api_key=***"
    assert f"JudgeError: judge error (endpoint {shown}): rejected" in page


def test_missing_chromium_skips_locally_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import browser

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no chromium
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium unavailable: no `chromium` on PATH"):
        browser.chromium_path()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium unavailable under CI"):
        browser.chromium_path()


_INTERACT = """<script>
(function () {
  function mark(k, v) { document.body.setAttribute("data-t-" + k, String(v)); }
  function start() {
    var st = document.getElementById("f-status");
    st.value = "failed"; st.dispatchEvent(new Event("change"));
    mark("count-failed", document.getElementById("count").textContent);
    mark("hash-failed", location.hash);
    st.value = "all"; st.dispatchEvent(new Event("change"));
    var vp = document.getElementById("viewport");
    var tries = 0;
    function scrollThere() { vp.scrollTop = 300 * 30; vp.dispatchEvent(new Event("scroll")); }
    function scrolled() {
      // The browser clamps scrollTop while the list is not laid out yet, and the page renders
      // on the next animation frame, which headless virtual time may hold back: scroll again
      // until both happened (a list that never renders from row 290 still fails below).
      var rows = document.querySelectorAll("#spacer .row");
      var pending = vp.scrollTop < 300 * 30 - 1 || !rows.length
        || rows[0].getAttribute("data-ix") === "0";
      if (pending && tries++ < 30) { scrollThere(); setTimeout(scrolled, 100); return; }
      mark("scroll-first", rows[0].getAttribute("data-ix"));
      mark("scroll-n", rows.length);
      rows[15].click();
      mark("open", document.getElementById("detail").getAttribute("data-ix"));
      mark("hash-open", location.hash);
      var q = document.getElementById("f-q");
      q.value = "question 12"; q.dispatchEvent(new Event("input"));
      setTimeout(function () {
        mark("count-q", document.getElementById("count").textContent);
        document.querySelector('#thead span[data-col="score"]').click();
        mark("hash-sort", location.hash);
        mark("done", 1);
      }, 400);
    }
    scrollThere();
    setTimeout(scrolled, 300);
  }
  // after the page's own start-up (layout included), not while it is still loading
  if (document.readyState === "complete") setTimeout(start, 100);
  else window.addEventListener("load", function () { setTimeout(start, 100); });
})();
</script>
"""


def test_browser_controls_scroll_and_click(tmp_path: Path) -> None:
    """The page's own event handlers in the browser: the status select, scrolling the
    virtualised list, clicking a row, typing a search, clicking a column header (a script
    appended to the page drives them; --virtual-time-budget lets its timers run)."""
    rep = _report(600)
    head, tail = render_html(rep).rsplit("</body>", 1)
    path = tmp_path / "interact.html"
    path.write_text(head + _INTERACT + "</body>" + tail, encoding="utf-8")
    dom = parse_dom(dump_dom(path, extra=["--virtual-time-budget=5000"]))
    t = {k[7:]: v for k, v in dom.find_all("body")[0].attrs.items() if k.startswith("data-t-")}
    assert t["done"] == "1", t
    n_failed = sum(1 for r in rep["records"] if r["passed"] is False and r["error"] is None)
    assert t["count-failed"] == f"{n_failed} of 600 shown"
    assert t["hash-failed"] == "#filter=failed"
    # scrolled to row 300: rendering starts 10 rows above it and stays bounded
    assert t["scroll-first"] == "290" and 20 < int(t["scroll-n"]) < 60
    assert t["open"] == "305" and t["hash-open"] == "#open=305"
    n_q = sum(1 for r in rep["records"] if "question 12" in r["inputs"]["input"])
    assert t["count-q"] == f"{n_q} of 600 shown"
    assert t["hash-sort"] == "#q=question%2012&sort=-score&open=305"


def test_browser_judge_agreement_card_and_disagreements(tmp_path: Path) -> None:
    # issue 20: the confusion matrix and every disagreement with its output, label and reason
    from pytest_llmeval.analysis.agreement import scorer_agreement
    from pytest_llmeval.core.records import ScoreRecord

    def rec(case: str, score: float, label: bool) -> ScoreRecord:
        return ScoreRecord(
            "t.py",
            "test_x",
            case,
            "factuality",
            0,
            score,
            0.5,
            None,
            score >= 0.5,
            False,
            0.0,
            rationale=f"because {case}",
            label=label,
            inputs={"output": f"<b>answer {case}</b>"},
        )

    records = [rec("p0", 1.0, True), rec("p1", 0.0, True), rec("f0", 1.0, False)]
    records += [rec("f1", 0.0, False), rec("f2", 0.0, False)]
    agreement = scorer_agreement("factuality", records, uses_judge=True).to_json()
    path = tmp_path / "agree.html"
    write_html(
        path,
        {"records": [r.to_json() for r in records], "agreement": {"factuality": agreement}},
    )
    dom = parse_dom(dump_dom(path))
    sec = dom.by_id("agree-sec")
    assert "hidden" not in sec.attrs
    card = sec.find_all("div", "agree")[0]
    assert card.find_all("h3")[0].text == "factuality"
    assert "5 labelled, 5 with both verdicts" in card.text
    cells = [td.text for td in card.find_all("td")]
    assert cells == ["1", "1", "1", "2"]  # label pass: 1 / 1; label fail: 1 / 2
    assert "accuracy 60.0%" in card.text
    rows = sec.find_all("tr", "disagreement")
    texts = [[td.text for td in row.find_all("td")] for row in rows]
    assert [t[0] for t in texts] == ["test_x[f0]", "test_x[p1]"]
    assert texts[0][1:] == ["fail", "pass (1)", "<b>answer f0</b>", "because f0"]
    assert not sec.find_all("b")  # the output is text, never markup


def test_browser_a_hand_written_trace_is_text_and_keeps_no_secret(tmp_path: Path) -> None:
    """A trace summary from a report written by hand (or an older version): its texts are
    redacted again for the page and shown as text, never markup; records of one test share
    one copy of their summary in the page."""
    trace = {
        "spans": 2,
        "model_calls": 0,
        "tool_calls": 1,
        "agent_steps": 0,
        "errors": 1,
        "input_tokens": 0,
        "output_tokens": 0,
        "duration_s": 0.25,
        "dropped": 0,
        "unfinished": 0,
        "trace_id": None,
        "root_span_id": None,
        "tree": [
            {
                "span_id": "a",
                "name": "agent",
                "kind": "agent",
                "depth": 0,
                "parent": None,
                "start_s": 0.0,
                "duration_s": 0.25,
            },
            {
                "span_id": "b",
                "name": "fetch",
                "kind": "tool",
                "depth": 1,
                "parent": 0,
                "start_s": 0.1,
                "duration_s": 0.05,
                "tool": "fetch",
                "result": XSS + " https://user:hunter2@api.example/v1?api_key=SEKRET",
                "error": "HTTPError: Authorization: Bearer tok-123456789",
                "cut": {"result": 40},
            },
        ],
        "tree_cut": 0,
    }
    path = tmp_path / "trace.html"
    write_html(path, {"records": [_record(0, trace=trace), _record(1, trace=trace)]})
    source = path.read_text("utf-8")
    assert "hunter2" not in source and "SEKRET" not in source and "tok-123456789" not in source
    data = json.loads(source.split('id="llmeval-data">', 1)[1].split("</script>", 1)[0])
    assert len(data["traces"]) == 1 and [r["trace_ix"] for r in data["records"]] == [0, 0]
    dom = parse_dom(dump_dom(path, "open=1"))
    detail = dom.by_id("detail")
    (tree,) = detail.find_all("table", "span-tree")
    (result,) = tree.find_all("div", "result")
    assert result.text == (
        f"result {XSS} https://***@api.example/v1?api_key=*** [40 more chars cut]"
    )
    (error,) = tree.find_all("div", "error")
    assert error.text == "error HTTPError: Authorization: Bearer ***"
    assert not [n for n in detail.iter() if n.tag in {"img", "script"}]
    assert detail.find_all("p", "trace-sum")[0].text == (
        "2 spans: 0 model calls, 1 tool call, 1 error; tokens 0 in + 0 out; 250.0 ms"
    )


def test_browser_one_case_interval_reads_n_a(tmp_path: Path) -> None:
    """One case has no mean interval: the card says ``n/a (1 case)``, the words of the terminal
    and the Markdown summary."""
    path = tmp_path / "one.html"
    write_html(path, {"records": [_record(0, scorer="s", case_id="a", score=0.5, error=None)]})
    (card,) = build_cards({"records": [_record(0, scorer="s", case_id="a", score=0.5, error=None)]})
    assert card["mean"]["n"] == 1 and card["mean"]["low"] is None
    dom = parse_dom(dump_dom(path, ""))
    (ci,) = dom.by_id("cards").find_all("div", cls="ci")
    assert ci.text == "mean, interval n/a (1 case)"

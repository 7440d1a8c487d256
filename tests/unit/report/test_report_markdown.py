"""The Markdown summary for CI (``--llm-eval-markdown``, ``merge --markdown``, the GitHub step
summary), read the way GitHub reads it: rendered by a real CommonMark renderer with GFM tables
(markdown-it-py, ``gfm-like``: tables, strikethrough, autolinks, raw HTML on), and checked by the
cells of the tables it parses to, never by matching strings in the text.
"""

from __future__ import annotations

from typing import Any

from report_markdown_support import MD, _markup_tokens, parse

from pytest_llmeval.analysis.compare import compare_runs
from pytest_llmeval.analysis.verdict import decide
from pytest_llmeval.core.model import Instrument, Run
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.report.markdown import LIMIT, markdown_size, render_markdown
from pytest_llmeval.report.view import Baseline, RunView


def _record(case: str, scorer: str, score: float, output: str, digest: str) -> ScoreRecord:
    return ScoreRecord(
        file="test_big.py",
        test="test_big",
        case_id=case,
        scorer=scorer,
        index=0,
        score=score,
        min=None,
        max=None,
        passed=None,
        cached=False,
        duration_s=0.0,
        inputs={"output": output},
        instrument=digest,
    )


def _view(
    cases: dict[str, list[tuple[str, float, float]]],
    *,
    label: str = "run 7",
    versions: tuple[str, str] = ("1", "1"),
) -> tuple[RunView, Any]:
    """A baseline and a current run of ``{scorer: [(case id, baseline score, current score)]}``,
    compared (a real comparison, with fewer Monte Carlo resamples to keep it quick).
    ``versions``: of the scorers' instruments in the baseline and the current run."""
    # one digest per scorer and version: the same instrument on both sides when the versions
    # are equal
    instruments = [
        {
            f"v{version}-{k}": Instrument(f"v{version}-{k}", name, version, True, (0.0, 1.0))
            for k, name in enumerate(cases)
        }
        for version in versions
    ]
    sides: dict[str, list[ScoreRecord]] = {"base": [], "cur": []}
    b_version, c_version = versions
    for k, (name, rows) in enumerate(cases.items()):
        for case, b, c in rows:
            old, new = f"old answer to {case}", f"new answer to {case}"
            sides["base"].append(_record(case, name, b, old, f"v{b_version}-{k}"))
            sides["cur"].append(_record(case, name, c, new, f"v{c_version}-{k}"))
    base = Run(records=tuple(sides["base"]), instruments=instruments[0])
    cur = Run(records=tuple(sides["cur"]), instruments=instruments[1])
    cmp = compare_runs(base, cur, resamples=200, baseline_label=label, current_label="this run")
    view = RunView(
        run=cur,
        verdict=decide(cur, [], cmp),
        comparison=cmp,
        baseline=Baseline(label=label, choice="given by path", path="base.json", run=base),
    )
    return view, cmp


def test_the_summary_is_cut_to_fit_a_pull_request_comment() -> None:
    """3,000 cases of each of two scorers, 2,000 of them worse and 1,000 better: about 1.5 MB
    of tables, cut to GitHub's limit with the least important detail first."""
    cases: dict[str, list[tuple[str, float, float]]] = {}
    for name in ("accuracy", "helpfulness"):
        rows = []
        for i in range(3000):
            case = f"case-{i:05d}-" + "x" * 80
            if i % 3:
                rows.append((case, 0.9, 0.9 - (i + 1) / 4000))
            else:
                rows.append((case, 0.1, 0.1 + (i + 1) / 4000))
        cases[name] = rows
    view, cmp = _view(cases)
    md = render_markdown(view, full_report="reports/run.json")
    assert markdown_size(md) <= LIMIT
    assert len(md) <= LIMIT
    doc = parse(md)
    # the tables come whole: every scorer and every comparison row
    assert doc.table("Scorers").column("scorer") == ["accuracy", "helpfulness"]
    assert doc.table("Against the baseline").column("verdict") == ["regressed", "regressed"]
    # the improved cases go first, whole; then the regressed are cut, each scorer keeping its
    # biggest
    assert "Improved cases" not in doc.headings
    shown = doc.table("Regressed cases")
    per_scorer = {name: [r[1] for r in shown.rows if r[0] == name] for name in cases}
    counts = {name: len(rows) for name, rows in per_scorer.items()}
    assert abs(counts["accuracy"] - counts["helpfulness"]) <= 1
    assert 50 < sum(counts.values()) < 2000
    for s in cmp.scorers:
        assert len(s.regressed) == 2000
        assert per_scorer[s.name] == [c.case for c in s.regressed[: counts[s.name]]]
    left = 4000 - sum(counts.values())
    (note,) = doc.quotes
    assert note == (
        f"Cut to fit a GitHub comment (65,536 characters). Left out: {left:,} of 4,000 "
        "regressed cases; all 2,000 improved cases. Everything is in reports/run.json."
    )
    # the note comes right after the header, and the table says where its rows went
    assert md.index("Cut to fit") < md.index("### Scorers")
    assert f"{left:,} more regressed cases left out here: see the note at the top." in (
        doc.paragraphs
    )


def test_without_a_whole_report_the_note_says_how_to_write_one() -> None:
    rows = [(f"c{i:04d}-" + "y" * 150, 0.9, 0.2) for i in range(1000)]
    view, _ = _view({"accuracy": rows})
    md = render_markdown(view)
    assert markdown_size(md) <= LIMIT
    (note,) = parse(md).quotes
    assert note.endswith(
        "Write the whole report with --llm-eval-report=PATH (JSON) or --llm-eval-html=PATH."
    )


def test_characters_outside_the_bmp_count_twice() -> None:
    """GitHub may count UTF-16 code units: a summary of emoji case ids still fits when they
    count twice."""
    rows = [(f"{i:04d}" + "😀" * 60, 0.9, 0.2) for i in range(1500)]
    view, _ = _view({"accuracy": rows})
    md = render_markdown(view)
    assert len(md.encode("utf-16-le")) // 2 <= LIMIT
    assert len(md) < LIMIT - 1000  # so the code points alone would have allowed more


#: case id -> how its cell must read (one code span, nothing else)
HOSTILE = {
    "pipe|pipe": "pipe|pipe",
    "tick`tick": "tick`tick",
    "``fence``": "``fence``",
    "<script>alert(1)</script>": "<script>alert(1)</script>",
    "line\nbreak\r\nthree": "line break three",
    "[link](https://example.com/x)": "[link](https://example.com/x)",
    "@octocat #12 www.example.com": "@octocat #12 www.example.com",
    "**bold** _it_ ~~gone~~ $x$ &amp;": "**bold** _it_ ~~gone~~ $x$ &amp;",
    "rtl\u202eexe.txt": "rtl\\u202eexe.txt",
    "back\\|slash": "back\\|slash",
    "ends with`": "ends with`",
    "   spaced    out  ": " spaced out ",
    "<!-- comment": "<!-- comment",
}


def test_hostile_case_ids_scorer_names_and_outputs_stay_text() -> None:
    scorer = "judge|<b>`x`</b>"
    rows = [(case, 0.9, 0.9 - (k + 1) / 100) for k, case in enumerate(HOSTILE)]
    view, cmp = _view({scorer: rows}, label="[base](javascript:alert(1)) @org/team")
    md = render_markdown(view)
    doc = parse(md)
    assert _markup_tokens(doc) == []
    html = MD.render(md)
    assert "<script>" not in html and "<b>" not in html and "<!--" not in html
    table = doc.table("Regressed cases")
    by_case = {row[1]: (row, kinds) for row, kinds in zip(table.rows, table.kinds, strict=True)}
    assert sorted(by_case) == sorted(f"test_big.py::test_big[{s}]" for s in HOSTILE.values())
    for shown in HOSTILE.values():
        row, kinds = by_case[f"test_big.py::test_big[{shown}]"]
        assert row[0] == scorer
        assert row[5] == f"old answer to {shown}".replace("  ", " ").strip()
        assert row[6] == f"new answer to {shown}".replace("  ", " ").strip()
        # scorer, case, was and now: each one code span and nothing else
        for i in (0, 1, 5, 6):
            assert kinds[i] == ["code_inline"], (row[i], kinds[i])
    # the baseline's label is shown as text, not as a link or a mention
    said = next(p for p in doc.paragraphs if p.startswith("baseline "))
    assert said == "baseline [base](javascript:alert(1)) @org/team (given by path; base.json)."
    assert doc.table("Scorers").column("scorer") == [scorer]
    assert doc.table("Against the baseline").column("scorer") == [scorer]
    assert [s.name for s in cmp.scorers] == [scorer]


def test_a_comparison_that_cannot_stand_never_reads_as_no_regression() -> None:
    """Another instrument (the scorer's version changed): its drop is not a regression the
    comparison can call, and not "no regression" either."""
    rows = [(f"c{i}", 0.9, 0.3) for i in range(10)]
    view, cmp = _view({"accuracy": rows}, versions=("1", "2"))
    assert [s.verdict for s in cmp.scorers] == ["incomparable"]
    doc = parse(render_markdown(view))
    facts = doc.paragraphs[0].split(" · ")
    assert '1 comparison problem: the comparison cannot stand for "no regression"' in facts
    assert "no significant regression against the baseline" not in facts
    row = doc.table("Against the baseline").row(scorer="accuracy")
    assert row["verdict"] == "incomparable (would be: regressed)"
    assert row["instrument"] == 'changed: version: "1" -> "2"'
    (problem,) = doc.fences["Comparison notes"]
    assert problem.startswith("accuracy: measured with another instrument than the baseline")


def test_a_shard_whose_tests_failed_says_fail() -> None:
    run = Run(records=(_record("c1", "accuracy", 0.5, "x", "v1-0"),), shard=(2, 3), exitstatus=1)
    view = RunView(run=run, verdict=decide(run, []))
    doc = parse(render_markdown(view))
    assert doc.headings[0] == "❌ pytest-llmeval: FAIL (shard 2 of 3)"
    assert doc.fences["Why the shard fails"] == ["pytest exit status 1: tests failed"]
    passing = Run(records=run.records, shard=(2, 3), exitstatus=0)
    doc = parse(render_markdown(RunView(run=passing, verdict=decide(passing, []))))
    assert doc.headings[0] == "⏳ pytest-llmeval: PARTIAL (shard 2 of 3)"


def test_many_gates_keep_the_failing_ones() -> None:
    """1,500 gated tests, every other one failing: the gate rows that fit are the failing ones,
    and the totals line under the table still counts every gate."""
    from pytest_llmeval.analysis.gates import evaluate_gates
    from pytest_llmeval.core.model import TestPlan
    from pytest_llmeval.core.stats import GateSpec

    records, plans = [], []
    for t in range(1500):
        test = f"test_{t:04d}_" + "n" * 40
        score = 0.2 if t % 2 == 0 else 0.9
        for case in ("a", "b"):
            records.append(
                ScoreRecord(
                    file="test_many.py",
                    test=test,
                    case_id=case,
                    scorer="accuracy",
                    index=0,
                    score=score,
                    min=0.5,
                    max=None,
                    passed=score >= 0.5,
                    cached=False,
                    duration_s=0.0,
                    where="test_many.py:1",
                )
            )
        spec = GateSpec("accuracy", min_mean=0.5, source="marker", score_range=(0.0, 1.0))
        plans.append(
            TestPlan(
                "test_many.py",
                test,
                (spec,),
                frozenset({"accuracy"}),
                2,
                1,
                frozenset({("a", 0), ("b", 0)}),
            )
        )
    run = Run(records=tuple(records), plan=tuple(plans))
    outcomes = evaluate_gates(run)
    assert [o.verdict for o in outcomes].count("fail") == 750
    view = RunView(run=run, outcomes=tuple(outcomes), verdict=decide(run, outcomes))
    md = render_markdown(view)
    assert markdown_size(md) <= LIMIT
    doc = parse(md)
    gates = doc.table("Gates")
    assert 100 < len(gates.rows) < 750
    assert set(gates.column("gate")) == {"FAIL"}
    # shown in the run's order
    assert gates.column("test") == sorted(gates.column("test"))
    assert "gates: 750 fail, 750 pass: the run fails" in doc.paragraphs
    (note,) = doc.quotes
    assert note.startswith(
        f"Cut to fit a GitHub comment (65,536 characters). Left out: {1500 - len(gates.rows):,} "
        "of 1,500 gates."
    )
    assert doc.fences["Why the run fails"] == ["750 of 1500 gate(s) do not pass (750 fail)"]

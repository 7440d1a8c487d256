from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from pytest_llmeval.core.records import ScoreRecord, aggregate
from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings
from pytest_llmeval.report.json_report import build_report, git_commit, write_report
from pytest_llmeval.report.terminal import format_table, totals_line, write_summary


class FakeTR:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_sep(self, sep: str, title: str) -> None:
        self.lines.append(f"== {title} ==")

    def write_line(self, line: str, **markup: Any) -> None:
        self.lines.append(line)


def recs(n_fail: int) -> list[ScoreRecord]:
    out = [
        ScoreRecord(
            "t.py",
            "test_a",
            str(i),
            "s",
            0,
            0.1,
            0.5,
            None,
            False,
            False,
            0.01,
            rationale="r" * 400,
        )
        for i in range(n_fail)
    ]
    out.append(ScoreRecord("t.py", "test_b", None, "s", 0, 0.9, 0.5, None, True, True, 0.01))
    return out


def test_table_alignment() -> None:
    lines = format_table(list(aggregate(recs(2)).values()))
    assert lines[0].split() == [
        "scorer",
        "n",
        "mean",
        "min",
        "max",
        "passed",
        "failed",
        "errors",
        "cached",
        "calls",
        "tokens",
        "cost",
        "time",
    ]
    assert lines[1].split()[:9] == ["s", "3", "0.367", "0.100", "0.900", "1", "2", "0", "1"]


def _judged(case: str, calls: int, cost: float | None) -> ScoreRecord:
    return ScoreRecord(
        "t.py", "test_j", case, "s", 0, 0.9, 0.5, None, True, False, 0.01,
        judge_calls=calls, cost_usd=cost,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("records", "line"),
    [
        (
            [_judged("a", 1, None)],
            "1 score, 0 from cache, 1 judge call (1 call at an unknown cost: see llm_eval_prices)",
        ),
        (
            [_judged("a", 1, None), _judged("b", 1, None)],
            "2 scores, 0 from cache, 2 judge calls (2 calls at an unknown cost: see "
            "llm_eval_prices)",
        ),
        (
            [_judged("a", 1, 0.5), _judged("b", 1, None)],
            "2 scores, 0 from cache, 2 judge calls, $0.5000 (1 call at an unknown cost: see "
            "llm_eval_prices)",
        ),
        ([_judged("a", 0, None)], "1 score, 0 from cache, 0 judge calls"),
    ],
)
def test_totals_line_singular_and_plural(records: list[ScoreRecord], line: str) -> None:
    assert totals_line(records, list(aggregate(records).values())) == line


def test_default_verbosity_caps_failures_and_shortens_reasons() -> None:
    tr = FakeTR()
    write_summary(tr, recs(25), verbosity=0)
    assert "  ... and 5 more (use -v to see all)" in tr.lines
    reasons = [line for line in tr.lines if line.strip().startswith("reason:")]
    cut = "      reason: " + "r" * 160 + "… (240 more chars; --llm-eval-report keeps it whole)"
    assert reasons == [cut] * 20


def test_verbose_shows_everything() -> None:
    tr = FakeTR()
    write_summary(tr, recs(25), verbosity=2)
    assert sum(1 for line in tr.lines if line.startswith("  t.py::test_a[")) == 25 + 25
    assert any("r" * 400 in line for line in tr.lines)
    assert "all scores:" in tr.lines


def test_quiet_is_one_line_per_scorer() -> None:
    tr = FakeTR()
    write_summary(tr, recs(1), verbosity=-1)
    assert tr.lines == ["== llm-eval summary ==", "s: n=2 mean=0.500 passed=1 failed=1"]


def test_build_and_write_report_atomically(tmp_path: Path) -> None:
    settings = Settings(judge=JudgeSettings(model="m", api_key=Secret("sk-SECRET")))
    report = build_report(
        recs(1), started=1.0, settings=settings, rootdir=tmp_path, exitstatus=1, workers=2
    )
    assert report["run"]["judge"]["model"] == "m" and report["run"]["workers"] == 2
    assert report["run"]["git_commit"] is None  # tmp_path is not a git checkout
    out = tmp_path / "sub" / "r.json"
    write_report(out, report)
    text = out.read_text()
    assert "SECRET" not in text
    assert json.loads(text)["aggregates"]["s"]["n"] == 2
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]  # no temp file left


def test_write_report_leaves_old_file_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(ValueError):
        write_report(out, {"bad": float("nan")})
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["r.json"]


def test_git_commit_of_this_checkout() -> None:
    root = ROOT
    if not (root / ".git").exists():
        pytest.skip("not running from a git checkout")
    commit = git_commit(root)
    assert commit is not None and len(commit) == 40
    int(commit, 16)  # hexadecimal


def test_report_names_this_projects_version_not_the_other_pytest_llmeval(tmp_path: Path) -> None:
    # "pytest-llmeval" on PyPI is another project: its metadata must not stand for ours
    import pytest_llmeval

    versions = build_report([], started=1.0, settings=None, rootdir=tmp_path, exitstatus=0)["run"][
        "versions"
    ]
    assert versions["pytest-llmeval-suite"] == pytest_llmeval.__version__
    assert "pytest-llmeval" not in versions


def _long_failure(rationale: str, error: str | None = None) -> list[ScoreRecord]:
    return [
        ScoreRecord(
            "t.py", "test_a", None, "s", 0, 0.1, 0.5, None, False, False, 0.01, rationale=rationale
        ),
        ScoreRecord(
            "t.py", "test_e", None, "s", 0, None, None, None, None, False, 0.0, error=error
        ),
    ]


@pytest.mark.parametrize(
    ("verbosity", "shown"), [(-1, None), (0, 160), (1, 1000), (2, 4000), (3, 4000)]
)
def test_a_rationale_is_bounded_at_every_verbosity(verbosity: int, shown: int | None) -> None:
    # a judge can reply with pages: the terminal shows a bounded part, the JSON report keeps it
    tr = FakeTR()
    write_summary(tr, _long_failure("w" * 10_000), verbosity, report_written=True)
    reasons = [line for line in tr.lines if line.lstrip().startswith("reason:")]
    if shown is None:  # -q: no failing cases at all
        assert reasons == []
        return
    assert reasons == [
        f"      reason: {'w' * shown}… ({10_000 - shown} more chars; see the JSON report)"
    ]
    assert max(len(line) for line in tr.lines) < shown + 200


@pytest.mark.parametrize(("verbosity", "shown"), [(0, 300), (1, 1000), (2, 4000)])
def test_a_scoring_error_is_bounded_at_every_verbosity(verbosity: int, shown: int) -> None:
    tr = FakeTR()
    write_summary(tr, _long_failure("short", error="JudgeError: " + "e" * 9_988), verbosity)
    (line,) = [line for line in tr.lines if line.startswith("  t.py::test_e s: ")]
    text = ("JudgeError: " + "e" * 9_988)[:shown]
    more = f"… ({10_000 - shown} more chars; --llm-eval-report keeps it whole)"
    assert line == f"  t.py::test_e s: {text}{more}"


def test_a_short_rationale_is_shown_whole() -> None:
    tr = FakeTR()
    write_summary(tr, _long_failure("the answer\nis   wrong"), 0)
    assert "      reason: the answer is wrong" in tr.lines

"""The Markdown summary for CI (``--llm-eval-markdown``, ``merge --markdown``, the GitHub step
summary), read the way GitHub reads it: rendered by a real CommonMark renderer with GFM tables
(markdown-it-py, ``gfm-like``: tables, strikethrough, autolinks, raw HTML on), and checked by the
cells of the tables it parses to, never by matching strings in the text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from report_markdown_support import MD, Doc, _markup_tokens, parse

from pytest_llmeval.cli.merge import main as merge_main
from pytest_llmeval.testing import OpenAITestServer, text

CONFTEST = """
from pytest_llmeval import scorer

@scorer(name="quality", register=False)
def quality(output):
    return float(output)

@scorer(name="latency_s", higher_is_better=False, score_range=(0.0, 100.0), register=False)
def latency_s(output):
    return float(output)

def pytest_llmeval_register_scorers(registry, config):
    registry.register(quality, replace=True)
    registry.register(latency_s, replace=True)
"""


#: the side of each case the test scores (MD_SIDE: base or cur), so one project can be a
#: baseline and a change to it
BOT = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
{gate}
def test_bot(case):
    side = os.environ.get("MD_SIDE", "base")
    assert_score("{scorer}", output=str(case[side]), {bound})
"""


OPTIONS = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-no-history", "--llm-eval-no-progress")


def _project(
    p: pytest.Pytester,
    rows: list[dict[str, Any]],
    *,
    scorer: str = "quality",
    min_mean: float = 0.5,
    min_rate: float = 0.5,
    bound: str = "min=0.5",
) -> None:
    gate = ""
    if scorer == "quality":
        gate = (
            f'@pytest.mark.llm_eval_gate("quality", min_mean={min_mean}, min_pass_rate={min_rate})'
        )
    p.makeconftest(CONFTEST)
    p.makepyfile(test_bot=BOT.format(scorer=scorer, gate=gate, bound=bound))
    _cases(p, rows)


def _cases(p: pytest.Pytester, rows: list[dict[str, Any]]) -> None:
    (p.path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rows(base: list[float], cur: list[float] | None = None) -> list[dict[str, Any]]:
    cur = base if cur is None else cur
    return [
        {"id": f"c{i:02d}", "base": b, "cur": c}
        for i, (b, c) in enumerate(zip(base, cur, strict=True))
    ]


def _read(p: pytest.Pytester, name: str) -> Doc:
    return parse((p.path / name).read_text(encoding="utf-8"))


def _json(p: pytest.Pytester, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((p.path / name).read_text())
    return data


def test_a_passing_run(pytester: pytest.Pytester) -> None:
    _project(pytester, _rows([0.9, 0.8, 1.0, 0.7]))
    result = pytester.runpytest(
        *OPTIONS, "--llm-eval-report=r.json", "--llm-eval-markdown=out/summary.md"
    )
    result.assert_outcomes(passed=4)
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"llm-eval: Markdown report written to {pytester.path}*"])
    doc = _read(pytester, "out/summary.md")
    assert doc.headings[0] == "✅ pytest-llmeval: PASS"
    assert doc.paragraphs[0] == ("4 scores by 1 scorer in 1 test · 1 gate: 1 pass · no judge calls")
    assert "Why the run fails" not in doc.paragraphs
    scorers = doc.table("Scorers")
    assert scorers.header == [
        "scorer",
        "n",
        "mean",
        "min",
        "max",
        "passed",
        "failed",
        "errors",
        "cached",
        "judge calls",
        "tokens",
        "cost",
    ]
    assert scorers.rows == [
        ["quality", "4", "0.850", "0.700", "1.000", "4", "0", "0", "0", "0", "0", "-"]
    ]
    # the same numbers as the JSON report and the terminal's table
    agg = _json(pytester, "r.json")["aggregates"]["quality"]
    assert float(scorers.row(scorer="quality")["mean"]) == pytest.approx(agg["mean"], abs=5e-4)
    terminal = next(line.split() for line in result.stdout.lines if line.startswith("quality "))
    assert terminal[:12] == scorers.rows[0]
    gates = doc.table("Gates")
    assert gates.rows == [
        [
            "PASS",
            "test_bot.py::test_bot",
            "quality",
            "mean 0.850 >= 0.5: pass; pass rate 1.000 >= 0.5: pass",
            "4",
            "4",
            "0",
            "",
        ]
    ]
    # one name, one meaning: the checks read as the terminal's gate line reads them
    result.stdout.fnmatch_lines(["PASS test_bot.py::test_bot quality: " + gates.rows[0][3]])
    assert "gates: 1 pass" in doc.paragraphs
    assert "Against the baseline" not in doc.headings
    assert _markup_tokens(doc) == []


def test_a_failing_gate(pytester: pytest.Pytester) -> None:
    _project(pytester, _rows([0.9, 0.2, 0.3, 0.8, 0.4, 0.1]), min_mean=0.6, min_rate=0.6)
    result = pytester.runpytest(*OPTIONS, "--llm-eval-report=r.json", "--llm-eval-markdown=s.md")
    assert result.ret == 1
    doc = _read(pytester, "s.md")
    report = _json(pytester, "r.json")
    assert doc.headings[0] == "❌ pytest-llmeval: FAIL"
    assert doc.fences["Why the run fails"] == report["verdict"]["failures"]
    assert doc.fences["Why the run fails"] == ["1 of 1 gate(s) do not pass (1 fail)"]
    gates = doc.table("Gates")
    row = gates.row(gate="FAIL")
    assert row["checks: the numbers that decided"] == (
        "mean 0.450 >= 0.6: fail; pass rate 0.333 >= 0.6: fail"
    )
    assert (row["cases"], row["samples"], row["unscored"]) == ("6", "6", "0")
    # the verdict cell is the only markup a gate row has: the FAIL in bold
    assert gates.kinds[0][0] == ["strong_open", "text", "strong_close"]
    result.stdout.fnmatch_lines(["FAIL test_bot.py::test_bot quality: " + row[gates.header[3]]])
    assert "gates: 1 fail: the run fails" in doc.paragraphs
    scorers = doc.table("Scorers")
    assert scorers.row(scorer="quality")["passed"] == "2"
    assert scorers.row(scorer="quality")["failed"] == "4"


def _regression_rows() -> list[dict[str, Any]]:
    # 8 of 20 cases drop from 0.9 to 0.4 - 0.03 i: the biggest drop is case c07's
    cur = [round(0.4 - 0.03 * i, 2) if i < 8 else 0.9 for i in range(20)]
    return _rows([0.9] * 20, cur)


def test_a_regression_with_its_p_value(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _regression_rows(), min_mean=0.1, min_rate=0.1)
    assert pytester.runpytest(*OPTIONS, "--llm-eval-report=base.json").ret == 0
    monkeypatch.setenv("MD_SIDE", "cur")
    result = pytester.runpytest(
        *OPTIONS,
        "--llm-eval-report=r.json",
        "--llm-eval-markdown=s.md",
        "--llm-eval-baseline=base.json",
        "--llm-eval-fail-on-regression",
    )
    assert result.ret == 1
    doc = _read(pytester, "s.md")
    cmp = _json(pytester, "r.json")["comparison"]
    (quality,) = [s for s in cmp["scorers"] if s["name"] == "quality"]
    assert quality["verdict"] == "regressed"
    # 8 non-zero differences: the exact sign-flip test, p = 2 / 2**8
    assert quality["p_value"] == pytest.approx(2 / 256)
    assert doc.headings[0] == "❌ pytest-llmeval: FAIL"
    assert doc.fences["Why the run fails"] == _json(pytester, "r.json")["verdict"]["failures"]
    assert doc.fences["Why the run fails"][0] == (
        "regression: quality mean 0.900 -> 0.658 (p=0.00781 < 0.05)"
    )
    table = doc.table("Against the baseline")
    assert table.header == [
        "scorer",
        "n",
        "baseline",
        "current",
        "diff",
        "95% CI",
        "p",
        "p method",
        "flips",
        "McNemar p",
        "better",
        "instrument",
        "verdict",
    ]
    row = table.row(scorer="quality")
    assert row == {
        "scorer": "quality",
        "n": "20",
        "baseline": "0.900",
        "current": "0.658",
        "diff": "-0.242",
        "95% CI": f"[{quality['ci_low']:+.3f}, {quality['ci_high']:+.3f}]",
        "p": "0.00781",
        "p method": "exact",
        "flips": "-8/+0",
        "McNemar p": "0.00781",
        "better": "higher",
        "instrument": "same",
        "verdict": "regressed",
    }
    # the gate's own comparison is a row too, under the gate's name
    assert table.row(scorer="gate quality (test_bot.py::test_bot)")["verdict"] == "regressed"
    regressed = doc.table("Regressed cases")
    assert regressed.header == ["scorer", "case", "baseline", "current", "change", "was", "now"]
    assert regressed.column("case") == [
        f"test_bot.py::test_bot[c{i:02d}]" for i in range(7, -1, -1)
    ]
    # the outputs judged: what the test passed as output= on each side
    assert regressed.rows[0][2:] == ["0.9", "0.19", "-0.71", "0.9", "0.19"]
    assert "Improved cases" not in doc.headings
    assert _markup_tokens(doc) == []


def test_a_lower_is_better_scorer(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # latency: 10 cases, 9 of them slower now (1.0 -> 2.0 + i / 10); lower is better
    rows = [
        {"id": f"c{i:02d}", "base": 1.0, "cur": 2.0 + i / 10 if i < 9 else 1.0} for i in range(10)
    ]
    _project(pytester, rows, scorer="latency_s", bound="max=5")
    pytester.runpytest(*OPTIONS, "--llm-eval-report=base.json")
    monkeypatch.setenv("MD_SIDE", "cur")
    result = pytester.runpytest(
        *OPTIONS, "--llm-eval-markdown=s.md", "--llm-eval-baseline=base.json"
    )
    assert result.ret == 0  # a regression is reported, not failed, without fail-on-regression
    doc = _read(pytester, "s.md")
    row = doc.table("Against the baseline").row(scorer="latency_s")
    assert (row["better"], row["diff"], row["verdict"]) == ("lower", "+1.260", "regressed")
    assert doc.headings[0] == "✅ pytest-llmeval: PASS"
    assert doc.paragraphs[0].startswith("10 scores by 1 scorer in 1 test · ")
    assert "1 regression against the baseline" in doc.paragraphs[0]
    regressed = doc.table("Regressed cases")
    # worse is higher here: the biggest increase first, every change positive
    assert regressed.column("case")[0] == "test_bot.py::test_bot[c08]"
    assert regressed.column("change") == [f"+{1 + i / 10:.4g}" for i in range(8, -1, -1)]


def test_merge_writes_the_markdown_of_the_unsharded_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _rows([0.9, 0.2, 0.3, 0.8, 0.4, 0.1, 0.7]), min_mean=0.6, min_rate=0.6)
    whole = pytester.runpytest(*OPTIONS, "--llm-eval-markdown=whole.md")
    assert whole.ret == 1
    for i in (1, 2):
        shard = pytester.runpytest(
            *OPTIONS,
            f"--llm-eval-shard={i}/2",
            f"--llm-eval-report=s{i}.json",
            f"--llm-eval-markdown=s{i}.md",
        )
        assert shard.ret == 0  # a shard's gates are partial
        doc = _read(pytester, f"s{i}.md")
        assert doc.headings[0] == f"⏳ pytest-llmeval: PARTIAL (shard {i} of 2)"
        assert doc.headings[2] == f"Gates (PARTIAL: shard {i}/2)"
        assert doc.table(f"Gates (PARTIAL: shard {i}/2)").column("gate")[0].startswith("PARTIAL (")
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.chdir(pytester.path)
    status = merge_main(["s2.json", "s1.json", "-o", "m.json", "--markdown", "m.md"])
    assert status == 1
    whole_md = (pytester.path / "whole.md").read_text(encoding="utf-8")
    merged_md = (pytester.path / "m.md").read_text(encoding="utf-8")
    assert " · merged from 2 shards" in merged_md
    assert merged_md.replace(" · merged from 2 shards", "") == whole_md
    assert step.read_text(encoding="utf-8") == merged_md
    doc = parse(merged_md)
    assert doc.table("Scorers").row(scorer="quality")["n"] == "7"
    assert doc.table("Gates").column("gate") == ["FAIL"]


def test_a_hostile_case_id_and_output_through_a_real_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ids pytest makes from dataset rows, and the outputs a model returns, reach the
    summary from real sessions too: a baseline, then a run whose output turned hostile."""
    _project(pytester, [{"id": "a|b `c` <i>d</i> @org", "base": 0.9, "cur": 0.1}])
    pytester.makepyfile(
        test_bot="""
import os
import pytest
from pytest_llmeval import assert_score

BASE = "a|b `c` <i>d</i> @org"
HOSTILE = "x | `y` <script>z</script>\\n[w](javascript:alert(1))"

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
def test_bot(case):
    output = BASE if os.environ.get("MD_SIDE", "base") == "base" else HOSTILE
    assert_score("exact_match", output=output, expected=BASE)
"""
    )
    assert pytester.runpytest(*OPTIONS, "--llm-eval-report=base.json").ret == 0
    monkeypatch.setenv("MD_SIDE", "cur")
    pytester.runpytest(*OPTIONS, "--llm-eval-markdown=s.md", "--llm-eval-baseline=base.json")
    md = (pytester.path / "s.md").read_text(encoding="utf-8")
    doc = parse(md)
    assert _markup_tokens(doc) == []
    assert "<script>" not in MD.render(md)
    table = doc.table("Regressed cases")
    (row,) = table.rows
    assert row[5] == "a|b `c` <i>d</i> @org"  # the baseline's output
    assert row[6] == "x | `y` <script>z</script> [w](javascript:alert(1))"
    assert row[1].startswith("test_bot.py::test_bot[")
    for i in (0, 1, 5, 6):
        assert table.kinds[0][i] == ["code_inline"]


PASSWORD = "s3cretpass"


URL_KEY = "SECRETKEY123"


ENV_KEY = "sk-envKEY-7f3a9c2e51"


YES = text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(10, 1))


JUDGED = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
@pytest.mark.parametrize("i", range(3))
def test_judged(i):
    assert_score("l3score", input=f"q{i}?", expected=f"a{i}", output=f"a{i}", min=0.5)
"""


def test_a_secret_in_the_judge_url_stays_out(
    pytester: pytest.Pytester, judge_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_server.set_default(YES)
    pytester.makepyfile(test_judged=JUDGED)
    pytester.makeini(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
        "llm_eval_prices =\n    test-judge 1000 1000\n"
    )
    url = f"http://user:{PASSWORD}@127.0.0.1:{judge_server.port}/v1?api_key={URL_KEY}"
    shown = f"http://***@127.0.0.1:{judge_server.port}/v1?api_key=***"
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    result = pytester.runpytest(*OPTIONS, "--llm-eval-markdown=s.md")
    result.assert_outcomes(passed=3)
    assert len(judge_server.requests) == 3  # the URL, secrets and all, was used
    for name in ("s.md", "step.md"):
        data = (pytester.path / name).read_text(encoding="utf-8")
        for secret in (PASSWORD, URL_KEY, ENV_KEY):
            assert secret not in data, (secret, name)
        doc = parse(data)
        assert doc.paragraphs[1] == f"judge test-judge at {shown}"
        judge_line = next(
            t for t in doc.tokens if t.type == "inline" and t.content.startswith("judge ")
        )
        assert [c.content for c in judge_line.children or () if c.type == "code_inline"] == [
            "test-judge",
            shown,
        ]
        row = doc.table("Scorers").row(scorer="l3score")
        # 3 calls of 10 + 1 tokens at $1000 a million tokens each way
        assert (row["judge calls"], row["tokens"], row["cost"]) == ("3", "33", "$0.0330")
        assert "cost $0.0330 for 3 judge calls" in doc.paragraphs[0]


def test_the_step_summary_is_appended_to_never_overwritten(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _rows([0.9, 0.8]))
    step = pytester.path / "step.md"
    step.write_text("## an earlier step's summary\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    first = pytester.runpytest(*OPTIONS, "--llm-eval-markdown=a.md")
    assert first.ret == 0
    first.stdout.fnmatch_lines([f"llm-eval: Markdown report appended to {step}"])
    _cases(pytester, _rows([0.9, 0.1, 0.1]))  # the gate's mean falls under 0.5
    assert pytester.runpytest(*OPTIONS, "--llm-eval-markdown=b.md").ret == 1
    a = (pytester.path / "a.md").read_text(encoding="utf-8")
    b = (pytester.path / "b.md").read_text(encoding="utf-8")
    assert a != b
    assert (
        step.read_text(encoding="utf-8") == "## an earlier step's summary\n" + "\n" + a + "\n" + b
    )
    doc = parse(step.read_text(encoding="utf-8"))
    assert doc.headings.count("✅ pytest-llmeval: PASS") == 1
    assert doc.headings.count("❌ pytest-llmeval: FAIL") == 1
    assert len(doc.tables["Scorers"]) == 2


@pytest.mark.parametrize(
    ("args", "ini", "env", "appended"),
    [
        (("--llm-eval-markdown-step-summary=off",), "", "", False),
        ((), "", "off", False),
        ((), "llm_eval_markdown_step_summary = off\n", "on", False),  # ini over env
        (
            ("--llm-eval-markdown-step-summary=on",),
            "llm_eval_markdown_step_summary = off\n",
            "",
            True,
        ),
        ((), "", "", True),
    ],
)
def test_the_step_summary_can_be_turned_off(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    ini: str,
    env: str,
    appended: bool,
) -> None:
    _project(pytester, _rows([0.9]))
    pytester.makeini("[pytest]\n" + ini)
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    if env:
        monkeypatch.setenv("LLM_EVAL_MARKDOWN_STEP_SUMMARY", env)
    result = pytester.runpytest(*OPTIONS, "--llm-eval-markdown=s.md", *args)
    assert result.ret == 0
    assert (pytester.path / "s.md").is_file()
    assert step.is_file() is appended
    if appended:
        assert step.read_text(encoding="utf-8") == (pytester.path / "s.md").read_text("utf-8")


def test_a_bad_step_summary_switch_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _rows([0.9]))
    result = pytester.runpytest(*OPTIONS, "--llm-eval-markdown-step-summary=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --llm-eval-markdown-step-summary / ini llm_eval_markdown_step_summary / env "
            "LLM_EVAL_MARKDOWN_STEP_SUMMARY: 'maybe' is not one of on, off (on: also append the "
            "Markdown summary to $GITHUB_STEP_SUMMARY when it is set; off: do not) "
            "(given by --llm-eval-markdown-step-summary)"
        ]
    )
    monkeypatch.setenv("LLM_EVAL_MARKDOWN_STEP_SUMMARY", "yes please")
    result = pytester.runpytest(*OPTIONS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*env LLM_EVAL_MARKDOWN_STEP_SUMMARY: 'yes please' is not*"])


def test_the_markdown_path_is_cli_then_ini_then_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _rows([0.9]))
    monkeypatch.setenv("LLM_EVAL_MARKDOWN", "env.md")
    pytester.runpytest(*OPTIONS)
    assert sorted(p.name for p in pytester.path.glob("*.md")) == ["env.md"]
    pytester.makeini("[pytest]\nllm_eval_markdown = ini.md\n")
    pytester.runpytest(*OPTIONS)
    assert sorted(p.name for p in pytester.path.glob("*.md")) == ["env.md", "ini.md"]
    (pytester.path / "ini.md").unlink()
    (pytester.path / "env.md").unlink()
    pytester.runpytest(*OPTIONS, "--llm-eval-markdown=cli.md")
    assert sorted(p.name for p in pytester.path.glob("*.md")) == ["cli.md"]


def test_an_unwritable_summary_fails_the_run_and_says_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _rows([0.9]))
    (pytester.path / "taken").mkdir()
    (pytester.path / "step").mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step"))
    result = pytester.runpytest(*OPTIONS, "--llm-eval-markdown=taken")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(
        [
            f"llm-eval: could not write the Markdown report to {pytester.path / 'taken'}: "
            "*Is a directory*",
            f"llm-eval: could not append the Markdown report to {pytester.path / 'step'}: "
            "*Is a directory*",
        ]
    )


def test_a_report_that_cannot_be_written_makes_the_summary_fail(pytester: pytest.Pytester) -> None:
    """The run exits 3 when its JSON report cannot be written: its summary must not say PASS."""
    _project(pytester, _rows([0.9, 0.8]))
    (pytester.path / "taken").mkdir()
    result = pytester.runpytest(*OPTIONS, "--llm-eval-report=taken", "--llm-eval-markdown=s.md")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    doc = _read(pytester, "s.md")
    assert doc.headings[0] == "❌ pytest-llmeval: FAIL"
    (reason,) = doc.fences["Why the run fails"]
    assert reason.startswith(
        f"the JSON report could not be written to {pytester.path / 'taken'}: [Errno 21] "
    )


def test_a_summary_that_cannot_be_written_makes_the_step_summary_fail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, _rows([0.9, 0.8]))
    (pytester.path / "taken.md").mkdir()
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    result = pytester.runpytest(*OPTIONS, "--llm-eval-markdown=taken.md")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    doc = parse(step.read_text(encoding="utf-8"))
    assert doc.headings[0] == "❌ pytest-llmeval: FAIL"
    (reason,) = doc.fences["Why the run fails"]
    assert reason.startswith(
        f"the Markdown report could not be written to {pytester.path / 'taken.md'}: [Errno 21] "
    )


def test_an_unusable_baseline_is_said(pytester: pytest.Pytester) -> None:
    _project(pytester, _rows([0.9, 0.8]))
    (pytester.path / "bad.json").write_text('{"records": "no"}')
    result = pytester.runpytest(
        *OPTIONS, "--llm-eval-markdown=s.md", "--llm-eval-baseline=bad.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    doc = _read(pytester, "s.md")
    assert doc.headings[0] == "❌ pytest-llmeval: FAIL"
    assert "the baseline cannot be used" in doc.paragraphs[0].split(" · ")
    (reason,) = doc.fences["Why the run fails"]
    assert reason.startswith("the baseline cannot be used: --llm-eval-baseline=bad.json: ")
    assert "Against the baseline" in doc.headings
    assert "Against the baseline" not in doc.tables  # no table: nothing was compared

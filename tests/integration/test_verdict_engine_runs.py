"""One verdict engine (issue 19): gates, statistics, comparisons and the run's verdict are pure
functions of one typed run model, and the three paths that compute them (pytest at the end of a
session, ``merge`` of shard reports, ``compare`` of two report files) agree field by field.

Two property tests: one over random runs built as :class:`pytest_llmeval.core.model.Run` (fast, many
examples: parametrized tests, repeats, lower- and higher-is-better scorers, errored, skipped
and lost cases, gates and run gates, changed instruments), each written as a report, read back,
split into random shards, written and merged; and one over random projects run through real
pytest (in-process), its shards and ``merge`` and ``compare`` on their files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CONFTEST = """
from pytest_llmeval import scorer

@scorer(name="quality", score_range=(0.0, 1.0))
def quality(output):
    return float(output)

@scorer(name="distance", higher_is_better=False, score_range=(0.0, 1.0))
def distance(output):
    return float(output)
"""


TEST = """
import pytest
from pytest_llmeval import assert_score

LEVELS = {levels!r}

@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("data/cases.jsonl", repeat={repeat})
{param}
{gate}
def test_suite(case, llm_eval_sample{param_arg}):
    level = LEVELS[case.id][llm_eval_sample % len(LEVELS[case.id])]
    if level == "skip":
        pytest.skip("no answer")
    if level == "raise":
        raise RuntimeError("the app failed")
    assert_score("{scorer}", output=level, {bound})
"""


@st.composite
def projects(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(2, 6))
    level = st.one_of(
        st.sampled_from(["skip", "raise"]), st.floats(0, 1).map(lambda x: round(x, 3))
    )
    levels = {f"c{i}": draw(st.lists(level, min_size=1, max_size=3)) for i in range(n)}
    scorer = draw(st.sampled_from(["quality", "distance"]))
    higher = scorer == "quality"
    return {
        "levels": levels,
        "shift": draw(st.sampled_from([0.0, 0.3])),
        "repeat": draw(st.integers(1, 3)),
        "param": draw(st.booleans()),
        "scorer": scorer,
        "bound": "min=0.5" if higher else "max=0.5",
        "gate": draw(
            st.sampled_from(
                [
                    "",
                    f'@pytest.mark.llm_eval_gate("{scorer}", min_pass_rate=0.5)',
                    f'@pytest.mark.llm_eval_gate("{scorer}", '
                    f'{"min" if higher else "max"}_mean=0.5, reducer="majority", max_errors=1)',
                ]
            )
        ),
        "shards": draw(st.integers(2, 3)),
    }


def _write(root: Path, project: dict[str, Any], shift: float) -> None:
    levels = {
        c: [x if isinstance(x, str) else min(1.0, round(x + shift, 3)) for x in v]
        for c, v in project["levels"].items()
    }
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps({"id": c}) + "\n" for c in levels)
    )
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_suite.py").write_text(
        TEST.format(
            levels=levels,
            repeat=project["repeat"],
            param='@pytest.mark.parametrize("style", ["a", "b"])' if project["param"] else "",
            param_arg=", style" if project["param"] else "",
            gate=project["gate"],
            scorer=project["scorer"],
            bound=project["bound"],
        )
    )


def _sections(report: dict[str, Any]) -> dict[str, Any]:
    comparison = dict(report.get("comparison") or {})
    comparison.pop("baseline", None)  # the baseline's label and path say how it was given
    comparison.pop("baseline_label", None)
    return {
        "records": [{k: v for k, v in r.items() if k != "duration_s"} for r in report["records"]],
        "gates": report["gates"],
        "statistics": report["statistics"],
        "comparison": {k: v for k, v in comparison.items() if k != "cases"},
        "passed": report["verdict"]["passed"],
    }


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(project=projects())
def test_pytest_merge_and_compare_agree_on_random_projects(
    pytester: pytest.Pytester, project: dict[str, Any]
) -> None:
    from pytest_llmeval.cli.compare import main as compare_main
    from pytest_llmeval.cli.merge import main as merge_main

    root = pytester.path
    for name in root.glob("*.json"):
        name.unlink()
    args = ("--llm-eval", "--llm-eval-cache=off", "--llm-eval-no-history", "-p", "no:randomly")
    _write(root, project, 0.0)
    pytester.runpytest(*args, "--llm-eval-report=base.json")
    _write(root, project, project["shift"])
    strict = ("--llm-eval-baseline=base.json", "--llm-eval-fail-on-regression")
    full = pytester.runpytest(*args, *strict, "--llm-eval-report=full.json")
    n = project["shards"]
    for i in range(1, n + 1):
        pytester.runpytest(
            *args, *strict, f"--llm-eval-shard={i}/{n}", f"--llm-eval-report=s{i}.json"
        )
    status = merge_main(
        [str(root / f"s{i}.json") for i in range(1, n + 1)] + ["-o", str(root / "m.json")]
    )
    full_report = json.loads((root / "full.json").read_text())
    merged = json.loads((root / "m.json").read_text())
    assert _sections(full_report) == _sections(merged)
    assert status == (0 if full.ret == 0 else 1)
    cmp_status = compare_main(
        [str(root / "base.json"), str(root / "full.json"), "--fail-on-regression", "--json"]
    )
    expect_fail = bool(full_report["comparison"]["problems"]) or any(
        s["verdict"] == "regressed"
        for s in (*full_report["comparison"]["scorers"], *full_report["comparison"]["gates"])
    )
    assert cmp_status == (1 if expect_fail else 0)

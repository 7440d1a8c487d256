"""Suite gates and repeated samples (issue 9), through real pytest runs (pytester).

The project below has a fake app whose answer for a case and sample is written in the dataset
(``outputs[sample]``), so every score, verdict and interval is known in advance:

case  outputs   exact_match per sample   case score (mean)  case passes min=1
a     x x       1 1                      1.0                yes
b     x y       1 0                      0.5 (flaky)        no
c     y y       0 0                      0.0                no
d     x x       1 1                      1.0                yes
e     x x       1 1                      1.0                yes

mean over cases 0.7, pass rate 3/5 = 0.6.
"""

from __future__ import annotations

import dataclasses
import json


def test_score_record_round_trips_sample_and_gated() -> None:
    from pytest_llmeval.core.records import ScoreRecord

    rec = ScoreRecord("f.py", "t", "c", "exact_match", 0, 0.0, 1.0, None, False, False, 0.1)
    rec = dataclasses.replace(rec, sample=3, gated=True)
    data = json.loads(json.dumps(rec.to_json()))
    assert (data["sample"], data["gated"]) == (3, True)
    assert ScoreRecord.from_json(data) == rec
    old = {k: v for k, v in data.items() if k not in ("sample", "gated")}
    assert (ScoreRecord.from_json(old).sample, ScoreRecord.from_json(old).gated) == (0, False)


def test_parse_gate_option() -> None:
    from pytest_llmeval.analysis.gates import parse_gate_option

    rule = parse_gate_option(
        "tests/test_qa.py::test_qa:factuality:min_mean=0.7, min-pass-rate=0.9,reducer=majority,"
        "max_errors=2,confidence=0.9"
    )
    assert rule.pattern == "tests/test_qa.py::test_qa" and not rule.wildcard
    spec = rule.spec
    assert (spec.scorer, spec.min_mean, spec.min_pass_rate, spec.reducer) == (
        "factuality",
        0.7,
        0.9,
        "majority",
    )
    assert (spec.max_errors, spec.confidence) == (2, 0.9)
    assert rule.matches("tests/test_qa.py", "test_qa")
    assert not rule.matches("tests/test_qa.py", "test_qa2")
    star = parse_gate_option("tests/*::Test*::test_?:exact_match:max_mean=0.5")
    assert star.wildcard and star.matches("tests/a/b.py", "TestX::test_1")


def test_case_samples_group_cases_and_keep_errors_unscored() -> None:
    from pytest_llmeval.analysis.gates import case_samples
    from pytest_llmeval.core.records import ScoreRecord

    def rec(case: str, sample: int, score: float | None, error: str | None = None) -> ScoreRecord:
        passed = None if score is None else score >= 0.5
        return ScoreRecord(
            "f.py", "t", case, "s", 0, score, 0.5, None, passed, False, 0.0, error=error,
            sample=sample,
        )  # fmt: skip

    cases = case_samples([rec("b", 1, 0.2), rec("a", 0, 0.9), rec("b", 0, None, "boom")])
    assert [c.case for c in cases] == ["f.py::t[a]", "f.py::t[b]"]
    b = cases[1]
    assert [(x.sample, x.score, x.passed, x.error) for x in b.samples] == [
        (0, None, None, "boom"),
        (1, 0.2, False, None),
    ]
    assert (b.min, b.max) == (0.5, None)

from __future__ import annotations

import json

import pytest

from pytest_llmeval.core.records import ScoreRecord, aggregate


def rec(scorer: str, score: float | None, passed: bool | None, **kw: object) -> ScoreRecord:
    base: dict[str, object] = dict(
        file="t.py",
        test="test_x",
        case_id="c",
        scorer=scorer,
        index=0,
        score=score,
        min=0.5,
        max=None,
        passed=passed,
        cached=False,
        duration_s=0.5,
    )
    base.update(kw)
    return ScoreRecord(**base)  # type: ignore[arg-type]


def test_record_json_round_trip_is_exact() -> None:
    r = rec(
        "s",
        0.25,
        False,
        rationale="why",
        metadata={"a": [1, 2]},
        prompt_tokens=3,
        completion_tokens=4,
        judge_calls=1,
        cost_usd=0.001,
        where="d.jsonl:2",
    )
    text = json.dumps(r.to_json())
    assert ScoreRecord.from_json(json.loads(text)) == r
    # unknown keys from a newer writer are ignored
    assert ScoreRecord.from_json({**r.to_json(), "future": 1}) == r


def test_aggregate_counts_and_means() -> None:
    recs = [
        rec("a", 1.0, True, cached=True, judge_calls=0),
        rec("a", 0.2, False, judge_calls=2, prompt_tokens=10, completion_tokens=5, cost_usd=0.01),
        rec("a", None, None, error="JudgeError: boom"),
        rec("b", 0.5, None),
    ]
    aggs = aggregate(recs)
    assert list(aggs) == ["a", "b"]
    a = aggs["a"].to_json()
    assert (a["n"], a["passed"], a["failed"], a["errors"], a["cache_hits"]) == (3, 1, 1, 1, 1)
    assert a["mean"] == pytest.approx(0.6) and (a["min"], a["max"]) == (0.2, 1.0)
    assert (a["judge_calls"], a["prompt_tokens"], a["completion_tokens"]) == (2, 10, 5)
    assert a["cost_usd"] == pytest.approx(0.01) and a["time_s"] == pytest.approx(1.5)
    assert aggs["b"].to_json()["cost_usd"] is None


def test_records_read_with_a_memo_share_the_strings_most_records_repeat() -> None:
    """A controller reads one record per case from its workers: file, test, scorer, instrument
    and judge models are kept once for the run, not once per record; values are unchanged."""
    strings: dict[str, str] = {}
    texts = [
        json.dumps(
            rec(
                "exact_match",
                1.0,
                True,
                case_id=f"c{i}",
                instrument="d" * 64,
                judge_models=("gpt-x",),
                inputs={"output": f"o{i}"},
            ).to_json()
        )
        for i in range(2)
    ]
    a, b = (ScoreRecord.from_json(json.loads(t), strings) for t in texts)
    for name in ("file", "test", "scorer", "instrument"):
        assert getattr(a, name) is getattr(b, name), name
    assert a.judge_models[0] is b.judge_models[0]
    assert a.case_id == "c0" and b.case_id == "c1" and a.inputs == {"output": "o0"}
    # the empty metadata of both is one read-only mapping, equal to {} and written as {}
    assert a.metadata is b.metadata and a.metadata == {} and a.to_json()["metadata"] == {}
    with pytest.raises(TypeError):
        a.metadata["x"] = 1  # type: ignore[index]
    assert a == ScoreRecord.from_json(json.loads(texts[0]))  # without the memo: equal
    assert not hasattr(a, "__dict__")  # slots: no per-record dict (issue 24's memory target)

from __future__ import annotations

from typing import Any

import pytest

import pytest_llmeval
from pytest_llmeval import Score, Scorer, ScorerConfigError, ScorerInputError, scorer
from pytest_llmeval.core.scores import Usage
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.scoring import identity_of


class Upper(Scorer):
    name = "upper_test"
    required_inputs = ("output",)
    default_options = {"strict": False}

    def compute(self, inputs: Any, ctx: ScoringContext) -> Score:
        return Score(value=float(inputs["output"].isupper()))


def test_unknown_option_is_a_config_error_listing_valid_ones() -> None:
    with pytest.raises(ScorerConfigError, match=r"option 'stirct' .*Valid options: strict"):
        Upper(stirct=True)


def test_missing_required_input_names_scorer_and_field() -> None:
    with pytest.raises(ScorerInputError) as info:
        Upper().check_inputs({"output": None})
    assert (info.value.scorer, info.value.field) == ("upper_test", "output")
    assert "Pass output=..." in str(info.value)


def test_input_error_located_at_dataset_row() -> None:
    err = ScorerInputError("s", "expected", "is required").at("data.jsonl:3")
    assert str(err).startswith("data.jsonl:3: scorer 's': input 'expected' is required")


def test_identity_excludes_api_key_and_unset_judge_options() -> None:
    class J(Scorer):
        name = "j_test"
        uses_judge = True

    ident = J(api_key="sk-SECRET", model="m1").identity_without_context()
    assert ident == {"name": "j_test", "version": "1", "options": {"model": "m1"}}
    assert "SECRET" not in repr(J(api_key="sk-SECRET"))


def test_identity_of_callables_and_scorers() -> None:
    assert identity_of(len) == {"callable": "builtins.len"}
    from pytest_llmeval.engine.scoring import code_fingerprint

    code = code_fingerprint(Upper)
    assert code is not None and len(code) == 16  # a scorer defined outside the package
    assert identity_of(Upper(strict=True)) == {
        "scorer": {"name": "upper_test", "version": "1", "options": {"strict": True}, "code": code}
    }


def test_function_scorer_passes_declared_inputs_and_options(ctx: ScoringContext) -> None:
    @scorer(name="len_at_most", required=("output",), register=False)
    def len_at_most(output: str, limit: int = 3) -> tuple[float, str]:
        return float(len(output) <= limit), f"len {len(output)}"

    assert len_at_most.default_options == {"limit": 3}
    res = len_at_most(limit=5).compute({"output": "abcd"}, ctx)
    assert (res.value, res.rationale) == (1.0, "len 4")
    assert len_at_most().compute({"output": "abcd"}, ctx).value == 0.0


def test_async_function_scorer(ctx: ScoringContext) -> None:
    @scorer(name="async_one", register=False)
    async def async_one(output: str) -> float:
        return 1.0

    assert async_one().compute({"output": "x"}, ctx).value == 1.0


def test_function_scorer_bad_return_is_a_clear_type_error(ctx: ScoringContext) -> None:
    @scorer(name="bad_ret", register=False)
    def bad_ret(output: str) -> Any:
        return "high"

    with pytest.raises(TypeError, match="scorer 'bad_ret' returned str"):
        bad_ret().compute({"output": "x"}, ctx)


def test_usage_addition_keeps_unknown_cost() -> None:
    assert Usage(1, 2, 1, None) + Usage(3, 4, 1, None) == Usage(4, 6, 2, None)
    assert Usage(1, 2, 1, 0.5) + Usage(0, 0, 1, None) == Usage(1, 2, 2, 0.5)


def test_score_cache_round_trip() -> None:
    s = Score(value=0.5, scorer="x", rationale="r", metadata={"a": [1]}, usage=Usage(1, 2, 1, 0.1))
    back = Score.from_cache(s.to_cache(), "x")
    assert back.cached and back.value == 0.5 and back.usage == Usage(1, 2, 1, 0.1)
    assert float(back) == 0.5


def test_code_fingerprint_follows_the_code_not_its_position() -> None:
    from pytest_llmeval.engine.registry import default_registry
    from pytest_llmeval.engine.scoring import code_fingerprint

    def make(src: str) -> type[Scorer]:
        namespace: dict[str, Any] = {"pytest_llmeval": pytest_llmeval}
        exec(compile(src, "<user scorers>", "exec"), namespace)
        return namespace["s"]  # type: ignore[no-any-return]

    one = "@pytest_llmeval.scorer(register=False)\ndef s(output):\n    return 1.0\n"
    moved = "\n\n\n" + one  # same code, other lines
    other = one.replace("1.0", "0.5")
    assert code_fingerprint(make(one)) == code_fingerprint(make(moved))
    assert code_fingerprint(make(one)) != code_fingerprint(make(other))
    assert code_fingerprint(default_registry.get("exact_match")) is None  # built-ins: version

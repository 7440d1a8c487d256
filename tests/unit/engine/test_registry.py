from __future__ import annotations

import pytest

from pytest_llmeval import Score, Scorer, UnknownScorerError
from pytest_llmeval.engine.registry import BUILTIN_SCORERS, ScorerRegistry, normalize_name


class Dummy(Scorer):
    name = "dummy_scorer"
    aliases = ("DummyScorer",)

    def compute(self, inputs, ctx):  # type: ignore[no-untyped-def]
        return Score(value=1.0)


def test_reference_spellings_resolve_to_the_same_name() -> None:
    reg = ScorerRegistry(BUILTIN_SCORERS)
    assert reg.canonical("ClosedQA") == reg.canonical("closed_qa") == "closed_qa"
    assert reg.canonical("Factuality") == "factuality"
    assert reg.canonical("L3Score") == "l3score"
    assert reg.canonical("JSONDiff") == "json_diff"


def test_unknown_name_lists_close_matches() -> None:
    reg = ScorerRegistry(BUILTIN_SCORERS)
    with pytest.raises(UnknownScorerError) as info:
        reg.canonical("factualty")
    assert info.value.close[0] == "factuality"
    assert "did you mean 'factuality'" in str(info.value)


def test_register_and_conflict() -> None:
    reg = ScorerRegistry()
    reg.register(Dummy)
    assert reg.get("DummyScorer") is Dummy

    class Other(Dummy):
        pass

    with pytest.raises(ValueError, match="already registered"):
        reg.register(Other)
    reg.register(Other, replace=True)
    assert reg.get("dummy_scorer") is Other


def test_register_rejects_non_scorers_and_nameless() -> None:
    reg = ScorerRegistry()
    with pytest.raises(TypeError):
        reg.register(object)  # type: ignore[arg-type]

    class NoName(Scorer):
        pass

    with pytest.raises(ValueError, match="has no `name`"):
        reg.register(NoName)


def test_normalize_name() -> None:
    assert normalize_name("Closed-QA ") == normalize_name("closed_qa") == "closedqa"

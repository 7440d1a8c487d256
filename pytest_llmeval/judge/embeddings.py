"""Text embedders for the embedding scorers.

Two backends behind one interface, :class:`Embedder`:

- ``openai:<model>``: the OpenAI-compatible embeddings endpoint, through the run's judge client
  (its endpoint, key, retries, usage and cost accounting).
- ``local:<hub id or directory>``: a transformer encoder run in process with ``transformers``
  (mean pooling over the attention mask, then L2 normalisation: the sentence-transformers recipe
  of all-MiniLM-L6-v2). The model loads lazily, on the first text to embed, once per process.

A model spec without a prefix is local when it is an existing directory or looks like a hub id
(``owner/name``), and an endpoint model name otherwise (``text-embedding-3-small``). With no
spec, the run's ``embedding_model`` setting (a local model) is used, else the judge's
``embedding_model`` on the endpoint.

Constructors and :meth:`Embedder.identity` never load a model or import torch: the result cache
computes identities for every scoring, and a cache hit must stay cheap. Every embedder keeps the
vectors of the texts it has embedded in a bounded in-memory LRU, keyed on the exact text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.core.errors import ScorerConfigError, ScorerNotAvailableError
from pytest_llmeval.core.scores import Usage

if TYPE_CHECKING:
    from pytest_llmeval.judge.host import EmbeddingHost

__all__ = [
    "INSTALL_HINT",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "cosine_similarity",
    "local_model_fingerprint",
    "make_embedder",
    "parse_model_spec",
    "require_torch",
]

#: How to get the optional dependencies of the local backend and of BERTScore.
INSTALL_HINT = (
    "pip install torch==2.13.0 (a CPU build; install it first), "
    'then the bertscore extra: pip install ".[bertscore]" in the pytest-llmeval-suite checkout'
)

#: Texts kept per embedder (vectors of a few hundred floats each).
DEFAULT_CACHE_SIZE = 10_000

#: Options the endpoint backend passes on to the judge client (``model`` is the embedding model
#: itself, never the chat model, so it is not among them).
_CLIENT_OPTIONS = ("base_url", "api_key", "timeout", "max_tries")


def require_torch(what: str) -> None:
    """Raise :class:`ScorerNotAvailableError` naming ``what`` unless torch and transformers
    import."""
    missing = []
    for module in ("torch", "transformers"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ScorerNotAvailableError(
            f"{what} needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
            f"not installed: {INSTALL_HINT}"
        )


class Embedder(ABC):
    """Turns texts into vectors. Subclasses implement :meth:`_compute` (vectors and usage for
    texts not in the cache) and :meth:`identity`."""

    def __init__(self, *, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Cache-key material: the backend and the model (never loads the model)."""

    @abstractmethod
    async def _compute(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        """Vectors for ``texts`` (distinct, none cached), in order, and what they cost."""

    def _compute_sync(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        from pytest_llmeval.core import aio as _aio

        return _aio.run_sync(self._compute(texts))

    # -- the cache ------------------------------------------------------------------------------

    def _lookup(self, texts: Sequence[str]) -> tuple[dict[str, list[float]], list[str]]:
        found: dict[str, list[float]] = {}
        missing: list[str] = []
        with self._cache_lock:
            for text in texts:
                if text in found:
                    continue
                vec = self._cache.get(text)
                if vec is None:
                    if text not in missing:
                        missing.append(text)
                else:
                    self._cache.move_to_end(text)
                    found[text] = vec
        return found, missing

    def _store(self, texts: Sequence[str], vectors: Sequence[list[float]]) -> None:
        with self._cache_lock:
            for text, vec in zip(texts, vectors, strict=True):
                self._cache[text] = vec
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def clear_cache(self) -> None:
        """Forget every cached vector."""
        with self._cache_lock:
            self._cache.clear()

    def _check(self, texts: Sequence[str]) -> list[str]:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("an embedder takes a list of strings")
        return list(texts)

    # -- public calls ---------------------------------------------------------------------------

    async def aembed_with_usage(self, texts: Sequence[str]) -> tuple[list[list[float]], Usage]:
        """Vectors for ``texts`` (in order) and the usage of the calls made (zero when every text
        was cached or the model is local)."""
        texts = self._check(texts)
        found, missing = self._lookup(texts)
        usage = Usage()
        if missing:
            vectors, usage = await self._compute(missing)
            self._store(missing, vectors)
            found.update(zip(missing, vectors, strict=True))
        return [found[t] for t in texts], usage

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, in order."""
        return (await self.aembed_with_usage(texts))[0]

    def embed_with_usage(self, texts: Sequence[str]) -> tuple[list[list[float]], Usage]:
        """Synchronous :meth:`aembed_with_usage`."""
        texts = self._check(texts)
        found, missing = self._lookup(texts)
        usage = Usage()
        if missing:
            vectors, usage = self._compute_sync(missing)
            self._store(missing, vectors)
            found.update(zip(missing, vectors, strict=True))
        return [found[t] for t in texts], usage

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Synchronous :meth:`aembed`."""
        return self.embed_with_usage(texts)[0]


# -- the endpoint backend -------------------------------------------------------------------------


class OpenAIEmbedder(Embedder):
    """Embeddings from the OpenAI-compatible endpoint of the run's judge (or of the judge options
    given: ``base_url``, ``api_key``, ``timeout``, ``max_tries``)."""

    def __init__(
        self,
        ctx: EmbeddingHost,
        model: str | None,
        options: Mapping[str, Any] | None = None,
        *,
        scorer: str | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(cache_size=cache_size)
        self._ctx = ctx
        self._options = {k: v for k, v in (options or {}).items() if v is not None}
        self._scorer = scorer
        self.model = model or ctx.judge_settings(self._options).embedding_model

    def identity(self) -> dict[str, Any]:
        # Like the judge's identity, the URL and key stay out: the same model behind a proxy or a
        # recorded replay gives the same vectors.
        return {"backend": "openai", "model": self.model}

    async def _compute(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        client = self._ctx.judge(self._options)
        return await client.embed(texts, model=self.model, scorer=self._scorer)

    def _compute_sync(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        return self._ctx.run(self._compute(texts))

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r})"


# -- the local backend ----------------------------------------------------------------------------


class _LocalModel:
    """A loaded tokenizer + encoder and how to pool it. One per (source) per process."""

    def __init__(self, source: str) -> None:
        require_torch("the local embedding backend")
        import torch
        from transformers import AutoModel, AutoTokenizer

        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(source)
            model: Any = AutoModel.from_pretrained(source)
        except (OSError, ValueError) as exc:
            raise ScorerNotAvailableError(
                f"could not load the embedding model {source!r}: {exc}. Give a local directory "
                "(model='local:/path/to/model') or make the hub id available offline "
                "(HF_HUB_OFFLINE=1 needs it in the local hub cache)"
            ) from exc
        model.eval()
        self.model = model
        self.torch = torch
        self.max_length = self._max_length(source)
        self.pooling = self._pooling(source)
        # One forward pass at a time per model: torch already uses every core.
        self.lock = threading.Lock()

    def _max_length(self, source: str) -> int:
        limit = int(getattr(self.tokenizer, "model_max_length", 512) or 512)
        limit = min(limit, 512)
        st_config = Path(source) / "sentence_bert_config.json"
        if st_config.is_file():
            try:
                value = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length")
            except (OSError, ValueError):
                value = None
            if isinstance(value, int) and value > 0:
                limit = min(limit, value)
        return limit

    @staticmethod
    def _pooling(source: str) -> str:
        config = Path(source) / "1_Pooling" / "config.json"
        if config.is_file():
            try:
                data = json.loads(config.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return "mean"
            if data.get("pooling_mode_cls_token") and not data.get("pooling_mode_mean_tokens"):
                return "cls"
        return "mean"

    def encode(self, texts: list[str], batch_size: int) -> list[list[float]]:
        torch = self.torch
        out: list[list[float] | None] = [None] * len(texts)
        # Sort by length so each batch pads little; pooling over the mask makes padding harmless.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with self.lock, torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                hidden = self.model(**batch)[0]
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                if self.pooling == "cls":
                    pooled = hidden[:, 0]
                else:
                    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                for row, i in enumerate(idx):
                    out[i] = [float(x) for x in pooled[row].tolist()]
        return [v if v is not None else [] for v in out]


_models: dict[str, _LocalModel] = {}
_models_lock = threading.Lock()


def _load_local(source: str) -> _LocalModel:
    # Loading takes seconds; hold the lock so two threads never load the same model twice.
    with _models_lock:
        model = _models.get(source)
        if model is None:
            model = _LocalModel(source)
            _models[source] = model
        return model


def loaded_local_models() -> list[str]:
    """Sources of the local embedding models loaded in this process (for tests)."""
    with _models_lock:
        return list(_models)


def local_model_fingerprint(path: str) -> str:
    """A short hash of a model directory's config and weight file names and sizes: stable across
    machines (unlike the absolute path) and cheap (no weights read)."""
    root = Path(path)
    digest = hashlib.sha256()
    for name in ("config.json", "tokenizer_config.json", "sentence_bert_config.json"):
        file = root / name
        if file.is_file():
            digest.update(name.encode())
            digest.update(file.read_bytes())
    for file in sorted(root.iterdir()):
        if file.suffix in {".safetensors", ".bin", ".pt", ".h5", ".msgpack"} and file.is_file():
            digest.update(f"{file.name}:{file.stat().st_size}".encode())
    return digest.hexdigest()[:16]


class LocalEmbedder(Embedder):
    """Embeddings from a local transformer (hub id or directory): mean pooling over the attention
    mask (CLS pooling when the directory's sentence-transformers config asks for it), L2
    normalised. Loads the model on the first text to embed, once per process."""

    def __init__(
        self,
        source: str,
        *,
        batch_size: int = 32,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(cache_size=cache_size)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ScorerConfigError(
                "embedding", "batch_size", f"must be a positive integer, not {batch_size!r}"
            )
        self.source = source
        self.batch_size = batch_size
        self._pending: dict[asyncio.AbstractEventLoop, _PendingTexts] = {}

    def identity(self) -> dict[str, Any]:
        if os.path.isdir(self.source):
            name = Path(self.source).resolve().name
            if name == "model":  # e.g. a package's bundled model: name it by its parent too
                name = f"{Path(self.source).resolve().parent.name}/{name}"
            return {
                "backend": "local",
                "model": name,
                "fingerprint": local_model_fingerprint(self.source),
                "pooling": "sentence-transformers",
            }
        return {"backend": "local", "model": self.source, "pooling": "sentence-transformers"}

    def _encode(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        model = _load_local(self.source)
        return model.encode(texts, self.batch_size), Usage()

    async def _compute(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        # Texts asked for in one turn of the loop (concurrent scorings, e.g. score_many's rows)
        # are encoded together, off the loop so judge calls beside it keep flowing.
        loop = asyncio.get_running_loop()
        batch = self._pending.get(loop)
        if batch is None:
            batch = self._pending[loop] = _PendingTexts(loop.create_future())
            loop.call_soon(self._launch, loop)
        batch.texts.update(dict.fromkeys(texts))
        # shield: one caller's cancellation must not cancel the batch the others wait for.
        table = await asyncio.shield(batch.result)
        return [table[t] for t in texts], Usage()

    def _launch(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop)
        task = loop.create_task(self._run_batch(batch))
        _background_tasks.add(task)
        task.add_done_callback(_background_tasks.discard)

    async def _run_batch(self, batch: _PendingTexts) -> None:
        texts = list(batch.texts)
        try:
            vectors, _ = await asyncio.to_thread(self._encode, texts)
        except Exception as exc:  # every waiting caller gets it, whatever it is
            batch.result.set_exception(exc)
        else:
            batch.result.set_result(dict(zip(texts, vectors, strict=True)))

    def _compute_sync(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        return self._encode(texts)

    def __repr__(self) -> str:
        return f"LocalEmbedder({self.source!r})"


class _PendingTexts:
    """Texts collected in one loop turn and the future of their vectors."""

    def __init__(self, result: asyncio.Future[dict[str, list[float]]]) -> None:
        self.texts: dict[str, None] = {}
        self.result = result


_background_tasks: set[asyncio.Task[None]] = set()


# -- choosing a backend ---------------------------------------------------------------------------


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``(backend, model)`` for a model spec: ``"openai:NAME"`` / ``"openai"``, ``"local:SOURCE"``,
    or a bare name (an existing directory or an ``owner/name`` hub id is local, anything else is
    an endpoint model). ``model`` is empty for a bare ``"openai"`` (the judge's default)."""
    text = spec.strip()
    lowered = text.lower()
    if lowered in {"openai", "openai:"}:
        return "openai", ""
    if lowered.startswith("openai:"):
        return "openai", text[len("openai:") :].strip()
    if lowered.startswith("local:"):
        return "local", text[len("local:") :].strip()
    if os.path.isdir(os.path.expanduser(text)) or "/" in text or os.sep in text:
        return "local", text
    return "openai", text


def make_embedder(ctx: EmbeddingHost, model: str | None = None, **options: Any) -> Embedder:
    """The embedder for ``model`` (see :func:`parse_model_spec`; ``None``: the run's default).

    Options: the judge options ``base_url``, ``api_key``, ``timeout``, ``max_tries`` (endpoint
    backend), ``batch_size`` (local backend), ``scorer`` (a name for error messages). Options of
    the other backend are ignored. Raises :class:`ScorerConfigError` for an unusable spec.
    """
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ScorerConfigError(
            str(options.get("scorer") or "embedding"),
            "model",
            f"must be an embedding model name, a hub id or a directory, not {model!r}",
            hint="e.g. 'openai:text-embedding-3-small' or 'local:/path/to/all-MiniLM-L6-v2'",
        )
    spec = model if model is not None else ctx.settings.embedding_model
    if spec is None:
        backend, name = "openai", ""
    else:
        backend, name = parse_model_spec(spec)
    scorer = options.get("scorer")
    if backend == "local":
        if not name:
            raise ScorerConfigError(
                str(scorer or "embedding"),
                "model",
                "'local:' needs a hub id or a directory after the colon",
            )
        batch_size = options.get("batch_size")
        return LocalEmbedder(
            os.path.expanduser(name), batch_size=32 if batch_size is None else batch_size
        )
    client_options = {k: options[k] for k in _CLIENT_OPTIONS if options.get(k) is not None}
    return OpenAIEmbedder(ctx, name or None, client_options, scorer=scorer)


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of two vectors, capped at 1 (rounding can push it just above); 0 when either is a
    zero vector. Vectors of different lengths are an error."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different lengths ({len(a)} and {len(b)})")
    dot = 0.0
    na = 0.0
    nb = 0.0
    for x, y in zip(a, b, strict=True):
        dot += x * y
        na += x * x
        nb += y * y
    denom = (na**0.5) * (nb**0.5)
    if denom == 0.0:
        return 0.0
    return float(min(dot / denom, 1.0))

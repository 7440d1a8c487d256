"""BERTScore (Arthur Bench ``bertscore``) and hedging language (Bench ``hedging_language``).

Models and tokenizers load through the bert-score package (``bert_score.utils.get_model`` /
``get_tokenizer`` / ``sent_encode``), so a hub id or a directory behaves as it does there: the
encoder is cut after ``num_layers`` layers and the last kept layer's token embeddings are used.
The greedy matching is computed here, batched, with padded positions masked to ``-inf`` before
each max: bert-score's own batched matching multiplies the similarity matrix by the padding mask,
so a padded position (similarity 0) beats real tokens whose best similarity is negative, and a
pair's score then depends on its batch mates. Ours equals bert-score's one-pair-at-a-time score
(within float32 rounding, ~1e-7) whatever the batch.

Like bert-score, ``[CLS]``/``[SEP]`` (the tokenizer's ``cls_token_id`` / ``sep_token_id``) take
part in the matching as candidates of the max but carry zero weight themselves when ``idf`` is
off; an empty side (only the two special tokens) scores P = R = F = 0; a NaN F1 (P + R = 0) is 0.

Models load lazily, on the first pair to score, once per process per (model, num_layers); the
token embeddings of recent sentences are kept per model (an LRU), so a fixed reference such as
the hedge phrase is encoded once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, final

from pytest_llmeval.core.errors import (
    ScorerConfigError,
    ScorerInputError,
    ScorerNotAvailableError,
    describe_value,
)
from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.judge.embeddings import INSTALL_HINT, local_model_fingerprint

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = [
    "DEFAULT_HEDGE",
    "DEFAULT_MODEL",
    "PRF",
    "BERTScore",
    "BertScoreEngine",
    "HedgingLanguage",
    "get_engine",
]

DEFAULT_MODEL = "microsoft/deberta-v3-base"
#: Bench's fixed hedge, the reference of ``hedging_language``.
DEFAULT_HEDGE = "As an AI language model, I don't have personal opinions, emotions, or beliefs."
#: Sentences whose token embeddings are kept per model.
SENTENCE_CACHE_SIZE = 4096


@final
@dataclass(frozen=True)
class PRF:
    """BERTScore precision, recall and F1 of one (candidate, reference) pair."""

    precision: float
    recall: float
    f1: float


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _strip_local(model: str) -> str:
    model = model.strip()
    if model.lower().startswith("local:"):
        model = model[len("local:") :].strip()
    return os.path.expanduser(model) if model.startswith("~") else model


class BertScoreEngine:
    """A loaded bert-score model + tokenizer with batch-invariant greedy matching.

    Thread-safe: one forward pass at a time (torch already uses every core).
    """

    def __init__(self, model_type: str, num_layers: int) -> None:
        try:
            import torch
            from bert_score.utils import get_model, get_tokenizer
        except ImportError as exc:
            raise ScorerNotAvailableError(
                f"BERTScore needs torch, transformers and bert-score ({exc.name} is missing): "
                f"{INSTALL_HINT}"
            ) from exc
        self.model_type = model_type
        self.num_layers = num_layers
        self.torch = torch
        try:
            self.tokenizer: Any = get_tokenizer(model_type, use_fast=False)
            self.model: Any = get_model(model_type, num_layers)
        except (OSError, ValueError) as exc:
            raise ScorerNotAvailableError(
                f"could not load the BERTScore model {model_type!r}: {exc}. Set model= to a "
                "local directory (with num_layers=...) or make the hub id available offline "
                "(HF_HUB_OFFLINE=1 needs it in the local hub cache)"
            ) from exc
        except ImportError as exc:  # e.g. a SentencePiece tokenizer without sentencepiece
            raise ScorerNotAvailableError(
                f"could not load the BERTScore model {model_type!r}: {exc}. {INSTALL_HINT}"
            ) from exc
        except AssertionError as exc:  # bert-score's own check of num_layers
            raise ScorerConfigError("bertscore", "num_layers", str(exc)) from exc
        self.model.eval()
        self.special_ids = frozenset(
            i for i in (self.tokenizer.sep_token_id, self.tokenizer.cls_token_id) if i is not None
        )
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else 0
        self.lock = threading.Lock()
        self._sentences: OrderedDict[str, tuple[Any, tuple[int, ...]]] = OrderedDict()

    # -- encoding -------------------------------------------------------------------------------

    def clear_cache(self) -> None:
        """Forget the cached token embeddings."""
        with self.lock:
            self._sentences.clear()

    def _encode(self, sentences: Sequence[str], batch_size: int) -> dict[str, Any]:
        """Unit-normalised token embeddings ``[tokens, dim]`` and token ids of each sentence.
        Caller holds the lock."""
        torch = self.torch
        out: dict[str, Any] = {}
        todo: list[tuple[str, list[int]]] = []
        for sent in dict.fromkeys(sentences):
            hit = self._sentences.get(sent)
            if hit is not None:
                self._sentences.move_to_end(sent)
                out[sent] = hit
            else:
                todo.append((sent, self._token_ids(sent)))
        # Longest first, cut into batches of similar lengths: on a CPU the encoder's cost is
        # per (padded) token, so padding a short sentence to a long one costs what it saves.
        todo.sort(key=lambda item: len(item[1]), reverse=True)
        for start, stop in _length_batches([len(ids) for _, ids in todo], batch_size):
            chunk = todo[start:stop]
            width = max(len(ids) for _, ids in chunk)
            ids_t = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, (_, ids) in enumerate(chunk):
                ids_t[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                mask[row, : len(ids)] = 1
            # What bert_score.utils.bert_encode does, minus its model.eval() per batch.
            emb = self.model(ids_t, attention_mask=mask)[0]
            for row, (sent, ids) in enumerate(chunk):
                vecs = emb[row, : len(ids)].float()
                vecs = vecs / vecs.norm(dim=-1, keepdim=True)
                entry = (vecs, tuple(ids))
                out[sent] = entry
                self._sentences[sent] = entry
        while len(self._sentences) > SENTENCE_CACHE_SIZE:
            self._sentences.popitem(last=False)
        return out

    def _token_ids(self, sent: str) -> list[int]:
        from bert_score.utils import sent_encode

        if not sent.strip():
            # bert-score encodes an empty sentence with build_inputs_with_special_tokens([]),
            # which transformers 5 tokenizers no longer have; encoding "" gives the same ids.
            builder = getattr(type(self.tokenizer), "build_inputs_with_special_tokens", None)
            if builder is not None:
                return list(self.tokenizer.build_inputs_with_special_tokens([]))
            return list(self.tokenizer.encode("", add_special_tokens=True))
        return list(sent_encode(self.tokenizer, sent))

    def _weights(self, ids: tuple[int, ...], idf: Mapping[int, float] | None) -> Any:
        torch = self.torch
        if idf is None:
            w = [0.0 if i in self.special_ids else 1.0 for i in ids]
        else:
            w = [float(idf.get(i, idf.get(-1, 0.0))) for i in ids]
        return torch.tensor(w, dtype=torch.float32)

    # -- matching -------------------------------------------------------------------------------

    def score_pairs(
        self,
        cands: Sequence[str],
        refs: Sequence[str],
        *,
        batch_size: int = 64,
        idf: Mapping[int, float] | None = None,
    ) -> list[PRF]:
        """P/R/F1 of each (candidate, reference) pair, batched, independent of batch mates.

        ``idf`` maps token ids to weights (``-1``: the weight of unseen ids); ``None`` is uniform
        weights with ``[CLS]``/``[SEP]`` at zero (bert-score's ``idf=False``).
        """
        if len(cands) != len(refs):
            raise ValueError(f"{len(cands)} candidates for {len(refs)} references")
        if not cands:
            return []
        torch = self.torch
        results: list[PRF] = []
        with self.lock, torch.inference_mode():
            encoded = self._encode(list(cands) + list(refs), batch_size)
            for start in range(0, len(cands), batch_size):
                hyp = [encoded[c] for c in cands[start : start + batch_size]]
                ref = [encoded[r] for r in refs[start : start + batch_size]]
                results.extend(self._greedy(hyp, ref, idf))
        return results

    def _pad(
        self, items: list[tuple[Any, tuple[int, ...]]], idf: Mapping[int, float] | None
    ) -> tuple[Any, Any, Any]:
        torch = self.torch
        n = len(items)
        width = max(e.shape[0] for e, _ in items)
        dim = items[0][0].shape[1]
        emb = torch.zeros((n, width, dim), dtype=torch.float32)
        mask = torch.zeros((n, width), dtype=torch.bool)
        weight = torch.zeros((n, width), dtype=torch.float32)
        for row, (e, ids) in enumerate(items):
            length = e.shape[0]
            emb[row, :length] = e
            mask[row, :length] = True
            weight[row, :length] = self._weights(ids, idf)
        return emb, mask, weight

    def _greedy(
        self,
        hyp: list[tuple[Any, tuple[int, ...]]],
        ref: list[tuple[Any, tuple[int, ...]]],
        idf: Mapping[int, float] | None,
    ) -> list[PRF]:
        torch = self.torch
        h_emb, h_mask, h_w = self._pad(hyp, idf)
        r_emb, r_mask, r_w = self._pad(ref, idf)
        sim = torch.bmm(h_emb, r_emb.transpose(1, 2))
        valid = h_mask.unsqueeze(2) & r_mask.unsqueeze(1)
        # The fix: a padded position can never be the best match of a real token.
        sim = sim.masked_fill(~valid, float("-inf"))
        word_p = sim.max(dim=2).values.masked_fill(~h_mask, 0.0)
        word_r = sim.max(dim=1).values.masked_fill(~r_mask, 0.0)
        precision = (word_p * (h_w / h_w.sum(dim=1, keepdim=True))).sum(dim=1)
        recall = (word_r * (r_w / r_w.sum(dim=1, keepdim=True))).sum(dim=1)
        out: list[PRF] = []
        for row in range(len(hyp)):
            p = float(precision[row])
            r = float(recall[row])
            # bert-score's rule for an empty side: only [CLS] and [SEP], i.e. two tokens.
            if len(hyp[row][1]) == 2 or len(ref[row][1]) == 2:
                p = r = 0.0
            f = 2 * p * r / (p + r) if (p + r) != 0 and not math.isnan(p + r) else 0.0
            out.append(PRF(_finite(p), _finite(r), _finite(f)))
        return out

    def idf_weights(self, corpus: Sequence[str]) -> dict[int, float]:
        """bert-score's idf over ``corpus`` (``log((N + 1) / (df + 1))``), unseen ids under -1."""
        from bert_score.utils import get_idf_dict

        with self.lock:
            table = get_idf_dict(list(corpus), self.tokenizer, nthreads=0)
        weights = {int(k): float(v) for k, v in table.items()}
        weights[-1] = math.log(len(corpus) + 1)
        return weights


#: The fixed cost of one forward pass, in tokens: what a batch boundary costs against padding.
_BATCH_OVERHEAD_TOKENS = 24


def _length_batches(lengths: Sequence[int], batch_size: int) -> list[tuple[int, int]]:
    """Cut ``lengths`` (sorted longest first) into runs of at most ``batch_size`` minimising
    padded tokens plus a fixed overhead per batch (dynamic programming, O(n * batch_size))."""
    n = len(lengths)
    best = [0.0] + [math.inf] * n
    cut = [0] * (n + 1)
    for stop in range(1, n + 1):
        for start in range(max(0, stop - batch_size), stop):
            cost = best[start] + (stop - start) * lengths[start] + _BATCH_OVERHEAD_TOKENS
            if cost < best[stop]:
                best[stop] = cost
                cut[stop] = start
    spans: list[tuple[int, int]] = []
    stop = n
    while stop > 0:
        spans.append((cut[stop], stop))
        stop = cut[stop]
    return spans[::-1]


def _finite(x: float) -> float:
    return 0.0 if math.isnan(x) else x


_engines: dict[tuple[str, int], BertScoreEngine] = {}
_engines_lock = threading.Lock()


def get_engine(model_type: str, num_layers: int) -> BertScoreEngine:
    """The process's engine for (model, num_layers), loaded on first use."""
    key = (model_type, num_layers)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = BertScoreEngine(model_type, num_layers)
            _engines[key] = engine
        return engine


def loaded_engines() -> list[tuple[str, int]]:
    """(model, num_layers) of the engines loaded in this process (for tests)."""
    with _engines_lock:
        return list(_engines)


class _PairBatcher:
    """Scores together the pairs that concurrent ``acompute`` calls submit in one turn of the
    event loop (``score_many`` gathers one coroutine per row): one batched call, off the loop.
    Safe because a pair's score does not depend on its batch mates. Used from one loop only."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, int | None, int], list[_Submitted]] = {}

    async def submit(self, scorer: _BertScorerBase, cand: str, ref: str) -> PRF:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[PRF] = loop.create_future()
        key = (scorer.model_type(), scorer.options["num_layers"], scorer.options["batch_size"])
        queue = self._pending.get(key)
        if queue is None:
            queue = self._pending[key] = []
            # call_soon runs after the steps already queued: the other rows' first steps.
            loop.call_soon(self._start, loop, key, scorer)
        queue.append((cand, ref, fut))
        return await fut

    def _start(
        self,
        loop: asyncio.AbstractEventLoop,
        key: tuple[str, int | None, int],
        scorer: _BertScorerBase,
    ) -> None:
        queue = self._pending.pop(key, [])
        task = loop.create_task(self._flush(queue, scorer))
        _background_tasks.add(task)
        task.add_done_callback(_background_tasks.discard)

    @staticmethod
    async def _flush(queue: list[_Submitted], scorer: _BertScorerBase) -> None:
        cands = [c for c, _, _ in queue]
        refs = [r for _, r, _ in queue]
        try:
            # Model resolution and loading happen in the worker thread too.
            prfs = await asyncio.to_thread(scorer.pairs, cands, refs)
        except Exception as exc:  # handed to every waiting row, whatever it is
            for _, _, fut in queue:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, _, fut), prf in zip(queue, prfs, strict=True):
            if not fut.done():
                fut.set_result(prf)


_Submitted = tuple[str, str, "asyncio.Future[PRF]"]
_background_tasks: set[asyncio.Task[None]] = set()
_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _PairBatcher] = (
    weakref.WeakKeyDictionary()
)


def _batcher() -> _PairBatcher:
    loop = asyncio.get_running_loop()
    with _engines_lock:
        batcher = _batchers.get(loop)
        if batcher is None:
            batcher = _batchers[loop] = _PairBatcher()
        return batcher


def _known_layers(model_type: str) -> int | None:
    from bert_score.utils import model2layers

    value = model2layers.get(model_type)
    return int(value) if value is not None else None


def _bert_score_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bert-score")
    except PackageNotFoundError:
        return "not installed"


class _BertScorerBase(Scorer):
    """Options and model resolution shared by both scorers."""

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def validate_options(self) -> None:
        model = self.options["model"]
        if not isinstance(model, (str, Path)) or not str(model).strip():
            raise ScorerConfigError(
                self.name,
                "model",
                f"must be a hub id or a model directory, not {model!r}",
                hint=f"Default: {DEFAULT_MODEL!r}",
            )
        self.options["model"] = str(model)
        layers = self.options["num_layers"]
        if layers is not None and (
            isinstance(layers, bool) or not isinstance(layers, int) or layers < 0
        ):
            raise ScorerConfigError(
                self.name, "num_layers", f"must be a non-negative integer, not {layers!r}"
            )
        if layers is None and os.path.isdir(_strip_local(str(model))):
            raise ScorerConfigError(
                self.name,
                "num_layers",
                f"is required for a local model directory ({model!r}): bert-score only knows "
                "the best layer of hub models it was tuned on",
                hint="Pass num_layers=N, e.g. num_layers=6 for all-MiniLM-L6-v2 (its last layer)",
            )
        size = self.options["batch_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ScorerConfigError(
                self.name, "batch_size", f"must be a positive integer, not {size!r}"
            )

    def model_type(self) -> str:
        return _strip_local(self.options["model"])

    def resolved_layers(self) -> int:
        layers = self.options["num_layers"]
        if layers is not None:
            return int(layers)
        model = self.model_type()
        try:
            known = _known_layers(model)
        except ImportError as exc:
            raise ScorerNotAvailableError(
                f"scorer {self.name!r} needs bert-score ({exc.name} is missing): {INSTALL_HINT}"
            ) from exc
        if known is None:
            raise ScorerConfigError(
                self.name,
                "num_layers",
                f"is required for {model!r}: bert-score has no tuned layer for this model",
                hint="Pass num_layers=N (the encoder layer whose embeddings are matched)",
            )
        return known

    def engine(self) -> BertScoreEngine:
        return get_engine(self.model_type(), self.resolved_layers())

    def idf_table(self, engine: BertScoreEngine) -> Mapping[int, float] | None:
        return None

    def to_score(self, prf: PRF) -> Score:
        """Turn (P, R, F1) into this scorer's score; each concrete scorer defines it."""
        raise TypeError(f"{type(self).__name__} must define to_score()")

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        model = self.model_type()
        ident: dict[str, Any] = {
            "method": "batch-invariant greedy matching",
            "bert_score": _bert_score_version(),
        }
        if os.path.isdir(model):
            ident["model"] = Path(model).resolve().name
            ident["fingerprint"] = local_model_fingerprint(model)
        else:
            ident["model"] = model
        # The tuned layer of a hub model is fixed by the bert-score version recorded above.
        ident["num_layers"] = self.options["num_layers"]
        return ident

    def identity_without_context(self) -> dict[str, Any]:
        ident = super().identity_without_context()
        if os.path.isdir(self.model_type()):
            # extra_identity names it by fingerprint; a path differs from machine to machine.
            ident["options"] = {**ident["options"], "model": "local directory"}
        return ident

    def text(self, inputs: Mapping[str, Any], name: str) -> str:
        value = inputs[name]
        if isinstance(value, (bytes, bytearray)):
            raise ScorerInputError(
                self.name,
                name,
                f"must be text, not {describe_value(value)}",
                hint="Decode it first",
            )
        return _text_of(value)

    async def apair(self, cand: str, ref: str) -> PRF:
        """One pair's P/R/F1 from async code: rows scored concurrently share one batch (idf
        off), and the forward pass runs off the event loop so judge calls keep flowing."""
        if self.options.get("idf") in (False, None):
            return await _batcher().submit(self, cand, ref)
        return (await asyncio.to_thread(self.pairs, [cand], [ref]))[0]

    def pairs(self, cands: Sequence[str], refs: Sequence[str]) -> list[PRF]:
        """P/R/F1 of each (candidate, reference) pair through the batched engine."""
        engine = self.engine()
        return engine.score_pairs(
            list(cands),
            list(refs),
            batch_size=self.options["batch_size"],
            idf=self.idf_table(engine),
        )


class BERTScore(_BertScorerBase):
    """BERTScore of ``output`` (candidate) against ``expected`` (reference), reported as
    ``precision_weight * P + (1 - precision_weight) * R`` (Bench: 0.1 P + 0.9 R). Declared range
    -1..1 (averages of cosines; 0..1 in practice, below 0 only for unrelated text with some
    models), higher is better.

    Options: ``model`` (hub id or directory; default ``microsoft/deberta-v3-base``),
    ``num_layers`` (default: bert-score's tuned layer for a known hub model, 9 for the default;
    required for a directory), ``precision_weight`` (0.1), ``batch_size`` (64), ``idf`` (False:
    uniform weights; a list of reference texts: bert-score's idf over that fixed corpus; a
    mapping token id -> weight). ``idf=True`` is refused: bert-score then takes the idf from the
    references of the call, which makes a score depend on the other cases of a batch.
    Metadata: ``precision``, ``recall``, ``f1``. Raises ScorerNotAvailableError without the
    ``bertscore`` extra, ScorerConfigError for bad options.
    """

    name: ClassVar[str] = "bertscore"
    # P and R average cosines: -1..1 (in practice 0..1; negative only for unrelated texts
    # with some models). Bench reports the raw value, so no clamping to 0.
    score_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    aliases: ClassVar[tuple[str, ...]] = ("BERTScore", "bert_score")
    required_inputs: ClassVar[tuple[str, ...]] = ("output", "expected")
    version: ClassVar[str] = "1"
    default_options: ClassVar[Mapping[str, Any]] = {
        "model": DEFAULT_MODEL,
        "num_layers": None,
        "precision_weight": 0.1,
        "batch_size": 64,
        "idf": False,
    }
    description: ClassVar[str] = "BERTScore 0.1 P + 0.9 R of output vs expected (batch-invariant)"

    def __init__(self, **options: Any) -> None:
        self._idf_cache: dict[int, Mapping[int, float]] = {}
        super().__init__(**options)

    def validate_options(self) -> None:
        super().validate_options()
        w = self.options["precision_weight"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= w <= 1.0:
            raise ScorerConfigError(
                self.name,
                "precision_weight",
                f"must be a number between 0 and 1, not {w!r}",
                hint="Bench uses 0.1 (0.1 * precision + 0.9 * recall)",
            )
        idf = self.options["idf"]
        if idf is True:
            raise ScorerConfigError(
                self.name,
                "idf",
                "=True would take the idf from the references scored together, so a case's score "
                "would depend on its batch",
                hint="Pass idf=[reference texts] (a fixed corpus) or a mapping token id -> weight",
            )
        if idf in (False, None):
            return
        if isinstance(idf, Mapping):
            if not all(
                isinstance(k, int) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in idf.items()
            ):
                raise ScorerConfigError(
                    self.name, "idf", "as a mapping must map token ids (int) to weights (numbers)"
                )
            return
        if isinstance(idf, (list, tuple)) and idf and all(isinstance(t, str) for t in idf):
            return
        raise ScorerConfigError(
            self.name,
            "idf",
            "must be False, a non-empty list of reference texts or a mapping, not "
            + describe_value(idf),
        )

    def idf_table(self, engine: BertScoreEngine) -> Mapping[int, float] | None:
        idf = self.options["idf"]
        if idf in (False, None):
            return None
        if isinstance(idf, Mapping):
            return {int(k): float(v) for k, v in idf.items()}
        key = id(engine)
        table = self._idf_cache.get(key)
        if table is None:
            table = engine.idf_weights(list(idf))
            self._idf_cache[key] = table
        return table

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        ident = dict(super().extra_identity(ctx))
        idf = self.options["idf"]
        if isinstance(idf, (list, tuple)):
            ident["idf_corpus"] = hashlib.sha256("\x00".join(idf).encode()).hexdigest()[:16]
        return ident

    def identity_without_context(self) -> dict[str, Any]:
        ident = super().identity_without_context()
        # A corpus can be large: its hash (in extra_identity) stands in for it.
        if isinstance(self.options["idf"], (list, tuple)):
            ident["options"] = {**ident["options"], "idf": "corpus"}
        return ident

    def to_score(self, prf: PRF) -> Score:
        w = float(self.options["precision_weight"])
        value = w * prf.precision + (1.0 - w) * prf.recall
        return Score(
            # Clamped only against float32 rounding (1.0000001 for identical texts).
            value=min(max(value, -1.0), 1.0),
            scorer=self.name,
            metadata={"precision": prf.precision, "recall": prf.recall, "f1": prf.f1},
        )

    def score_pairs(self, outputs: Sequence[Any], expecteds: Sequence[Any]) -> list[Score]:
        """Scores of many (output, expected) pairs in batches; each equals its one-pair score."""
        if len(outputs) != len(expecteds):
            raise ValueError(f"{len(outputs)} outputs for {len(expecteds)} expected values")
        cands = [_text_of(o) for o in outputs]
        refs = [_text_of(e) for e in expecteds]
        return [self.to_score(prf) for prf in self.pairs(cands, refs)]

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        return self.score_pairs([self.text(inputs, "output")], [self.text(inputs, "expected")])[0]

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        out, exp = self.text(inputs, "output"), self.text(inputs, "expected")
        return self.to_score(await self.apair(out, exp))


class HedgingLanguage(_BertScorerBase):
    """BERTScore F1 of ``output`` against Bench's fixed hedge, "As an AI language model, I don't
    have personal opinions, emotions, or beliefs." Range 0..1, lower is better (less hedging);
    the useful threshold depends on the model.

    Options: ``model``, ``num_layers``, ``batch_size`` as for ``bertscore``, and ``hedge`` (the
    reference phrase). Metadata: ``precision``, ``recall``, ``f1``.
    """

    name: ClassVar[str] = "hedging_language"
    aliases: ClassVar[tuple[str, ...]] = ("HedgingLanguage",)
    required_inputs: ClassVar[tuple[str, ...]] = ("output",)
    higher_is_better: ClassVar[bool] = False
    version: ClassVar[str] = "1"
    default_options: ClassVar[Mapping[str, Any]] = {
        "model": DEFAULT_MODEL,
        "num_layers": None,
        "batch_size": 64,
        "hedge": DEFAULT_HEDGE,
    }
    description: ClassVar[str] = (
        "BERTScore F1 of output vs a fixed AI-hedge phrase (lower is better)"
    )

    def validate_options(self) -> None:
        super().validate_options()
        hedge = self.options["hedge"]
        if not isinstance(hedge, str) or not hedge.strip():
            raise ScorerConfigError(
                self.name, "hedge", f"must be a non-empty phrase, not {hedge!r}"
            )

    def to_score(self, prf: PRF) -> Score:
        return Score(
            # F1 of P and R in [0, 1] lies in [0, 1]; the clamp removes float32 overshoot and
            # the meaningless F1 of a negative P or R (its raw value stays in the metadata).
            value=min(max(prf.f1, 0.0), 1.0),
            scorer=self.name,
            metadata={"precision": prf.precision, "recall": prf.recall, "f1": prf.f1},
        )

    def score_pairs(self, outputs: Sequence[Any]) -> list[Score]:
        """Scores of many outputs in batches; each equals its one-output score."""
        cands = [_text_of(o) for o in outputs]
        refs = [self.options["hedge"]] * len(cands)
        return [self.to_score(prf) for prf in self.pairs(cands, refs)]

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        return self.score_pairs([self.text(inputs, "output")])[0]

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        self.check_inputs(inputs)
        prf = await self.apair(self.text(inputs, "output"), self.options["hedge"])
        return self.to_score(prf)

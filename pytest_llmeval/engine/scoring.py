"""The scorer contract: ``Score`` (a result), ``Usage`` (judge cost), ``Scorer`` (the base class)
and the ``@scorer`` decorator for function scorers.

Scorers know nothing of pytest. A scorer receives its inputs as a dict (``output``, ``expected``,
``input``, ``context`` and any extra fields it declares) plus a :class:`ScoringContext` that hands
out judge clients and embedders lazily, and returns a :class:`Score`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import ScorerConfigError, ScorerInputError
from pytest_llmeval.core.redaction import hide_secrets, redact_text, redact_url
from pytest_llmeval.core.scores import Score, Usage, canonical_json
from pytest_llmeval.judge import params as _params
from pytest_llmeval.judge.params import JUDGE_OPTIONS

if TYPE_CHECKING:
    from pytest_llmeval.core.model import Instrument
    from pytest_llmeval.engine.context import ScoringContext

__all__ = ["JUDGE_OPTIONS", "Score", "Scorer", "Usage", "check_bound_range", "code_fingerprint"]

_SECRET_OPTIONS = frozenset({"api_key"})


def identity_of(value: Any) -> Any:
    """A JSON-safe, stable stand-in for an option value, for cache keys."""
    if isinstance(value, Scorer):
        return {"scorer": value.identity_without_context()}
    if isinstance(value, type) and issubclass(value, Scorer):
        return {"scorer": value.name, "version": value.version}
    if callable(value):
        mod = getattr(value, "__module__", "?")
        qual = getattr(value, "__qualname__", repr(value))
        return {"callable": f"{mod}.{qual}"}
    if isinstance(value, Mapping):
        return {str(k): identity_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [identity_of(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


class Scorer:
    """Base class of every scorer.

    Subclasses set the class attributes and implement :meth:`compute` (sync) or :meth:`acompute`
    (async; judge scorers). Options are keyword arguments of the constructor, declared with their
    defaults in ``default_options``; an unknown option is a :class:`ScorerConfigError`.

    Class attributes:

    - ``name``: the snake_case registry name; ``aliases``: other spellings (the reference's own).
    - ``required_inputs`` / ``optional_inputs``: input fields (``output``, ``expected``, ``input``,
      ``context`` or scorer-specific ones such as ``criteria``).
    - ``higher_is_better``: direction; a bare bound in ``assert_score`` follows it.
    - ``score_range``: (low, high) of ``Score.value``.
    - ``version``: bump when the computation changes; it is part of the cache key.
    - ``uses_judge``: True for scorers that call an LLM (they accept :data:`JUDGE_OPTIONS`).
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    required_inputs: ClassVar[tuple[str, ...]] = ("output",)
    optional_inputs: ClassVar[tuple[str, ...]] = ()
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    version: ClassVar[str] = "1"
    uses_judge: ClassVar[bool] = False
    #: the two inputs a judge compares (a pairwise scorer: battle, summary): ``swap=True`` asks
    #: again with them exchanged, and the scorer's range mirrored reads that answer back
    swap_fields: ClassVar[tuple[str, str] | None] = None
    default_options: ClassVar[Mapping[str, Any]] = {}
    description: ClassVar[str] = ""

    def __init__(self, **options: Any) -> None:
        allowed = dict(self.default_options)
        if self.uses_judge:
            allowed.update({k: v for k, v in JUDGE_OPTIONS.items() if k not in allowed})
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            valid = ", ".join(sorted(allowed)) or "none"
            raise ScorerConfigError(
                self.name or type(self).__name__,
                unknown[0],
                "is not an option of this scorer",
                hint=f"Valid options: {valid}",
            )
        merged = {**allowed, **options}
        self.options: dict[str, Any] = merged
        self.validate_options()

    # -- hooks for subclasses -------------------------------------------------------------

    def validate_options(self) -> None:
        """Check ``self.options``; raise :class:`ScorerConfigError` on a bad value."""

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        """Score one case synchronously. The default runs :meth:`acompute` on the context's loop."""
        if type(self).acompute is Scorer.acompute:
            raise TypeError(f"{type(self).__name__} must implement compute() or acompute()")
        return ctx.run(self.acompute(inputs, ctx))

    async def acompute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        """Score one case asynchronously. The default calls :meth:`compute`."""
        return self.compute(inputs, ctx)

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        """More cache-key material: prompt template hash, judge model and sampling parameters,
        the method used (e.g. which tagger ran). Judge scorers add the judge identity here."""
        return {}

    def is_self_contained(self) -> bool:
        """Whether :meth:`compute` makes no judge or embedder call, neither itself nor through
        another scorer. ``score()`` then runs it without the per-scoring usage collector (the
        judge usage a failed scoring carries, and the per-scoring judge deadline), which costs
        more than a cheap scorer's whole computation. Default False. The built-in deterministic
        scorers say True for their own class only: a subclass may override ``compute``."""
        return False

    def stores_results(self) -> bool:
        """Whether results go to the result store (and are looked up there). Default True. A
        built-in scorer whose computation costs less than a lookup (building the key alone
        encodes every input) says False for its own class only: its result is computed every
        time, identical to what the store would hold, and a record says ``cached`` False. Not
        part of the scorer's identity: changing it never makes stored results or a baseline
        look like another instrument's."""
        return True

    def value_function(self) -> Callable[[Any, Any], float] | None:
        """For a self-contained scorer whose score is its value alone (no rationale, metadata or
        usage), computed from ``output`` and ``expected`` only: the function of the two (None
        for one not given) that gives exactly the value :meth:`compute` gives (the same code:
        ``compute`` calls it). ``score()`` then calls it directly, without building an inputs
        dict and an intermediate Score. Default None; the built-in lexical scorers give theirs
        for their own class only."""
        return None

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """The inputs as the cache key sees them (default: as given). Override when an input
        names something whose contents can change under the same name, e.g. a directory."""
        return inputs

    # -- machinery ------------------------------------------------------------------------

    @classmethod
    def input_fields(cls) -> frozenset[str]:
        """The names this scorer takes as inputs (required and optional), computed once."""
        cached = cls.__dict__.get("_input_fields")
        if cached is None or cached[0] != (cls.required_inputs, cls.optional_inputs):
            cached = (
                (cls.required_inputs, cls.optional_inputs),
                frozenset(cls.required_inputs + cls.optional_inputs),
            )
            cls._input_fields = cached  # type: ignore[attr-defined]
        fields: frozenset[str] = cached[1]
        return fields

    def check_inputs(self, inputs: Mapping[str, Any]) -> None:
        """Raise :class:`ScorerInputError` for the first required input that is missing or None."""
        for name in self.required_inputs:
            if inputs.get(name) is None:
                raise ScorerInputError(
                    self.name,
                    name,
                    "is required but was not given",
                    hint=f"Pass {name}=... to assert_score (required inputs: "
                    f"{', '.join(self.required_inputs)})",
                )

    def public_options(self) -> dict[str, Any]:
        """Options without secrets and without unset (None) judge overrides. A URL keeps no
        credentials (``base_url``: user-info and secret parameters as ``***``): these options
        are the scorer's identity, which its instrument shows in reports and its cache key and
        instrument digest hash (a hash of a password is one to guess offline)."""
        out: dict[str, Any] = {}
        for key, value in self.options.items():
            if key in _SECRET_OPTIONS:
                continue
            if key in JUDGE_OPTIONS and key not in self.default_options and value is None:
                continue
            if isinstance(value, str) and "://" in value:
                value = redact_url(value)
            out[key] = value
        return out

    def identity_without_context(self) -> dict[str, Any]:
        ident = {
            "name": self.name,
            "version": self.version,
            "options": identity_of(self.public_options()),
        }
        code = code_fingerprint(type(self))
        if code is not None:
            ident["code"] = code
        return ident

    def identity(self, ctx: ScoringContext) -> dict[str, Any]:
        """Everything that decides this scorer's result apart from the inputs (cache key part)."""
        ident = self.identity_without_context()
        extra = self.extra_identity(ctx)
        if extra:
            ident["extra"] = identity_of(dict(extra))
        return ident

    def identity_json(self, ctx: ScoringContext) -> str:
        """:meth:`identity` as canonical JSON, computed once per (instance, context) and again
        when the run learns that a judge model refuses a parameter (it is then not sent, and the
        key must say so)."""
        memo = self.__dict__.get("_identity_memo")
        learned = _params.generation()
        if memo is not None and memo[0] is ctx and memo[1] == learned:
            text: str = memo[2]
            return text
        text = canonical_json(self.identity(ctx))
        self.__dict__["_identity_memo"] = (ctx, learned, text)
        return text

    def instrument(self, ctx: ScoringContext) -> Instrument:
        """What this scorer measures with in ``ctx``: its identity (as reports may show it:
        secret-looking options hidden), its direction and its range, named by a digest of all
        three. Every record carries the digest, so a comparison of two runs knows whether they
        measured with the same instrument (a scorer re-declared lower-is-better is another
        one). Made once per identity (a cache hit costs one identity lookup)."""
        text = self.identity_json(ctx)
        memo = self.__dict__.get("_instrument_memo")
        if memo is not None and memo[0] is text:
            made: Instrument = memo[1]
            return made
        from pytest_llmeval.core.model import KNOWN_INSTRUMENTS, Instrument, instrument_digest

        identity = hide_secrets(json.loads(text))
        higher = bool(self.higher_is_better)
        lo, hi = float(self.score_range[0]), float(self.score_range[1])
        named = {
            "identity": identity,
            "higher_is_better": higher,
            # JSON has no infinity: an unbounded end is named as such
            "score_range": [x if math.isfinite(x) else str(x) for x in (lo, hi)],
        }
        digest = instrument_digest(canonical_json(named))
        made = KNOWN_INSTRUMENTS.get(digest) or Instrument(
            digest=digest,
            scorer=self.name,
            version=str(self.version),
            higher_is_better=higher,
            score_range=(lo, hi),
            identity=identity,
            uses_judge=bool(self.uses_judge),
        )
        KNOWN_INSTRUMENTS.setdefault(digest, made)
        self.__dict__["_instrument_memo"] = (text, made)
        return made

    def instrument_with(self, ctx: ScoringContext, asked: Mapping[str, Any]) -> Instrument:
        """:meth:`instrument` of a scoring whose judge was asked otherwise than once
        (``judge_samples``, ``swap``: ``asked`` says how): another instrument (a comparison of
        a run that asked once with one that asked five times says so)."""
        from pytest_llmeval.core.model import KNOWN_INSTRUMENTS, instrument_digest

        base = self.instrument(ctx)
        identity = {**base.identity, **asked}
        lo, hi = base.score_range or (float(self.score_range[0]), float(self.score_range[1]))
        named = {
            "identity": identity,
            "higher_is_better": base.higher_is_better,
            "score_range": [x if math.isfinite(x) else str(x) for x in (lo, hi)],
        }
        digest = instrument_digest(canonical_json(named))
        made = KNOWN_INSTRUMENTS.get(digest) or dataclasses.replace(
            base, digest=digest, identity=identity
        )
        KNOWN_INSTRUMENTS.setdefault(digest, made)
        return made

    def __repr__(self) -> str:
        # Public options may still hold a URL with credentials (the judge's base_url).
        opts = ", ".join(f"{k}={redact_text(repr(v))}" for k, v in self.public_options().items())
        return f"{type(self).__name__}({opts})"


def code_fingerprint(cls: type[Scorer]) -> str | None:
    """A hash of a user-defined scorer's own code (the function of an ``@scorer``, the methods a
    ``Scorer`` subclass defines outside this package), so that editing it does not replay results
    cached for the old code. Line numbers are left out: moving code does not change it. What the
    code reads from its module is covered too: the values of the plain constants it names (a
    ``CUTOFF = 0.8`` changed to ``0.9``), its closure's plain values, and the code of the
    functions of its own module it names (helpers), recursively. Helpers in other modules are
    not covered (bump ``version`` when they change). ``None`` for the built-in scorers, whose
    ``version`` says when their results change."""
    memo = cls.__dict__.get("_code_fingerprint")
    if memo is not None:
        return memo[0]  # type: ignore[no-any-return]
    digest = hashlib.sha256()
    found = False
    seen: set[int] = set()
    for klass in cls.__mro__:
        module = getattr(klass, "__module__", "") or ""
        if module == "pytest_llmeval" or module.startswith("pytest_llmeval."):
            continue
        members = dict(vars(klass))
        func = members.pop("_func", None)
        if func is not None:
            members["_func"] = func
        for name in sorted(members):
            target = _function_of(members[name])
            if target is not None:
                found = True
                digest.update(name.encode("utf-8") + b"\0")
                _hash_function(digest, target, seen)
    result = digest.hexdigest()[:16] if found else None
    cls._code_fingerprint = (result,)  # type: ignore[attr-defined]
    return result


def _function_of(member: Any) -> Any:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    func = getattr(member, "__func__", member)  # bound methods
    return func if getattr(func, "__code__", None) is not None else None


#: plain values whose repr names them exactly (a constant's value, not an object's identity)
_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _plain_repr(value: Any, depth: int = 0) -> str | None:
    """``repr(value)`` when it is a plain constant (or a small container of them), else None."""
    if isinstance(value, _PLAIN):
        text = repr(value)
        return text if len(text) <= 10_000 else None
    if depth < 3 and isinstance(value, (tuple, list, frozenset, set)) and len(value) <= 1000:
        items = []
        for v in value:
            item = _plain_repr(v, depth + 1)
            if item is None:
                return None
            items.append(item)
        body = sorted(items) if isinstance(value, (set, frozenset)) else items
        return f"{type(value).__name__}({', '.join(body)})"
    if depth < 3 and isinstance(value, dict) and len(value) <= 1000:
        pairs = []
        for k, v in value.items():
            kr, vr = _plain_repr(k, depth + 1), _plain_repr(v, depth + 1)
            if kr is None or vr is None:
                return None
            pairs.append(f"{kr}: {vr}")
        return "{" + ", ".join(sorted(pairs)) + "}"
    return None


def _hash_function(digest: Any, func: Any, seen: set[int]) -> None:
    if id(func) in seen:
        return
    seen.add(id(func))
    code = func.__code__
    _hash_code(digest, code)
    module = getattr(func, "__module__", None)
    namespace = getattr(func, "__globals__", {})
    for name in sorted(_names(code)):
        if name not in namespace:
            continue
        value = namespace[name]
        plain = _plain_repr(value)
        if plain is not None:
            digest.update(f"{name}={plain}".encode("utf-8", "backslashreplace") + b"\0")
        elif callable(value) and getattr(value, "__module__", None) == module:
            helper = _function_of(value)
            if helper is not None:
                digest.update(name.encode("utf-8") + b"\0")
                _hash_function(digest, helper, seen)
    for cell in getattr(func, "__closure__", None) or ():
        try:
            plain = _plain_repr(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
        if plain is not None:
            digest.update(plain.encode("utf-8", "backslashreplace") + b"\0")


def _names(code: Any) -> set[str]:
    """Every global name ``code`` and the code nested in it can read."""
    out = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            out |= _names(const)
    return out


def _hash_code(digest: Any, code: Any) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode("utf-8"))
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _hash_code(digest, const)
        else:
            digest.update(repr(const).encode("utf-8", "backslashreplace"))


ScoreFunctionResult = float | int | bool | Score | tuple[float, str]


def check_bound_range(
    inst: Scorer | type[Scorer],
    lo: float | None,
    hi: float | None,
    names: tuple[str, str] = ("min", "max"),
) -> None:
    """A bound outside the scorer's range makes the assertion fail whatever the output."""
    r_lo, r_hi = inst.score_range
    direction = "higher is better" if inst.higher_is_better else "lower is better"
    if lo is not None and lo > r_hi:
        raise ScorerConfigError(
            inst.name,
            names[0],
            f"is {lo:g}, above the highest score {r_hi:g}: it can never pass",
            hint=f"{inst.name} scores lie in [{r_lo:g}, {r_hi:g}] ({direction})",
        )
    if hi is not None and hi < r_lo:
        raise ScorerConfigError(
            inst.name,
            names[1],
            f"is {hi:g}, below the lowest score {r_lo:g}: it can never pass",
            hint=f"{inst.name} scores lie in [{r_lo:g}, {r_hi:g}] ({direction})",
        )

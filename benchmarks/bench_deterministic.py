"""Deterministic scorers vs Autoevals 0.4.1, same inputs, same process.

For each of ExactMatch, Levenshtein, NumericDiff, JSONDiff, ValidJSON and ListContains this script
generates 10,000 (output, expected) pairs from a fixed seed, scores them with Autoevals and with
ours, asserts the numbers are identical (to 1e-9) and prints time ratios
``autoevals_time / our_time`` (above 1.0: we are faster) for:

- ``compute``: our Scorer instance's ``compute`` (what a scorer costs);
- ``score()``: ``pytest_llmeval.score(instance, ...)`` with the cache off (the public call, with
  the input checks and the range check on top);
- ``score(name)``: the same with the scorer given by name.

Every ratio must be at least 1.0. It also breaks down the ``score()`` cost per call. Each timing
is the best of ``--repeat`` rounds, the contenders interleaved, so that a busy machine hurts both
sides alike. Times are this thread's CPU time (``--clock cpu``, the default): on a shared machine
a round of a few milliseconds is mostly preempted, which wall time (``--clock wall``) counts
(every contender computes in this thread).

Run: ``pip install -e ".[bench]" && python benchmarks/bench_deterministic.py``. Exit status 1 when
a number differs or any ratio (``compute``, ``score()``, ``score(name)``) is below 1.0.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

N_PAIRS = 10_000
ALPHABET = string.ascii_letters + string.digits + " _-.,éøñ中文字Ωж🙂👍"
WORDS = [
    "Paris",
    "apple",
    "banana",
    "cherry",
    "elderberry",
    "workspace",
    "team",
    "mango",
    "2.2 million",
    "Eiffel Tower",
    "München",
    "café",
    "naïve",
    "🙂 smile",
    "1889",
    "London",
    "grape",
    "lemon",
]
KEYS = ["a", "b", "name", "age", "tags", "c", "ключ", "キー"]


def _text(rng: random.Random, lo: int = 0, hi: int = 24) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(lo, hi)))


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(0, 3)):
        op = rng.randint(0, 2)
        pos = rng.randint(0, len(chars))
        if op == 0:
            chars.insert(pos, rng.choice(ALPHABET))
        elif chars and op == 1:
            del chars[min(pos, len(chars) - 1)]
        elif chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(ALPHABET)
    return "".join(chars)


def _number(rng: random.Random) -> int | float:
    if rng.random() < 0.5:
        return rng.randint(-1000, 1000)
    return round(rng.uniform(-1000, 1000), rng.randint(0, 6))


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 6 if depth < 3 else 3)
    if kind == 0:
        return _number(rng)
    if kind == 1:
        return rng.choice(WORDS) if rng.random() < 0.5 else _text(rng, 0, 8)
    if kind == 2:
        return rng.choice([None, True, False])
    if kind == 3:
        return rng.choice(WORDS)
    if kind in (4, 5):
        return {k: _json_value(rng, depth + 1) for k in rng.sample(KEYS, rng.randint(0, 4))}
    return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def _similar_json(rng: random.Random, value: Any) -> Any:
    """A value near ``value``: same shape mostly, some leaves and keys changed."""
    if isinstance(value, dict):
        out = {k: _similar_json(rng, v) for k, v in value.items() if rng.random() < 0.9}
        if rng.random() < 0.2:
            out[rng.choice(KEYS)] = _json_value(rng, 2)
        return out
    if isinstance(value, list):
        out_list = [_similar_json(rng, v) for v in value if rng.random() < 0.9]
        if rng.random() < 0.2:
            out_list.append(_json_value(rng, 2))
        return out_list
    if isinstance(value, str):
        return value if rng.random() < 0.4 else _mutate(rng, value)
    if isinstance(value, bool) or value is None:
        return value if rng.random() < 0.7 else _json_value(rng, 3)
    if rng.random() < 0.5:
        return value
    return value + rng.randint(-5, 5)


def pairs_levenshtein(rng: random.Random) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for _ in range(N_PAIRS):
        a = _text(rng)
        out.append((a, _mutate(rng, a) if rng.random() < 0.8 else _text(rng)))
    return out


def pairs_exact_match(rng: random.Random) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for _ in range(N_PAIRS):
        kind = rng.random()
        if kind < 0.6:
            a = rng.choice(WORDS)
            out.append((a, a if rng.random() < 0.5 else rng.choice(WORDS)))
        elif kind < 0.8:
            n = _number(rng)
            out.append((n, n if rng.random() < 0.5 else str(n)))
        else:
            v = {k: _json_value(rng, 2) for k in rng.sample(KEYS, rng.randint(1, 3))}
            other: Any = v if rng.random() < 0.5 else _similar_json(rng, v)
            if rng.random() < 0.5:
                other = json.dumps(other, separators=(",", ":"))
            out.append((v, other))
    return out


def pairs_numeric_diff(rng: random.Random) -> list[tuple[Any, Any]]:
    return [(_number(rng), _number(rng)) for _ in range(N_PAIRS)]


def pairs_json_diff(rng: random.Random) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for _ in range(N_PAIRS):
        a = _json_value(rng)
        b = _similar_json(rng, a)
        if isinstance(a, (dict, list)) and rng.random() < 0.3:
            a = json.dumps(a)
        out.append((a, b))
    return out


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "number"}},
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}},
]


def pairs_valid_json(rng: random.Random) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for _ in range(N_PAIRS):
        value = _json_value(rng)
        text = json.dumps(value)
        if rng.random() < 0.2:
            text = text[: rng.randint(0, len(text))]  # often broken
        schema = rng.choice(SCHEMAS) if rng.random() < 0.3 else None
        out.append((text, schema))
    return out


def pairs_list_contains(rng: random.Random) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for _ in range(N_PAIRS):
        exp = [rng.choice(WORDS) for _ in range(rng.randint(0, 6))]
        got = [_mutate(rng, w) for w in exp if rng.random() < 0.8]
        got += [rng.choice(WORDS) for _ in range(rng.randint(0, 2))]
        rng.shuffle(got)
        out.append((got, exp))
    return out


# name -> (Autoevals class name, our registry name, pair generator)
CASES: dict[str, tuple[str, str, Callable[[random.Random], list[tuple[Any, Any]]]]] = {
    "ExactMatch": ("ExactMatch", "exact_match", pairs_exact_match),
    "Levenshtein": ("Levenshtein", "levenshtein", pairs_levenshtein),
    "NumericDiff": ("NumericDiff", "numeric_diff", pairs_numeric_diff),
    "JSONDiff": ("JSONDiff", "json_diff", pairs_json_diff),
    "ValidJSON": ("ValidJSON", "valid_json", pairs_valid_json),
    "ListContains": ("ListContains", "list_contains", pairs_list_contains),
}


#: the clock of every timing: this thread's CPU time, or wall time (``--clock``)
_CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.thread_time, "wall": time.perf_counter}
_clock: Callable[[], float] = time.thread_time


def _timed(fn: Callable[[], list[float]]) -> tuple[float, list[float]]:
    t0 = _clock()
    values = fn()
    return _clock() - t0, values


def _best(
    fns: dict[str, Callable[[], list[float]]], repeat: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    best = {name: float("inf") for name in fns}
    values: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, fn in fns.items():  # interleaved: a load spike hits every contender
            elapsed, vals = _timed(fn)
            best[name] = min(best[name], elapsed)
            values[name] = vals
    return best, values


def _overhead_breakdown(ctx: Any) -> dict[str, float]:
    """Microseconds per call of ``score()`` and of the steps it is made of (levenshtein and
    list_contains on short inputs, cache off), best of 7 rounds of 20,000 calls."""
    import timeit

    import autoevals

    from pytest_llmeval.core.scores import Score, make_score
    from pytest_llmeval.engine import assertions
    from pytest_llmeval.scorers.lexical import Levenshtein, levenshtein_similarity
    from pytest_llmeval.scorers.structured import ListContains

    inst = Levenshtein()
    ref = autoevals.Levenshtein()
    lists = ListContains()
    result = make_score(0.5, "list_contains")
    inputs = {"output": "hello", "expected": "hallo"}
    plan = assertions._plan(lists)
    assert plan is not None
    steps: dict[str, Callable[[], Any]] = {
        "autoevals Levenshtein().eval(o, e)": lambda: ref.eval("hello", "hallo"),
        "our inst.compute(inputs, ctx)": lambda: inst.compute(inputs, ctx),
        "score(inst, ...), cache off": lambda: assertions.score(
            inst, output="hello", expected="hallo"
        ),
        "score('levenshtein', ...), cache off": lambda: assertions.score(
            "levenshtein", output="hello", expected="hallo"
        ),
        "  get_context()": assertions.get_context,
        "  levenshtein_similarity (its value function)": lambda: levenshtein_similarity(
            "hello", "hallo"
        ),
        "  make_score(...) (one Score)": lambda: make_score(0.5, "x"),
        "  Score(value=..., scorer=...) (frozen __init__)": lambda: Score(value=0.5, scorer="x"),
        "score(list_contains instance, ...) (no value function)": lambda: assertions.score(
            lists, output=["a"], expected=["a"]
        ),
        "  _score_planned: inputs dict, compute, check": lambda: assertions._score_planned(
            plan, ["a"], ["a"], None, None, ctx
        ),
        "    _checked(inst, result, t0) (range check, copy)": lambda: assertions._checked(
            lists, result, 0.0
        ),
    }
    n = 20_000
    return {
        label: min(timeit.repeat(fn, number=n, repeat=7, timer=_clock)) / n * 1e6
        for label, fn in steps.items()
    }


def verdict(rows: dict[str, dict[str, float]]) -> list[str]:
    """The failures among ``rows`` (scorer -> contender -> autoevals time / our time): each
    ratio below 1.0, ``compute``, ``score`` and ``score_name`` alike."""
    labels = {"compute": "compute", "score": "score()", "score_name": "score(name)"}
    return [
        f"{scorer}: {labels.get(label, label)} ratio {ratio:.2f} < 1.0"
        for scorer, ratios in rows.items()
        for label, ratio in ratios.items()
        if not ratio >= 1.0
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="rounds per timing (best is kept)")
    parser.add_argument("--clock", choices=sorted(_CLOCKS), default="cpu", help="what is timed")
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--only", nargs="*", help="reference scorer names to run")
    args = parser.parse_args(argv)
    global _clock
    _clock = _CLOCKS[args.clock]

    try:
        import autoevals
    except ImportError:
        print("autoevals is not installed: pip install autoevals==0.4.1 (the 'bench' extra)")
        return 2

    from pytest_llmeval import score
    from pytest_llmeval.core.settings import Settings
    from pytest_llmeval.engine.context import ScoringContext, set_context
    from pytest_llmeval.engine.registry import default_registry

    ctx = ScoringContext(Settings(cache_mode="off"))
    set_context(ctx)

    print(
        f"autoevals {getattr(autoevals, '__version__', '0.4.1')}, {N_PAIRS} pairs per scorer, "
        f"best of {args.repeat}, {args.clock} time; ratio = autoevals time / our time "
        "(> 1: we are faster)\n"
    )
    header = (
        f"{'scorer':<13}{'autoevals s':>12}{'compute s':>11}{'ratio':>8}"
        f"{'score() s':>11}{'ratio':>8}{'score(name) s':>15}{'ratio':>8}  same numbers"
    )
    print(header)
    print("-" * len(header))

    failures: list[str] = []
    ratios: dict[str, dict[str, float]] = {}
    for ref_name, (ae_cls_name, our_name, gen) in CASES.items():
        if args.only and ref_name not in args.only:
            continue
        pairs = gen(random.Random(f"{args.seed}-{ref_name}"))
        ae = getattr(autoevals, ae_cls_name)()
        ours = default_registry.get(our_name)()
        compute = ours.compute
        fns: dict[str, Callable[[], list[float]]] = {
            "autoevals": lambda ae=ae, pairs=pairs: [float(ae.eval(o, e).score) for o, e in pairs],
            "compute": lambda compute=compute, pairs=pairs: [
                compute({"output": o, "expected": e}, ctx).value for o, e in pairs
            ],
            "score": lambda ours=ours, pairs=pairs: [
                score(ours, output=o, expected=e).value for o, e in pairs
            ],
            "score_name": lambda our_name=our_name, pairs=pairs: [
                score(our_name, output=o, expected=e).value for o, e in pairs
            ],
        }
        # ``compute`` gets every input, None included (Autoevals sees them too); score() drops
        # None inputs as it always does.
        best, values = _best(fns, args.repeat)
        ref = values["autoevals"]
        same = True
        for label in ("compute", "score", "score_name"):
            for i, (a, b) in enumerate(zip(ref, values[label], strict=True)):
                if abs(a - b) > 1e-9:
                    same = False
                    failures.append(
                        f"{ref_name} [{label}] pair {i}: autoevals {a!r} vs ours {b!r} "
                        f"for {pairs[i]!r}"[:300]
                    )
                    break
        r_compute = best["autoevals"] / best["compute"]
        r_score = best["autoevals"] / best["score"]
        r_name = best["autoevals"] / best["score_name"]
        print(
            f"{ref_name:<13}{best['autoevals']:>12.4f}{best['compute']:>11.4f}{r_compute:>8.2f}"
            f"{best['score']:>11.4f}{r_score:>8.2f}{best['score_name']:>15.4f}{r_name:>8.2f}"
            f"  {'yes' if same else 'NO'}"
        )
        ratios[ref_name] = {"compute": r_compute, "score": r_score, "score_name": r_name}
    failures.extend(verdict(ratios))

    print("\nscore() cost, microseconds per call (short inputs, cache off):")
    for label, us in _overhead_breakdown(ctx).items():
        print(f"  {label:<56}{us:>8.2f}")

    if failures:
        print("\nFAILED:")
        for line in failures:
            print("  " + line)
        return 1
    print("\nall numbers identical; every ratio >= 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())

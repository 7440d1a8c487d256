"""Gate verdict simulation benchmark (issue 9): how often is a dataset gate wrong?

Simulates apps whose true pass rate or true mean score is known, runs many seeded "test runs"
of 100-200 cases each through ``pytest_llmeval.core.stats.evaluate_gate`` and counts the verdicts:

* pass-rate apps: one sample per case, and three repeated samples per case judged by majority
  (each case has its own pass probability, drawn from a Beta distribution, so the samples of one
  case are correlated; the true majority pass rate is computed exactly);
* mean-score apps: each case has its own mean (Beta), its three samples scatter around it, so the
  samples of a case are correlated and the case score (mean reducer) has the case mean as its
  expectation; the app's true mean is the Beta mean. Gates with and without the scorer's range.

A verdict is wrong when it is ``pass`` but the true value misses the bound, or ``fail`` but the
true value meets it (a true value exactly on a ``min`` bound meets it). With ``confidence=0.95``
every wrong-verdict rate must be at most 5%; the script exits 1 if one is not. Rows marked
"contrast" compare the point estimate (no ``confidence=``) and are not checked: they show why the
intervals matter. A last table checks the coverage of the per-scorer cluster interval (clusters =
cases) against a naive t interval over the records, which ignores the correlation.

Usage: python benchmarks/bench_gates.py [--runs 2000] [--seed 1] [--check-contrast]
(pure Python, one core; about 40 s of CPU at 2000 runs)
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmeval.core.stats import (
    CaseSamples,
    GateSpec,
    Sample,
    cluster_mean_interval,
    evaluate_gate,
    t_interval,
)

LIMIT = 0.05
SAMPLES = 3


def majority_rate(a: float, b: float) -> float:
    """Exact P(majority of 3 samples pass) when a case's pass probability q ~ Beta(a, b):
    E[3q^2 - 2q^3] from the Beta moments."""
    s = a + b
    m2 = a * (a + 1) / (s * (s + 1))
    m3 = m2 * (a + 2) / (s + 2)
    return 3 * m2 - 2 * m3


def beta_for_majority(target: float, concentration: float = 4.0) -> tuple[float, float]:
    """Beta(a, b) with a + b = concentration whose majority-of-3 pass rate is `target`."""
    lo, hi = 1e-6, concentration - 1e-6
    for _ in range(200):
        mid = (lo + hi) / 2
        if majority_rate(mid, concentration - mid) < target:
            lo = mid
        else:
            hi = mid
    a = (lo + hi) / 2
    return a, concentration - a


def pass_rate_app(p: float) -> Callable[[random.Random, int], list[CaseSamples]]:
    """One sample per case, passing with probability p."""

    def draw(rng: random.Random, n: int) -> list[CaseSamples]:
        out = []
        for i in range(n):
            ok = rng.random() < p
            out.append(CaseSamples(f"c{i}", (Sample(1.0 if ok else 0.0, ok),)))
        return out

    return draw


def repeated_pass_app(target: float) -> Callable[[random.Random, int], list[CaseSamples]]:
    """Three samples per case; the case's pass probability q ~ Beta with majority rate `target`."""
    a, b = beta_for_majority(target)

    def draw(rng: random.Random, n: int) -> list[CaseSamples]:
        out = []
        for i in range(n):
            q = rng.betavariate(a, b)
            samples = []
            for k in range(SAMPLES):
                ok = rng.random() < q
                samples.append(Sample(1.0 if ok else 0.0, ok, None, k))
            out.append(CaseSamples(f"c{i}", tuple(samples)))
        return out

    return draw


def rare_failure_app(fail_rate: float) -> Callable[[random.Random, int], list[CaseSamples]]:
    """Scores 1.0, except a rare case that scores 0.0 (one sample per case): small datasets
    often see no failure at all, and a zero spread must not read as certainty."""

    def draw(rng: random.Random, n: int) -> list[CaseSamples]:
        return [
            CaseSamples(f"c{i}", (Sample(0.0 if rng.random() < fail_rate else 1.0, None),))
            for i in range(n)
        ]

    return draw


def mean_app(mean: float, kappa: float = 10.0) -> Callable[[random.Random, int], list[CaseSamples]]:
    """Case mean mu ~ Beta(mean*kappa, (1-mean)*kappa); three samples mu + noise (symmetric,
    inside [0, 1]), so E[sample] = mu and E[case score] = mean."""

    def draw(rng: random.Random, n: int) -> list[CaseSamples]:
        out = []
        for i in range(n):
            mu = rng.betavariate(mean * kappa, (1 - mean) * kappa)
            width = 0.8 * min(mu, 1.0 - mu)
            samples = tuple(
                Sample(mu + width * (2.0 * rng.random() - 1.0), None, None, k)
                for k in range(SAMPLES)
            )
            out.append(CaseSamples(f"c{i}", samples))
        return out

    return draw


@dataclass
class Scenario:
    name: str
    truth: float
    gate: GateSpec
    draw: Callable[[random.Random, int], list[CaseSamples]]
    checked: bool = True
    cases: tuple[int, int] = (100, 200)

    @property
    def bound(self) -> float:
        g = self.gate
        for v in (g.min_mean, g.max_mean, g.min_pass_rate, g.max_pass_rate):
            if v is not None:
                return float(v)
        raise AssertionError("gate without a bound")

    @property
    def truth_meets(self) -> bool:
        g = self.gate
        if g.min_mean is not None or g.min_pass_rate is not None:
            return self.truth >= self.bound
        return self.truth <= self.bound


def scenarios() -> list[Scenario]:
    c = 0.95
    rng01 = (0.0, 1.0)
    out = [
        Scenario(
            "rate, 1 sample",
            0.85,
            GateSpec("s", min_pass_rate=0.9, confidence=c),
            pass_rate_app(0.85),
        ),
        Scenario(
            "rate, 1 sample",
            0.95,
            GateSpec("s", min_pass_rate=0.9, confidence=c),
            pass_rate_app(0.95),
        ),
        Scenario(
            "rate, 1 sample",
            0.90,
            GateSpec("s", min_pass_rate=0.9, confidence=c),
            pass_rate_app(0.90),
        ),
        Scenario(
            "rate, 1 sample",
            0.05,
            GateSpec("s", max_pass_rate=0.1, confidence=c),
            pass_rate_app(0.05),
        ),
    ]
    for target in (0.85, 0.95):
        out.append(
            Scenario(
                "rate, 3 samples, majority",
                target,
                GateSpec("s", min_pass_rate=0.9, confidence=c, reducer="majority"),
                repeated_pass_app(target),
            )
        )
    for truth in (0.85, 0.95, 0.88, 0.90):
        out.append(
            Scenario(
                "mean, 3 samples",
                truth,
                GateSpec("s", min_mean=0.9, confidence=c, score_range=rng01),
                mean_app(truth),
            )
        )
    for truth in (0.85, 0.95, 0.88):
        out.append(
            Scenario(
                "mean, 3 samples, no range",
                truth,
                GateSpec("s", min_mean=0.9, confidence=c),
                mean_app(truth),
            )
        )
    out.append(
        Scenario(
            "mean, 3 samples",
            0.10,
            GateSpec("s", max_mean=0.15, confidence=c, score_range=rng01),
            mean_app(0.10),
        )
    )
    # small datasets (5-30 cases) with rare failures, true mean 0.9: against a 0.92 gate (a pass
    # is wrong; most runs see few or no zeros) and a 0.8 gate (a fail is wrong; skewed data)
    for bound in (0.92, 0.8):
        for score_range in (rng01, None):
            out.append(
                Scenario(
                    "rare zeros, 5-30 cases" + ("" if score_range else ", no range"),
                    0.90,
                    GateSpec("s", min_mean=bound, confidence=c, score_range=score_range),
                    rare_failure_app(0.10),
                    cases=(5, 30),
                )
            )
    # contrast: the point estimate, no confidence= (not checked)
    out.append(
        Scenario(
            "contrast: point estimate",
            0.88,
            GateSpec("s", min_pass_rate=0.9),
            pass_rate_app(0.88),
            False,
        )
    )
    out.append(
        Scenario(
            "contrast: point estimate", 0.89, GateSpec("s", min_mean=0.9), mean_app(0.89), False
        )
    )
    return out


def run_scenario(sc: Scenario, runs: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    counts = {"pass": 0, "fail": 0, "inconclusive": 0, "error": 0}
    needed: list[int] = []
    for _ in range(runs):
        cases = sc.draw(rng, rng.randint(*sc.cases))
        result = evaluate_gate(sc.gate, cases)
        counts[result.verdict] += 1
        for check in result.checks:
            if check.needed is not None:
                needed.append(check.needed)
    wrong = counts["fail"] if sc.truth_meets else counts["pass"]
    return {
        "pass": counts["pass"] / runs,
        "fail": counts["fail"] / runs,
        "inconclusive": counts["inconclusive"] / runs,
        "error": counts["error"] / runs,
        "wrong": wrong / runs,
        "needed": sorted(needed)[len(needed) // 2] if needed else math.nan,
    }


def coverage(truth: float, runs: int, seed: int) -> tuple[float, float]:
    """Coverage of the 95% cluster interval over all samples vs a naive t over the records."""
    rng = random.Random(seed)
    draw = mean_app(truth)
    hit_cluster = hit_naive = 0
    for _ in range(runs):
        cases = draw(rng, rng.randint(100, 200))
        groups = [[s.score for s in c.samples if s.score is not None] for c in cases]
        iv = cluster_mean_interval(groups)
        hit_cluster += iv.low <= truth <= iv.high
        naive = t_interval([v for g in groups for v in g])
        hit_naive += naive.low <= truth <= naive.high
    return hit_cluster / runs, hit_naive / runs


def gate_text(g: GateSpec) -> str:
    for name in ("min_mean", "max_mean", "min_pass_rate", "max_pass_rate"):
        v = getattr(g, name)
        if v is not None:
            conf = f", conf={g.confidence:g}" if g.confidence is not None else ""
            red = f", {g.reducer}" if g.reducer != "mean" else ""
            return f"{name}={v:g}{conf}{red}"
    return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--check-contrast",
        action="store_true",
        help="hold the point-estimate contrast rows to the 5%% limit too (they fail it: a demo "
        "that the check can fail)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f"{args.runs} simulated runs per row, 100-200 cases each, seed {args.seed}")
    header = (
        f"{'app':<34} {'true':>5} {'gate':<45} {'pass':>6} {'fail':>6} {'inconc':>6} "
        f"{'wrong':>6} {'med. needed':>11}  check"
    )
    print(header)
    print("-" * len(header))
    failures = []
    for i, sc in enumerate(scenarios()):
        r = run_scenario(sc, args.runs, args.seed * 1000 + i)
        needed = f"{r['needed']:.0f}" if not math.isnan(r["needed"]) else "-"
        if sc.checked or args.check_contrast:
            ok = r["wrong"] <= LIMIT
            verdict = "ok" if ok else f"WRONG > {LIMIT:.0%}"
            if not ok:
                failures.append(sc.name)
        else:
            verdict = "(contrast, not checked)"
        print(
            f"{sc.name:<34} {sc.truth:>5.2f} {gate_text(sc.gate):<45} {r['pass']:>6.1%} "
            f"{r['fail']:>6.1%} {r['inconclusive']:>6.1%} {r['wrong']:>6.1%} {needed:>11}  "
            f"{verdict}"
        )
    print()
    print(
        f"{'coverage of 95% intervals, mean app':<40} {'cluster (cases)':>16} "
        f"{'naive (records)':>16}"
    )
    for j, truth in enumerate((0.85, 0.6)):
        cl, nv = coverage(truth, args.runs, args.seed * 1000 + 100 + j)
        ok = cl >= 0.93
        if not ok:
            failures.append(f"cluster coverage {truth}")
        print(
            f"{'true mean ' + format(truth, 'g'):<40} {cl:>16.1%} {nv:>16.1%}  "
            f"{'ok' if ok else 'LOW'}"
        )
    print(f"\n{time.perf_counter() - started:.1f} s")
    if failures:
        print(f"FAILED: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

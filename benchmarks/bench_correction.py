"""Bias-corrected pass rate benchmark (issue 20, "Is the judge right?").

Simulates judges of known error rates and checks what
``pytest_llmeval.core.agreement.corrected_pass_rate`` makes of them. For each configuration (a
true pass rate p, a judge that passes truly passing outputs with probability Se and fails truly
failing ones with probability Sp, a labelled set of L records and a judged set of N records),
every simulated run draws

* the labelled set: how many of the L records people passed (``sample``: Binomial(L, p), the
  labels being a sample of the same outputs; ``balanced``: L/2 of each), and the judge's verdicts
  on them (hits ~ Binomial(passed, Se) and Binomial(failed, Sp));
* the judged set: N outputs, each truly passing with probability p and then judged with Se/Sp,
  so the judge's pass count is Binomial(N, p*Se + (1-p)*(1-Sp)) (drawn as that count directly);

and calls ``corrected_pass_rate``. Per configuration it prints: how often the estimate is
defined, how often it comes with an interval, the mean bias of the estimate against p (runs with
an estimate), the coverage of p by the 95% interval (runs with an interval), the share of all
runs whose interval misses p, and the interval's mean width. Below the table, the reasons the
estimator gave where it had no estimate or no interval in at least 10% of the runs (a judge no
better than chance, labelled sets without one kind of record, ...).

Targets (exit code 1 names the rows that miss one):

1. coverage >= 93% in every row whose judge is better than chance (Se + Sp > 1) and whose
   estimate is defined in at least 90% of the runs (coverage counted over the runs with an
   interval). Where the estimator withholds its interval in many runs, the coverage of the
   intervals it does give is conditional on its own choice and noisier; those rows are printed
   and held to target 2 only;
2. in every row, any judge included, the runs whose interval misses p are at most 7% of all
   runs: how often a report (or a gate) could be misled, whatever the estimator withholds.

Rows of a judge no better than chance are held to target 2 only: the report must say "not
defined" there, and the table shows how often it does. A last, unchecked table runs the
interval with Lang and Reiczigel's (2014) own constants (1 success added to 2 trials for the
true-pass and true-fail rates, a shifted centre) on the same draws, to show why the estimator
uses ``z**2`` trials instead.

Usage: python benchmarks/bench_correction.py [--runs 2000] [--seed 1] [--quick]
(numpy draws the counts when installed, else the random module; about 15 s at the default
2000 runs, most of it in ``corrected_pass_rate`` itself; --quick about 1 s)
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmeval.core.agreement import corrected_pass_rate
from pytest_llmeval.core.stats import _z

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a dependency of the package
    np = None  # type: ignore[assignment]

COVERAGE_TARGET = 0.93
DEFINED_FOR_CHECK = 0.90
MISS_LIMIT = 1.0 - COVERAGE_TARGET
REASON_SHOWN = 0.10  # list the reasons of rows undefined (or without interval) this often
CONFIDENCE = 0.95

JUDGES: tuple[tuple[str, float, float], ...] = (
    ("good", 0.90, 0.90),
    ("lenient", 0.95, 0.70),
    ("strict", 0.70, 0.95),
    ("weak", 0.65, 0.60),
    ("chance", 0.50, 0.50),
    ("worse", 0.40, 0.45),
)
PASS_RATES = (0.3, 0.6, 0.85, 0.95)
LABELLED = (20, 50, 200)
JUDGED = (50, 200, 1000)
SPLITS = ("sample", "balanced")

QUICK_JUDGES = ("good", "lenient", "weak", "chance")
QUICK_PASS_RATES = (0.3, 0.95)
QUICK_LABELLED = (20, 200)
QUICK_JUDGED = (50, 1000)

# the contrast table (Lang and Reiczigel's constants), good and strict judges
CONTRAST_JUDGES = ("good", "strict")
CONTRAST_PASS_RATES = (0.85, 0.95)
CONTRAST_LABELLED = (50, 200)
CONTRAST_JUDGED = (200, 1000)


@dataclass(frozen=True)
class Config:
    judge: str
    se: float
    sp: float
    p: float
    split: str
    labelled: int
    judged: int

    @property
    def better_than_chance(self) -> bool:
        return self.se + self.sp > 1.0

    def label(self) -> str:
        return (
            f"{self.judge} Se={self.se:g} Sp={self.sp:g} p={self.p:g} {self.split} "
            f"L={self.labelled} N={self.judged}"
        )


@dataclass
class Result:
    runs: int
    defined: int = 0
    with_interval: int = 0
    bias_sum: float = 0.0
    covered: int = 0
    width_sum: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)
    # the contrast: Lang and Reiczigel's own constants on the same draws
    lr_intervals: int = 0
    lr_covered: int = 0
    lr_width_sum: float = 0.0

    @property
    def defined_rate(self) -> float:
        return self.defined / self.runs

    @property
    def interval_rate(self) -> float:
        return self.with_interval / self.runs

    @property
    def bias(self) -> float:
        return self.bias_sum / self.defined if self.defined else math.nan

    @property
    def coverage(self) -> float:
        return self.covered / self.with_interval if self.with_interval else math.nan

    @property
    def missed(self) -> float:
        """Runs whose interval misses p, as a share of all runs."""
        return (self.with_interval - self.covered) / self.runs

    @property
    def width(self) -> float:
        return self.width_sum / self.with_interval if self.with_interval else math.nan


def lang_reiczigel(
    passed: int, n: int, tp_hits: int, n_pass: int, tf_hits: int, n_fail: int
) -> tuple[float, float] | None:
    """The interval of Lang and Reiczigel (2014) with their own constants, for the contrast:
    the judged set's proportion moved as Agresti-Coull (z^2/2 successes on z^2 trials), the
    true-pass and true-fail rates by 1 success on 2 trials, a delta-method interval around the
    adjusted Rogan-Gladen centre shifted by 2 z^2 (c Se(1-Se)/n_Se - (1-c) Sp(1-Sp)/n_Sp),
    cut to [0, 1]. None where the observed rates sum to 1 or less."""
    if n_pass < 1 or n_fail < 1 or tp_hits / n_pass + tf_hits / n_fail <= 1.0:
        return None
    z = _z(CONFIDENCE)
    z2 = z * z
    ap = (passed + z2 / 2.0) / (n + z2)
    n_se, n_sp = n_pass + 2.0, n_fail + 2.0
    se = (tp_hits + 1.0) / n_se
    sp = (tf_hits + 1.0) / n_sp
    youden = se + sp - 1.0
    if youden <= 0.0:
        return None
    centre = (ap + sp - 1.0) / youden
    v_se = se * (1.0 - se) / n_se
    v_sp = sp * (1.0 - sp) / n_sp
    sd = math.sqrt(ap * (1.0 - ap) / (n + z2) + centre**2 * v_se + (1.0 - centre) ** 2 * v_sp)
    sd /= youden
    shift = 2.0 * z2 * (centre * v_se - (1.0 - centre) * v_sp)
    low = min(1.0, max(0.0, centre + shift - z * sd))
    high = min(1.0, max(0.0, centre + shift + z * sd))
    return low, high


# ---------------------------------------------------------------------------------------------
# Binomial draws: numpy when installed, else an exact inversion sampler on the random module
# ---------------------------------------------------------------------------------------------

Draw = Callable[[list[int], float], list[int]]


def _binomial_py(rng: random.Random, n: int, p: float) -> int:
    """One exact Binomial(n, p) draw by inverting the CDF, searched outward from the mode."""
    if n == 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    q = 1.0 - p
    mode = min(n, int((n + 1) * p))
    log_pmf = (
        math.lgamma(n + 1)
        - math.lgamma(mode + 1)
        - math.lgamma(n - mode + 1)
        + mode * math.log(p)
        + (n - mode) * math.log(q)
    )
    u = rng.random()
    # the mode and below first, then above: any fixed order of the support inverts exactly
    pmf = math.exp(log_pmf)
    k = mode
    while True:
        u -= pmf
        if u <= 0.0 or k == 0:
            break
        pmf *= k * q / ((n - k + 1) * p)
        k -= 1
    if u <= 0.0:
        return k
    pmf = math.exp(log_pmf)
    k = mode
    while k < n:
        pmf *= (n - k) * p / ((k + 1) * q)
        k += 1
        u -= pmf
        if u <= 0.0:
            return k
    return mode  # rounding left a sliver of probability: the mode is as good as any


def drawer(seed: int) -> Draw:
    if np is not None:
        gen = np.random.default_rng(seed)

        def draw_np(n: list[int], p: float) -> list[int]:
            return [int(v) for v in gen.binomial(np.asarray(n, dtype=np.int64), p)]

        return draw_np
    rng = random.Random(seed)

    def draw_py(n: list[int], p: float) -> list[int]:
        return [_binomial_py(rng, k, p) for k in n]

    return draw_py


def _reason_key(reason: str | None) -> str:
    """The reason up to its first parenthesis (where the counts start), so runs that failed
    the same way group together."""
    if reason is None:
        return "(no reason given)"
    return reason.split(" (", 1)[0].strip()


def simulate(cfg: Config, runs: int, seed: int, contrast: bool = False) -> Result:
    draw = drawer(seed)
    if cfg.split == "sample":
        lab_pass = draw([cfg.labelled] * runs, cfg.p)
    else:
        lab_pass = [cfg.labelled // 2] * runs
    lab_fail = [cfg.labelled - k for k in lab_pass]
    tp_hits = draw(lab_pass, cfg.se)
    tf_hits = draw(lab_fail, cfg.sp)
    judge_pass = cfg.p * cfg.se + (1.0 - cfg.p) * (1.0 - cfg.sp)
    passed = draw([cfg.judged] * runs, judge_pass)
    res = Result(runs)
    for i in range(runs):
        counts = (passed[i], cfg.judged, tp_hits[i], lab_pass[i], tf_hits[i], lab_fail[i])
        r = corrected_pass_rate(*counts, confidence=CONFIDENCE)
        if r.estimate is not None:
            res.defined += 1
            res.bias_sum += r.estimate - cfg.p
        if r.interval is not None:
            res.with_interval += 1
            res.covered += r.interval.low <= cfg.p <= r.interval.high
            res.width_sum += r.interval.high - r.interval.low
        else:
            res.reasons[_reason_key(r.reason)] += 1
        if contrast:
            lr = lang_reiczigel(*counts)
            if lr is not None:
                res.lr_intervals += 1
                res.lr_covered += lr[0] <= cfg.p <= lr[1]
                res.lr_width_sum += lr[1] - lr[0]
    return res


def configs(quick: bool) -> list[Config]:
    judges = [j for j in JUDGES if not quick or j[0] in QUICK_JUDGES]
    out = []
    for name, se, sp in judges:
        for p in QUICK_PASS_RATES if quick else PASS_RATES:
            for split in SPLITS:
                for labelled in QUICK_LABELLED if quick else LABELLED:
                    for judged in QUICK_JUDGED if quick else JUDGED:
                        out.append(Config(name, se, sp, p, split, labelled, judged))
    return out


def contrast_configs() -> list[Config]:
    return [
        Config(name, se, sp, p, "sample", labelled, judged)
        for name, se, sp in JUDGES
        if name in CONTRAST_JUDGES
        for p in CONTRAST_PASS_RATES
        for labelled in CONTRAST_LABELLED
        for judged in CONTRAST_JUDGED
    ]


def _pct(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.1%}"


def check(cfg: Config, res: Result) -> tuple[str, bool]:
    """The row's verdict and whether it meets its targets."""
    if res.missed > MISS_LIMIT:
        return f"MISSES p in {res.missed:.1%} of runs > {MISS_LIMIT:.0%}", False
    if not cfg.better_than_chance:
        return "ok (misses only: no better than chance)", True
    if res.defined_rate < DEFINED_FOR_CHECK:
        return f"ok (misses only: defined < {DEFINED_FOR_CHECK:.0%})", True
    if res.with_interval == 0 or res.coverage < COVERAGE_TARGET:
        return f"LOW < {COVERAGE_TARGET:.0%}", False
    return "ok", True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per row (2000; 500 quick)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smaller grid at 500 runs per row, no contrast table (a few seconds)",
    )
    args = parser.parse_args(argv)
    runs = args.runs if args.runs is not None else (500 if args.quick else 2000)
    started = time.perf_counter()
    backend = "numpy" if np is not None else "random (numpy not installed)"
    print(
        f"{runs} simulated runs per row, seed {args.seed}, draws by {backend}. L: labelled "
        "records (sample: labels drawn with p; balanced: half passed), N: judged records."
    )
    print(
        f"Checked: coverage >= {COVERAGE_TARGET:.0%} where Se + Sp > 1 and the estimate is "
        f"defined in >= {DEFINED_FOR_CHECK:.0%} of runs; in every row, intervals missing p in "
        f"<= {MISS_LIMIT:.0%} of all runs."
    )
    header = (
        f"{'judge':<8} {'Se':>4} {'Sp':>4} {'p':>4} {'split':<8} {'L':>4} {'N':>5} "
        f"{'defined':>7} {'interval':>8} {'bias':>7} {'coverage':>8} {'missed':>6} "
        f"{'width':>6}  check"
    )
    failures: list[str] = []
    undefined: list[tuple[Config, Result]] = []
    last_judge = None
    for i, cfg in enumerate(configs(args.quick)):
        if cfg.judge != last_judge:
            print()
            print(header)
            print("-" * len(header))
            last_judge = cfg.judge
        res = simulate(cfg, runs, args.seed * 100_003 + i)
        verdict, ok = check(cfg, res)
        if not ok:
            failures.append(f"{cfg.label()}: {verdict}")
        bias = "-" if math.isnan(res.bias) else f"{res.bias:+.3f}"
        width = "-" if math.isnan(res.width) else f"{res.width:.3f}"
        print(
            f"{cfg.judge:<8} {cfg.se:>4g} {cfg.sp:>4g} {cfg.p:>4g} {cfg.split:<8} "
            f"{cfg.labelled:>4} {cfg.judged:>5} {_pct(res.defined_rate):>7} "
            f"{_pct(res.interval_rate):>8} {bias:>7} {_pct(res.coverage):>8} "
            f"{res.missed:>6.1%} {width:>6}  {verdict}"
        )
        if 1.0 - res.interval_rate >= REASON_SHOWN:
            undefined.append((cfg, res))
    if undefined:
        print(f"\nNot defined (no estimate or no interval in >= {REASON_SHOWN:.0%} of runs):")
        legend: dict[str, int] = {}
        for _, res in undefined:
            for reason in res.reasons:
                legend.setdefault(reason, len(legend) + 1)
        for reason, number in legend.items():
            print(f"  [{number}] {reason} (...)")
        for cfg, res in undefined:
            shares = ", ".join(
                f"[{legend[reason]}] {count / res.runs:.1%}"
                for reason, count in res.reasons.most_common()
            )
            print(f"  {cfg.label()}: not defined in {1.0 - res.interval_rate:.1%}: {shares}")
    if not args.quick:
        print(
            "\nContrast (not checked): the same draws through Lang and Reiczigel's own constants"
            " (1 success on 2 trials for Se and Sp, shifted centre)"
        )
        head = (
            f"{'judge':<8} {'Se':>4} {'Sp':>4} {'p':>4} {'split':<8} {'L':>4} {'N':>5} "
            f"{'coverage':>8} {'width':>6} {'L&R coverage':>12} {'L&R width':>9}"
        )
        print(head)
        print("-" * len(head))
        for j, cfg in enumerate(contrast_configs()):
            res = simulate(cfg, runs, args.seed * 100_003 + 50_000 + j, contrast=True)
            lr_cov = res.lr_covered / res.lr_intervals if res.lr_intervals else math.nan
            lr_width = res.lr_width_sum / res.lr_intervals if res.lr_intervals else math.nan
            print(
                f"{cfg.judge:<8} {cfg.se:>4g} {cfg.sp:>4g} {cfg.p:>4g} {cfg.split:<8} "
                f"{cfg.labelled:>4} {cfg.judged:>5} {_pct(res.coverage):>8} {res.width:>6.3f} "
                f"{_pct(lr_cov):>12} {lr_width:>9.3f}"
            )
    print(f"\n{time.perf_counter() - started:.1f} s")
    if failures:
        print("FAILED:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

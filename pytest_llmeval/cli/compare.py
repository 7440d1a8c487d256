"""``python -m pytest_llmeval compare BASELINE.json CURRENT.json``: two runs compared with the
functions pytest uses, printed as a table (or JSON), exit 1 on a regression when asked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pytest_llmeval.analysis.compare import (
    ComparisonError,
    compare_runs,
    comparison_failures,
    load_run,
    refuse_shard,
)
from pytest_llmeval.report.comparison import format_comparison

#: --fail-on-regression given without a value
_FROM_ALPHA = -1.0


def main(argv: Sequence[str]) -> int:
    """``compare BASELINE CURRENT``: print the comparison; with ``--fail-on-regression`` exit 1
    on a significant regression or on a comparison that cannot stand for "no regression"
    (another instrument, nothing compared); 2 for unusable input (a file that is not a valid
    report, named with the field that is wrong)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmeval compare",
        description="Compare two pytest-llmeval runs (saved runs or JSON reports).",
    )
    parser.add_argument("baseline", type=Path, help="the baseline: a saved run or JSON report")
    parser.add_argument("current", type=Path, help="the run to check against it")
    parser.add_argument(
        "--fail-on-regression",
        nargs="?",
        const=_FROM_ALPHA,
        default=None,
        type=float,
        metavar="ALPHA",
        help="exit 1 when a scorer's mean gets worse with p < ALPHA (default: --alpha, else "
        "0.05), or when a scorer cannot be compared (another instrument, nothing paired)",
    )
    parser.add_argument("--alpha", type=float, default=None, help="significance level (0.05)")
    parser.add_argument(
        "--accept-incomparable",
        action="append",
        default=[],
        metavar="SCORER",
        help="compare SCORER although its instrument changed (or it is missing); 'all' for "
        "every scorer; repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--max-cases", type=int, default=5, help="cases listed per scorer")
    parser.add_argument("--seed", type=int, default=0, help="seed of the Monte Carlo test")
    args = parser.parse_args(list(argv))
    alpha = args.fail_on_regression
    if alpha is None or alpha == _FROM_ALPHA:  # the bare flag takes --alpha when it is given
        alpha = args.alpha
    alpha = 0.05 if alpha is None else alpha
    if not 0.0 < alpha < 1.0:
        parser.error(f"ALPHA must be strictly between 0 and 1, got {alpha!r}")
    accept = [a.strip() for item in args.accept_incomparable for a in item.split(",") if a.strip()]
    try:
        base = load_run(args.baseline)
        cur = load_run(args.current)
        for path, run in ((args.baseline, base), (args.current, cur)):
            refuse_shard(run, str(path))
    except ComparisonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from pytest_llmeval.analysis.gates import evaluate_gates

    cmp = compare_runs(
        base,
        cur,
        alpha=alpha,
        seed=args.seed,
        baseline_label=str(args.baseline),
        current_label=str(args.current),
        accept=accept,
        gates=evaluate_gates(cur),
    )
    failures = comparison_failures(cmp)
    if args.json:
        print(json.dumps(cmp.to_json(), indent=2, allow_nan=False))
    else:
        for line in format_comparison(cmp, max_cases=args.max_cases):
            print(line)
        for line in failures:
            print(line)
    return 1 if failures and args.fail_on_regression is not None else 0

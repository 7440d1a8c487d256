"""How far a judge agrees with people, and with other judges (issue 20).

Pure functions over counts and values, no numpy: the plugin imports this module only when a
run has labelled records or a judge panel. Each statistic follows one established definition,
named in its docstring, and the tests hold it to that implementation (scikit-learn, statsmodels,
scipy, the ``krippendorff`` package) to 1e-9:

- :func:`confusion` and :func:`cohen_kappa`: Cohen's kappa with the large-sample standard error
  of Fleiss, Cohen and Everitt (1969) and a Wald interval, as statsmodels' ``cohens_kappa``;
- :func:`spearman`: Spearman's rank correlation, ties given their average rank (scipy);
- :func:`fleiss_kappa`: Fleiss' kappa for a fixed number of raters per subject (statsmodels);
- :func:`krippendorff_alpha`: Krippendorff's alpha, nominal or interval, any rater may be
  missing on any unit;
- :func:`corrected_pass_rate`: the pass rate a judge of measured true-pass and true-fail rates
  implies (Rogan and Gladen, 1978), with an interval carrying the uncertainty of the labelled
  set and of the judged set.

A statistic that is not defined for the data (kappa when both raters use one category only,
a correlation of a constant) is ``None`` with the reason, never a number standing in for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pytest_llmeval.core.stats import (
    Confusion,
    CorrectedRate,
    Kappa,
    cohen_kappa,
    confusion,
    corrected_pass_rate,
)

__all__ = [
    "Confusion",
    "CorrectedRate",
    "Kappa",
    "cohen_kappa",
    "confusion",
    "corrected_pass_rate",
    "fleiss_kappa",
    "krippendorff_alpha",
    "mean_absolute_error",
    "spearman",
]


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the average of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        rank = (i + j) / 2.0 + 1.0
        for t in range(i, j + 1):
            ranks[order[t]] = rank
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx == 0.0 or syy == 0.0:
        return None
    r = sxy / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, r))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (the Pearson correlation of average ranks), as scipy's
    ``spearmanr``; None with fewer than two pairs or when either side is constant."""
    if len(x) != len(y):
        raise ValueError(f"{len(x)} values against {len(y)}")
    if len(x) < 2:
        return None
    _check_finite(x)
    _check_finite(y)
    return _pearson(_ranks(x), _ranks(y))


def mean_absolute_error(x: Sequence[float], y: Sequence[float]) -> float:
    """The mean of ``|x_i - y_i|``."""
    if len(x) != len(y):
        raise ValueError(f"{len(x)} values against {len(y)}")
    if not x:
        raise ValueError("a mean absolute error needs at least one pair")
    _check_finite(x)
    _check_finite(y)
    return math.fsum(abs(a - b) for a, b in zip(x, y, strict=True)) / len(x)


def _check_finite(values: Sequence[float]) -> None:
    for v in values:
        if not (isinstance(v, (int, float)) and math.isfinite(v)) or isinstance(v, bool):
            raise ValueError(f"{v!r} is not a finite number")


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of ``table[subject][category]`` counts, every subject rated by the same
    number of raters (two or more), as statsmodels' ``fleiss_kappa(method="fleiss")``; None when
    every rating fell in one category (chance agreement is complete)."""
    if not table:
        raise ValueError("Fleiss' kappa needs at least one subject")
    k = len(table[0])
    if any(len(row) != k for row in table):
        raise ValueError("every subject needs a count for each category")
    raters = {sum(row) for row in table}
    if len(raters) != 1:
        raise ValueError(
            f"Fleiss' kappa needs the same number of raters for every subject, got {sorted(raters)}"
            " (use Krippendorff's alpha when some ratings are missing)"
        )
    m = raters.pop()
    if m < 2:
        raise ValueError("Fleiss' kappa needs at least two raters per subject")
    subjects = len(table)
    total = subjects * m
    p_cat = [sum(row[j] for row in table) / total for j in range(k)]
    p_subject = [(sum(c * c for c in row) - m) / (m * (m - 1)) for row in table]
    p_mean = math.fsum(p_subject) / subjects
    p_exp = math.fsum(p * p for p in p_cat)
    if p_exp >= 1.0 - 1e-12:
        return None
    return (p_mean - p_exp) / (1.0 - p_exp)


def krippendorff_alpha(
    units: Sequence[Sequence[Any]],
    level: Literal["nominal", "interval"] = "nominal",
) -> float | None:
    """Krippendorff's alpha of ``units[unit][rater]`` values (None where that rater gave none).
    Units with fewer than two values are not pairable and do not count. ``nominal``: any two
    different values disagree equally; ``interval``: by their squared difference. None when
    fewer than two values are pairable or all pairable values are equal (no disagreement is
    expected, so alpha is undefined)."""
    if level not in ("nominal", "interval"):
        raise ValueError(f"level must be 'nominal' or 'interval', got {level!r}")
    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [vals for vals in pairable if len(vals) >= 2]
    if level == "interval":
        for vals in pairable:
            _check_finite(vals)

    def delta(a: Any, b: Any) -> float:
        if level == "nominal":
            return 0.0 if a == b else 1.0
        return float(a - b) ** 2

    coincidence: dict[tuple[Any, Any], float] = {}
    for vals in pairable:
        w = 1.0 / (len(vals) - 1)
        for i, a in enumerate(vals):
            for j, b in enumerate(vals):
                if i != j:
                    coincidence[(a, b)] = coincidence.get((a, b), 0.0) + w
    totals: dict[Any, float] = {}
    for (a, _), o in coincidence.items():
        totals[a] = totals.get(a, 0.0) + o
    n = math.fsum(totals.values())
    if n < 2:
        return None
    observed = math.fsum(o * delta(a, b) for (a, b), o in coincidence.items())
    values = list(totals)
    expected = math.fsum(
        totals[a] * totals[b] * delta(a, b) for a in values for b in values if a != b
    )
    if expected == 0.0:
        return None
    return 1.0 - (n - 1.0) * observed / expected

"""Is the judge right? Agreement of each scorer with the labels people gave (issue 20).

A record is *labelled* when its case carried ``label=``. A label says pass or fail directly
(True/False) or through the score it stands for (a score, or a classifier's choice, held
against the record's own bound). The judge's verdict is the record's ``passed``. Per scorer,
over its labelled records with both verdicts: the confusion matrix at the bound, accuracy and
the true-pass and true-fail rates with Wilson intervals, Cohen's kappa with its interval; over
choices, the confusion of labelled and judged choices; over scores, Spearman and the mean
absolute error. When the scorer also has unlabelled records, their pass rate is corrected for
the measured rates (:func:`pytest_llmeval.core.agreement.corrected_pass_rate`).

One labelled output is one labelled record however often the judge was asked about it: the
samples of one assertion in one case with the same label (a repeat, ``judge_samples``) are
reduced to one verdict (the mean score against the bound, as the summary reduces a case) before
they are counted, as a gate counts them (:func:`pytest_llmeval.core.stats.labelled_pairs`);
counting each ask would claim more evidence about the judge than the labels give. The corrected
pass rate counts each unlabelled case once the same way. The list of disagreements and the
graded statistics (Spearman, mean absolute error) are per record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmeval.core.agreement import (
    Confusion,
    CorrectedRate,
    Kappa,
    cohen_kappa,
    confusion,
    corrected_pass_rate,
    mean_absolute_error,
    spearman,
)
from pytest_llmeval.core.model import Run, sort_key
from pytest_llmeval.core.records import ScoreRecord
from pytest_llmeval.core.stats import (
    CaseSamples,
    Interval,
    Sample,
    labelled_pairs,
    reduce_case,
    wilson_interval,
)

__all__ = [
    "ScorerAgreement",
    "human_verdict",
    "label_score",
    "record_sample",
    "run_agreement",
    "scorer_agreement",
]

#: the categories of the pass/fail confusion matrix, in its row and column order
VERDICTS = ("pass", "fail")


def label_score(record: ScoreRecord) -> float | None:
    """The score a record's label stands for (None for True/False or no label). A report
    written without ``label_score`` gives a numeric label its own value."""
    if record.label_score is not None:
        return record.label_score
    label = record.label
    if isinstance(label, (int, float)) and not isinstance(label, bool):
        return float(label)
    return None


def human_verdict(record: ScoreRecord) -> bool | None:
    """Whether the person's label passes the case: the label itself when True/False, else the
    score it stands for held against the record's bound; None without a label or a bound."""
    if isinstance(record.label, bool):
        return record.label
    score = label_score(record)
    if score is None or (record.min is None and record.max is None):
        return None
    return (record.min is None or score >= record.min) and (
        record.max is None or score <= record.max
    )


@dataclass(frozen=True)
class ScorerAgreement:
    """How one scorer's verdicts agree with the labels of its records."""

    scorer: str
    #: whether the scorer asks a judge (None: the run does not say): labels on a deterministic
    #: scorer check the scorer itself
    uses_judge: bool | None
    labelled: int  # records with a label
    #: labelled records without both verdicts (no bound, an error, a label a bound cannot place)
    unplaced: int
    confusion: Confusion  # pass/fail at the bound: rows the label, columns the judge
    accuracy: Interval | None
    kappa: Kappa | None
    true_pass: Interval | None  # judge passes among records people passed
    true_fail: Interval | None  # judge fails among records people failed
    choices: Confusion | None  # classifier choices: rows the label, columns the judge
    graded: int  # labelled records with a label score and a score
    spearman: float | None
    mae: float | None
    disagreements: tuple[ScoreRecord, ...]
    #: the pass rate of the unlabelled records of the one test that has both labelled and
    #: unlabelled records, corrected for that test's measured rates (None: no such test, or
    #: several: see ``corrected_by_test``)
    corrected: CorrectedRate | None
    #: per test ("file::test") with labelled and unlabelled records: the pass rate of its
    #: unlabelled records corrected for the rates measured on its own labelled ones. Per test,
    #: because another test may hold the scorer against another bound (a ``max=`` that passes
    #: when the judge says No) or score the same outputs again
    corrected_by_test: tuple[tuple[str, CorrectedRate], ...] = ()

    @property
    def n(self) -> int:
        """Records with both verdicts (what accuracy, kappa and the rates are over)."""
        return self.confusion.n

    def _counts(self) -> tuple[int, int, int, int]:
        (tp, fn), (fp, tn) = self.confusion.counts
        return tp, fn, fp, tn

    def to_json(self) -> dict[str, Any]:
        tp, fn, fp, tn = self._counts()
        return {
            "scorer": self.scorer,
            "uses_judge": self.uses_judge,
            "labelled": self.labelled,
            "n": self.n,
            "unplaced": self.unplaced,
            "accuracy": None if self.accuracy is None else self.accuracy.estimate,
            "accuracy_interval": None if self.accuracy is None else self.accuracy.to_json(),
            "kappa": None if self.kappa is None else self.kappa.kappa,
            "kappa_detail": None if self.kappa is None else self.kappa.to_json(),
            "true_pass_rate": None if self.true_pass is None else self.true_pass.estimate,
            "true_pass_interval": None if self.true_pass is None else self.true_pass.to_json(),
            "true_fail_rate": None if self.true_fail is None else self.true_fail.estimate,
            "true_fail_interval": None if self.true_fail is None else self.true_fail.to_json(),
            "confusion": {
                **self.confusion.to_json(),
                "rows": "label",
                "columns": "judge",
                "true_pass": tp,
                "false_fail": fn,
                "false_pass": fp,
                "true_fail": tn,
            },
            "choices": None if self.choices is None else self.choices.to_json(),
            "graded": self.graded,
            "spearman": self.spearman,
            "mae": self.mae,
            "disagreements": [_disagreement(r) for r in self.disagreements],
            "corrected": None if self.corrected is None else self.corrected.to_json(),
            "corrected_by_test": [
                {"test": test, **rate.to_json()} for test, rate in self.corrected_by_test
            ],
        }


def _disagreement(record: ScoreRecord) -> dict[str, Any]:
    return {
        "file": record.file,
        "test": record.test,
        "case_id": record.case_id,
        "sample": record.sample,
        "where": record.where,
        "label": record.label,
        "score": record.score,
        "passed": record.passed,
        "choice": record.metadata.get("choice"),
        "rationale": record.rationale,
        "output": record.inputs.get("output"),
    }


def scorer_agreement(
    scorer: str, records: Sequence[ScoreRecord], uses_judge: bool | None = None
) -> ScorerAgreement:
    """The agreement of ``scorer`` over ``records`` (its records; the labelled ones are
    measured, the unlabelled ones corrected)."""
    labelled = [r for r in records if r.label is not None]
    disagreements: list[ScoreRecord] = []
    unplaced = 0
    for r in labelled:
        human = human_verdict(r)
        if human is None or r.passed is None or r.error is not None:
            unplaced += 1
        elif human != r.passed:
            disagreements.append(r)
    judged, unlabelled = _judged(records)
    pairs = [(_word(h), _word(j)) for h, j in judged]
    table = confusion([a for a, _ in pairs], [b for _, b in pairs], VERDICTS)
    (tp, fn), (fp, tn) = table.counts
    n = table.n
    accuracy = wilson_interval(tp + tn, n) if n else None
    kappa = cohen_kappa(table) if n else None
    true_pass = wilson_interval(tp, tp + fn) if tp + fn else None
    true_fail = wilson_interval(tn, fp + tn) if fp + tn else None

    chosen = [
        (r.label, r.metadata.get("choice"))
        for r in labelled
        if isinstance(r.label, str) and isinstance(r.metadata.get("choice"), str)
    ]
    choices = None
    if chosen:
        cats = sorted({c for pair in chosen for c in pair if isinstance(c, str)})
        choices = confusion([a for a, _ in chosen], [b for _, b in chosen], cats)

    graded_pairs = [
        (s, float(r.score))
        for r in labelled
        if r.error is None and r.score is not None and (s := label_score(r)) is not None
    ]
    rho = mae = None
    if graded_pairs:
        xs = [a for a, _ in graded_pairs]
        ys = [b for _, b in graded_pairs]
        rho = spearman(xs, ys)
        mae = mean_absolute_error(xs, ys)

    by_test = _corrected_by_test(records) if unlabelled and n else ()
    corrected = by_test[0][1] if len(by_test) == 1 else None
    disagreements.sort(key=sort_key)
    return ScorerAgreement(
        scorer=scorer,
        uses_judge=uses_judge,
        labelled=len(labelled),
        unplaced=unplaced,
        confusion=table,
        accuracy=accuracy,
        kappa=kappa,
        true_pass=true_pass,
        true_fail=true_fail,
        choices=choices,
        graded=len(graded_pairs),
        spearman=rho,
        mae=mae,
        disagreements=tuple(disagreements),
        corrected=corrected,
        corrected_by_test=by_test,
    )


def _corrected_by_test(
    records: Sequence[ScoreRecord],
) -> tuple[tuple[str, CorrectedRate], ...]:
    """The corrected pass rate of each test with labelled and unlabelled records (see
    :attr:`ScorerAgreement.corrected_by_test`), by test."""
    tests: dict[str, list[ScoreRecord]] = {}
    for r in records:
        tests.setdefault(f"{r.file}::{r.test}", []).append(r)
    out = []
    for test in sorted(tests):
        pairs, unlabelled = _judged(tests[test])
        if not pairs or not unlabelled:
            continue
        tp = sum(1 for h, j in pairs if h and j)
        people_pass = sum(1 for h, _ in pairs if h)
        tn = sum(1 for h, j in pairs if not h and not j)
        rate = corrected_pass_rate(
            sum(unlabelled), len(unlabelled), tp, people_pass, tn, len(pairs) - people_pass
        )
        out.append((test, rate))
    return tuple(out)


def _judged(records: Sequence[ScoreRecord]) -> tuple[list[tuple[bool, bool]], list[bool]]:
    """(person, judge) verdicts of the labelled outputs, and the judge's verdicts on the
    unlabelled cases, each output and case counted once (see the module docstring). When no
    case has two records (no repeats, one assertion) each record is its case, and the verdicts
    are read off the records directly, as :func:`labelled_pairs` would reduce them."""
    seen: set[tuple[str, str, str | None]] = set()
    for r in records:
        key = (r.file, r.test, r.case_id)
        if key in seen:
            cases = _cases(records)
            unlabelled = [
                v
                for c in cases
                if all(x.human is None for x in c.samples)
                and (v := reduce_case(c).passed) is not None
            ]
            return labelled_pairs(cases), unlabelled
        seen.add(key)
    pairs: list[tuple[bool, bool]] = []
    alone: list[bool] = []
    for r in records:
        if r.error is not None or r.score is None or not math.isfinite(r.score):
            continue
        if r.min is not None or r.max is not None:
            verdict: bool | None = (r.min is None or r.score >= r.min) and (
                r.max is None or r.score <= r.max
            )
        else:
            verdict = r.passed
        if verdict is None:
            continue
        human = human_verdict(r) if r.label is not None else None
        if human is None:
            alone.append(verdict)
        else:
            pairs.append((human, verdict))
    return pairs, alone


def record_sample(r: ScoreRecord) -> Sample:
    """A record as a sample of its case, as gates and the agreement see it: an errored record
    is an unscored sample, and the person's verdict travels with it."""
    return Sample(
        score=None if r.error is not None else r.score,
        passed=None if r.error is not None else r.passed,
        error=r.error,
        sample=r.sample,
        index=r.index,
        min=r.min,
        max=r.max,
        human=human_verdict(r),
    )


def _cases(records: Sequence[ScoreRecord]) -> list[CaseSamples]:
    """The records as cases of samples (one case per file, test and case id), each sample with
    the person's verdict on it."""
    groups: dict[tuple[str, str, str | None], list[ScoreRecord]] = {}
    for r in records:
        groups.setdefault((r.file, r.test, r.case_id), []).append(r)
    out = []
    for (file, test, case_id), recs in groups.items():
        recs.sort(key=lambda r: (r.sample, r.index))
        samples = tuple(record_sample(r) for r in recs)
        bounded = next((r for r in recs if r.error is None), recs[0])
        key = f"{file}::{test}[{case_id}]"
        out.append(CaseSamples(key, samples, min=bounded.min, max=bounded.max))
    return out


def _word(passed: bool) -> str:
    return "pass" if passed else "fail"


def run_agreement(run: Run) -> tuple[ScorerAgreement, ...]:
    """The agreement of every scorer of ``run`` that has labelled records, by scorer name."""
    by_scorer: dict[str, list[ScoreRecord]] = {}
    labelled: set[str] = set()
    for r in run.records:
        by_scorer.setdefault(r.scorer, []).append(r)
        if r.label is not None:
            labelled.add(r.scorer)
    return tuple(
        scorer_agreement(name, by_scorer[name], _uses_judge(run, name)) for name in sorted(labelled)
    )


def _uses_judge(run: Run, scorer: str) -> bool | None:
    said = {i.uses_judge for i in run.instruments_of(scorer)} - {None}
    return said.pop() if len(said) == 1 else None

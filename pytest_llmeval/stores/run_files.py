"""Report and saved-run files read safely: strict JSON (no NaN, no Infinity, bounded depth), the
published schema (``pytest_llmeval/schemas/report.schema.json``) and what a schema cannot say
(gates a run can judge, instruments that match their records, scores inside their range), then the
typed :class:`~pytest_llmeval.core.model.Run`. A bad file is a :class:`RunFileError` naming the
file and the field."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_llmeval.core.model import (
    REPORT_VERSION,
    RUN_FORMAT,
    Run,
    RunFileError,
    run_from_report,
    spec_from_json,
)
from pytest_llmeval.core.trace_summary import TraceSummary, TraceSummaryError


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows (NaN and Infinity are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} does not fit a float")
    return value


def loads_strict(text: str) -> Any:
    """``json.loads`` without NaN/Infinity or overflowing numbers; raises ValueError."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        # the C parser counts its depth against the recursion limit and raises cleanly
        raise ValueError("nested too deeply to be a report") from None


def read_json(path: Path) -> Any:
    """Read a JSON file strictly; raise :class:`RunFileError` saying what is wrong."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunFileError(where, f"cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RunFileError(where, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return loads_strict(text)
    except ValueError as exc:
        raise RunFileError(where, f"not valid JSON ({exc})") from None


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    from importlib.resources import files

    import jsonschema

    schema = json.loads(
        files("pytest_llmeval").joinpath("schemas/report.schema.json").read_text("utf-8")
    )
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _field(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def report_of(data: Any, where: str = "report") -> Mapping[str, Any]:
    """The report inside ``data``: a saved run's ``report``, or ``data`` itself. Raises
    :class:`RunFileError` for anything else."""
    if not isinstance(data, Mapping):
        raise RunFileError(where, f"not a pytest-llmeval report or saved run (a {_kind(data)})")
    if data.get("format") == RUN_FORMAT or "report" in data:
        inner = data.get("report")
        if not isinstance(inner, Mapping):
            raise RunFileError(where, "a saved run without a 'report' object", "report")
        return inner
    return data


def _kind(value: Any) -> str:
    return {list: "JSON array", str: "JSON string", bool: "JSON boolean"}.get(
        type(value), "JSON value"
    )


def validate_report(data: Any, where: str) -> Mapping[str, Any]:
    """Check ``data`` (a JSON report, a saved run, a shard report) against the schema and the
    rules a schema cannot state; return the report part. Raises :class:`RunFileError`."""
    report = report_of(data, where)
    prefix = "report." if report is not data else ""
    if "records" not in report:
        raise RunFileError(
            where, "not a pytest-llmeval JSON report or saved run (no 'records' list)", "records"
        )
    version = report.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > REPORT_VERSION:
        raise RunFileError(
            where,
            f"written by a newer pytest-llmeval (report version {version}; this one reads up to "
            f"{REPORT_VERSION}): upgrade to read it",
            f"{prefix}version",
        )
    error = min(
        _validator().iter_errors(report),
        key=lambda e: (len(list(e.absolute_path)), list(map(str, e.absolute_path))),
        default=None,
    )
    if error is not None:
        path = list(error.absolute_path)
        found = f" (found {_short(error.instance)})" if path else ""
        raise RunFileError(
            where, f"{error.message}{found}", prefix + _field(path) if path else prefix or None
        )
    if report is not data:
        number = data.get("number")
        if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
            raise RunFileError(where, f"not a run number: {_short(number)}", "number")
    _check_semantics(report, where, prefix)
    return report


def _check_gates(report: Mapping[str, Any], where: str, prefix: str) -> None:
    """Every gate a report carries must be one a run could judge (a bound, a range with low <
    high, ...): the schema cannot say it, and a bad one would fail only when judged."""
    places: list[tuple[str, Any]] = []
    for i, plan in enumerate(report.get("plan") or ()):
        places += [(f"plan[{i}].gates[{j}]", g) for j, g in enumerate(plan.get("gates") or ())]
    shard_section = report.get("shard")
    shard: Mapping[str, Any] = shard_section if isinstance(shard_section, Mapping) else {}
    for section, settings in (
        ("settings", report.get("settings")),
        ("shard.settings", shard.get("settings")),
    ):
        for k, rule in enumerate((settings or {}).get("gate_rules") or ()):
            places.append((f"{section}.gate_rules[{k}].spec", rule["spec"]))
    for field_, data in places:
        try:
            spec_from_json(data).validate()
        except (ValueError, TypeError) as exc:
            raise RunFileError(
                where, f"not a gate a run can judge: {exc}", prefix + field_
            ) from None


def _check_semantics(report: Mapping[str, Any], where: str, prefix: str) -> None:
    _check_gates(report, where, prefix)
    instruments = report.get("instruments") or {}
    for digest, inst in instruments.items():
        rng = inst.get("score_range")
        if rng is not None:
            lo, hi = rng
            if lo is not None and hi is not None and not lo < hi:
                raise RunFileError(
                    where,
                    f"score_range {rng} must have low < high",
                    f"{prefix}instruments.{digest}",
                )
    for i, r in enumerate(report["records"]):
        at = f"{prefix}records[{i}]"
        if r.get("trace") is not None:
            _check_trace(r["trace"], where, f"{at}.trace")
        digest = r.get("instrument")
        if digest is None:
            continue
        inst = instruments.get(digest)
        if inst is None:
            raise RunFileError(where, f"instrument {digest} is not in 'instruments'", at)
        if inst["scorer"] != r["scorer"]:
            raise RunFileError(
                where,
                f"scorer {r['scorer']!r} but its instrument {digest} is of {inst['scorer']!r}",
                at,
            )
        score = r.get("score")
        rng = inst.get("score_range")
        if score is not None and rng is not None:
            lo = -math.inf if rng[0] is None else rng[0]
            hi = math.inf if rng[1] is None else rng[1]
            if not lo - 1e-9 <= score <= hi + 1e-9:
                raise RunFileError(
                    where,
                    f"score {score!r} of scorer {r['scorer']!r} is outside its range "
                    f"[{rng[0]}, {rng[1]}]",
                    f"{at}.score",
                )


def _check_trace(data: Any, where: str, at: str) -> None:
    """A record's trace summary as :meth:`TraceSummary.from_json` reads it: what the schema
    cannot say (a parent that is an earlier entry, depths that agree, counts that add up)."""
    try:
        TraceSummary.from_json(data)
    except TraceSummaryError as exc:
        raise RunFileError(where, exc.problem, f"{at}.{exc.field}" if exc.field else at) from None


def run_from_json(data: Any, where: str) -> Run:
    """The :class:`Run` of a report, saved run or shard report (validated first). Raises
    :class:`RunFileError`."""
    report = validate_report(data, where)
    try:
        return run_from_report(report)
    except (KeyError, TypeError, ValueError) as exc:  # the schema should have caught it
        raise RunFileError(where, f"not a usable report ({type(exc).__name__}: {exc})") from None


def load_run(path: Path) -> tuple[Run, Mapping[str, Any]]:
    """Read and validate a report, saved run or shard report: its :class:`Run` and the file's
    JSON. Raises :class:`RunFileError`."""
    data = read_json(path)
    return run_from_json(data, str(path)), data

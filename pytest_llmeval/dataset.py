"""Datasets: CSV, JSONL or JSON files to ordered :class:`Case` objects with stable ids.

Rows load in file order (so collection is identical on every xdist worker). A case's id is its
``id`` field when the file has one, else its 1-based row number. Every error names ``file:line``.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, final

from pytest_llmeval.errors import DatasetError

__all__ = ["Case", "MissingFieldError", "load_dataset"]

_FORMATS = (".jsonl", ".csv", ".json")


@final
class MissingFieldError(KeyError):
    """``case["field"]`` for a field the row lacks: a KeyError whose message says where."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(key)
        self.message = message

    def __str__(self) -> str:
        return self.message


@final
class Case(Mapping[str, Any]):
    """One dataset row. Fields are attributes (``case.expected``) and mapping items
    (``case["expected"]``). A field the row lacks reads as ``None`` through an attribute only for
    the standard fields ``input``, ``output``, ``expected`` and ``context``; others raise
    ``AttributeError`` naming the fields the row has."""

    __slots__ = ("_fields", "id", "location")
    _STANDARD = ("input", "output", "expected", "context")

    def __init__(self, id: str, fields: Mapping[str, Any], location: str) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "location", location)
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        if name in Case._STANDARD:
            return None
        raise AttributeError(
            f"dataset case {self.id!r} ({self.location}) has no field {name!r}; "
            f"its fields are: {', '.join(fields) or 'none'}"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Case is read-only")

    def __getitem__(self, key: str) -> Any:
        try:
            return self._fields[key]
        except KeyError:
            raise MissingFieldError(
                key,
                f"dataset case {self.id!r} ({self.location}) has no field {key!r}; "
                f"its fields are: {', '.join(self._fields) or 'none'}",
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._fields)

    def __repr__(self) -> str:
        return f"Case(id={self.id!r}, location={self.location!r}, fields={list(self._fields)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Case, (self.id, self._fields, self.location))


_ID_SAFE = re.compile(r"[^\w.\-:/@+]+")


def _clean_id(raw: Any) -> str:
    text = str(raw).strip()
    return _ID_SAFE.sub("_", text) or "_"


def load_dataset(
    path: str | Path, *, id_field: str = "id", display: str | None = None
) -> list[Case]:
    """Load ``path`` (``.jsonl``, ``.csv`` or ``.json``) into cases, in file order.

    Raises :class:`DatasetError` for a missing file, an unknown format, a malformed row (with
    ``file:line``), an empty dataset or duplicate ids. ``display`` is the name used for the file
    in case locations and errors (default: ``path`` as given).
    """
    p = Path(path)
    shown = display or str(path)
    if not p.is_file():
        raise DatasetError(
            shown,
            "dataset file not found (paths in llm_eval_dataset are relative to the test file)",
        )
    suffix = p.suffix.lower()
    if suffix not in _FORMATS:
        raise DatasetError(
            shown, f"unknown dataset format {suffix!r}; use one of {', '.join(_FORMATS)}"
        )
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(shown, f"cannot read dataset: {exc}") from None
    if suffix == ".jsonl":
        rows = list(_jsonl_rows(text, shown))
    elif suffix == ".csv":
        rows = list(_csv_rows(text, shown))
    else:
        rows = list(_json_rows(text, shown))
    if not rows:
        raise DatasetError(shown, "dataset is empty: it has no rows; add at least one case")
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for n, (line, row) in enumerate(rows, start=1):
        where = f"{shown}:{line}"
        raw_id = row.get(id_field)
        case_id = _clean_id(raw_id) if raw_id not in (None, "") else str(n)
        if case_id in seen:
            raise DatasetError(
                where,
                f"duplicate case id {case_id!r} (first at {seen[case_id]});"
                " ids must be unique within a dataset",
            )
        seen[case_id] = where
        cases.append(Case(case_id, row, where))
    return cases


def _jsonl_rows(text: str, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{shown}:{lineno}",
                f"malformed JSON line: {exc.msg} "
                f"(column {exc.colno}); each line must be one JSON object",
            ) from None
        if not isinstance(obj, dict):
            raise DatasetError(
                f"{shown}:{lineno}",
                f"each JSONL line must be a JSON object, not {type(obj).__name__}",
            )
        yield lineno, obj


def _csv_rows(text: str, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    lines = text.splitlines(keepends=True)
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise DatasetError(f"{shown}:1", f"malformed CSV header: {exc}") from None
    header = [h.strip() for h in header]
    if len(set(header)) != len(header) or any(not h for h in header):
        raise DatasetError(f"{shown}:1", "CSV header must name every column once")
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DatasetError(f"{shown}:{start}", f"malformed CSV row: {exc}") from None
        if not row or all(not c.strip() for c in row):
            start = reader.line_num + 1
            continue
        if len(row) != len(header):
            raise DatasetError(
                f"{shown}:{start}",
                f"CSV row has {len(row)} fields, the header "
                f"has {len(header)}; quote fields that contain commas",
            )
        yield start, dict(zip(header, row, strict=True))
        start = reader.line_num + 1


def _json_rows(text: str, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    decoder = json.JSONDecoder()

    def lineno(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{shown}:{exc.lineno}", f"malformed JSON: {exc.msg}") from None
    if isinstance(doc, dict) and isinstance(doc.get("cases"), list):
        # locate the array of cases to give per-row line numbers
        start = text.find("[", text.find('"cases"'))
    elif isinstance(doc, list):
        start = text.find("[")
    else:
        raise DatasetError(
            f"{shown}:1", 'a JSON dataset must be a list of objects or {"cases": [...]}'
        )
    pos = start + 1
    idx = 0
    ws = re.compile(r"[\s,]*")
    while True:
        pos = ws.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text) or text[pos] == "]":
            return
        obj, end = decoder.raw_decode(text, pos)
        if not isinstance(obj, dict):
            raise DatasetError(
                f"{shown}:{lineno(pos)}",
                f"case {idx + 1} must be a JSON object, not {type(obj).__name__}",
            )
        yield lineno(pos), obj
        idx += 1
        pos = end

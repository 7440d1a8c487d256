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

from pytest_llmeval.core.errors import DatasetError

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
    (``case["expected"]``). A field the row lacks raises either way, with the same message naming
    the case, its ``file:line`` and the fields it has: an ``AttributeError`` for ``case.field``
    (so ``getattr(case, "field", default)`` and ``hasattr`` work) and a :class:`MissingFieldError`
    (a ``KeyError``) for ``case["field"]``. Read an optional field with ``case.get("field")``.

    Why no ``None`` for an absent ``expected``: a typo in a dataset's column name would then
    reach the scorer as "no reference" and could pass silently."""

    __slots__ = ("_fields", "id", "location")

    def __init__(self, id: str, fields: Mapping[str, Any], location: str) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "location", location)
        object.__setattr__(self, "_fields", dict(fields))

    def _missing(self, name: str) -> str:
        fields = object.__getattribute__(self, "_fields")
        return (
            f"dataset case {self.id!r} ({self.location}) has no field {name!r}; "
            f"its fields are: {', '.join(fields) or 'none'} "
            f"(read an optional field with case.get({name!r}))"
        )

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: slots, methods and Mapping mixins come first.
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        raise AttributeError(self._missing(name), name=name, obj=self)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Case is read-only")

    def __getitem__(self, key: str) -> Any:
        try:
            return self._fields[key]
        except KeyError:
            raise MissingFieldError(key, self._missing(key)) from None

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


#: JSON's own whitespace (RFC 8259): not ``\s``, which also matches characters JSON rejects.
_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON_SHAPE = 'a JSON dataset must be a list of objects or an object {"cases": [...]}'


class _LineCounter:
    """Line numbers of offsets in a text, counted incrementally: offsets come in increasing
    order while walking the document, so a large file is scanned once, not once per row."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._line = 1

    def __call__(self, pos: int) -> int:
        if pos < self._pos:
            self._pos, self._line = 0, 1
        self._line += self._text.count("\n", self._pos, pos)
        self._pos = pos
        return self._line


class _JSONWalker:
    """Walks a JSON document that :func:`json.loads` has already accepted, by real parser
    positions: every value (keys included) is read with ``JSONDecoder.raw_decode`` at the offset
    where it starts, so escapes (``"\\u0063ases"``), brackets inside strings and nested objects
    with a ``"cases"`` key are all seen the way the parser sees them, never by text search."""

    def __init__(self, text: str, shown: str) -> None:
        self.text = text
        self.shown = shown
        self.line = _LineCounter(text)
        self._decode = json.JSONDecoder().raw_decode

    def ws(self, pos: int) -> int:
        return _JSON_WS.match(self.text, pos).end()  # type: ignore[union-attr]

    def expect(self, pos: int, chars: str) -> str:
        char = self.text[pos : pos + 1]
        if not char or char not in chars:  # unreachable for a document json.loads accepted
            raise DatasetError(
                f"{self.shown}:{self.line(pos)}",
                f"malformed JSON: expected one of {chars!r} at column {pos + 1}",
            )
        return char

    def value(self, pos: int) -> tuple[Any, int]:
        """The value starting at ``pos`` and the offset just after it."""
        return self._decode(self.text, pos)

    def cases_offset(self, pos: int) -> int | None:
        """Offset of the value of the top-level object's ``"cases"`` member (the object starts
        at ``pos``), or None. Two ``"cases"`` members are an error: json.loads would keep the
        last one silently, and a dataset must not run rows its author may not mean."""
        self.expect(pos, "{")
        pos = self.ws(pos + 1)
        found: int | None = None
        if self.text.startswith("}", pos):
            return None
        while True:
            key_at = pos
            self.expect(pos, '"')
            key, pos = self.value(pos)
            pos = self.ws(pos)
            self.expect(pos, ":")
            pos = self.ws(pos + 1)
            if key == "cases":
                if found is not None:
                    raise DatasetError(
                        f"{self.shown}:{self.line(key_at)}",
                        f'the JSON object has a second "cases" key (the first is at line '
                        f"{self.line(found)}); keep one list of cases",
                    )
                found = pos
            _, pos = self.value(pos)
            pos = self.ws(pos)
            if self.expect(pos, ",}") == "}":
                return found
            pos = self.ws(pos + 1)

    def array_items(self, pos: int) -> Iterator[tuple[int, Any]]:
        """(start offset, value) of each item of the array that starts at ``pos``."""
        self.expect(pos, "[")
        pos = self.ws(pos + 1)
        if self.text.startswith("]", pos):
            return
        while True:
            start = pos
            item, pos = self.value(pos)
            yield start, item
            pos = self.ws(pos)
            if self.expect(pos, ",]") == "]":
                return
            pos = self.ws(pos + 1)


def _json_rows(text: str, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    # json.loads first: it validates the whole document (trailing data included) and gives the
    # parser's own message and line for a malformed file. The walk then only locates rows.
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{shown}:{exc.lineno}", f"malformed JSON: {exc.msg} (column {exc.colno})"
        ) from None
    walker = _JSONWalker(text, shown)
    start = walker.ws(0)
    if isinstance(doc, list):
        array_at = start
    elif isinstance(doc, dict):
        found = walker.cases_offset(start)
        if found is None:
            raise DatasetError(f"{shown}:{walker.line(start)}", f'{_JSON_SHAPE}; no "cases" key')
        if not isinstance(doc["cases"], list):
            raise DatasetError(
                f"{shown}:{walker.line(found)}",
                f'"cases" must be a list of objects, not {type(doc["cases"]).__name__}',
            )
        array_at = found
    else:
        raise DatasetError(f"{shown}:{walker.line(start)}", _JSON_SHAPE)
    for idx, (pos, obj) in enumerate(walker.array_items(array_at), start=1):
        if not isinstance(obj, dict):
            raise DatasetError(
                f"{shown}:{walker.line(pos)}",
                f"case {idx} must be a JSON object, not {type(obj).__name__}",
            )
        yield walker.line(pos), obj

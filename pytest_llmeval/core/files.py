"""Files written whole or not at all: a reader (another run, a CI step, a browser) never sees
half a report or half a saved run, and concurrent writers never interleave."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

__all__ = [
    "JsonLines",
    "dumps_report",
    "report_chunks",
    "report_target",
    "write_chunks_atomic",
    "write_text_atomic",
]


def write_text_atomic(path: Path, text: str, *, newline: str | None = None) -> None:
    """Write ``text`` (UTF-8) to a temporary file beside ``path``, then rename it into place;
    on any failure (Ctrl-C included) the temporary file is removed and ``path`` is untouched."""
    write_chunks_atomic(path, (text,), newline=newline)


def report_target(path: Path) -> None:
    """Make the folder of a report to be written at ``path``; an OSError naming the path in the
    way when ``path`` is a directory or its folder is a file (``mkdir`` alone would say "File
    exists", and the rename would name the temporary file)."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        # the folder of the report exists but is not a directory
        raise NotADirectoryError(
            errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent)
        ) from None


class JsonLines(Sequence[Any]):
    """A list of JSON values made one at a time from ``items`` by ``make``, as the report writer
    reaches each (a run's records as dicts: thousands of them never all alive at once)."""

    def __init__(self, items: Sequence[Any], make: Callable[[Any], Any]) -> None:
        self.items = items
        self.make = make

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self.make(v) for v in self.items[index]]
        return self.make(self.items[index])

    def __iter__(self) -> Iterator[Any]:
        return map(self.make, self.items)


def report_chunks(document: Mapping[str, Any], nested: Collection[str] = ()) -> Iterator[str]:
    """The text of ``document`` in pieces, as :func:`dumps_report` joins them: one top-level key
    per line, each element of a top-level list (or :class:`JsonLines`) on its own line, every
    value in compact form by json's C encoder; a key in ``nested`` whose value is a mapping is
    laid out the same way, one level in (a saved run's report). NaN or infinity is a ValueError,
    raised when the piece holding it is made."""
    yield from _chunks(document, nested, _value_encoder(), " ")
    yield "\n"


def _value_encoder() -> Callable[[Any], str]:
    """One JSON value as compact text (``", "`` and ``": "`` separators, ASCII, no NaN or
    infinity: a ValueError), by json's C encoder made once for the whole report: a run's report
    encodes one record per case, and ``JSONEncoder.encode`` makes the C encoder anew for each
    value. The same text as ``encode``; without the C encoder, ``encode`` itself. Reports hold
    the JSON-safe values the records made (no cycles), so no circular-reference check."""
    import json
    import json.encoder as json_encoder

    encoder = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))
    make = getattr(json_encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    # (markers, default, string encoder, indent, key and item separators, sort_keys,
    # skipkeys, allow_nan): JSONEncoder.iterencode's own call for a one-shot value
    made = make(
        None,
        encoder.default,
        json_encoder.encode_basestring_ascii,
        None,
        encoder.key_separator,
        encoder.item_separator,
        False,
        False,
        False,
    )

    def encode(value: Any) -> str:
        return "".join(made(value, 0))

    return encode


def _chunks(
    document: Mapping[str, Any], nested: Collection[str], encode: Callable[[Any], str], pad: str
) -> Iterator[str]:
    yield "{\n"
    last = len(document) - 1
    for i, (key, value) in enumerate(document.items()):
        end = ",\n" if i < last else "\n"
        yield f"{pad}{encode(str(key))}: "
        if key in nested and isinstance(value, Mapping) and value:
            yield from _chunks(value, (), encode, pad + " ")
            yield end
        elif isinstance(value, (list, JsonLines)):
            if not len(value):
                yield "[]" + end
                continue
            yield "[\n"
            n = len(value) - 1
            for j, element in enumerate(value):
                yield f"{pad} {encode(element)}{',' if j < n else ''}\n"
            yield f"{pad}]{end}"
        else:
            yield encode(value) + end
    yield pad[:-1] + "}"


def dumps_report(document: Mapping[str, Any]) -> str:
    """``document`` as JSON a person can read and a program can write fast (see
    :func:`report_chunks`; an ``indent`` would make json use its pure-Python encoder, several
    times slower on a report of thousands of records). NaN or infinity is a ValueError."""
    return "".join(report_chunks(document))


def write_chunks_atomic(path: Path, chunks: Iterable[str], *, newline: str | None = None) -> None:
    """:func:`write_text_atomic` for text made in pieces (written as they come: the whole text
    is never in memory); an exception while making a piece leaves ``path`` untouched."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            write = fh.write
            for chunk in chunks:
                write(chunk)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

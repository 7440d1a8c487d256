"""dumps_report: the JSON report and saved runs written with json's C encoder, readable line by
line (issue 24: an indent made the end of a 16,000-case session spend seconds in json's
pure-Python encoder)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_llmeval.core.files import JsonLines, dumps_report, report_chunks, write_chunks_atomic


def test_it_reads_back_as_the_same_document_one_record_per_line() -> None:
    doc = {
        "version": 3,
        "run": {"judge": {"model": "m"}, "é": "ü"},
        "records": [{"scorer": "exact_match", "score": 1.0}, {"scorer": "x", "score": None}],
        "gates": [],
        "plan": [[1, 2]],
    }
    text = dumps_report(doc)
    assert json.loads(text) == doc
    assert list(json.loads(text)) == list(doc)  # key order kept
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and text.endswith("}\n")
    assert '  {"scorer": "exact_match", "score": 1.0},' in lines
    assert '  {"scorer": "x", "score": null}' in lines
    assert ' "gates": [],' in lines


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        dumps_report({"records": [{"score": bad}]})
    with pytest.raises(ValueError):
        dumps_report({"score": bad})


def test_lazy_records_are_made_one_at_a_time_and_read_back_the_same(tmp_path: Path) -> None:
    """The history's saved run is written from the records without a list of their dicts: each
    is made as the writer reaches it, and the file reads back as the eager document would."""
    made: list[int] = []
    alive: list[int] = []

    class Row(dict[str, int]):
        def __del__(self) -> None:
            alive.remove(self["n"])

    def make(n: int) -> Row:
        made.append(n)
        alive.append(n)
        assert len(alive) <= 2, alive  # the one written and at most the one before it
        return Row(n=n)

    lazy = {"version": 2, "records": JsonLines(range(5), make), "gates": []}
    path = tmp_path / "run.json"
    run = {"format": "x", "report": lazy}
    write_chunks_atomic(path, report_chunks(run, nested=("report",)))
    assert made == [0, 1, 2, 3, 4]
    eager = {"version": 2, "records": [{"n": n} for n in range(5)], "gates": []}
    assert json.loads(path.read_text(encoding="utf-8")) == {"format": "x", "report": eager}
    assert '   {"n": 3},' in path.read_text(encoding="utf-8").splitlines()
    # a JSON report (not nested) is the same text, lazy or not
    assert dumps_report({**lazy, "records": JsonLines(range(5), lambda n: {"n": n})}) == (
        dumps_report(eager)
    )
    assert JsonLines([1, 2], str)[1] == "2" and JsonLines([1, 2], str)[:1] == ["1"]
    # a run without records (none scored, or collect-only) writes an empty list, lazy or not
    none = {"version": 2, "records": JsonLines([], make), "gates": []}
    assert dumps_report(none) == dumps_report({**none, "records": []})
    assert json.loads(dumps_report(none))["records"] == []


def test_a_bad_record_met_midway_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text("old", encoding="utf-8")
    records = JsonLines([1.0, 2.0, math.nan, 4.0], lambda v: {"score": v})
    with pytest.raises(ValueError):
        write_chunks_atomic(path, report_chunks({"records": records}))
    assert path.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no temporary file left

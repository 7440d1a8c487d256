"""dumps_report: the JSON report and saved runs written with json's C encoder, readable line by
line (issue 24: an indent made the end of a 16,000-case session spend seconds in json's
pure-Python encoder)."""

from __future__ import annotations

import json
import math

import pytest

from pytest_llmeval.core.files import dumps_report


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

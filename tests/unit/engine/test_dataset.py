from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmeval import Case, DatasetError, load_dataset


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_jsonl_rows_in_order_with_ids_and_line_numbers(tmp_path: Path) -> None:
    p = write(tmp_path, "d.jsonl", '{"id": "x", "input": "a"}\n\n{"input": "b", "k": 2}\n')
    cases = load_dataset(p, display="d.jsonl")
    assert [c.id for c in cases] == ["x", "2"]
    assert [c.location for c in cases] == ["d.jsonl:1", "d.jsonl:3"]
    assert cases[1].input == "b" and cases[1]["k"] == 2 and cases[1].k == 2
    assert dict(cases[1]) == {"input": "b", "k": 2}


def test_unknown_attribute_names_the_fields(tmp_path: Path) -> None:
    (case,) = load_dataset(write(tmp_path, "d.jsonl", '{"input": "a"}\n'))
    with pytest.raises(AttributeError, match=r"has no field 'nope'; its fields are: input"):
        _ = case.nope


def test_missing_item_is_a_key_error_that_says_where(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"id": "a", "output": "x"}\n')
    (case,) = load_dataset(f, display="d.jsonl")
    with pytest.raises(KeyError) as info:
        case["expected"]
    assert str(info.value) == (
        "dataset case 'a' (d.jsonl:1) has no field 'expected'; its fields are: id, output"
        " (read an optional field with case.get('expected'))"
    )
    assert case.get("expected") is None  # the Mapping protocol still works
    assert case.get("output") == "x" and "expected" not in case


def test_csv_with_quoted_multiline_field_reports_start_line(tmp_path: Path) -> None:
    p = write(tmp_path, "d.csv", 'id,input,expected\nr1,"line one\nline two",x\nr2,b,y\n')
    cases = load_dataset(p, display="d.csv")
    assert [c.id for c in cases] == ["r1", "r2"]
    assert cases[0].input == "line one\nline two"
    assert [c.location for c in cases] == ["d.csv:2", "d.csv:4"]


def test_csv_row_with_wrong_field_count_is_an_error_with_line(tmp_path: Path) -> None:
    p = write(tmp_path, "d.csv", "input,expected\na,b\nc,d,e\n")
    with pytest.raises(DatasetError, match=r"d\.csv:3: CSV row has 3 fields, the header has 2"):
        load_dataset(p, display="d.csv")


def test_json_list_and_cases_object_with_lines(tmp_path: Path) -> None:
    p = write(tmp_path, "d.json", '[\n  {"input": "a"},\n  {"input": "b"}\n]\n')
    assert [c.location for c in load_dataset(p, display="d.json")] == ["d.json:2", "d.json:3"]
    p2 = write(tmp_path, "e.json", json.dumps({"cases": [{"id": 7}, {"id": 8}]}))
    assert [c.id for c in load_dataset(p2)] == ["7", "8"]


def test_malformed_jsonl_row_names_file_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, "d.jsonl", '{"input": "a"}\n{"input": \n')
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: malformed JSON line"):
        load_dataset(p, display="d.jsonl")


def test_non_object_jsonl_row(tmp_path: Path) -> None:
    p = write(tmp_path, "d.jsonl", "[1, 2]\n")
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: each JSONL line must be a JSON object"):
        load_dataset(p, display="d.jsonl")


def test_empty_missing_duplicate_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset is empty"):
        load_dataset(write(tmp_path, "e.jsonl", "\n\n"))
    with pytest.raises(DatasetError, match="dataset file not found"):
        load_dataset(tmp_path / "missing.jsonl")
    dup = write(tmp_path, "dup.jsonl", '{"id": "a"}\n{"id": "a"}\n')
    with pytest.raises(DatasetError, match=r"dup\.jsonl:2: duplicate case id 'a' \(first at "):
        load_dataset(dup, display="dup.jsonl")
    with pytest.raises(DatasetError, match=r"unknown dataset format '\.txt'"):
        load_dataset(write(tmp_path, "d.txt", "x"))


def test_case_pickles_for_xdist() -> None:
    import pickle

    c = Case("a", {"input": 1}, "f:1")
    c2 = pickle.loads(pickle.dumps(c))
    assert (c2.id, c2.location, c2.input) == ("a", "f:1", 1)
    with pytest.raises(AttributeError, match="read-only"):
        c.id = "b"  # type: ignore[misc]


def test_ids_are_sanitised_for_node_ids(tmp_path: Path) -> None:
    p = write(tmp_path, "d.jsonl", '{"id": "what is 2+2? [x]"}\n')
    assert load_dataset(p)[0].id == "what_is_2+2_x_"


def test_missing_attribute_raises_like_the_missing_item(tmp_path: Path) -> None:
    (case,) = load_dataset(
        write(tmp_path, "d.jsonl", '{"id": "a", "output": "x"}\n'), display="d.jsonl"
    )
    with pytest.raises(AttributeError) as attr:
        _ = case.expected  # a standard field reads as an error too, never as None
    with pytest.raises(KeyError) as item:
        case["expected"]
    assert (
        str(attr.value)
        == str(item.value)
        == (
            "dataset case 'a' (d.jsonl:1) has no field 'expected'; its fields are: id, output"
            " (read an optional field with case.get('expected'))"
        )
    )
    assert attr.value.name == "expected"
    # AttributeError semantics stay: getattr with a default and hasattr still work
    assert getattr(case, "expected", "fallback") == "fallback"
    assert not hasattr(case, "context") and hasattr(case, "output")
    assert case.get("expected", "d") == "d" and case.output == "x"


def _json_ids_and_locations(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    cases = load_dataset(write(tmp_path, "d.json", text), display="d.json")
    return [(c.id, c.location) for c in cases]


@pytest.mark.parametrize(
    "text",
    [
        # a value "cases" before the real key, then a list of objects: a text search runs "tags"
        '{"title": "cases",\n "tags": [{"id": "decoy"}],\n "cases": [\n'
        '  {"id": "r1"},\n  {"id": "r2"}\n ]\n}\n',
        # an escaped key: the parser reads "cases", a text search finds nothing
        '{"tags": [{"id": "decoy"}],\n "n": 1,\n "\\u0063ases": [\n'
        '  {"id": "r1"},\n  {"id": "r2"}\n ]\n}\n',
        # the same behind a value "cases" and a list of objects
        '{"title": "cases",\n "tags": [{"id": "decoy"}],\n "\\u0063ases": [\n'
        '  {"id": "r1"},\n  {"id": "r2"}\n ]\n}\n',
        # a nested object with its own "cases" key comes first
        '{"meta": {"cases": [{"id": "decoy"}]},\n "n": 1, "cases":\n [\n'
        '  {"id": "r1"},\n  {"id": "r2"}\n ]\n}\n',
    ],
    ids=["value-named-cases", "escaped-key", "escaped-key-after-decoy", "nested-cases-key"],
)
def test_json_cases_list_is_found_by_parsing(tmp_path: Path, text: str) -> None:
    assert json.loads(text)["cases"] == [{"id": "r1"}, {"id": "r2"}]  # the test's own premise
    assert _json_ids_and_locations(tmp_path, text) == [("r1", "d.json:4"), ("r2", "d.json:5")]


def test_json_rows_report_the_line_where_each_row_starts(tmp_path: Path) -> None:
    text = (
        "[\n"
        '  {"id": "one", "input": "a ] b \\" [ {"},\n'  # brackets, braces, escaped quote
        "\n"
        "  {\n"
        '    "id": "two",\n'
        '    "input": "line\\nbreak"\n'
        "  }\t,\r\n"
        '  {"id": "three"}]\n'
    )
    assert _json_ids_and_locations(tmp_path, text) == [
        ("one", "d.json:2"),
        ("two", "d.json:4"),
        ("three", "d.json:8"),
    ]


def test_json_shape_errors_name_the_line(tmp_path: Path) -> None:
    dup = write(tmp_path, "dup.json", '{"cases": [{"id": 1}],\n "\\u0063ases": [{"id": 2}]}\n')
    with pytest.raises(DatasetError, match=r'dup\.json:2: .*second "cases" key .*line 1'):
        load_dataset(dup, display="dup.json")
    not_list = write(tmp_path, "nl.json", '{"title": "x",\n "cases": {"id": 1}}\n')
    with pytest.raises(DatasetError, match=r'nl\.json:2: "cases" must be a list of objects'):
        load_dataset(not_list, display="nl.json")
    no_key = write(tmp_path, "nk.json", '{"title": "cases"}\n')
    with pytest.raises(DatasetError, match=r'nk\.json:1: .*no "cases" key'):
        load_dataset(no_key, display="nk.json")
    scalar = write(tmp_path, "s.json", '{"cases": [\n {"id": 1},\n "two"\n]}\n')
    with pytest.raises(DatasetError, match=r"s\.json:3: case 2 must be a JSON object, not str"):
        load_dataset(scalar, display="s.json")
    bad = write(tmp_path, "b.json", '{"cases": [\n {"id": 1}\n {"id": 2}]}\n')
    with pytest.raises(DatasetError, match=r"b\.json:3: malformed JSON: Expecting ','"):
        load_dataset(bad, display="b.json")

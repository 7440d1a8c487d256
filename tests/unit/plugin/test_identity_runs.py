"""Each collected item's test function, worked out once per run of one function's items
(pytest_llmeval/plugin/identity.py: function_keys): the same answer as asking item by item,
whatever the order, classes or parametrization ids. (pytester's getitems finishes a session
that only collected: the plugin's session end must not need what only a real run sets.)"""

from __future__ import annotations

import random

import pytest

from pytest_llmeval.plugin.identity import function_identity, function_keys

SOURCE = """
import pytest

@pytest.mark.parametrize("x", ["a::b", "c", "d[e]"])
def test_one(x):
    pass

def test_two():
    pass

class TestA:
    @pytest.mark.parametrize("y", [1, 2])
    def test_one(self, y):
        pass

class TestB:
    @pytest.mark.parametrize("y", [1, 2])
    def test_one(self, y):
        pass

    class TestInner:
        @pytest.mark.parametrize("z", [1, 2])
        def test_one(self, z):
            pass
"""


def test_each_item_gets_its_own_functions_key_in_any_order(pytester: pytest.Pytester) -> None:
    items = pytester.getitems(SOURCE)
    assert len(items) == 10
    expected = [function_identity(item) for item in items]
    assert function_keys(items) == expected
    assert expected[0] == ("test_each_item_gets_its_own_functions_key_in_any_order.py", "test_one")
    tests = [test for _file, test in expected]
    assert tests.count("TestA::test_one") == 2 and tests.count("TestB::test_one") == 2
    assert tests.count("TestB::TestInner::test_one") == 2
    # reordered (as -p randomly or a plugin's modifyitems may): runs break up, keys follow
    shuffled = list(items)
    random.Random(4).shuffle(shuffled)
    assert function_keys(shuffled) == [function_identity(item) for item in shuffled]
    assert function_keys([]) == []


def test_items_whose_node_ids_are_not_their_parents_plus_their_name_are_keyed_one_by_one(
    pytester: pytest.Pytester,
) -> None:
    """xdist's loadgroup appends "@group" to an xdist_group test's node ids (after the plan
    collector's first look), and another plugin may give its items node ids of its own: such a
    run of items is never keyed by its first item. A case id with "::" under loadgroup once
    made the whole test look like another test, and its gate vanish: the run passed."""
    items = pytester.getitems(SOURCE)
    first = items[0]  # test_one[a::b]
    for item in items[:3]:
        item._nodeid = f"{item.nodeid}@g"  # what xdist's worker does under --dist loadgroup
    keys = function_keys(items)
    assert keys == [function_identity(item) for item in items]
    file = first.nodeid.split("::", 1)[0]
    assert keys[:3] == [(file, "test_one")] * 3
    # a run of one parent and one name whose node ids another plugin chose
    odd = items[3]  # test_two
    odd._nodeid = f"{file}::suite::test_two"
    twin = items[3]
    keys = function_keys([*items[:3], odd, twin])
    assert keys == [function_identity(item) for item in [*items[:3], odd, twin]]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "@pytest.mark.llm_eval_dataset('d.jsonl', concurrency=3)\n"
            "async def test_a(case):\n    pass",
            True,
        ),
        (
            "pytestmark = pytest.mark.llm_eval_dataset('d.jsonl', concurrency=2)\n"
            "async def test_a(case):\n    pass",
            True,
        ),
        (
            "@pytest.mark.llm_eval_dataset('d.jsonl', concurrency=2)\nclass TestA:\n"
            "    async def test_a(self, case):\n        pass",
            True,
        ),
        (
            "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.llm_eval_dataset("
            "'d.jsonl', concurrency=4)), 2])\ndef test_a(x):\n    pass",
            True,
        ),
        (
            "@pytest.mark.llm_eval_dataset('d.jsonl', concurrency=1)\n"
            "async def test_a(case):\n    pass",
            False,
        ),
        ("@pytest.mark.other(concurrency=5)\nasync def test_a(case):\n    pass", False),
    ],
    ids=["function", "module", "class", "one-param", "one", "other-mark"],
)
def test_the_concurrency_check_is_skipped_only_when_no_mark_asks_for_more_than_one(
    pytester: pytest.Pytester, source: str, expected: bool
) -> None:
    """Collection asks each item's concurrency only when some llm_eval_dataset mark an item can
    see (its own, its parametrization's, its class's or module's) asks for more than 1."""
    from pytest_llmeval.plugin.concurrent import _some_concurrency_above_one

    (pytester.path / "d.jsonl").write_text('{"id": "c1"}\n{"id": "c2"}\n')
    items = pytester.getitems("import pytest\n" + source)
    assert items
    assert _some_concurrency_above_one(items) is expected


OTHER_ITEMS = """
import pytest

class OddItem(pytest.Item):
    @property
    def obj(self):
        raise RuntimeError("an item of another plugin: nothing to ask for here")

    def runtest(self):
        pass

class OddFile(pytest.File):
    def collect(self):
        yield OddItem.from_parent(self, name="odd")

def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".odd":
        return OddFile.from_parent(parent, path=file_path)
"""


def test_another_plugins_items_are_not_asked_what_only_test_functions_have(
    pytester: pytest.Pytester,
) -> None:
    """The coroutine question goes to test functions only (as the runner's own check does): an
    item of another plugin whose ``obj`` cannot be read collects and runs beside a test."""
    pytester.makeconftest(OTHER_ITEMS)
    pytester.makefile(".odd", check="")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    # (hypothesis' plugin reads every item's obj when it runs: not it, this plugin is tested)
    result = pytester.runpytest_subprocess(
        "--llm-eval", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"
    )
    result.assert_outcomes(passed=2)


GROUPED_GATE = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.xdist_group("g")
@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
@pytest.mark.llm_eval_gate("exact_match", min_pass_rate=0.5)
def test_gated(case):
    assert_score("exact_match", output=case.output, expected="x", min=1)
"""


def test_a_gate_over_grouped_cases_with_colons_in_their_ids_still_fails_under_loadgroup(
    pytester: pytest.Pytester,
) -> None:
    """2 of 10 cases pass, the gate asks for half: the run fails with ``-n 2 --dist
    loadgroup`` whatever the case ids (xdist appends "@g" to these items' node ids), as it does
    without xdist."""
    pytest.importorskip("xdist")
    rows = ['{"id": "q::0", "output": "x"}', '{"id": "c1", "output": "x"}']
    rows += [f'{{"id": "c{i}", "output": "y"}}' for i in range(2, 10)]
    (pytester.path / "cases.jsonl").write_text("\n".join(rows) + "\n")
    pytester.makepyfile(test_grouped=GROUPED_GATE)
    for extra in (["-n", "0"], ["-n", "2", "--dist", "loadgroup"]):
        result = pytester.runpytest_subprocess(
            "--llm-eval", "--llm-eval-cache=off", "-p", "no:cacheprovider", *extra
        )
        assert result.ret == 1, extra
        result.stdout.fnmatch_lines(["*test_gated exact_match: pass rate 0.2*fail*"])

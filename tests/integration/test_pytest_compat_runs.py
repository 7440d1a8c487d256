"""pytest's internals in one place (issue 22, part 5): ``pytest_llmeval.plugin.pytest_compat``
is the only module that touches a private pytest or pytest-xdist API; each entry works on the pytest
this runs on (the smoke subset runs this file on the oldest supported pytest too); a pytest
without one of them is an error naming it, never a silent default that lets a test pass."""

from __future__ import annotations

import pytest
from case_files import write_cases

from pytest_llmeval.plugin import pytest_compat as compat

pytestmark = pytest.mark.smoke


def test_an_xdist_worker_without_a_lockable_queue_is_an_error_naming_the_version(
    pytester: pytest.Pytester,
) -> None:
    """pytest-xdist 3.5 and 3.6 keep the worker's queue in a plain Queue: reading it raised
    AttributeError: 'Queue' object has no attribute 'lock' from the middle of a case."""
    config = pytester.parseconfig()
    assert compat.worker_queue(config) is None  # not a worker
    config.workerinput = {"workerid": "gw0"}  # type: ignore[attr-defined]
    with pytest.raises(compat.PytestInternalsError, match=r"torun\.lock\(\) \(pytest-xdist 3\.7"):
        compat.worker_queue(config)


INNER = """
import pytest
from pytest_llmeval.plugin import pytest_compat as c


@pytest.fixture(scope="module", params=["A", "B"])
def res(request):
    return request.param


@pytest.fixture
def fx(request):
    request.addfinalizer(lambda: None)
    return 42


@pytest.mark.parametrize("x", ["a"])
def test_item(res, x, fx, request):
    item = request.node
    info = c.fixture_info(item)
    assert info.argnames == ("res", "x", "fx", "request")
    assert {"res", "x", "fx", "request"} <= set(info.names_closure)
    assert set(info.name2fixturedefs) >= {"res", "fx"}
    index = {"A": 0, "B": 1}[res]
    assert c.broader_scoped_params(item.callspec) == (("res", index),)
    assert c.parametrization_id_parts(item.callspec) == [res, "a"]
    assert c.item_request(item) is request
    assert c.request_item(request) is item
    defs = c.request_fixture_defs(request)
    assert {"res", "fx"} <= set(defs)

    # the function-scoped fixture's state comes off its FixtureDef and goes back
    fixturedef = defs["fx"]
    detached = c.detach_fixture(fixturedef)
    assert detached is not None and detached.argname == "fx"
    assert detached.value() == (True, 42) and len(detached.finalizers) >= 1
    assert c.detach_fixture(fixturedef) is None  # nothing left on it
    detached.attach()
    again = c.detach_fixture(fixturedef)
    assert again is not None and again.value() == (True, 42)
    again.attach()

    # the item's entry on the setup stack comes off the top and goes back
    entry = c.detach_setup_entry(item)
    assert entry is not None and c.detach_setup_entry(item) is None
    c.restore_setup_entry(item, entry)
    assert c.detach_setup_entry(item) is entry
    c.restore_setup_entry(item, entry)


def test_escaping_and_widths(pytestconfig):
    assert c.ascii_escaped_by_config("caf\\u00e9", pytestconfig) == "caf\\\\xe9"
    assert c.wcswidth("ab") == 2 and c.wcswidth("\\u65e5\\u672c") == 4
    writer = c.terminal_writer(pytestconfig)
    stream = c.terminal_file(writer)
    assert callable(stream.write)
    c.set_terminal_file(writer, stream)
    assert c.terminal_file(writer) is stream
    assert c.worker_queue(pytestconfig) is None


def test_xfail_marks_are_evaluated(request):
    request.node.add_marker(pytest.mark.xfail(raises=KeyError, strict=True))
    xfailed = c.evaluate_xfail_marks(request.node)
    assert xfailed.strict is True and xfailed.raises is KeyError
    pytest.xfail("evaluated")


def test_renewing_a_dropped_request(request):
    item = request.node
    c.forget_request(item)
    assert c.item_request(item) is False and item.funcargs is None
    c.renew_request(item)
    fresh = c.item_request(item)
    assert fresh and fresh is not request
"""


def test_each_entry_works_on_this_pytests_own_objects(pytester: pytest.Pytester) -> None:
    """Run inside a real test on this pytest: every entry returns what pytest holds."""
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4, xfailed=1)


def test_the_worker_queue_lists_what_this_worker_runs_next(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_q="""
        from pytest_llmeval.plugin import pytest_compat as c

        def test_0(pytestconfig):
            queue = c.worker_queue(pytestconfig)
            assert queue[0] == 1
            # the indices sent so far (xdist sends a few at a time), in the order they run
            ints = [i for i in queue if isinstance(i, int)]
            assert ints == [1, 2][: len(ints)]

        def test_1():
            pass

        def test_2():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(passed=3)


#: An inner conftest that takes ``CallSpec2._idlist`` off every parametrization after collection,
#: as a pytest that renamed it would be: pytest itself only reads it while collecting (the ids).
WITHOUT_IDLIST = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            object.__delattr__(callspec, "_idlist")
"""


PARAMETRIZED_SAMPLES = """
import pytest
from pytest_llmeval import assert_score


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", repeat=2)
@pytest.mark.parametrize("model", ["small", "large"])
def test_models(case, model):
    assert_score("exact_match", output=case.expected, expected=case.expected, min=1)
"""


def test_a_pytest_without_the_id_parts_fails_the_run_naming_them(
    pytester: pytest.Pytester,
) -> None:
    """Before: ``getattr(callspec, "_idlist", ())`` fell back to the whole id, so both repeat
    samples of a case (``small-c0-s0``, ``small-c0-s1``) were cases of their own in the
    statistics and gates, and the run passed (exit 0, 12 passed). pytest itself runs on
    without it: only our case ids depended on it."""
    write_cases(pytester, ["c0", "c1", "c2"])
    pytester.makeconftest(WITHOUT_IDLIST)
    pytester.makepyfile(test_x=PARAMETRIZED_SAMPLES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-eval", timeout=120)
    assert result.ret not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert result.parseoutcomes().get("passed", 0) == 0
    result.stdout.fnmatch_lines(["*pytest-llmeval relies on CallSpec2._idlist, which*"])

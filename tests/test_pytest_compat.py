"""pytest's internals in one place (issue 22, part 5): ``pytest_llmeval.plugin.pytest_compat``
is the only module that touches a private pytest or pytest-xdist API; each entry works on the pytest
this runs on (the smoke subset runs this file on the oldest supported pytest too); a pytest
without one of them is an error naming it, never a silent default that lets a test pass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib
from case_files import write_cases

from pytest_llmeval.plugin import pytest_compat as compat

pytestmark = pytest.mark.smoke

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_llmeval"
COMPAT = PACKAGE / "plugin" / "pytest_compat.py"

#: Private attributes of pytest and pytest-xdist objects that only the compat module may touch.
PRIVATE_ATTRIBUTES = frozenset(
    {
        "_request",
        "_initrequest",
        "_fixtureinfo",
        "_arg2scope",
        "_idlist",
        "_pyfuncitem",
        "_fixture_defs",
        "_setupstate",
        "_finalizers",
        "cached_result",
        "cached_param",
        "_tw",
        "_file",
        "torun",
        "nextitem_index",
    }
)
#: Assigned only in the compat module (``FixtureDef.func``); reading ``.func`` is common.
PRIVATE_STORES = frozenset({"func"})
#: Class names of private objects found by name (xdist's worker).
PRIVATE_NAMES = frozenset({"WorkerInteractor"})


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                out.add(id(body[0].value))
    return out


def private_uses(source: str, filename: str = "<src>") -> list[str]:
    """Every use of a private pytest API in ``source``, as ``line: what``."""
    tree = ast.parse(source, filename)
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "_pytest":
                    found.append(f"{line}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] == "_pytest":
                found.append(f"{line}: from {node.module} import")
        elif isinstance(node, ast.Attribute):
            receiver = node.value
            own = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
            if node.attr in PRIVATE_ATTRIBUTES and not own:
                found.append(f"{line}: .{node.attr}")
            elif node.attr in PRIVATE_STORES and isinstance(node.ctx, ast.Store) and not own:
                found.append(f"{line}: .{node.attr} =")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            strings = [a for a in args if isinstance(a, str)]
            if name in ("getattr", "hasattr", "setattr", "delattr") and any(
                s in PRIVATE_ATTRIBUTES or s in PRIVATE_STORES for s in strings
            ):
                found.append(f"{line}: {name}(..., {strings[0]!r})")
            if name in ("import_module", "__import__") and any(
                s.split(".")[0] == "_pytest" for s in strings
            ):
                found.append(f"{line}: {name}({strings[0]!r})")
        elif (
            isinstance(node, ast.Constant)
            and id(node) not in docs
            and isinstance(node.value, str)
            and node.value in PRIVATE_NAMES
        ):
            found.append(f"{line}: {node.value!r}")
    return sorted(found, key=lambda s: int(s.split(":")[0]))


def test_no_module_but_the_compat_one_touches_pytest_internals() -> None:
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p != COMPAT)
    assert len(modules) > 30  # the walk sees the package (a wrong root would pass vacuously)
    offenders = {
        str(p.relative_to(ROOT)): uses
        for p in modules
        if (uses := private_uses(p.read_text(encoding="utf-8"), str(p)))
    }
    assert offenders == {}, (
        "private pytest APIs outside pytest_llmeval/plugin/pytest_compat.py (add an entry there): "
        f"{offenders}"
    )


def test_the_walk_catches_every_form_of_private_use() -> None:
    """The checker above, on each form it must catch (a checker that misses one passes
    forever) and on what it must leave alone."""
    source = '''
"""A docstring may name WorkerInteractor and _pytest.runner."""
import _pytest
import _pytest.runner as r
from _pytest.fixtures import FixtureDef
import importlib
importlib.import_module("_pytest.logging")
stack = item.session._setupstate.stack
fd.cached_result = None
getattr(item, "_request", None)
hasattr(callspec, "_idlist")
fixturedef.func = stand_in
if type(p).__name__ == "WorkerInteractor":
    pass
self._file = f
value = partial.func
from pytest_llmeval.plugin import pytest_compat
'''
    uses = private_uses(source)
    assert uses == [
        "3: import _pytest",
        "4: import _pytest.runner",
        "5: from _pytest.fixtures import",
        "7: import_module('_pytest.logging')",
        "8: ._setupstate",
        "9: .cached_result",
        "10: getattr(..., '_request')",
        "11: hasattr(..., '_idlist')",
        "12: .func =",
        "13: 'WorkerInteractor'",
    ]


# -- the declared ranges -------------------------------------------------------------------------


def _declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["xdist"])
    out = {}
    for req in reqs:
        for name in ("pytest-xdist", "pytest"):
            if req.startswith(name) and req[len(name)] in "<>=!~":
                out[name] = req[len(name) :]
                break
    return out


def test_pyproject_declares_the_ranges_the_errors_quote() -> None:
    declared = {"pytest": compat.SUPPORTED_PYTEST, "pytest-xdist": compat.SUPPORTED_XDIST}
    assert _declared() == declared


def test_this_pytest_and_xdist_are_in_the_supported_ranges() -> None:
    """The smoke subset runs on the oldest and the newest: both must be inside the ranges (a
    smoke run on a version outside them proves nothing about the declaration)."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    assert Version(pytest.__version__) in SpecifierSet(compat.SUPPORTED_PYTEST)
    assert Version(metadata.version("pytest-xdist")) in SpecifierSet(compat.SUPPORTED_XDIST)


# -- a missing internal is an error naming it --------------------------------------------------


def test_a_missing_pytest_function_is_an_error_naming_it() -> None:
    with pytest.raises(compat.PytestInternalsError) as info:
        compat._internal("_pytest.runner", "no_such_function", "runs a case")
    message = str(info.value)
    assert info.value.internal == "_pytest.runner.no_such_function"
    assert "_pytest.runner.no_such_function, which runs a case" in message
    assert f"this pytest {pytest.__version__} (pytest-xdist " in message
    assert f"pytest{compat.SUPPORTED_PYTEST} and pytest-xdist{compat.SUPPORTED_XDIST}" in message
    with pytest.raises(compat.PytestInternalsError, match=r"_pytest\.no_such_module\.x"):
        compat._internal("_pytest.no_such_module", "x", "runs a case")


def test_a_missing_private_attribute_is_an_error_not_a_default() -> None:
    """The call sites used ``getattr(obj, "_private", default)``: a pytest without it ran on
    with the default (no broader-scoped parameters, no fixtures requested at run time)."""

    class NotAPytestObject:
        indices = {"p": 0}

    with pytest.raises(compat.PytestInternalsError, match=r"Function\._fixtureinfo"):
        compat.fixture_info(NotAPytestObject())  # type: ignore[arg-type]
    with pytest.raises(compat.PytestInternalsError, match=r"CallSpec2\._arg2scope"):
        compat.broader_scoped_params(NotAPytestObject())
    with pytest.raises(compat.PytestInternalsError, match=r"CallSpec2\._idlist"):
        compat.parametrization_id_parts(NotAPytestObject())
    with pytest.raises(compat.PytestInternalsError, match=r"FixtureRequest\._fixture_defs"):
        compat.request_fixture_defs(NotAPytestObject())
    with pytest.raises(compat.PytestInternalsError, match=r"FixtureDef\.cached_result"):
        compat.detach_fixture(NotAPytestObject())


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


# -- each entry on this pytest's real objects ----------------------------------------------------

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


# -- a pytest without an internal fails the run, it does not pass it -----------------------------

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

"""pytest's internals in one place (issue 22, part 5): ``pytest_llmeval.plugin.pytest_compat``
is the only module that touches a private pytest or pytest-xdist API; each entry works on the pytest
this runs on (the smoke subset runs this file on the oldest supported pytest too); a pytest
without one of them is an error naming it, never a silent default that lets a test pass."""

from __future__ import annotations

import ast

import pytest
import tomllib
from paths import PACKAGE, ROOT

from pytest_llmeval.plugin import pytest_compat as compat

pytestmark = pytest.mark.smoke

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

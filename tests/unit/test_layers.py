"""The package's layers hold (docs/architecture.md draws them): imports point down, never in a
circle (lazy and TYPE_CHECKING imports included), no private name crosses a subpackage, only the
pytest layer imports pytest, the core imports only the standard library, and a module over 800
lines says why in its docstring.

Everything is read from the source with :mod:`ast`, so an import inside a function or under
``if TYPE_CHECKING:`` counts the same as one at the top of the file."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import PACKAGE

#: bottom to top: a module may import from its own layer or a lower one
LAYERS = ("core", "stores", "judge", "engine", "scorers", "analysis", "report", "plugin", "cli")
#: the public face: pytest_llmeval/__init__.py and __main__.py sit above every layer
TOP = len(LAYERS)
#: the OpenAI-compatible test server: a program of its own, importing nothing of the package's
ISLANDS = ("testing",)
#: third-party packages only the pytest layer may import
PYTEST_MODULES = ("pytest", "_pytest", "xdist", "pluggy", "execnet")
MAX_LINES = 800
#: the docstring paragraph a longer module must have
LONG_NOTE = "Why this module is long:"


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a module of the package, or a top-level third-party / stdlib name
    name: str | None  # the name imported from it (``from X import name``), if any
    line: int


def _module_names() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _module_names()


def _imports(module: str) -> Iterator[Import]:
    path = MODULES[module]
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, _owner(alias.name), None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES:  # ``from pkg import module``
                    yield Import(module, full, None, node.lineno)
                else:
                    yield Import(module, _owner(source), alias.name, node.lineno)


def _owner(dotted: str) -> str:
    """The package module a dotted name lives in (its longest known prefix), or its top name."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in MODULES:
            return ".".join(parts[:end])
    return parts[0]


def _layer(module: str) -> int | str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__main__",):
        return TOP
    if parts[1] in ISLANDS:
        return parts[1]
    if parts[1] not in LAYERS:
        raise AssertionError(
            f"{module}: not in any layer; put it in one of {', '.join(LAYERS)} "
            "(and in docs/architecture.md)"
        )
    return LAYERS.index(parts[1])


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


ALL_IMPORTS = [imp for module in sorted(MODULES) for imp in _imports(module)]
INTERNAL = [imp for imp in ALL_IMPORTS if imp.target in MODULES and imp.target != imp.importer]


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_imports_point_down() -> None:
    wrong = []
    for imp in INTERNAL:
        src, dst = _layer(imp.importer), _layer(imp.target)
        if imp.target == "pytest_llmeval" or imp.importer == "pytest_llmeval":
            if imp.importer != "pytest_llmeval" and src != TOP:
                wrong.append(f"{imp.importer}:{imp.line} imports the top package (a cycle)")
            continue
        if isinstance(src, str) or isinstance(dst, str):
            if src != dst:
                wrong.append(f"{imp.importer}:{imp.line} -> {imp.target} (an island)")
            continue
        if dst > src:
            wrong.append(
                f"{imp.importer}:{imp.line} ({LAYERS[src] if src < TOP else 'top'}) imports "
                f"{imp.target} ({LAYERS[dst]}), a layer above it"
            )
    assert not wrong, "\n".join(wrong)


def _cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in INTERNAL:
        graph[imp.importer].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle() -> None:
    assert _cycles() == []


def test_no_private_name_crosses_a_subpackage() -> None:
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.name} from {imp.target}"
        for imp in INTERNAL
        if imp.name is not None
        and imp.name.startswith("_")
        and not imp.name.startswith("__")
        and _subpackage(imp.importer) != _subpackage(imp.target)
    ]
    private_modules = [
        f"{imp.importer}:{imp.line} imports the private module {imp.target}"
        for imp in INTERNAL
        if imp.target.rpartition(".")[2].startswith("_")
        and not imp.target.endswith("__")
        and _subpackage(imp.importer) != _subpackage(imp.target)
    ]
    assert not wrong + private_modules, "\n".join(wrong + private_modules)


def test_only_the_pytest_layer_imports_pytest() -> None:
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for imp in ALL_IMPORTS
        if imp.target in PYTEST_MODULES and _layer(imp.importer) != LAYERS.index("plugin")
    ]
    assert not wrong, "\n".join(wrong)


def test_no_scorer_calls_pytest() -> None:
    # a scorer says "skip" with an exception of ours; the pytest layer turns it into a skip
    wrong = []
    for module, path in MODULES.items():
        if _layer(module) == LAYERS.index("plugin"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "pytest"
            ):
                wrong.append(f"{module}:{node.lineno} uses pytest.{node.attr}")
    assert not wrong, "\n".join(wrong)


def test_the_core_imports_only_the_standard_library() -> None:
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for imp in ALL_IMPORTS
        if _layer(imp.importer) == 0
        and imp.target not in MODULES
        and imp.target not in sys.stdlib_module_names
        and imp.target != "__future__"
    ]
    assert not wrong, "\n".join(wrong)


def test_a_module_over_800_lines_says_why() -> None:
    wrong = []
    for module, path in sorted(MODULES.items()):
        lines = path.read_text("utf-8").count("\n")
        if lines <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
        if LONG_NOTE not in doc:
            wrong.append(f"{module}: {lines} lines and no '{LONG_NOTE}' paragraph in its docstring")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("module", "expected"),
    [("pytest_llmeval.core.model", 0), ("pytest_llmeval.plugin", LAYERS.index("plugin"))],
)
def test_the_layer_of_a_module_is_its_subpackage(module: str, expected: int) -> None:
    # the checks above are only as good as this mapping
    assert _layer(module) == expected


def test_the_architecture_document_lists_every_module_in_its_layer() -> None:
    # docs/architecture.md's module table is the drawing a newcomer reads: keep it true
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text("utf-8")
    table = text.split("<!-- module table:", 1)[1]
    listed = {}
    for line in table.splitlines()[1:]:
        if not line.startswith("| `"):
            if listed:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        listed[cells[0].strip("`")] = cells[1]
    actual = {}
    for module, path in MODULES.items():
        layer = _layer(module)
        name = {TOP: "top"}.get(layer, layer) if isinstance(layer, int) else layer
        actual[str(path.relative_to(PACKAGE))] = LAYERS[name] if isinstance(name, int) else name
    assert listed == actual

"""A fresh clone must be able to run its own tests: no test reads a path outside the repository.

The parity vectors once lived in a ``parity`` folder beside the checkout, so the README's test
command failed on a clone with 15 errors. This guard scans the test sources for the ways a path
escapes the repository (``__file__`` walked up past the root, ``..`` segments, absolute paths of
the machine it was written on, the old ``shared`` folder) and checks the parity data is in the
repository with its provenance.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from paths import ROOT as REPO
from paths import TESTS

#: ``Path(__file__)`` (optionally ``.resolve()``/``.absolute()``) followed by ``.parent`` steps
_FILE_PARENTS = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent\b)+)")
#: ``Path(__file__)....parents[N]``
_FILE_PARENTS_INDEX = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?\.parents\[(\d+)\]")
#: other escapes: a ``..`` path segment in a string, the parent of the repo root, ``os.pardir``,
#: the sibling ``shared`` folder, absolute paths of the machines the project is developed on
_ESCAPES = re.compile(
    r"""(["'/\\]\.\.[/\\"'])|\bROOT\.parent\b|\bREPO\.parent\b|\bos\.pardir\b|"""
    r"""(/\s*["']shared["'])|(["'/]shared/)|(["'](?:/work|/home|/root)/)"""
)


def _escaping_lines(text: str, steps_to_root: int) -> list[int]:
    """Numbers of the lines of ``text`` that name a path outside the repository, for a test
    source from which ``steps_to_root`` ``.parent`` steps reach the repository root."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        steps = [m.group(1).count(".parent") for m in _FILE_PARENTS.finditer(line)]
        steps += [int(m.group(1)) + 1 for m in _FILE_PARENTS_INDEX.finditer(line)]
        too_far = any(n > steps_to_root for n in steps)
        if too_far or _ESCAPES.search(line):
            found.append(number)
    return found


def _test_sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.resolve() != Path(__file__).resolve())


def test_no_test_source_names_a_path_outside_the_repository() -> None:
    sources = _test_sources()
    assert len(sources) > 10  # the scan really covers the suite
    offending = []
    for path in sources:
        rel = path.relative_to(REPO)
        lines = path.read_text("utf-8").splitlines()
        for number in _escaping_lines("\n".join(lines), len(rel.parts)):
            offending.append(f"{rel}:{number}: {lines[number - 1].strip()}")
    assert offending == [], "tests must read only files inside the repository:\n" + "\n".join(
        offending
    )


def test_the_scan_catches_each_kind_of_escape() -> None:
    # the scanner itself, on lines like the ones that broke fresh clones (for a file at
    # tests/sub/test_x.py: three .parent steps reach the root, a fourth leaves it)
    lines = {
        "inside": "Path(__file__).resolve().parent.parent.parent / 'x'",
        "too_far": "Path(__file__).resolve().parent.parent.parent.parent / 'data'",
        "parents_index": "Path(__file__).parents[3] / 'parity'",
        "dotdot": "p = root / '../data/parity'",
        "root_parent": "SIBLING = ROOT.parent / 'data'",
        "sibling": "base / 'shared' / 'parity'",
        "shared_str": "open('../x/shared/parity/a.json')",
        "shared_key": "{'shared': shared}",
        "absolute": "open('/work/data/x.json')",
        "comment": "# the vectors once lived in .." + "/shared",
    }
    flagged = {name: _escaping_lines(text, steps_to_root=3) == [1] for name, text in lines.items()}
    assert flagged == {
        "inside": False,
        "too_far": True,
        "parents_index": True,
        "dotdot": True,
        "root_parent": True,
        "sibling": True,
        "shared_str": True,
        "shared_key": False,
        "absolute": True,
        "comment": False,
    }


def test_parity_data_lives_in_the_repository_with_its_origin() -> None:
    parity = TESTS / "parity"
    assert sorted(p.name for p in parity.iterdir()) == [
        "README.md",
        "arthur_bench_golden.json",
        "autoevals_heuristics.jsonl",
    ]
    readme = (parity / "README.md").read_text("utf-8")
    assert "Autoevals 0.4.1" in readme and "Arthur Bench 0.3.1" in readme
    assert "shared/parity/" in readme  # where the copies come from
    lines = (parity / "autoevals_heuristics.jsonl").read_text("utf-8").splitlines()
    assert len([line for line in lines if line.strip()]) == 243


# -- installing: the README's install line must install this project ------------------------------

#: a pip command that installs the PyPI distribution "pytest-llmeval" (another project)
_OTHER_PROJECT = re.compile(r"pip install\b[^\n]*?[\s\"']pytest-llmeval(?![\w-])")


def test_the_distribution_is_named_pytest_llmeval_suite() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["name"] == "pytest-llmeval-suite"
    assert project["entry-points"]["pytest11"] == {"llmeval": "pytest_llmeval.plugin"}
    assert project["dynamic"] == ["version"]  # from pytest_llmeval.__version__


def test_no_install_instruction_installs_the_other_pytest_llmeval() -> None:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    files += sorted((REPO / "scripts").glob("*.sh"))
    files += sorted((REPO / "pytest_llmeval").rglob("*.py"))
    files += [p for p in sorted(TESTS.rglob("*.py")) if p.resolve() != Path(__file__).resolve()]
    offending = [
        f"{p.relative_to(REPO)}: {m.group(0)}"
        for p in files
        for m in _OTHER_PROJECT.finditer(p.read_text("utf-8"))
    ]
    assert offending == []
    assert _OTHER_PROJECT.search('pip install "pytest-llmeval[bertscore]"')  # the scan works
    assert _OTHER_PROJECT.search("pip install pytest-llmeval  # core")
    assert not _OTHER_PROJECT.search("pip uninstall pytest-llmeval")
    readme = (REPO / "README.md").read_text("utf-8")
    assert "\npip install .   " in readme  # the install line installs this clone
    assert "pytest-llmeval-suite" in readme


def test_examples_and_tests_share_no_module_basename() -> None:
    """Neither folder is a package, so pytest imports both by basename: an example named like a
    test module breaks collection of examples/ inside the suite (import file mismatch)."""
    examples = {p.name for p in (REPO / "examples").glob("test_*.py")}
    tests = {p.name for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts}
    assert examples and tests
    assert examples & tests == set()


def test_no_two_test_modules_share_a_basename() -> None:
    """The test folders are not packages either (tests/unit/<layer>/, tests/integration/): two
    test modules of one name in two folders would not both import."""
    names = Counter(p.name for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts)
    names.pop("conftest.py", None)
    assert [name for name, n in names.items() if n > 1] == []
    assert len(names) > 80

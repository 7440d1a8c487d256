"""The documentation site: ``mkdocs build --strict`` of mkdocs.yml (a broken link, anchor or
reference fails it), the reference pages generated from the code's own tables (every option,
every registered scorer, every public name, every error class), and nothing in a built page that
loads from another host."""

from __future__ import annotations

import asyncio
import functools
import html
import http.server
import inspect
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_llmeval
from pytest_llmeval import default_registry
from pytest_llmeval.core import errors
from pytest_llmeval.core.options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def build_site(dest: Path) -> float:
    """Build the site into ``dest`` with this checkout's package; the seconds it took."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    started = time.monotonic()
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")]
    done = subprocess.run(
        [*command, "--site-dir", str(dest)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
        check=False,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return seconds


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("docs") / "site"
    build_site(dest)
    return dest


def page_text(site: Path, page: str) -> str:
    """The visible text of a built page, entities decoded."""
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    body = raw.split('<article class="md-content__inner', 1)[1].split("</article>", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def page_ids(site: Path, page: str) -> set[str]:
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    return set(re.findall(r'\bid="([^"]+)"', raw))


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in (
        "getting-started",
        "guides/datasets",
        "guides/judges",
        "guides/gates-statistics",
        "guides/comparing-runs-ci",
        "guides/caching",
        "guides/concurrency",
        "guides/custom-scorers",
        "guides/agents",
        "guides/reports",
        "sandbox",
        "reference/scorers",
        "reference/options",
        "reference/errors",
        "reference/report-schema",
        "reference/api",
        "migration",
        "statistics",
        "quirks",
        "architecture",
        "benchmarks",
        "development",
    ):
        assert (site / page / "index.html").is_file(), page
    assert (site / "search" / "search_index.json").is_file()
    assert (site / "report.png").is_file()
    assert not (site / "hooks.py").exists()  # the build hook is not published


def test_every_option_is_in_the_options_reference(site: Path) -> None:
    text = page_text(site, "reference/options")
    assert f"{len(OPTIONS)} options, in the order the plugin registers them." in text
    for option in OPTIONS:
        for name in (option.flag, option.ini, option.env):
            if name:
                assert name in text, f"{name} ({option.name}) missing from reference/options"
        assert option.help.split(";")[0][:60] in text, option.name


def test_every_registered_scorer_is_in_the_scorers_reference(site: Path) -> None:
    text = page_text(site, "reference/scorers")
    ids = page_ids(site, "reference/scorers")
    # the scorers a fresh process registers (what the build saw): this process's registry also
    # holds the custom scorers earlier tests of this worker registered
    names = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import json; from pytest_llmeval import default_registry; "
                "print(json.dumps(default_registry.names()))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert len(names) >= 47
    assert f"{len(names)} scorers are registered." in text
    for name in names:
        cls = default_registry.get(name)
        assert name in ids, f"no section for scorer {name}"
        for alias in cls.aliases:
            assert alias in text, f"alias {alias} of {name}"
        direction = "higher is better" if cls.higher_is_better else "lower is better"
        low, high = cls.score_range
        assert f"Range: {low:g} to {high:g}, {direction}" in text
    # a judge's entry shows the prompt it sends; lower-is-better scorers are bound by max=
    assert "You are checking a submitted answer against an expert answer" in text
    assert 'assert_score("hallucination", output=output, context=context, max=0)' in text
    assert 'assert_score("levenshtein", output=output, expected=expected, min=1)' in text
    # the scorers docs/quirks.md speaks of link to it, the others do not
    section = text.split("levenshtein¶", 1)[1].split("¶", 1)[0]
    assert "Reference parity and quirks: see Reference quirks" in section
    # the examples were scored when the page was built: the values are the scorers' own
    assert 'result = score("levenshtein", output="kitten", expected="sitting")' in section
    assert "\n0.5714 None\n" in section
    section = text.split("tool_correctness¶", 1)[1].split("¶", 1)[0]
    assert "\n0.8 missing: send_receipt\n" in section
    section = text.split("trace_budget¶", 1)[1].split("¶", 1)[0]
    assert "Reference parity and quirks" not in section


def test_every_public_name_and_error_is_in_the_reference(site: Path) -> None:
    api = page_ids(site, "reference/api")
    public = [n for n in pytest_llmeval.__all__ if not n.startswith("__")]
    missing = [n for n in public if f"pytest_llmeval.{n}" not in api]
    assert missing == []
    assert pytest_llmeval.__version__ in page_text(site, "reference/api")
    # docstrings' reST roles are shown as code, not as role text
    assert "Register a `Scorer` subclass" in inspect.getdoc(pytest_llmeval.register).replace(
        ":class:", ""
    )
    assert "Register a Scorer subclass in the default registry" in page_text(site, "reference/api")
    assert re.search(r":(class|func|meth|data):", page_text(site, "reference/api")) is None
    text = page_text(site, "reference/errors")
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, BaseException) and cls.__module__ == errors.__name__:
            assert name in page_ids(site, "reference/errors") or f"{name}" in text, name
            first = (inspect.getdoc(cls) or "").split("\n")[0].replace("``", "")
            assert first[:50] in text, name


def test_the_report_schema_page_lists_every_top_level_field(site: Path) -> None:
    import json

    schema = json.loads((ROOT / "pytest_llmeval/schemas/report.schema.json").read_text("utf-8"))
    text = page_text(site, "reference/report-schema")
    for field in schema["properties"]:
        assert field in text
    for name in schema["$defs"]:
        assert name in text


def test_no_built_page_loads_from_another_host(site: Path) -> None:
    loads = re.compile(r'<(?:link|script|img|iframe)\b[^>]*\b(?:href|src)="(https?:)?//', re.I)
    offenders = [
        str(p.relative_to(site)) for p in site.rglob("*.html") if loads.search(p.read_text("utf-8"))
    ]
    assert offenders == []
    assert "fonts.googleapis" not in (site / "index.html").read_text("utf-8")


def test_readme_is_a_front_page_that_links_into_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "bash scripts/run-examples.sh" in readme and "bash scripts/run-tests.sh" in readme
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).exists(), target


# -- the site in a real browser ----------------------------------------------------------------


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (a free port), as a reader would open it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


NAV_LABELS = ["Getting started", "Datasets", "Judges and providers", "Scorers", "Options",
              "Errors", "Python API", "From other tools"]  # fmt: skip


def test_the_site_in_headless_chromium(served: str, tmp_path: Path) -> None:
    """Navigation renders on every page opened, search finds a scorer by name (its index is
    built in a web worker after load), no console error, and no request leaves the machine."""
    from cdp import open_page

    async def run() -> tuple[list[str], list[str]]:
        async with open_page(tmp_path / "profile") as page:
            for path in ("", "reference/scorers/", "reference/api/", "getting-started/"):
                await page.goto(served + path)
                labels = await page.wait_until(
                    "Array.from(document.querySelectorAll('nav.md-nav--primary .md-nav__link'))"
                    ".map(a => a.textContent.trim()).filter(t => t)"
                )
                for label in NAV_LABELS:
                    assert label in labels, (path, label, labels)
                title = await page.evaluate("document.querySelector('article h1').textContent")
                assert title.strip(), path
            # search: type a scorer's name into the search box, wait for the worker's results
            await page.goto(served)
            # typed before the worker has built its index, a query may go unanswered: type it
            # again until the deadline (each round polls for results; nothing is a fixed wait)
            found = None
            deadline = time.monotonic() + 180
            while not found:
                await page.evaluate(
                    "(() => { const q = document.querySelector('input.md-search__input');"
                    " q.value = ''; q.dispatchEvent(new Event('input')); q.focus(); })()"
                )
                await page.call("Input.insertText", text="trajectory_match")
                # a result links to the scorer's own section of the scorers reference
                found = await page.poll(
                    "Array.from(document.querySelectorAll('.md-search-result__list a'))"
                    ".map(a => a.getAttribute('href'))"
                    ".find(h => /reference\\/scorers\\/[^#]*#trajectory_match$/.test(h))",
                    seconds=20,
                )
                if not found and time.monotonic() > deadline:
                    pytest.fail("search found no trajectory_match section in 180 s")
            assert found.startswith(served + "reference/scorers/"), found
            summary = await page.evaluate(
                "document.querySelector('.md-search-result__meta').textContent"
            )
            assert re.search(r"\d+ matching document", summary), summary
            return list(page.requests), list(page.errors)

    requests, problems = asyncio.run(run())
    assert problems == []
    assert any(url.endswith("search/search_index.json") for url in requests), requests
    local = ("data:", "blob:", "file:", "about:", served)
    assert [url for url in requests if not url.startswith(local)] == []


def test_the_migration_tables_name_only_registered_scorers() -> None:
    """Every bare snake_case name in the "ours" column of docs/migration.md is a scorer of the
    registry (a renamed or misspelt scorer there would send a migrating user nowhere)."""
    text = (ROOT / "docs" / "migration.md").read_text(encoding="utf-8")
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ")]
    ours = [cells[2] for cells in rows if len(cells) > 3 and cells[2].strip() != "ours"]
    names = {n for cell in ours for n in re.findall(r"`([a-z][a-z0-9_]*)`", cell)}
    # inputs, columns and API names the tables also show
    not_scorers = {"context", "output", "expected", "input", "messages", "id", "assert"}
    not_scorers |= {"llm_classifier", "llm_eval_trace", "score_many"}
    assert len(names - not_scorers) >= 40
    assert sorted(names - not_scorers - set(default_registry.names())) == []

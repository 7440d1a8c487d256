"""No secret reaches an output (issue 19, finding 16).

A judge base URL with a password in its user-info and an API key in its query, an API key in the
environment, a Redis URL with a password: real runs against the project's test server and a real
redis-server, with every output there is (terminal, logs at DEBUG, the JSON and HTML reports,
JUnit XML, the saved run, a shard report and its merge, the SQLite cache, the cache CLI). Each
test asserts that no secret is anywhere, and that the redacted form is shown where the URL is (so
that it cannot pass by showing nothing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from secrets_support import BASIC, ENV_KEY, PASSWORD, SECRETS, URL_KEY

from pytest_llmeval.testing import OpenAITestServer, error, text

YES = text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)], usage=(10, 1))


TESTS = """
import os
import pytest
from pytest_llmeval import assert_score

@pytest.mark.parametrize("i", range(2))
def test_judged(i):
    assert_score("l3score", input=f"q{i}?", expected=f"a{i}", output=f"a{i}", min=0.5)

def test_judged_with_the_url_as_an_option():
    # the same URL as the scorer's own judge option: it is part of the scorer's identity (its
    # instrument in the report, its cache key) and of its repr. Not in a local variable: the
    # test's own locals are pytest's to show (--showlocals), not pytest-llmeval's.
    assert_score(
        "l3score", input="q?", expected="a", output="a", min=0.5,
        base_url=os.environ["JUDGE_URL_OPTION"],
    )
"""


def _outputs(root: Path, *texts: tuple[str, str]) -> dict[str, bytes]:
    """Every file under ``root`` (reports, saved runs, the SQLite cache and its journal, JUnit
    XML...) and the given texts, by name."""
    found = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    found.update({name: value.encode() for name, value in texts})
    return found


def _assert_no_secret(outputs: dict[str, bytes], secrets: Iterable[str] = SECRETS) -> None:
    for name, data in outputs.items():
        for secret in secrets:
            assert secret.encode() not in data, f"{secret!r} is in {name}"


def _merge(root: Path, *reports: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_llmeval merge`` in its own process (so its output is all there)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "merge", *reports, "-o", "merged.json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_judged=TESTS)
    pytester.makeini(
        "[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n"
        "llm_eval_prices =\n    test-judge 1 1\n"
    )
    for name in ("OPENAI_BASE_URL", "LLM_EVAL_CACHE_URL", "LLM_EVAL_REDIS_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    return pytester


def _use(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("JUDGE_URL_OPTION", url)


def _run_everything(
    p: pytest.Pytester, *args: str, merge_status: int = 0
) -> tuple[pytest.RunResult, str]:
    """One run with every output on, then the merge of its shard report (exit status
    ``merge_status``: 1 when the shard's tests failed); (run, merge output)."""
    result = p.runpytest_subprocess(
        "--llm-eval",  # saves the run in the history
        "-p",
        "no:randomly",
        "--llm-eval-report=r.json",
        "--llm-eval-html=r.html",
        "--junitxml=j.xml",
        "--llm-eval-shard=1/1",
        "--log-level=DEBUG",
        "-rA",
        "--showlocals",
        *args,
    )
    merged = _merge(p.path, "r.json")
    assert merged.returncode == merge_status, merged.stdout + merged.stderr
    assert (p.path / "merged.json").is_file()
    return result, merged.stdout + merged.stderr


def test_judge_url_secrets_stay_out_of_a_judged_run(
    project: pytest.Pytester, judge_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_server.set_default(YES)
    url = f"http://user:{PASSWORD}@127.0.0.1:{judge_server.port}/v1?api_key={URL_KEY}"
    shown = f"http://***@127.0.0.1:{judge_server.port}/v1?api_key=***"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    _use(monkeypatch, url)
    result, merge_out = _run_everything(project)
    result.assert_outcomes(passed=3)
    # The URL works as written: its parameters and its user-info (HTTP basic auth, which takes
    # the place of the bearer key as it always did) reach the server, on the right path.
    assert len(judge_server.requests) == 3
    for request in judge_server.requests:
        assert request.path == "/v1/chat/completions"
        assert request.query == {"api_key": [URL_KEY]}
        assert request.headers["authorization"] == f"Basic {BASIC}"
    root = project.path
    outputs = _outputs(
        root,
        ("stdout", result.stdout.str()),
        ("stderr", result.stderr.str()),
        ("merge output", merge_out),
    )
    _assert_no_secret(outputs)
    # ... and where the URL is shown, it is shown redacted
    for name in ("r.json", "merged.json"):
        report = json.loads((root / name).read_text())
        assert report["run"]["judge"]["base_url"] == shown, name
    saved = sorted((root / ".llmeval" / "runs").glob("[0-9][0-9][0-9][0-9].json"))
    assert len(saved) == 1
    run = json.loads(saved[0].read_text())
    assert run["judge"]["base_url"] == run["report"]["run"]["judge"]["base_url"] == shown
    assert shown in (root / "r.html").read_text()
    # the HTTP client's request log, captured at DEBUG and shown by -rA
    log_line = f"HTTP Request: POST http://127.0.0.1:{judge_server.port}/v1/chat/completions"
    assert f"{log_line}?api_key=*** " in result.stdout.str()


def test_judge_url_secrets_stay_out_of_judge_errors(
    project: pytest.Pytester, judge_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing judge: the JudgeError names the endpoint, and the endpoint's own error text
    echoes the key and the URL back; neither reaches the terminal, JUnit, reports or history."""
    port = judge_server.port
    judge_server.set_default(
        error(
            401,
            f"Incorrect API key provided: {ENV_KEY}. You called "
            f"http://user:{PASSWORD}@127.0.0.1:{port}/v1?api_key={URL_KEY}",
        )
    )
    url = f"http://user:{PASSWORD}@127.0.0.1:{port}/v1?api_key={URL_KEY}"
    shown = f"http://***@127.0.0.1:{port}/v1?api_key=***"
    _use(monkeypatch, url)
    result, merge_out = _run_everything(project, f"--llm-eval-judge-base-url={url}", merge_status=1)
    result.assert_outcomes(errors=3)
    assert len(judge_server.requests) == 3
    root = project.path
    out = result.stdout.str()
    outputs = _outputs(root, ("stdout", out), ("stderr", result.stderr.str()), ("merge", merge_out))
    _assert_no_secret(outputs)
    endpoint = f"endpoint {shown}): the chat request was rejected"
    cause = "HTTP 401: Incorrect API key provided: ***. You called " + shown
    # the terminal: the traceback, the short summary and the llm-eval summary
    assert f"JudgeError: judge error (scorer 'l3score', model 'test-judge', {endpoint}" in out
    assert cause in out
    # JUnit: the error's text and the llm_eval:<scorer> property
    junit = (root / "j.xml").read_text()
    assert endpoint in junit and 'value="error: JudgeError: judge error' in junit
    # the records of the JSON report, the merged report and the saved run
    saved = sorted((root / ".llmeval" / "runs").glob("[0-9][0-9][0-9][0-9].json"))
    assert len(saved) == 1
    for path in (root / "r.json", root / "merged.json", saved[0]):
        report = json.loads(path.read_text())
        records = report["report"]["records"] if path == saved[0] else report["records"]
        assert len(records) == 3 and all(endpoint in r["error"] for r in records), path
        assert all(cause in r["error"] for r in records), path
    assert endpoint in (root / "r.html").read_text()


REDIS_CONFTEST = """
from pytest_llmeval import Score, Scorer, register

@register
class Plain(Scorer):
    name = "plain"
    def compute(self, inputs, ctx):
        return Score(scorer=self.name, value=0.75)
"""


REDIS_TESTS = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.parametrize("i", range(2))
def test_case(i):
    assert_score("plain", output=f"answer {i}", min=0.5)
"""


def _cache_cli(*argv: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "cache", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def test_redis_password_stays_out_of_runs_and_the_cache_cli(
    pytester: pytest.Pytester, redis_server_auth: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = redis_server_auth.password
    wrong = "wrong-PASSWORD-123"
    port = redis_server_auth.port
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    shown = f"redis://***@127.0.0.1:{port}/0"
    for name in ("LLM_EVAL_CACHE_URL", "LLM_EVAL_REDIS_PASSWORD", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(REDIS_CONFTEST)
    pytester.makepyfile(test_x=REDIS_TESTS)
    common = ("--llm-eval", "-p", "no:randomly", "--llm-eval-report=r.json")
    common += ("--llm-eval-html=r.html",)
    common += ("--junitxml=j.xml", "--log-level=DEBUG", "-rA", "--llm-eval-rpm=60000")
    # The right password: the fleet's rate limit in Redis is named in the summary.
    ok = pytester.runpytest_subprocess(
        *common, f"--llm-eval-cache-url={url}", "--llm-eval-cache-required"
    )
    ok.assert_outcomes(passed=2)
    assert f"for every machine sharing Redis {shown} (key 'llmeval:ratelimit')" in ok.stdout.str()
    # A wrong password: the store is unavailable, said at start and at the end (with the
    # command that pushes the results later: the password goes where the *** is).
    bad = pytester.runpytest_subprocess(
        *common,
        f"--llm-eval-cache-url={url.replace(password, wrong)}",
        "--llm-eval-cache=refresh",  # computed again, so there is something left to push
        "--llm-eval-no-history",
    )
    bad.assert_outcomes(passed=2)
    bad_out = bad.stdout.str() + bad.stderr.str()
    assert f"Redis result store {shown} is unavailable: AuthenticationError" in bad_out
    assert f"--url '{shown}' --prefix llmeval: (put the URL's user-info back where it" in bad_out
    # The cache CLI, on the same store.
    cli: list[tuple[str, str]] = []
    status, out = _cache_cli("stats", "--url", url)
    assert status == 0 and out.startswith(f"result store: Redis {shown} (prefix 'llmeval:')")
    cli.append(("stats", out))
    status, out = _cache_cli("export", "--url", url, "-o", str(pytester.path / "export.jsonl"))
    assert status == 0
    cli.append(("export", out))
    local = pytester.path / ".llmeval"
    status, out = _cache_cli("push", "--dir", str(local), "--url", url)
    assert status == 0 and f"to Redis {shown} (prefix 'llmeval:')" in out
    cli.append(("push", out))
    status, out = _cache_cli("stats", "--url", url.replace(password, wrong))
    assert status == 1 and f"Redis result store {shown} is unavailable" in out
    cli.append(("stats, wrong password", out))
    status, out = _cache_cli("stats", "--url", f"http://:{password}@127.0.0.1:{port}/0")
    assert status == 2 and "use redis://host:port/db" in out
    cli.append(("stats, wrong scheme", out))
    outputs = _outputs(
        pytester.path,
        ("stdout", ok.stdout.str()),
        ("stderr", ok.stderr.str()),
        ("stdout, wrong password", bad_out),
        *cli,
    )
    _assert_no_secret(outputs, (password, wrong))


SECRET_OPTIONS = """
from pytest_llmeval import scorer

@scorer(name="remote_check")
def remote_check(output, password="", token="", headers=None):
    return 1.0
"""


SECRET_TEST = """
import pytest
from pytest_llmeval import assert_score

@pytest.mark.llm_eval
def test_q():
    assert_score(
        "remote_check",
        output="x",
        min=1,
        password="hunter2-Pa55word-xyz",
        token="sk-proj-abcdefghijklmnop1234567890",
        headers={"Authorization": "Bearer tok-9876543210-secret"},
    )
"""


def test_a_custom_scorers_secret_options_never_reach_reports_history_or_cache(
    pytester: pytest.Pytester,
) -> None:
    """Leak: a custom scorer that calls a service takes its credentials as options
    (``password=``, ``token=``, ``headers={"Authorization": ...}``). The cache's key parts hide
    options with such names, but the report's ``instruments`` section (and the saved run) wrote
    all three in clear, and the cache's key parts kept the nested Authorization header: only an
    option named ``api_key`` is kept out of a scorer's public identity."""
    pytester.makeconftest(SECRET_OPTIONS)
    pytester.makepyfile(test_q=SECRET_TEST)
    pytester.runpytest(
        "--llm-eval", "-p", "no:cacheprovider", "--llm-eval-report=report.json"
    ).assert_outcomes(passed=1)
    secrets = (b"hunter2-Pa55word-xyz", b"sk-proj-abcdefghijklmnop1234567890", b"tok-9876543210")
    written = [pytester.path / "report.json", *sorted((pytester.path / ".llmeval").rglob("*"))]
    leaks = [
        (path.name, secret.decode())
        for path in written
        if path.is_file()
        for secret in secrets
        if secret in path.read_bytes()
    ]
    assert leaks == []

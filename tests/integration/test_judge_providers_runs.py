"""Judge providers: Azure OpenAI through the SDK's AsyncAzureOpenAI client, against the test
server speaking Azure's URL shape (/openai/deployments/{deployment}/chat/completions?api-version=
with the api-key header)."""

from __future__ import annotations

import json

import pytest
from judge_providers_support import CORRECT, KEY, VERSION, _root

from pytest_llmeval.testing import OpenAITestServer

TESTS = """
from pytest_llmeval import assert_score

def test_qa():
    assert_score("qa_correctness", input="q", context="c", output="o", min=1)
"""


def _project(p: pytest.Pytester, server: OpenAITestServer, ini: str = "") -> None:
    p.makepyfile(test_qa=TESTS)
    p.makeini(
        "[pytest]\nllm_eval_judge_model = judge-dep\nllm_eval_max_tries = 1\n"
        "llm_eval_cache = off\n" + ini
    )
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_EVAL_JUDGE_PROVIDER"):
        p._monkeypatch.delenv(var, raising=False)
    p._monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", _root(server))
    p._monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    p._monkeypatch.setenv("OPENAI_API_VERSION", VERSION)


@pytest.mark.parametrize("how", ["cli", "ini", "env"])
def test_plugin_azure_provider(
    pytester: pytest.Pytester, judge_server: OpenAITestServer, how: str
) -> None:
    _project(pytester, judge_server, "llm_eval_judge_provider = azure\n" if how == "ini" else "")
    if how == "env":
        pytester._monkeypatch.setenv("LLM_EVAL_JUDGE_PROVIDER", "azure")
    judge_server.set_default(CORRECT)
    out = pytester.path / "r.json"
    args = [f"--llm-eval-report={out}", "-rA"]
    if how == "cli":
        args.append("--llm-eval-judge-provider=azure")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    (req,) = judge_server.requests_to("chat")
    assert req.path == "/openai/deployments/judge-dep/chat/completions"
    assert (req.deployment, req.api_version, req.headers["api-key"]) == (
        "judge-dep",
        VERSION,
        KEY,
    )
    assert KEY not in result.stdout.str() + result.stderr.str() + out.read_text()
    assert json.loads(out.read_text())["records"][0]["score"] == 1.0


def test_plugin_azure_without_a_key_is_an_error_naming_the_variable(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _project(pytester, judge_server)
    pytester._monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    # OPENAI_API_KEY is not Azure's key variable
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-SECRET")
    result = pytester.runpytest("--llm-eval-judge-provider=azure")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*the judge provider is azure but the API key (AZURE_OPENAI_API_KEY*"]
    )
    assert judge_server.requests == []


def test_plugin_unknown_provider_is_a_usage_error(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    _project(pytester, judge_server)
    result = pytester.runpytest("--llm-eval-judge-provider=azur")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'azur' is not one of openai, azure*"])

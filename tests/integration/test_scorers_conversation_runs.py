"""Tests of pytest_llmeval.scorers.conversation (conversation_relevancy, knowledge_retention,
role_adherence, conversation_completeness) through the scripted OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from scorers_conversation_support import CHAT, _verdicts

from pytest_llmeval.testing import OpenAITestServer


def test_a_dataset_row_with_a_json_messages_column(
    pytester: pytest.Pytester, judge_server: OpenAITestServer
) -> None:
    judge_server.set_default(_verdicts({"Oslo": "off topic"}))
    rows = [
        {"id": "good", "messages": json.dumps(CHAT[:3])},
        {"id": "bad", "messages": json.dumps(CHAT)},
    ]
    pytester.makefile(".jsonl", chats="\n".join(json.dumps(r) for r in rows))
    pytester.makepyfile(
        """
        import pytest
        from pytest_llmeval import assert_score

        @pytest.mark.llm_eval
        @pytest.mark.llm_eval_dataset("chats.jsonl")
        def test_chat(case):
            assert_score("conversation_relevancy", messages=case.messages, min=1.0)
        """
    )
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET")
    result = pytester.runpytest("--llm-eval", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*first failing turn: messages[[]6[]] is not relevant (off topic)*"]
    )

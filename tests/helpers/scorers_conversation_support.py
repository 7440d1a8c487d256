"""Tests of pytest_llmeval.scorers.conversation (conversation_relevancy, knowledge_retention,
role_adherence, conversation_completeness) through the scripted OpenAI-compatible server."""

from __future__ import annotations

import re
from typing import Any

from pytest_llmeval.testing import tool_call as judge_reply

CHAT = [
    {"role": "system", "content": "You are Ada, a polite travel agent."},
    {"role": "user", "content": "Hi, I'm Bob. I want to fly to Rome on May 3."},
    {"role": "assistant", "content": "Hello Bob! Looking at flights to Rome on May 3."},
    {"role": "user", "content": "Window seat please."},
    {"role": "assistant", "content": "Sure, which city are you flying to?"},
    {"role": "user", "content": "And a hotel?"},
    {"role": "assistant", "content": "The weather in Oslo is nice."},
]


def _prompt(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    assert isinstance(content, str)
    return content


def _block(prompt: str, tag: str) -> str:
    """The content of the one ``<tag_NONCE>`` block of a rendered prompt."""
    (match,) = re.finditer(rf"<{tag}_([0-9a-f]+)>\n(.*?)\n</{tag}_\1>", prompt, re.S)
    return match.group(2)


def _verdicts(bad: dict[str, str], yes: str = "Yes", no: str = "No") -> Any:
    """A judge that answers ``no`` when the reply block contains a key of ``bad`` (with its
    value as reasons), else ``yes``."""

    def reply(body: dict[str, Any]) -> Any:
        prompt = _prompt(body)
        tag = "assistant_reply" if "<assistant_reply_" in prompt else "user_intention"
        text = _block(prompt, tag)
        for key, why in bad.items():
            if key in text:
                return judge_reply({"reasons": why, "choice": no}, usage=(10, 1))
        return judge_reply({"reasons": "fine", "choice": yes}, usage=(10, 1))

    return reply

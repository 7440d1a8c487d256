"""Test helpers for users of pytest-llmeval: a scripted OpenAI-compatible server to test judges
(and judge scorers of your own) without a real endpoint. Importing this does not import openai.

    from pytest_llmeval.testing import OpenAITestServer, text, tool_call
"""

from __future__ import annotations

from pytest_llmeval.testing.openai_server import (
    MODERATION_CATEGORIES,
    ChatReply,
    Delay,
    EmbeddingReply,
    Fault,
    ModerationReply,
    OpenAITestServer,
    RawReply,
    RecordedRequest,
    Trickle,
    delay,
    embeddings,
    error,
    hashed_embedding,
    moderation,
    raw,
    text,
    tool_call,
    tool_call_in_content,
    trickle,
)

__all__ = [
    "MODERATION_CATEGORIES",
    "ChatReply",
    "Delay",
    "EmbeddingReply",
    "Fault",
    "ModerationReply",
    "OpenAITestServer",
    "RawReply",
    "RecordedRequest",
    "Trickle",
    "delay",
    "embeddings",
    "error",
    "hashed_embedding",
    "moderation",
    "raw",
    "text",
    "tool_call",
    "tool_call_in_content",
    "trickle",
]

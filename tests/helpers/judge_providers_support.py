"""Judge providers: Azure OpenAI through the SDK's AsyncAzureOpenAI client, against the test
server speaking Azure's URL shape (/openai/deployments/{deployment}/chat/completions?api-version=
with the api-key header)."""

from __future__ import annotations

from pytest_llmeval.testing import OpenAITestServer, tool_call

KEY = "azure-SECRET-key-0123"


VERSION = "2024-10-21"


CORRECT = tool_call({"reasons": "the context says so", "choice": "correct"})


def _root(server: OpenAITestServer) -> str:
    return f"http://127.0.0.1:{server.port}"

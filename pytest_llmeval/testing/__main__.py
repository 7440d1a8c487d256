"""``python -m pytest_llmeval.testing``: run the scripted OpenAI-compatible test server in its
own process (see :func:`pytest_llmeval.testing.openai_server.main` for the options)."""

from __future__ import annotations

from pytest_llmeval.testing.openai_server import main

raise SystemExit(main())

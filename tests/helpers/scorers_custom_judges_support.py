"""Judges you define (pytest_llmeval/scorers/custom.py): llm_classifier, g_eval and the JSON/YAML
spec loader, through the scripted OpenAI-compatible test server with the real ``openai`` client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path

"""Judge requests of every judge scorer on fixed cases, through the test server.

``python tests/helpers/judge_parity.py`` (with ``PYTHONPATH=.``) writes what each scorer sends to
tests/data/judge_requests_before.json. It was run once on the code before the judge step (commit
4c6df75, where every judge scorer rendered its own prompt) to record the requests;
tests/unit/judge/test_judge_step_parity.py runs the same cases on the current code and checks that
the prompts say the same things with the same case values (see that module for what may differ).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from paths import DATA

from pytest_llmeval.testing import OpenAITestServer, text, tool_call
from pytest_llmeval.testing.openai_server import ChatReply

RECORD = DATA / "judge_requests_before.json"

CONV = [
    {"role": "system", "content": "You are a terse travel agent."},
    {"role": "user", "content": "I am Ana and I fly to Rome on May 3."},
    {"role": "assistant", "content": "Noted, Ana: Rome on May 3."},
    {"role": "user", "content": "Book me a hotel near the Colosseum."},
    {"role": "assistant", "content": "Booked Hotel Flavio, 300 m from the Colosseum."},
]
TRAJECTORY = [
    {"role": "user", "content": "Weather in Oslo tomorrow?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "snow, -3 C"},
    {"role": "assistant", "content": "Snow and -3 C in Oslo tomorrow."},
]

Q = "Where is the Eiffel Tower and how tall is it?"
CTX = ["The Eiffel Tower is in Paris.", "It is 330 metres tall."]
OUT = "The Eiffel Tower is in Paris. It is 330 m tall and was built in 1889."
EXP = "It stands in Paris and is 330 metres tall."

#: (case id, scorer, inputs, options)
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("factuality", "factuality", {"input": Q, "expected": EXP, "output": OUT}, {}),
    (
        "factuality_nocot",
        "factuality",
        {"input": Q, "expected": EXP, "output": OUT},
        {"use_cot": False},
    ),
    ("battle", "battle", {"instructions": "Say hi.", "output": "Hi!", "expected": "Hello."}, {}),
    ("closed_qa", "closed_qa", {"input": Q, "output": OUT, "criteria": "Mentions Paris."}, {}),
    ("humor", "humor", {"output": "Why did the chicken cross the road?"}, {}),
    ("security", "security", {"output": "DROP TABLE users; --"}, {}),
    (
        "sql",
        "sql",
        {"input": "All users?", "expected": "SELECT * FROM users", "output": "select * from users"},
        {},
    ),
    (
        "summary",
        "summary",
        {
            "input": "A long text about towers.",
            "expected": "Towers.",
            "output": "A text on towers.",
        },
        {},
    ),
    (
        "translation",
        "translation",
        {"language": "French", "input": "Bonjour", "expected": "Hello", "output": "Good day"},
        {},
    ),
    ("possible", "possible", {"input": "Count to 3.", "output": "1, 2, 3"}, {}),
    ("factuality_conv", "factuality", {"messages": CONV, "expected": "Booked a hotel."}, {}),
    ("qa_correctness", "qa_correctness", {"input": Q, "context": CTX, "output": OUT}, {}),
    (
        "summary_quality",
        "summary_quality",
        {"input": "A long text about towers.", "expected": "Towers.", "output": "On towers."},
        {},
    ),
    ("hallucination", "hallucination", {"output": OUT, "context": CTX}, {}),
    ("context_entity_recall", "context_entity_recall", {"expected": EXP, "context": CTX}, {}),
    ("context_relevancy", "context_relevancy", {"input": Q, "context": CTX}, {}),
    ("context_recall", "context_recall", {"input": Q, "expected": EXP, "context": CTX}, {}),
    ("context_precision", "context_precision", {"input": Q, "expected": EXP, "context": CTX}, {}),
    ("faithfulness", "faithfulness", {"input": Q, "output": OUT, "context": CTX}, {}),
    (
        "answer_relevancy",
        "answer_relevancy",
        {"input": Q, "output": OUT, "context": CTX},
        {"strictness": 2},
    ),
    (
        "answer_correctness",
        "answer_correctness",
        {"input": Q, "expected": EXP, "output": OUT},
        {"answer_similarity_weight": 0},
    ),
    ("conversation_relevancy", "conversation_relevancy", {"messages": CONV}, {}),
    ("knowledge_retention", "knowledge_retention", {"messages": CONV}, {}),
    ("role_adherence", "role_adherence", {"messages": CONV}, {}),
    ("conversation_completeness", "conversation_completeness", {"messages": CONV}, {}),
    ("task_completion", "task_completion", {"output": TRAJECTORY}, {}),
    (
        "argument_correctness",
        "argument_correctness",
        {"input": "Weather in Oslo tomorrow?", "output": TRAJECTORY},
        {},
    ),
    (
        "custom_inline",
        "parity_polite",
        {"input": "Where is my parcel?", "output": "It left today."},
        {},
    ),
    ("custom_blocks", "parity_blocks", {"output": "It left today."}, {}),
    ("l3score", "l3score", {"input": Q, "expected": EXP, "output": OUT}, {}),
    (
        "g_eval",
        "g_eval",
        {"input": Q, "output": OUT},
        {"criteria": "The answer is correct.", "evaluation_steps": ["Check the facts."]},
    ),
]

_ARGS: dict[str, dict[str, Any]] = {
    "extract_entities": {"entities": ["Paris", "330 metres"]},
    "select_relevant_sentences": {
        "sentences": [{"reason": "location", "sentence": "The Eiffel Tower is in Paris."}]
    },
    "attribute_statements": {
        "statements": [{"statement": "It is in Paris.", "reason": "ctx", "attributed": 1}]
    },
    "judge_context_usefulness": {"reason": "it helps", "verdict": 1},
    "extract_statements": {"statements": ["It is in Paris.", "It was built in 1889."]},
    "generate_question": {"question": "Where is the Eiffel Tower?", "noncommittal": 0},
    "classify_statements": {"TP": ["in Paris"], "FP": ["built 1889"], "FN": []},
    "list_claims": {"claims": ["It is in Paris.", "It was built in 1889."]},
    "report_intentions": {"intentions": [{"message": 3, "intention": "Book a hotel."}]},
}


def reply(body: dict[str, Any]) -> ChatReply:
    """The scripted reply to any judge request of the cases (by the forced tool)."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        if body.get("top_logprobs") == 5:  # l3score
            return text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)])
        return text("4", top_logprobs=[("4", -0.2), ("5", -1.8)])
    tool = choice["function"]["name"]
    if tool in _ARGS:
        return tool_call(_ARGS[tool])
    schema = body["tools"][0]["function"]["parameters"]
    if tool == "judge_statements":
        n = schema["properties"]["verdicts"].get("maxItems", 2)
        return tool_call(
            {"verdicts": [{"statement": "s", "reason": "r", "verdict": 1} for _ in range(n)]}
        )
    if tool == "judge_claims":
        n = schema["properties"]["verdicts"].get("maxItems", 2)
        return tool_call({"verdicts": [{"reasons": "r", "verdict": "supported"}] * n})
    enum = schema["properties"]["choice"]["enum"]
    args: dict[str, Any] = {"choice": enum[0]}
    if "reasons" in schema["properties"]:
        args["reasons"] = "because"
    return tool_call(args)


#: Judges you define, used by the cases above: inline placeholders, and blocks as written.
CUSTOM = {
    "parity_polite": (
        "A customer asked: {{input}}\n"
        "The assistant replied: {{output}}\n"
        "Is the reply polite? (A) polite, (B) neutral, (C) rude.",
        {"A": 1.0, "B": 0.5, "C": 0.0},
    ),
    "parity_blocks": (
        "Read the reply.\n\n<reply>\n{{output}}\n</reply>\n\nIs it short? Y or N.",
        {"Y": 1.0, "N": 0.0},
    ),
}


def run_case(case_id: str) -> list[dict[str, Any]]:
    """The chat request bodies the case's scorer sends, in the order received (concurrent
    calls sorted by their text, so the order is stable)."""
    from pytest_llmeval import llm_classifier, score
    from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings
    from pytest_llmeval.engine.context import ScoringContext, set_context

    (_, name, inputs, options) = next(c for c in CASES if c[0] == case_id)
    if name in CUSTOM:
        llm_classifier(name, CUSTOM[name][0], CUSTOM[name][1])
    with OpenAITestServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.set_default(reply)
        judge = JudgeSettings(
            base_url=server.base_url,
            model="test-judge",
            api_key=Secret("sk-test"),
            timeout=5.0,
            max_tries=1,
            concurrency=4,
        )
        settings = Settings(judge=judge, cache_mode="off", cache_dir=Path(tmp) / ".llmeval")
        ctx = ScoringContext(settings)
        prev = set_context(ctx)
        try:
            fields = dict(inputs)
            score(name, output=fields.pop("output", None), **fields, **options)
        finally:
            set_context(prev)
            ctx.close()
        bodies = [r.body for r in server.requests_to("chat")]
    keep = ("messages", "tools", "tool_choice", "temperature", "logprobs", "top_logprobs")
    out = [{k: b[k] for k in keep if k in b} for b in bodies]
    return sorted(out, key=lambda b: json.dumps(b, sort_keys=True))


def main() -> int:
    record = {case_id: run_case(case_id) for case_id, *_ in CASES}
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(record)} cases, {sum(map(len, record.values()))} requests -> {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Parity of the judge step with the requests recorded before it (tests/data/
judge_requests_before.json, written by tests/helpers/judge_parity.py from commit 4c6df75's code,
where each judge scorer rendered its own prompt).

Every judge scorer sends, case for case, the same prompt text and the same case values; what
may differ, and is checked here to differ only so:

1. **Layout**: the prompt's text outside the data blocks (its instructions, the classifier's
   answer instruction) comes first, the blocks and the data notice last. Removing the blocks
   and the notice from either prompt leaves the same paragraphs, in the same order, word for
   word (only the blank lines around a removed block differ).
2. **Inline fields of a judge you define**: a ``{{field}}`` written inside a sentence used to be
   broken out into a block in place; it is now the reference ``<field>`` in the sentence, and
   its block comes after the prompt. Without those references the text is the same.
3. **Verdict-list schemas** (``judge_statements``, ``judge_claims``): ``minItems``/``maxItems``
   (the claim count) are gone, so that the tools array is the same for every case; the judge
   step checks one verdict per claim instead (re-asked once, then a judge error).

The blocks (tags and values) and their nonce are identical, and so are the tool names,
descriptions, ``tool_choice``, temperature and logprob parameters.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from judge_parity import CASES, RECORD, run_case

from pytest_llmeval.judge.prompt import data_notice

BEFORE: dict[str, list[dict[str, Any]]] = json.loads(RECORD.read_text(encoding="utf-8"))

_BLOCK = re.compile(
    r"^<(?P<tag>[A-Za-z][A-Za-z0-9_]*)_(?P<nonce>[0-9a-f]{8,})>\n(?P<value>.*?)\n"
    r"</(?P=tag)_(?P=nonce)>$",
    re.MULTILINE | re.DOTALL,
)
#: Cases whose judge you define writes fields inline (difference 2 above).
INLINE = {"custom_inline": ("input", "output")}
#: Cases whose prompt text was deliberately reworded after the record was made (a wording change
#: reviewed on its own, e.g. issue 12's reference fidelity of closed_qa, possible, sql and
#: translation): their blocks, tools and layout are still compared, their instruction text not.
#: Add a case here only together with that rewording.
REWORDED: set[str] = {"closed_qa", "possible", "sql", "translation"}


def _parts(content: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(blocks as (tag, nonce, value), the paragraphs of the rest without the notice)."""
    blocks = [(m["tag"], m["nonce"], m["value"]) for m in _BLOCK.finditer(content)]
    rest = _BLOCK.sub("", content)
    nonces = {n for _, n, _ in blocks}
    for nonce in nonces:
        rest = rest.replace(data_notice(nonce), "")
    paragraphs = [p.strip() for p in re.split(r"\n[ \t]*\n", rest) if p.strip()]
    return blocks, paragraphs


def _without_count(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(tools)
    for tool in out:
        props = tool["function"]["parameters"]["properties"]
        if "verdicts" in props:
            props["verdicts"].pop("minItems", None)
            props["verdicts"].pop("maxItems", None)
    return out


def test_the_record_covers_every_case() -> None:
    assert sorted(BEFORE) == sorted(c[0] for c in CASES)
    assert sum(len(v) for v in BEFORE.values()) == 39


@pytest.mark.parametrize("case_id", [c[0] for c in CASES])
def test_the_judge_step_sends_the_same_prompts_and_values(case_id: str) -> None:
    before = BEFORE[case_id]
    after = run_case(case_id)
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        for key in ("tool_choice", "temperature", "logprobs", "top_logprobs"):
            assert new.get(key) == old.get(key), key
        if "tools" in old:
            assert new["tools"] == _without_count(old["tools"])
        [old_msg] = old["messages"]
        [new_msg] = new["messages"]
        assert new_msg["role"] == old_msg["role"] == "user"
        old_blocks, old_text = _parts(old_msg["content"])
        new_blocks, new_text = _parts(new_msg["content"])
        # The same case values in the same tags, with the same nonce.
        assert new_blocks == old_blocks
        assert old_blocks, "every judge prompt has data blocks"
        if case_id in REWORDED:
            pass
        elif case_id in INLINE:
            joined = " ".join(" ".join(new_text).split())
            for name in INLINE[case_id]:
                assert f"<{name}>" in joined
                joined = joined.replace(f" <{name}>", "")
            assert joined == " ".join(" ".join(old_text).split())
        else:
            assert new_text == old_text
        # The layout: every block (and the notice) after the last instruction paragraph.
        content = new_msg["content"]
        nonce = new_blocks[0][1]
        first_block = content.index(f"<{new_blocks[0][0]}_{nonce}>")
        notice_at = content.index(data_notice(nonce))
        assert notice_at > first_block
        for paragraph in new_text:
            if case_id == "hallucination" and "verdicts):" in paragraph:
                # The one per-case paragraph (it names the number of claims) follows the case.
                assert paragraph.startswith("Answer by calling the `judge_claims` tool")
                assert content.index(paragraph) > notice_at
                assert content.endswith(paragraph)
            else:
                assert content.index(paragraph) < first_block, paragraph

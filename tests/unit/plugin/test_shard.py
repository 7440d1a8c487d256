"""Splitting a run into shards: the round-robin deal over sorted case keys and the ``I/N`` parser
(the runs and their merge: tests/integration/test_merge_runs.py)."""

from __future__ import annotations

from pytest_llmeval.plugin.shard import parse_shard, split_keys


def test_split_keys_deals_round_robin_over_sorted_keys() -> None:
    keys = [
        (True, "f::t[c]"),
        (False, "f::p[1]"),
        (True, "f::t[a]"),
        (True, "f::t[a]"),
        (True, "f::t[b]"),
    ]
    assert split_keys(keys, 2) == {
        (True, "f::t[a]"): 1,
        (True, "f::t[b]"): 2,
        (True, "f::t[c]"): 1,
        (False, "f::p[1]"): 2,
    }
    assert parse_shard(" 2/5 ") == (2, 5)

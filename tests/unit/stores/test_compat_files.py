"""Files written by an older pytest-llmeval still work (tests/data/compat; written_by.txt names
the commit, make.py how): its result cache is hit by every scoring (replay mode, where a miss is
an error, with no judge to call), its JSON report and saved run load as baselines and compare as
the same instruments, unchanged."""

from __future__ import annotations

from paths import DATA

COMPAT = DATA / "compat"


def test_the_data_was_written_by_an_older_commit() -> None:
    assert (COMPAT / "written_by.txt").read_text().startswith("pytest-llmeval 0.1.0 at 79f3171")

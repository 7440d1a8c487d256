"""Sharded runs (issue 11): ``--llm-eval-shard i/n`` runs shard i of n of the suite, as a pytest
plugin module registered by :mod:`pytest_llmeval.plugin`; ``python -m pytest_llmeval merge``
(:mod:`pytest_llmeval.analysis.merge`) turns the shards' JSON reports into the report of the whole
run.

**The split is by case, balanced, over the sorted case list.** Every collected item gets a *case
key*: for an ``llm_eval`` test (marker ``llm_eval`` or ``llm_eval_dataset``) ``FILE::TEST[CASE]``,
the identity its score records carry (CASE the dataset row's id, or the parametrization id of a
test without a dataset), so that every sample of a repeated case (``-s0`` ... ``-sK``) and every
parametrization of the same dataset case share one key; for any other test its node id. The
distinct keys are sorted (``llm_eval`` keys first, then the others, each by code point: the same
list on every machine that collects the same tests) and dealt round-robin: the k-th key (from 0)
goes to shard ``k % n + 1``. Shard sizes differ by at most one case, and consecutive cases of a
test go to different shards. The split runs after ``-k``/``-m``/``--deselect``, so every shard
must be run with the same selection; each shard records a digest of the whole sorted key list and
``merge`` refuses shards whose digests differ.

**A shard is not the verdict.** Its gates (and a baseline comparison) see only its cases: they
are reported as PARTIAL in the terminal and in the JSON report (each gate's ``verdict`` is
``"partial"``, the shard's own in ``shard_verdict``), and a gate miss (or a regression with
``--llm-eval-fail-on-regression``) does not fail the shard's exit status. Test failures still do,
as in any pytest run. A shard needs ``--llm-eval-report`` (without a report its gates would be
judged nowhere); the report's ``shard`` section carries what ``merge`` needs to judge the whole:
the shard's (i, n), the run's gate settings, the gate book (gated items selected and run), the
scorers' declared ranges and the collection digest. A shard that no case fell in (more shards
than cases) exits 0, not pytest's "no tests collected" (5).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval.core.options import OPTION, parse_shard
from pytest_llmeval.plugin.options import _enabled, _is_worker, resolved, value

if TYPE_CHECKING:
    from pytest_llmeval.core.model import Run

__all__ = [
    "SPLIT",
    "ShardState",
    "case_key",
    "parse_shard",
    "shard_of",
    "shard_section",
    "split_keys",
]

#: How cases are dealt to shards (recorded in each shard's report).
SPLIT = "round-robin over the sorted case keys"
#: ``workeroutput`` key: an xdist worker's collection facts, for the controller
SHARD_INFO_KEY = "llm_eval_shard_info"


@dataclass
class ShardState:
    index: int
    count: int
    #: distinct case keys collected in the whole run, and in this shard (None: not known here)
    cases: int | None = None
    in_shard: int | None = None
    digest: str | None = None


_state_key = pytest.StashKey[ShardState]()


def shard_of(config: pytest.Config) -> tuple[int, int] | None:
    """(i, n) when this run is a shard, else None."""
    state = config.stash.get(_state_key, None)
    return None if state is None else (state.index, state.count)


def case_key(item: pytest.Item) -> tuple[bool, str]:
    """(is an llm_eval test, case key) of an item (see the module docstring)."""
    if item.get_closest_marker("llm_eval") is None and (
        item.get_closest_marker("llm_eval_dataset") is None
    ):
        return False, item.nodeid
    from pytest_llmeval.plugin.identity import record_identity

    file, test, case_id, _where = record_identity(item)
    return True, f"{file}::{test}" + (f"[{case_id}]" if case_id is not None else "")


def split_keys(keys: list[tuple[bool, str]], count: int) -> dict[tuple[bool, str], int]:
    """Each distinct key -> its shard (1..count): round-robin over the sorted keys, llm_eval
    keys first."""
    ordered = sorted(set(keys), key=lambda k: (not k[0], k[1]))
    return {k: pos % count + 1 for pos, k in enumerate(ordered)}


def digest_of(keys: list[tuple[bool, str]]) -> str:
    ordered = sorted(set(keys), key=lambda k: (not k[0], k[1]))
    text = "\n".join(("L " if llm else "T ") + key for llm, key in ordered)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# -- configuration -----------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    shard = resolved(config, "llm_eval_shard")
    if not shard.given:
        return
    index, count = shard.value
    if _enabled(config) and not value(config, "llm_eval_report"):
        raise pytest.UsageError(
            f"{OPTION['llm_eval_shard'].label} {shard.raw}: a shard's gates are judged by "
            "merging the shards' JSON reports; add --llm-eval-report (e.g. "
            f"--llm-eval-report=shard-{index}.json), then run python -m pytest_llmeval merge "
            "shard-*.json -o report.json"
        )
    state = config.stash[_state_key] = ShardState(index, count)
    if not _is_worker(config):
        config.pluginmanager.register(_Controller(config, state), "llm-eval-shard-controller")


# -- collection --------------------------------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the items of this shard (after -k, -m and --deselect: they run first)."""
    state = config.stash.get(_state_key, None)
    if state is None:
        return
    keys = [case_key(item) for item in items]
    shards = split_keys(keys, state.count)
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item, key in zip(items, keys, strict=True):
        (kept if shards[key] == state.index else dropped).append(item)
    state.cases = len(shards)
    state.in_shard = sum(1 for s in shards.values() if s == state.index)
    state.digest = digest_of(keys)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_sessionfinish(session: pytest.Session) -> None:
    """xdist worker: the shard's collection facts for the controller (which does not collect),
    in ``workeroutput``: it reaches the controller even when no item fell in this shard."""
    config = session.config
    state = config.stash.get(_state_key, None)
    output = getattr(config, "workeroutput", None)
    if state is not None and state.digest is not None and output is not None:
        info = {"cases": state.cases, "in_shard": state.in_shard, "digest": state.digest}
        output[SHARD_INFO_KEY] = json.dumps(info)


class _Controller:
    """Controller side (or the only process): the collection facts of the xdist workers, the
    exit status of an empty shard, the report's ``shard`` section, the terminal line."""

    def __init__(self, config: pytest.Config, state: ShardState) -> None:
        self.config = config
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: the collection facts a worker sent (every worker collects alike)."""
        payload = getattr(node, "workeroutput", {}).get(SHARD_INFO_KEY)
        if not payload or self.state.digest is not None:
            return
        info = json.loads(payload)
        self.state.cases = int(info["cases"])
        self.state.in_shard = int(info["in_shard"])
        self.state.digest = str(info["digest"])

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """No case fell in this shard (more shards than cases): that is not a failure."""
        state = self.state
        if (
            session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and state.in_shard == 0
            and state.cases
        ):
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if not state.in_shard:
            line = f"llm-eval shard {state.index}/{state.count}: no case of the run fell in it"
        else:
            line = (
                f"llm-eval shard {state.index}/{state.count}: {state.in_shard} of {state.cases} "
                f"cases ({SPLIT}); gates and comparisons here are partial: merge the shards' "
                "reports (python -m pytest_llmeval merge) for the verdict"
            )
        terminalreporter.write_line(line, yellow=True)


def shard_section(config: pytest.Config, run: Run) -> dict[str, Any] | None:
    """The report's ``shard`` section of a shard run (None otherwise): what ``merge`` checks
    across the shards (the split, the collection digest, the settings that decide verdicts, the
    scorers' versions); the plan and instruments travel in the report itself."""
    state = config.stash.get(_state_key, None)
    if state is None:
        return None
    repeat = resolved(config, "llm_eval_repeat")
    versions: dict[str, str | None] = {}
    for inst in run.instruments.values():
        versions.setdefault(inst.scorer, inst.version)
    return {
        "index": state.index,
        "count": state.count,
        "split": SPLIT,
        "cases": state.cases,
        "cases_in_shard": state.in_shard,
        "collection_digest": state.digest,
        "stopped": run.stopped,
        # what must be the same in every shard of one run (merge checks it)
        "settings": {
            **run.settings.to_json(),
            # the value as given (merge compares the shards' texts), None when not given
            "repeat": str(repeat.raw) if repeat.given else None,
            "strict_cases": bool(value(config, "llm_eval_strict_cases")),
        },
        "scorer_versions": dict(sorted(versions.items())),
    }

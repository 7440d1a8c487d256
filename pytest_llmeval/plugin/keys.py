"""The stash keys and report attributes the pytest layer's modules share: where a test's
recorder, the run's scoring context, its spend and rate-limit files, its gates and its verdict
policies are kept, and the names of the report attributes that carry records and misses."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from pytest_llmeval.core.records import TestRecorder
from pytest_llmeval.engine.context import ScoringContext

if TYPE_CHECKING:
    from pytest_llmeval.analysis.gates import GateRule, TestGates
    from pytest_llmeval.stores.ratelimit import FileBucket
    from pytest_llmeval.stores.spend import SharedSpend

ERROR_ATTR = "llm_eval_error"


recorder_key = pytest.StashKey[TestRecorder]()


context_key = pytest.StashKey[ScoringContext]()


previous_context_key: pytest.StashKey[ScoringContext | None] = pytest.StashKey()


#: the instruments this process has shipped to the controller (once each)
shipped_key = pytest.StashKey[set[str]]()


spend_key: pytest.StashKey[SharedSpend] = pytest.StashKey()


#: ``workerinput`` key: the path of the run's shared spend file
#: (see :mod:`pytest_llmeval.stores.spend`)
SPEND_FILE_KEY = "llm_eval_spend_file"


rate_file_key: pytest.StashKey[FileBucket] = pytest.StashKey()


#: ``workerinput`` key: the path of the run's rate-limit file
#: (see :mod:`pytest_llmeval.stores.ratelimit`)
RATE_FILE_KEY = "llm_eval_rate_file"


#: call report attribute: the per-case misses a gate will judge (the test itself passed)
GATED_MISS_ATTR = "llm_eval_gated_miss"


gate_table_key: pytest.StashKey[dict[tuple[str, str], TestGates]] = pytest.StashKey()


gate_rules_key: pytest.StashKey[list[GateRule]] = pytest.StashKey()


gate_failure_key = pytest.StashKey[str]()


@dataclasses.dataclass(frozen=True)
class VerdictPolicies:
    """``--llm-eval-inconclusive``, ``--llm-eval-skipped``, ``--llm-eval-accept-incomparable``."""

    inconclusive: str = "fail"
    skipped: str = "fail"
    accept_incomparable: tuple[str, ...] = ()


verdict_policies_key = pytest.StashKey[VerdictPolicies]()


#: The recorder of a case set up ahead of its protocol (the plugin's protocol wrapper reuses it).
prepared_recorder_key = pytest.StashKey[TestRecorder]()

#: ``workeroutput`` key: what an xdist worker waited for judge slots (:class:`SlotWaits` JSON)
SLOT_WAITS_KEY = "llm_eval_slot_waits"

#: ``--llm-eval-trace-spans`` and ``--llm-eval-trace-chars``, read (and checked) at configure
trace_limits_key = pytest.StashKey[tuple[int, int]]()

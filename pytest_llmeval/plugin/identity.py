"""Which case a pytest item is: its test function, dataset case id and sample, as records,
gates, plans and shards name it (the same with ``-n 0`` and ``-n N``), and its recorder."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby, repeat
from operator import add, attrgetter
from typing import Any

import pytest

from pytest_llmeval.core.records import TestRecorder, current_recorder
from pytest_llmeval.engine.dataset import Case
from pytest_llmeval.plugin import pytest_compat as compat
from pytest_llmeval.plugin.keys import prepared_recorder_key, recorder_key


def function_identity(item: pytest.Item) -> tuple[str, str]:
    """(file, test) of an item: the test function as records, gates and shards name it
    (``Class::name`` for a method), without its parametrization."""
    nodeid, name = item.nodeid, item.name
    # The parametrization id may itself contain "::": cut the item's own name off the end first.
    if nodeid.endswith(name):
        prefix = nodeid[: len(nodeid) - len(name)]
    else:
        # xdist's loadgroup appends "@group" to the node ids of an xdist_group test's items:
        # the parent's id, when the node id is that plus the item's name, still says where
        parent = getattr(item, "parent", None)
        head = f"{parent.nodeid}::" if parent is not None and parent.nodeid else None
        if head is not None and nodeid.startswith(head + name):
            prefix = head
        else:
            prefix = nodeid.rpartition("::")[0] + "::"
    file, _, middle = prefix.partition("::")
    return file, middle + getattr(item, "originalname", name)


_PARENT_OF = attrgetter("parent")
_NAME_OF = attrgetter("name")
_NODEID_OF = attrgetter("nodeid")


def function_keys(items: Sequence[pytest.Item]) -> list[tuple[str, str]]:
    """:func:`function_identity` of each of ``items``, worked out once per run of consecutive
    items of one test function (one parent, one original name: a parametrized function's
    items), not once per item: what every collecting process (each xdist worker too) asks of
    every item. Per item only attribute reads and C passes."""
    names = list(map(_NAME_OF, items))
    nodeids = list(map(_NODEID_OF, items))
    originals = map(getattr, items, repeat("originalname"), names)
    pairs = list(zip(map(_PARENT_OF, items), originals, strict=True))
    out: list[tuple[str, str]] = []
    at = 0
    for _pair, run in groupby(pairs):
        stop = at + len(list(run))
        first, name = nodeids[at], names[at]
        prefix = first[: len(first) - len(name)] if first.endswith(name) else None
        # One key for the run only where every node id is provably the first one's prefix
        # plus the item's own name (then function_identity() finds that same prefix for each:
        # same file, same middle, same original name); anything else (xdist's "@group" ids,
        # another plugin's own node ids) is worked out item by item.
        if (
            prefix is not None
            and list(map(add, repeat(prefix), names[at:stop])) == nodeids[at:stop]
        ):
            out.extend(repeat(function_identity(items[at]), stop - at))
        else:
            out.extend(map(function_identity, items[at:stop]))
        at = stop
    return out


def _escaped_id(text: str, config: pytest.Config) -> str:
    """``text`` as pytest writes it into an id (non-ASCII escaped, unless the ini option that
    forfeits that is set), by pytest's own rule."""
    return compat.ascii_escaped_by_config(text, config)


def _case_id(item: pytest.Item, callspec: Any, case: Case) -> str:
    """The record's case id of a dataset item: the dataset case's id, or, when the test is also
    parametrized otherwise, pytest's own parametrization id with the dataset case's part written
    as its id and the repeat sample's suffix taken out (``gpt4-q1`` for ``test[gpt4-q1-s2]``),
    so that two parametrizations of one case never share a record identity, and every sample of
    one parametrization keeps it."""
    full = str(getattr(callspec, "id", "") or "")
    parts = compat.parametrization_id_parts(callspec)
    sample = _sample_of(item)
    ours = {case.id, f"{case.id}-s{sample}"}
    ours |= {_escaped_id(x, item.config) for x in ours}
    for i, part in enumerate(parts):
        if part in ours:
            parts[i] = case.id
            return "-".join(parts)
    return full


def record_identity(item: pytest.Item) -> tuple[str, str, str | None, str | None]:
    """(file, test, case id, case location) of an item: records are keyed on these, not on raw
    node ids, so that reports of the same run with and without xdist compare equal. With the
    sample (repeat index) they are unique per node id: every parametrization is its own case."""
    file, test = function_identity(item)
    case_id: str | None = None
    where: str | None = None
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        params = callspec.params
        c = params.get("case")
        if isinstance(c, Case):
            where = c.location
            case_id = c.id if len(params) == 1 else _case_id(item, callspec, c)
        else:
            case_id = callspec.id
    return file, test, case_id, where


def _sample_of(item: pytest.Item) -> int:
    """The repeat sample of a dataset item: the ``llm_eval_sample`` mark its parametrization put
    on the item itself (the marker is set by ``llm_eval_dataset(repeat=)``, never above an
    item), else 0. Read from the item's own marks: asked for every item, and cheaper than a
    walk up its parents."""
    for mark in getattr(item, "own_markers", ()):
        if mark.name == "llm_eval_sample":
            return int(mark.args[0]) if mark.args else 0
    return 0


def closest_mark(item: pytest.Item, name: str) -> pytest.Mark | None:
    """``item.get_closest_marker(name)``, its own marks read first without a walk: a test's
    own marks (its function's decorators, its parametrization's) hold the plugin's markers of a
    dataset test, asked for at collection of every item. The same mark pytest's walk finds:
    the item's own come first in it."""
    for mark in item.own_markers:
        if mark.name == name:
            return mark
    return item.get_closest_marker(name)


def item_recorder(item: pytest.Item) -> TestRecorder | None:
    """The item's recorder: its protocol's or, for a concurrent case set up ahead of its
    protocol (its setup reports are made then), the one prepared for it."""
    current = current_recorder.get()
    if current is not None and current.owner is item:
        return current  # (the common case, without two stash lookups: its protocol is running)
    stash = item.stash
    prepared = stash.get(prepared_recorder_key, None)
    return prepared if prepared is not None else stash.get(recorder_key, None)


def _new_recorder(item: pytest.Item) -> TestRecorder:
    file, test, case_id, where = record_identity(item)
    return TestRecorder(file, test, case_id, where, sample=_sample_of(item), owner=item)


def _definition_identity(metafunc: pytest.Metafunc) -> tuple[str, str]:
    file, _, test = metafunc.definition.nodeid.partition("::")
    return file, test

"""JUnit properties (``--junitxml``): each score of a test as an ``llm_eval:<scorer>`` property.

junitxml reads a test's properties from its reports, so this writer writes per test, in the
process that ran it (the properties cross xdist with the report): the view it is given holds
that one test's records (:mod:`pytest_llmeval.plugin.history` makes it on the teardown report).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, final

from pytest_llmeval.core.records import ScoreRecord

if TYPE_CHECKING:
    from pytest_llmeval.report.view import RunView

__all__ = ["JUnitProperties", "junit_properties"]


class _HasProperties(Protocol):
    user_properties: Any


def junit_properties(records: Iterable[ScoreRecord]) -> list[tuple[str, object]]:
    """``llm_eval:<scorer>`` = the score (``error: ...`` for a scoring error), and
    ``llm_eval:<scorer>:bound`` = its bound; ``#<i>`` names the i-th further assertion of one
    scorer in the test, ``@<s>`` the sample of a repeated case."""
    props: list[tuple[str, object]] = []
    for r in records:
        name = f"llm_eval:{r.scorer}" + (f"#{r.index}" if r.index else "")
        if r.sample:
            name += f"@{r.sample}"
        value: object = f"error: {r.error}" if r.error is not None else r.score
        props.append((name, value))
        bound = " and ".join(
            b
            for b in (
                f">= {r.min:g}" if r.min is not None else "",
                f"<= {r.max:g}" if r.max is not None else "",
            )
            if b
        )
        if bound:
            props.append((f"{name}:bound", bound))
    return props


@final
class JUnitProperties:
    """Adds the properties of the view's records to ``report.user_properties`` (a test's
    teardown report)."""

    name = "JUnit properties"

    def __init__(self, report: _HasProperties) -> None:
        self.report = report

    def write(self, view: RunView) -> None:
        props = junit_properties(view.run.records)
        if props:
            self.report.user_properties = [*self.report.user_properties, *props]

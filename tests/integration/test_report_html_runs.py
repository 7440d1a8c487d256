"""The HTML report: data embedding and escaping, card statistics, the page in a real headless
Chromium (cards, gate verdicts, filters, sorting, a row's detail, the word diff, no script
injection), the --llm-eval-html option and the ``report`` subcommand."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("how", ["option", "ini"])
def test_llm_eval_html_writes_the_report(pytester: pytest.Pytester, how: str) -> None:
    pytester.makepyfile(
        """
        from pytest_llmeval import assert_score

        def test_ok():
            assert_score("levenshtein", output="abc", expected="abc", min=0.9)

        def test_bad():
            assert_score("levenshtein", output="abc", expected="xyz", min=0.9)
        """
    )
    if how == "ini":
        pytester.makeini("[pytest]\nllm_eval_html = out/report.html\n")
        result = pytester.runpytest("--llm-eval-cache=off")
    else:
        result = pytester.runpytest("--llm-eval-cache=off", "--llm-eval-html=out/report.html")
    result.assert_outcomes(passed=1, failed=1)
    page = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    data = json.loads(page.split('id="llmeval-data">', 1)[1].split("</script>", 1)[0])
    assert [(r["test"], r["scorer"], r["passed"]) for r in data["records"]] == [
        ("test_bad", "levenshtein", False),
        ("test_ok", "levenshtein", True),
    ]
    assert data["cards"][0]["scorer"] == "levenshtein"
    assert not (pytester.path / "report.json").exists()  # the JSON report is a separate option

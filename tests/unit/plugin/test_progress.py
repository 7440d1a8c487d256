"""The live status line (issue 14): shown on a real terminal (a pty), never mixed with pytest's
own output, absent with -q, --llm-eval-no-progress, its ini twin and a non-terminal stdout."""

from __future__ import annotations

from progress_support import _Tty, screen

from pytest_llmeval.plugin.progress import _StatusFile, format_status


def test_screen_emulator_applies_rewrites() -> None:
    assert screen("ab\r\x1b[Kcd\n\rx\x1b[Ay\x1b[B\r\x1b[2Cz") == ["cy", "x z"]


def test_format_status() -> None:
    assert (
        format_status(
            done=3, total=5, in_flight=2, judge_calls=7, cached=1, spent=0.0123, budget=1.0, eta=65
        )
        == "llm-eval: 3/5 cases, ETA 1m05s | 2 in flight | 7 judge calls, 1 cached | $0.0123/$1.00"
    )
    assert (
        format_status(
            done=0,
            total=None,
            in_flight=1,
            judge_calls=1,
            cached=0,
            spent=2.5,
            budget=None,
            eta=None,
        )
        == "llm-eval: 0/? cases | 1 in flight | 1 judge call, 0 cached | $2.50"
    )


def test_format_status_says_what_the_run_waits_on() -> None:
    """Past half a second of queueing for judge slots the line says so, with the limit; the
    rate limit comes first, as before."""
    common = dict(
        done=1, total=9, in_flight=9, judge_calls=4, cached=0, spent=0.0, budget=None, eta=None
    )
    assert "judge slots" not in format_status(**common, slot_wait=(0.4, 8))  # type: ignore[arg-type]
    assert format_status(**common, rate_wait=3.0, slot_wait=(75.0, 8)).endswith(  # type: ignore[arg-type]
        " | rate-limited 3s | waited for judge slots (8) 1m15s"
    )


def test_status_file_keeps_the_line_below_pytest_output() -> None:
    real = _Tty()
    f = _StatusFile(real, lambda: 40)
    f.write("test_a.py ")
    f.show("llm-eval: 0/2 cases")
    f.write("\x1b[32m.\x1b[0m")  # a dot: written in place above, the status stays
    f.show("llm-eval: 1/2 cases")
    assert screen(real.getvalue(), 40) == ["test_a.py .", "llm-eval: 1/2 cases"]
    f.write(" [100%]\n")  # a line break: the status is erased first
    assert f.shown is None
    f.write("== 2 passed ==\n")
    assert screen(real.getvalue(), 40) == ["test_a.py . [100%]", "== 2 passed =="]


def test_status_is_cut_to_the_terminal_width_and_skipped_on_a_wrapped_line() -> None:
    real = _Tty()
    f = _StatusFile(real, lambda: 20)
    f.show("llm-eval: 3/5 cases, ETA 1s")
    assert f.shown == "llm-eval: 3/5 cases"
    f.write("x" * 25)  # pytest's line wrapped: its cursor's place is unknown
    f.show("llm-eval: 4/5 cases")
    assert f.shown is None
    assert screen(real.getvalue(), 20) == ["x" * 20, "x" * 5]

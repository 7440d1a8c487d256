"""Ctrl-C always stops a run: wherever the main thread is when its SIGINT handler runs.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread is:
in the plugin's gate bookkeeping, or inside the standard library's own lock juggling
(``concurrent.futures.wait``, ``threading.Condition.wait``) while it waits for cases on the
case loop or for a judge call on the background loop. Under load that thread is descheduled
anywhere, so the handler runs anywhere. The inner runs here take their Ctrl-C (a real SIGINT)
at the exact points where a KeyboardInterrupt used to leave a lock held or released twice (see
``CTRL_C_CONFTEST``): the run hung, ended in an INTERNALERROR, or reported the interrupted test
as failed and went on with the next. And a Ctrl-C that reaches the main thread without waking
it (taken by another thread, or ``_thread.interrupt_main()``) left it waiting for the cases in
flight to finish by themselves.

Every run must end INTERRUPTED with pytest's summary, every case body in flight cancelled and
every fixture set up torn down. The timeouts of the inner runs are a backstop only."""

from __future__ import annotations

import signal
import sys

import pytest
from case_files import CTRL_C_CONFTEST, read_injected
from case_files import read_events as _events
from case_files import write_cases as _cases

from pytest_llmeval.testing import OpenAITestServer, delay, text

#: the body waits until the main thread is blocked waiting inside the plugin's function
#: ``inside`` (for the cases in flight, the body, the judge): only then does a Ctrl-C that does
#: not wake it show whether that wait notices
WAIT_FOR_MAIN = """
def main_thread_waits(inside):
    frame = sys._current_frames().get(threading.main_thread().ident)
    waits = False
    while frame is not None:
        code = frame.f_code
        waits = waits or (code.co_name == "wait" and code.co_filename.endswith("threading.py"))
        if waits and code.co_name == inside:
            return True
        frame = frame.f_back
    return False
"""

CONCURRENT = (
    """
import _thread, asyncio, sys, threading
import pytest
from conftest import ARMED, KIND, event
"""
    + WAIT_FOR_MAIN
    + """

@pytest.fixture
async def res(case):
    event("setup " + case.id)
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=2)
async def test_k(case, res):
    event("started " + case.id)
    if case.id == "a" and KIND != "interrupt-main":
        # a ends once b runs: the main thread then sets up c (the gate, its async fixture)
        # and waits for b and c together, while b is in flight
        while not ARMED.is_set():
            await asyncio.sleep(0.01)
        event("finished a")
        return
    if case.id == "b":
        ARMED.set()
        if KIND == "interrupt-main":
            while not main_thread_waits("_protocol"):
                await asyncio.sleep(0.01)
            _thread.interrupt_main()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        event("cancelled " + case.id)
        raise
"""
)


def _run(p: pytest.Pytester, where: str, monkeypatch: pytest.MonkeyPatch) -> pytest.RunResult:
    monkeypatch.setenv("CTRL_C_AT", where)
    p.makeconftest(CTRL_C_CONFTEST)
    return p.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", timeout=120)


def _assert_stopped(result: pytest.RunResult) -> None:
    """Interrupted, with pytest's own summary, and nothing worse."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "INTERNALERROR" not in output, output
    result.stdout.fnmatch_lines(["*!!! KeyboardInterrupt !!!*", "=*= * in *s =*="])


def _assert_cleaned_up(events: list[str]) -> None:
    """Every body in flight cancelled (or finished), every fixture set up torn down, once."""
    for ev in events:
        verb, _, case = ev.partition(" ")
        if verb == "setup":
            assert events.count("teardown " + case) == 1, events
        if verb == "started":
            assert ("cancelled " + case in events) != ("finished " + case in events), events
    assert not [e for e in events if e.startswith("teardown ") and "setup " + e[9:] not in events]


@pytest.mark.parametrize(
    "where",
    [
        # right after the main thread takes the gate for c's setup phase (it was left taken:
        # the cancelled cases waited for it and the teardown blocked on it, a hang)
        "gate-acquire:1",
        # right after the gate is lent to the cases while c's async fixture runs (the phase
        # gave it back a second time: INTERNALERROR "release unlocked lock")
        "gate-release:1",
        # right after the phase takes the gate back from the cases
        "gate-acquire:2",
        # right after c's setup phase gives the gate back
        "gate-release:2",
        # between the locks concurrent.futures.wait takes on b's and c's futures (one was left
        # taken: the case loop froze on it when b's future completed, a hang)
        "futures-wait:1",
        # a Ctrl-C that does not wake the main thread's wait for the cases in flight (they
        # sleep 60 s: it was noticed only then)
        "interrupt-main",
    ],
)
def test_ctrl_c_anywhere_in_the_main_thread_stops_concurrent_cases(
    pytester: pytest.Pytester, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cases(pytester, ["a", "b", "c", "d"])
    pytester.makepyfile(test_k=CONCURRENT)
    result = _run(pytester, where, monkeypatch)
    _assert_stopped(result)
    kind = where.partition(":")[0]
    assert read_injected(pytester) == ([] if kind == "interrupt-main" else [kind])
    events = _events(pytester)
    assert {"started a", "started b", "cancelled b"} <= set(events), events
    assert "started d" not in events  # nothing new once interrupted
    _assert_cleaned_up(events)


SEQUENTIAL = (
    """
import _thread, asyncio, sys, threading
import pytest
from conftest import KIND, event
"""
    + WAIT_FOR_MAIN
    + """

@pytest.fixture
async def res(case):
    event("setup " + case.id)
    yield case.id
    event("teardown " + case.id)


@pytest.mark.llm_eval
@pytest.mark.llm_eval_dataset("cases.jsonl")
async def test_k(case, res):
    event("started " + case.id)
    if KIND == "interrupt-main":
        while not main_thread_waits("_call_sequential"):
            await asyncio.sleep(0.01)
        _thread.interrupt_main()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        event("cancelled " + case.id)
        raise
"""
)


@pytest.mark.parametrize(
    "where",
    [
        # inside Condition.wait of the main thread's wait for the body (the KeyboardInterrupt
        # became "RuntimeError: cannot release un-acquired lock": case a FAILED, b ran)
        "condition-wait",
        # the wait for the body is not woken (b ran after 60 s)
        "interrupt-main",
    ],
)
def test_ctrl_c_anywhere_stops_a_case_of_concurrency_1(
    pytester: pytest.Pytester, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cases(pytester, ["a", "b"])
    pytester.makepyfile(test_k=SEQUENTIAL)
    monkeypatch.setenv("ARM_AT_CALL", "1")
    result = _run(pytester, where, monkeypatch)
    _assert_stopped(result)
    assert read_injected(pytester) == ([] if where == "interrupt-main" else [where])
    assert _events(pytester) == ["setup a", "started a", "cancelled a", "teardown a"]


SYNC_JUDGED = (
    """
import _thread, sys, threading, time
import pytest
from conftest import ARMED, KIND, event
from pytest_llmeval import score
from pytest_llmeval.core.aio import background_loop
"""
    + WAIT_FOR_MAIN
    + """

def _interrupt_when_waiting():
    while not main_thread_waits("run_sync"):
        time.sleep(0.01)
    _thread.interrupt_main()


@pytest.mark.llm_eval
@pytest.mark.parametrize("n", [1, 2])
def test_sync(n):
    event(f"started {n}")
    background_loop()  # started before arming: starting its thread waits on an Event too
    ARMED.set()
    if KIND == "interrupt-main":
        threading.Thread(target=_interrupt_when_waiting, daemon=True).start()
    score("l3score", input=f"q{n}", output="a", expected="a")
    event(f"scored {n}")
"""
)


@pytest.mark.parametrize("where", ["condition-wait", "interrupt-main"])
def test_ctrl_c_while_a_sync_test_waits_for_the_judge_stops_the_run(
    pytester: pytest.Pytester,
    judge_server: OpenAITestServer,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sync test's judge call runs on the background loop while the main thread waits for it
    (``score()``): a Ctrl-C there stops the run (it was the test's RuntimeError and the next
    test ran, or it went unnoticed until the judge's 60 s timeout)."""
    pytester.makepyfile(test_sync=SYNC_JUDGED)
    pytester.makeini("[pytest]\nllm_eval_judge_model = test-judge\nllm_eval_max_tries = 1\n")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ctrl-c-SECRET")
    judge_server.set_default(delay(60, text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)])))
    result = _run(pytester, where, monkeypatch)
    _assert_stopped(result)
    assert read_injected(pytester) == ([] if where == "interrupt-main" else [where])
    assert _events(pytester) == ["started 1"]  # not scored, and no next test


GUARD_SCRIPT = """
import _thread, signal, threading, time
from pytest_llmeval.core.aio import ctrl_c, wait_event

# Held back inside the block, delivered (KeyboardInterrupt) when it ends; the handler that was
# there is back afterwards.
try:
    with ctrl_c:
        signal.raise_signal(signal.SIGINT)
        with ctrl_c:
            pass  # the inner block's end is no place to deliver it
        print("held back", ctrl_c.pending)
    print("not delivered")
except KeyboardInterrupt:
    print("delivered at the end")
print("default back", signal.getsignal(signal.SIGINT) is signal.default_int_handler)

# A handler of the user's is the one called for it, once.
calls = []
signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
with ctrl_c:
    signal.raise_signal(signal.SIGINT)
    print("user handler not yet", calls)
print("user handler", calls, signal.getsignal(signal.SIGINT) is not signal.default_int_handler)

# Ignored stays ignored.
signal.signal(signal.SIGINT, signal.SIG_IGN)
with ctrl_c:
    signal.raise_signal(signal.SIGINT)
print("ignored", signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.default_int_handler)

# A Ctrl-C that does not interrupt the blocking call still ends the wait.
never = threading.Event()
threading.Thread(target=lambda: (time.sleep(0.2), _thread.interrupt_main()), daemon=True).start()
try:
    wait_event(never, 60)
    print("wait not interrupted")
except KeyboardInterrupt:
    print("wait interrupted")

# Another thread's blocks change nothing for the main thread.
def other():
    with ctrl_c:
        time.sleep(0.5)
threading.Thread(target=other).start()
time.sleep(0.1)
try:
    signal.raise_signal(signal.SIGINT)
    time.sleep(0.01)
    print("main thread held back by another thread's block")
except KeyboardInterrupt:
    print("main thread interrupted at once")
"""


def test_ctrl_c_guard_holds_back_then_delivers_to_the_handler_that_was_there(
    pytester: pytest.Pytester,
) -> None:
    """_aio.ctrl_c's contract, in a process of its own (it raises real SIGINTs)."""
    result = pytester.run(sys.executable, "-c", GUARD_SCRIPT, timeout=120)
    assert result.ret == 0, result.stderr.str()
    assert result.stdout.lines == [
        "held back True",
        "delivered at the end",
        "default back True",
        "user handler not yet []",
        f"user handler [{int(signal.SIGINT)}] True",
        "ignored True",
        "wait interrupted",
        "main thread interrupted at once",
    ]

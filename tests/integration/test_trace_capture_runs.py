"""``llm_eval_trace`` through real pytest runs: the provider installed under ``--llm-eval`` (and
the error without it), a user's own provider used as it is, spans attributed per test and per
concurrent case (context, parent fallback for threads), late spans counted and reported, the
error without the ``otel`` extra.

Every run is a subprocess: the global tracer provider can be set once per process."""

from __future__ import annotations

import json

import pytest
from case_files import write_cases

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (pinned in the dev extra)")

TWO_TESTS = """
import json
from opentelemetry import trace

tracer = trace.get_tracer("app")


def test_first(llm_eval_trace):
    with tracer.start_as_current_span("first-root"):
        with tracer.start_as_current_span("first-child"):
            pass
    assert [s.name for s in llm_eval_trace.spans] == ["first-root", "first-child"]
    root, child = llm_eval_trace.spans
    assert child.parent_id == root.span_id and root.parent_id is None


def test_no_fixture():
    with tracer.start_as_current_span("unclaimed"):
        pass


def test_second(llm_eval_trace):
    with tracer.start_as_current_span("second"):
        pass
    assert [s.name for s in llm_eval_trace.spans] == ["second"]
    assert llm_eval_trace.unfinished == 0
"""


def test_under_llm_eval_a_provider_is_installed_and_spans_stay_with_their_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_under_xdist_each_worker_captures_its_own_tests(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_two=TWO_TESTS)
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=3)


def test_without_llm_eval_and_no_provider_the_fixture_says_how_to_turn_it_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*llm_eval_trace: no OpenTelemetry SDK tracer provider is set in this process, so the "
            "code under test records no span. Run pytest with --llm-eval (pytest-llmeval then "
            "installs one), or set one yourself before the test: "
            "opentelemetry.trace.set_tracer_provider(opentelemetry.sdk.trace.TracerProvider())"
        ]
    )


def test_a_provider_the_project_set_is_used_as_it_is(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        PROVIDER = TracerProvider()
        EXPORTED = InMemorySpanExporter()
        PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTED))
        trace.set_tracer_provider(PROVIDER)
        """
    )
    pytester.makepyfile(
        test_own=TWO_TESTS
        + """

def test_the_projects_exporter_still_sees_every_span():
    import conftest
    from opentelemetry import trace as api
    assert api.get_tracer_provider() is conftest.PROVIDER
    names = [s.name for s in conftest.EXPORTED.get_finished_spans()]
    assert names == ["first-child", "first-root", "unclaimed", "second"]
"""
    )
    # no --llm-eval: the project's provider is enough
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_spans_of_threads_follow_their_parent_and_late_spans_are_counted_and_reported(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_threads="""
        import threading, time
        from opentelemetry import context, trace

        tracer = trace.get_tracer("app")
        RELEASE = threading.Event()
        STARTED = threading.Event()
        DONE = threading.Event()


        def test_thread_spans_and_a_straggler(llm_eval_trace):
            with tracer.start_as_current_span("agent") as agent:
                ctx = trace.set_span_in_context(agent)

                def tool():  # a thread of its own: no pytest context, the parent passed
                    with tracer.start_as_current_span("tool", context=ctx):
                        pass

                t = threading.Thread(target=tool)
                t.start()
                t.join()

                def straggler():
                    with tracer.start_as_current_span("straggler", context=ctx):
                        STARTED.set()
                        RELEASE.wait(10)
                    DONE.set()

                threading.Thread(target=straggler).start()
                assert STARTED.wait(10)
            assert sorted(s.name for s in llm_eval_trace.spans) == ["agent", "tool"]
            tool_span = llm_eval_trace.find("tool")[0]
            assert tool_span.parent_id == llm_eval_trace.find("agent")[0].span_id


        def test_next(llm_eval_trace):
            RELEASE.set()
            assert DONE.wait(10)
            assert len(llm_eval_trace) == 0
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", "-W", "default")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*TraceCaptureWarning: llm_eval_trace: 1 span(s) of "
            "test_threads.py::test_thread_spans_and_a_straggler were still open when the test "
            "ended*",
            "*- llm-eval trace -*",
            "1 span(s) ended after their test had ended (counted here, not attached to another "
            "test):",
            "  test_threads.py::test_thread_spans_and_a_straggler: 1",
        ]
    )


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrent_cases_each_get_their_own_spans(
    pytester: pytest.Pytester, concurrency: int
) -> None:
    ids = [f"c{i}" for i in range(6)]
    write_cases(pytester, ids)
    pytester.makepyfile(
        test_cases="""
        import asyncio, json, threading
        import pytest
        from opentelemetry import trace

        tracer = trace.get_tracer("app")
        IN_FLIGHT = []
        MOST = [0]


        async def tool(name):
            with tracer.start_as_current_span(name):
                await asyncio.sleep(0.01)


        @pytest.mark.llm_eval
        @pytest.mark.llm_eval_dataset("cases.jsonl", concurrency=CONCURRENCY)
        async def test_case(case, llm_eval_trace):
            IN_FLIGHT.append(case.id)
            MOST[0] = max(MOST[0], len(IN_FLIGHT))
            with tracer.start_as_current_span(f"agent-{case.id}") as agent:
                await asyncio.sleep(0.05)  # the others start meanwhile
                await asyncio.gather(tool(f"a-{case.id}"), tool(f"b-{case.id}"))
                ctx = trace.set_span_in_context(agent)
                loop = asyncio.get_running_loop()
                done = loop.create_future()

                def in_thread():
                    with tracer.start_as_current_span(f"thread-{case.id}", context=ctx):
                        pass
                    loop.call_soon_threadsafe(done.set_result, None)

                threading.Thread(target=in_thread).start()
                await done
            IN_FLIGHT.remove(case.id)
            names = sorted(s.name for s in llm_eval_trace.spans)
            with open(f"names-{case.id}.json", "w") as f:
                json.dump({"names": names, "most": MOST[0]}, f)
        """.replace("CONCURRENCY", str(concurrency))
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    most = 0
    for i in ids:
        seen = json.loads((pytester.path / f"names-{i}.json").read_text())
        assert seen["names"] == [f"a-{i}", f"agent-{i}", f"b-{i}", f"thread-{i}"]
        most = max(most, seen["most"])
    assert most == concurrency  # with 3, the cases really overlapped


def test_a_provider_that_takes_no_processor_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from opentelemetry import trace
        trace.set_tracer_provider(trace.NoOpTracerProvider())
        """
    )
    pytester.makepyfile(test_plain="def test_trace(llm_eval_trace):\n    pass\n")
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "llm_eval_trace: the global tracer provider is a NoOpTracerProvider, which takes no "
            "span processor, so no span can be captured; set an SDK TracerProvider "
            "(opentelemetry.sdk.trace.TracerProvider) instead"
        ]
    )


def test_without_the_otel_extra_the_fixture_names_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import sys
        for name in [m for m in sys.modules if m.split(".")[0] == "opentelemetry"]:
            del sys.modules[name]
        sys.modules["opentelemetry"] = None  # as if not installed
        """
    )
    pytester.makepyfile(
        test_plain="""
        def test_trace(llm_eval_trace):
            pass
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "llm_eval_trace needs OpenTelemetry (opentelemetry is not installed): "
            "pip install 'pytest-llmeval-suite[[]otel]' (opentelemetry-api and opentelemetry-sdk)"
        ]
    )
    assert "During handling" not in result.stdout.str()


def test_agents_sdk_spans_are_captured_and_replacing_its_processors_is_a_warning(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("agents")
    pytester.makepyfile(
        test_sdk="""
        from agents import set_trace_processors
        from agents.tracing import custom_span, function_span, trace

        set_trace_processors([])  # export nothing


        def test_spans(llm_eval_trace):
            with trace("workflow"):
                with custom_span("step", data={"k": 1}):
                    with function_span("add", input='{"a": 1}', output="2"):
                        pass
            step, add = llm_eval_trace.spans
            assert (step.kind, step.source, step.name) == ("span", "openai_agents", "step")
            assert add.parent_id == step.span_id
            (call,) = llm_eval_trace.tool_calls
            assert (call.name, call.arguments, call.result) == ("add", {"a": 1}, 2)


        def test_replaced_inside(llm_eval_trace):
            set_trace_processors([])
            with trace("workflow"):
                with custom_span("lost"):
                    pass
            assert len(llm_eval_trace) == 0


        def test_again(llm_eval_trace):  # the next capture adds it back
            with trace("workflow"):
                with custom_span("found"):
                    pass
            assert [s.name for s in llm_eval_trace.spans] == ["found"]
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", "-W", "default")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*TraceCaptureWarning: llm_eval_trace: the OpenAI Agents SDK's trace processors were "
            "replaced during test_sdk.py::test_replaced_inside (set_trace_processors)*"
        ]
    )


def test_gen_ai_events_sent_through_the_logs_api_reach_their_span(
    pytester: pytest.Pytester,
) -> None:
    # the older GenAI conventions (and opentelemetry-instrumentation-openai-v2's default mode)
    # send message content as events through the Logs API, inside the model call's span
    pytester.makepyfile(
        test_events="""
        from opentelemetry import _logs, trace

        tracer = trace.get_tracer("app")


        def test_chat(llm_eval_trace):
            logger = _logs.get_logger("app")
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
            with tracer.start_as_current_span("chat m", attributes=attrs):
                logger.emit(_logs.LogRecord(event_name="gen_ai.system.message",
                                            body={"content": "Be brief."},
                                            attributes={"gen_ai.system": "openai"}))
                logger.emit(_logs.LogRecord(event_name="gen_ai.user.message",
                                            body={"content": "Weather in Paris?"}))
                logger.emit(_logs.LogRecord(
                    event_name="gen_ai.choice",
                    body={"index": 0, "finish_reason": "tool_calls", "message": {
                        "role": "assistant",
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {
                            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]}},
                ))
            logger.emit(_logs.LogRecord(event_name="gen_ai.user.message", body={"content": "x"}))
            (call,) = llm_eval_trace.model_calls
            assert list(call.input_messages) == [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
            ]
            assert list(call.output_messages) == [{
                "role": "assistant", "content": None, "finish_reason": "tool_calls",
                "tool_calls": [{"id": "call_1", "name": "get_weather",
                                "arguments": {"city": "Paris"}}],
            }]
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_require_spans_on_an_uninstrumented_test_is_an_error_naming_instrumentation(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_bare="""
        def test_agent(llm_eval_trace):
            answer = "sunny"  # an agent that emits no span
            llm_eval_trace.require_spans()
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # not a quality failure: the trace is unusable
    result.stdout.fnmatch_lines(
        [
            "*EmptyTraceError: llm_eval_trace: no span was captured for this test, and none was "
            "started in this process while it ran: is the code under test instrumented?*"
        ]
    )


def test_a_test_whose_trace_stayed_empty_is_warned_about(pytester: pytest.Pytester) -> None:
    # an assertion that something did not happen passes on an empty trace: instrumentation
    # that was never on must not go unnoticed
    pytester.makepyfile(
        test_empty="""
        def test_never_deletes(llm_eval_trace):
            pass  # the agent ran uninstrumented: no span
            assert "delete_account" not in llm_eval_trace.tool_names
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider", "-W", "default")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*TraceCaptureWarning: llm_eval_trace: no span was captured during "
            "test_empty.py::test_never_deletes*is the code under test instrumented?*"
        ]
    )


def test_under_a_session_wide_span_a_finished_tests_span_stays_out_of_the_next_trace(
    pytester: pytest.Pytester,
) -> None:
    # every test under one trace id (a session fixture's span, as pytest-opentelemetry does)
    pytester.makeconftest(
        """
        import pytest
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())


        @pytest.fixture(scope="session", autouse=True)
        def session_span():
            with trace.get_tracer("suite").start_as_current_span("session"):
                yield
        """
    )
    pytester.makepyfile(
        test_shared="""
        import contextvars
        import threading

        from opentelemetry import trace

        tracer = trace.get_tracer("app")
        GO, STARTED = threading.Event(), threading.Event()


        def test_a(llm_eval_trace):
            with tracer.start_as_current_span("a1"):
                pass

            def later():  # the agent's background work, the test's context copied
                GO.wait(10)
                with tracer.start_as_current_span("a-late"):
                    STARTED.set()

            ctx = contextvars.copy_context()
            threading.Thread(target=ctx.run, args=(later,)).start()
            assert llm_eval_trace.tool_names == () and len(llm_eval_trace) == 1


        def test_b(llm_eval_trace):
            with tracer.start_as_current_span("b1"):
                pass
            GO.set()
            assert STARTED.wait(10)
            assert [s.name for s in llm_eval_trace.spans] == ["b1"]
        """
    )
    result = pytester.runpytest_subprocess("--llm-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)

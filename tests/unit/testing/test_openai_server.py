"""The scripted OpenAI-compatible test server, over plain HTTP (urllib) and the openai client."""

from __future__ import annotations

import base64
import errno
import json
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from pytest_llmeval.testing import (
    MODERATION_CATEGORIES,
    OpenAITestServer,
    delay,
    embeddings,
    error,
    hashed_embedding,
    moderation,
    text,
    tool_call,
    tool_call_in_content,
)

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def post(server: OpenAITestServer, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        server.base_url + path,
        data=data,
        headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def get(server: OpenAITestServer, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(server.base_url + path, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_base_url_and_models(judge_server: OpenAITestServer) -> None:
    assert judge_server.base_url == f"http://127.0.0.1:{judge_server.port}/v1"
    status, body = get(judge_server, "/models")
    assert status == 200
    assert body["data"][0]["id"] == "test-judge"
    assert judge_server.requests[0].endpoint == "models"


def test_text_reply_shape_and_estimated_usage(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(text("Hello there"))
    status, _, body = post(judge_server, "/chat/completions", CHAT)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "m"
    [choice] = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": "Hello there"}
    assert choice["finish_reason"] == "stop"
    assert choice["logprobs"] is None
    usage = body["usage"]
    assert usage["prompt_tokens"] == len(json.dumps(CHAT["messages"])) // 4 + 1
    assert usage["completion_tokens"] == len("Hello there") // 4 + 1


def test_tool_call_uses_the_forced_function_name(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(tool_call({"choice": "A"}, usage=(7, 3)))
    req = {
        **CHAT,
        "tools": [{"type": "function", "function": {"name": "first"}}],
        "tool_choice": {"type": "function", "function": {"name": "pick"}},
    }
    _, _, body = post(judge_server, "/chat/completions", req)
    [choice] = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "pick", "arguments": '{"choice": "A"}'}
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_malformed_and_content_tool_calls(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(tool_call("{not json"), tool_call_in_content({"a": 1}, name="f"))
    _, _, first = post(judge_server, "/chat/completions", CHAT)
    _, _, second = post(judge_server, "/chat/completions", CHAT)
    assert first["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{not json"
    content = second["choices"][0]["message"]["content"]
    assert json.loads(content) == {"name": "f", "arguments": {"a": 1}}


def test_logprobs_only_when_asked_and_cut_to_top_logprobs(judge_server: OpenAITestServer) -> None:
    tops = [("Yes", -0.1), ("No", -2.5), ("yes", -3.0)]
    judge_server.enqueue(text("Yes", top_logprobs=tops), text("Yes", top_logprobs=tops))
    _, _, plain = post(judge_server, "/chat/completions", CHAT)
    assert plain["choices"][0]["logprobs"] is None
    _, _, asked = post(
        judge_server, "/chat/completions", {**CHAT, "logprobs": True, "top_logprobs": 2}
    )
    [first] = asked["choices"][0]["logprobs"]["content"]
    assert (first["token"], first["logprob"]) == ("Yes", -0.1)
    assert [(t["token"], t["logprob"]) for t in first["top_logprobs"]] == tops[:2]


def test_faults_carry_status_and_retry_after(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(error(429, "busy", retry_after=1.5), error(500))
    status, headers, body = post(judge_server, "/chat/completions", CHAT)
    assert status == 429
    assert headers["Retry-After"] == "1.5"
    assert body["error"]["message"] == "busy"
    assert body["error"]["type"] == "rate_limit_exceeded"
    status, headers, body = post(judge_server, "/chat/completions", CHAT)
    assert status == 500 and "Retry-After" not in headers
    assert [r.status for r in judge_server.requests] == [429, 500]


def test_delay_holds_the_reply(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(delay(0.3, text("late")))
    status, _, body = post(judge_server, "/chat/completions", CHAT)
    assert status == 200 and body["choices"][0]["message"]["content"] == "late"
    [rec] = judge_server.requests
    assert rec.finished_at is not None and rec.finished_at - rec.received_at >= 0.3


def test_empty_chat_queue_is_a_clear_400_unless_a_default_is_set(
    judge_server: OpenAITestServer,
) -> None:
    status, _, body = post(judge_server, "/chat/completions", CHAT)
    assert status == 400 and "no chat reply is queued" in body["error"]["message"]
    judge_server.set_default(lambda req: text(f"echo {req['messages'][-1]['content']}"))
    _, _, body = post(judge_server, "/chat/completions", CHAT)
    assert body["choices"][0]["message"]["content"] == "echo hi"
    judge_server.set_default(text("fixed"))
    _, _, body = post(judge_server, "/chat/completions", CHAT)
    assert body["choices"][0]["message"]["content"] == "fixed"


def test_queues_are_per_endpoint(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(text("chat 1"), moderation(True), embeddings([[1.0]]), text("chat 2"))
    assert judge_server.pending() == 4 and judge_server.pending("chat") == 2
    _, _, emb = post(judge_server, "/embeddings", {"model": "e", "input": "x"})
    assert emb["data"][0]["embedding"] == [1.0]
    _, _, c1 = post(judge_server, "/chat/completions", CHAT)
    _, _, mod = post(judge_server, "/moderations", {"input": "x"})
    _, _, c2 = post(judge_server, "/chat/completions", CHAT)
    assert c1["choices"][0]["message"]["content"] == "chat 1"
    assert c2["choices"][0]["message"]["content"] == "chat 2"
    assert mod["results"][0]["flagged"] is True
    assert judge_server.pending() == 0


def test_fault_for_another_endpoint(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(error(503, endpoint="embeddings"))
    status, _, _ = post(judge_server, "/embeddings", {"model": "e", "input": ["a"]})
    assert status == 503
    judge_server.enqueue(text("x"), endpoint="moderations")  # a chat reply where it cannot fit
    status, _, body = post(judge_server, "/moderations", {"input": "a"})
    assert status == 500 and "does not fit the moderations endpoint" in body["error"]["message"]


def test_embeddings_default_function_and_base64(judge_server: OpenAITestServer) -> None:
    _, _, body = post(judge_server, "/embeddings", {"model": "e", "input": ["cat", "cat", "dog"]})
    vecs = [d["embedding"] for d in body["data"]]
    assert vecs[0] == vecs[1] == pytest.approx(hashed_embedding("cat"))
    assert vecs[0] != vecs[2]
    assert sum(x * x for x in vecs[0]) == pytest.approx(1.0)
    assert body["usage"]["prompt_tokens"] == 3
    _, _, b64 = post(
        judge_server, "/embeddings", {"model": "e", "input": "cat", "encoding_format": "base64"}
    )
    raw = base64.b64decode(b64["data"][0]["embedding"])
    decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert decoded == pytest.approx(hashed_embedding("cat"), abs=1e-6)


def test_embedding_function_reply_and_count_mismatch(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(embeddings(lambda t: [float(len(t)), 1.0]), embeddings([[1.0]]))
    _, _, body = post(judge_server, "/embeddings", {"model": "e", "input": ["ab", "abcd"]})
    assert [d["embedding"] for d in body["data"]] == [[2.0, 1.0], [4.0, 1.0]]
    status, _, body = post(judge_server, "/embeddings", {"model": "e", "input": ["a", "b"]})
    assert status == 400 and "scripted 1 vectors" in body["error"]["message"]


def test_moderation_default_and_scripted(judge_server: OpenAITestServer) -> None:
    _, _, body = post(judge_server, "/moderations", {"input": ["a", "b"]})
    assert len(body["results"]) == 2
    first = body["results"][0]
    assert first["flagged"] is False
    assert set(first["categories"]) == set(MODERATION_CATEGORIES)
    assert set(first["category_scores"].values()) == {0.0}
    judge_server.enqueue(moderation(True, {"violence": 0.8, "custom": 0.2}, {"violence": True}))
    _, _, body = post(judge_server, "/moderations", {"input": "x", "model": "mm"})
    result = body["results"][0]
    assert body["model"] == "mm"
    assert result["categories"]["violence"] is True and result["categories"]["hate"] is False
    assert result["category_scores"]["custom"] == 0.2


def test_bad_requests(judge_server: OpenAITestServer) -> None:
    status, _, body = post(judge_server, "/chat/completions", b"{nope")
    assert status == 400 and "not JSON" in body["error"]["message"]
    judge_server.enqueue(text("x"))
    status, _, body = post(judge_server, "/chat/completions", {"model": "m", "messages": []})
    assert status == 400 and "'messages'" in body["error"]["message"]
    status, _, body = post(judge_server, "/nowhere", {})
    assert status == 404
    status, _, body = post(judge_server, "/embeddings", {"model": "e", "input": 3})
    assert status == 400


def test_request_log_and_clear(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(text("a"))
    post(judge_server, "/chat/completions", {**CHAT, "temperature": 0.3, "seed": 7})
    [rec] = judge_server.requests
    assert rec.method == "POST" and rec.path == "/v1/chat/completions"
    assert rec.body["temperature"] == 0.3 and rec.body["seed"] == 7
    assert rec.headers["authorization"] == "Bearer k"
    assert rec.status == 200
    assert (
        judge_server.requests_to("chat") == [rec] and judge_server.requests_to("embeddings") == []
    )
    judge_server.enqueue(text("b"))
    judge_server.clear()
    assert judge_server.requests == [] and judge_server.pending() == 0


def test_latency_and_max_in_flight_across_threads(judge_server: OpenAITestServer) -> None:
    judge_server.set_default(text("ok"))
    # long enough that five requests sent together overlap on a loaded machine too
    judge_server.latency = 1.5
    results: list[int] = []
    together = threading.Barrier(5)

    def worker() -> None:
        together.wait(timeout=30)
        results.append(post(judge_server, "/chat/completions", CHAT)[0])

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 5
    assert judge_server.max_in_flight == 5
    for rec in judge_server.requests:
        assert rec.finished_at is not None and rec.finished_at - rec.received_at >= 1.5


def test_stop_wakes_a_sleeping_delay() -> None:
    server = OpenAITestServer().start()
    server.enqueue(delay(60.0, text("never")))
    codes: list[object] = []

    def worker() -> None:
        try:
            codes.append(post(server, "/chat/completions", CHAT)[0])
        except Exception as exc:  # the connection may be cut while stopping
            codes.append(type(exc).__name__)

    t = threading.Thread(target=worker)
    t.start()
    while not server.requests:
        time.sleep(0.01)
    t0 = time.monotonic()
    server.stop()
    t.join(timeout=10)
    assert not t.is_alive()
    assert time.monotonic() - t0 < 10
    assert len(codes) == 1
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


def test_enqueue_rejects_unknown_endpoint(judge_server: OpenAITestServer) -> None:
    with pytest.raises(ValueError, match="endpoint must be one of"):
        judge_server.enqueue(text("x"), endpoint="completions")


def test_through_the_openai_client(judge_server: OpenAITestServer) -> None:
    import openai

    judge_server.enqueue(tool_call({"x": 1}), embeddings([[0.5, 0.5]]))
    client = openai.OpenAI(base_url=judge_server.base_url, api_key="k", max_retries=0)
    try:
        chat = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
            tool_choice={"type": "function", "function": {"name": "f"}},
        )
        calls = chat.choices[0].message.tool_calls
        assert calls is not None
        assert calls[0].function.name == "f"  # type: ignore[union-attr]
        emb = client.embeddings.create(model="e", input=["a"])  # SDK default: base64
        assert emb.data[0].embedding == pytest.approx([0.5, 0.5])
        models = client.models.list()
        assert [m.id for m in models.data] == ["test-judge"]
    finally:
        client.close()


def test_raw_reply_is_sent_verbatim(judge_server: OpenAITestServer) -> None:
    from pytest_llmeval.testing import raw

    judge_server.enqueue(raw("not json at all", status=200))
    req = urllib.request.Request(
        judge_server.base_url + "/chat/completions",
        data=json.dumps(CHAT).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.read() == b"not json at all"


def test_stats_route_counts_and_clears(judge_server: OpenAITestServer) -> None:
    judge_server.enqueue(text("a"))
    post(judge_server, "/chat/completions", CHAT)
    post(judge_server, "/embeddings", {"model": "e", "input": "x"})
    stats_url = judge_server.base_url.rsplit("/v1", 1)[0] + "/_test/stats"
    with urllib.request.urlopen(stats_url, timeout=10) as resp:
        stats = json.loads(resp.read())
    assert stats == {"requests": {"chat": 1, "embeddings": 1}, "max_in_flight": 1}
    assert len(judge_server.requests) == 2  # the stats request is not logged
    req = urllib.request.Request(stats_url, data=b"{}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["requests"] == {"chat": 1, "embeddings": 1}
    assert judge_server.stats() == {"requests": {}, "max_in_flight": 0}


def test_command_line_server() -> None:
    import subprocess
    import sys

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest_llmeval.testing",
            "--reply-text",
            "No",
            "--top-logprobs",
            "No=-0.2,Yes=-1.7",
            "--tool-arguments",
            '{"choice": "A"}',
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")

        def call(body: dict[str, Any]) -> Any:
            request = urllib.request.Request(
                base_url + "/chat/completions", data=json.dumps(body).encode()
            )
            with urllib.request.urlopen(request, timeout=10) as resp:
                return json.loads(resp.read())

        plain = call({**CHAT, "logprobs": True, "top_logprobs": 5})
        choice = plain["choices"][0]
        assert choice["message"]["content"] == "No"
        tops = choice["logprobs"]["content"][0]["top_logprobs"]
        assert [(t["token"], t["logprob"]) for t in tops] == [("No", -0.2), ("Yes", -1.7)]
        tooled = call({**CHAT, "tools": [{"type": "function", "function": {"name": "f"}}]})
        call_ = tooled["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call_ == {"name": "f", "arguments": '{"choice": "A"}'}
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_fixed_port_serves_on_it_and_keeps_its_base_url_across_starts() -> None:
    port = _free_port()
    server = OpenAITestServer(port=port)
    for _ in range(2):  # two runs: the same base URL, so the same judge identity
        with server:
            assert server.port == port
            assert server.base_url == f"http://127.0.0.1:{port}/v1"
            status, body = get(server, "/models")
            assert (status, body["data"][0]["id"]) == (200, "test-judge")
    assert [r.endpoint for r in server.requests] == ["models", "models"]


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = OpenAITestServer(port=port)
        with pytest.raises(OSError) as info:
            server.start()
    assert info.value.errno == errno.EADDRINUSE
    assert info.value.strerror == (
        f"the test server cannot listen on 127.0.0.1:{port}: Address already in use (is another "
        "process using that port? port=0 takes a free one)"
    )
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


@pytest.mark.parametrize("port", [-1, 65536, True, "8080", 80.0])
def test_port_must_be_a_port_number(port: Any) -> None:
    with pytest.raises(ValueError) as info:
        OpenAITestServer(port=port)
    assert str(info.value) == f"port must be a whole number from 0 to 65535, not {port!r}"


def test_command_line_server_port() -> None:
    import subprocess
    import sys

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmeval.testing", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"http://127.0.0.1:{port}/v1"
        # a second server on the same port: the error, exit status 1
        second = subprocess.run(
            [sys.executable, "-m", "pytest_llmeval.testing", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (second.returncode, second.stdout) == (1, "")
        assert second.stderr == (
            f"error: the test server cannot listen on 127.0.0.1:{port}: Address already in use "
            "(is another process using that port? port=0 takes a free one)\n"
        )
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0

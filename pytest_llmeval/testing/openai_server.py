"""A scriptable OpenAI-compatible HTTP server for testing judges, on 127.0.0.1.

It speaks enough of OpenAI's API for the official ``openai`` client: ``POST /v1/chat/completions``
(text, tool calls, logprobs), ``POST /v1/embeddings``, ``POST /v1/moderations`` and
``GET /v1/models`` (also at Azure OpenAI's paths, ``/openai/deployments/{deployment}/...``, the
deployment and ``api-version`` recorded with the request). A test queues the replies it wants,
in order, per endpoint, and may inject faults (an HTTP error with ``Retry-After``, a reply
slower than the client's timeout, a reply whose body trickles in a byte at a time, malformed tool
arguments, a reply without logprobs), and can refuse given parameters for given models with
OpenAI's own 400 reply (:meth:`OpenAITestServer.reject_parameter`). Every request body is logged
with its arrival and completion times, and the server tracks how many requests were in flight at
once::

    from pytest_llmeval.testing import OpenAITestServer, error, tool_call

    with OpenAITestServer() as server:
        server.enqueue(error(429, retry_after=0.2), tool_call({"choice": "A"}))
        ...  # point the judge at server.base_url
        assert server.requests[-1].body["tool_choice"]["function"]["name"] == "select_choice"

When an endpoint's queue is empty the server answers with that endpoint's default: for chat, a
reply or a function of the request body set with :meth:`OpenAITestServer.set_default` (with none
set, a 400 saying that no reply was scripted); for embeddings, a deterministic vector per text
(hashed character trigrams, so similar texts get similar vectors); for moderations, "not flagged".

No third-party web framework: the stdlib's threading HTTP server, one thread per request.

Why this module is long: it is a standalone program (``python -m pytest_llmeval.testing``) speaking
enough of the OpenAI API (chat with tools and JSON, embeddings, moderations, errors, delays and
scripted replies) for the tests to exercise the real client; it imports nothing from the rest of
the package.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union, final
from urllib.parse import parse_qs, unquote

__all__ = [
    "MODERATION_CATEGORIES",
    "ChatReply",
    "Delay",
    "EmbeddingReply",
    "Fault",
    "ModerationReply",
    "OpenAITestServer",
    "RawReply",
    "RecordedRequest",
    "Trickle",
    "delay",
    "embeddings",
    "error",
    "hashed_embedding",
    "moderation",
    "raw",
    "text",
    "tool_call",
    "tool_call_in_content",
    "trickle",
]

ENDPOINTS = ("chat", "embeddings", "moderations")

#: The categories OpenAI's moderation models report (every reply lists them all).
MODERATION_CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/instructions",
    "self-harm/intent",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)


# -- scripted items ------------------------------------------------------------------------------


@final
@dataclass(frozen=True)
class ChatReply:
    """A chat completion. ``tool_calls`` are ``(name, raw arguments)``; a ``None`` name means the
    function the request forced (or its first tool). ``top_logprobs`` are the first token's top
    alternatives, returned only when the request asks for logprobs. ``usage`` is
    ``(prompt_tokens, completion_tokens)``; by default it is estimated from the text lengths.
    ``cached_tokens`` (the prompt tokens served from a prompt cache) is sent as
    ``usage.prompt_tokens_details.cached_tokens`` when given."""

    content: str | None = None
    tool_calls: tuple[tuple[str | None, str], ...] = ()
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    usage: tuple[int, int] | None = None
    model: str | None = None
    cached_tokens: int | None = None


@final
@dataclass(frozen=True)
class EmbeddingReply:
    """Embeddings: fixed ``vectors`` (one per input text) or a function text -> vector."""

    vectors: tuple[tuple[float, ...], ...] | None = None
    fn: Callable[[str], Sequence[float]] | None = None


@final
@dataclass(frozen=True)
class ModerationReply:
    """A moderation result; categories not given are reported False with score 0."""

    flagged: bool = False
    categories: Mapping[str, bool] = field(default_factory=dict)
    category_scores: Mapping[str, float] = field(default_factory=dict)


@final
@dataclass(frozen=True)
class Fault:
    """An HTTP error reply (429, 500, ...), optionally with a ``Retry-After`` header (seconds)."""

    status: int
    message: str = ""
    retry_after: float | None = None
    endpoint: str | None = None
    param: str | None = None
    code: str | None = None


@final
@dataclass(frozen=True)
class RawReply:
    """Exactly these bytes as the reply body (for endpoints that answer out of format)."""

    body: bytes
    status: int = 200
    endpoint: str | None = None


@final
@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before answering with ``then`` (or the endpoint's default): a reply slower
    than the client's timeout."""

    seconds: float
    then: Item | None = None
    endpoint: str | None = None


@final
@dataclass(frozen=True)
class Trickle:
    """Answer with ``then`` (or the endpoint's default), sending the headers at once and then the
    body ``chunk`` bytes every ``interval`` seconds: a server that is never silent long enough
    for a read timeout yet never finishes."""

    interval: float
    then: Item | None = None
    chunk: int = 1
    endpoint: str | None = None


class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"


_NO_VALUE: Any = _NoValue()


Item = Union[ChatReply, EmbeddingReply, ModerationReply, Fault, RawReply, Delay, Trickle]  # noqa: UP007
ChatDefault = Union[Item, Callable[[dict[str, Any]], Item]]  # noqa: UP007


def text(
    content: str,
    *,
    top_logprobs: Iterable[tuple[str, float]] | None = None,
    usage: tuple[int, int] | None = None,
    model: str | None = None,
    cached_tokens: int | None = None,
) -> ChatReply:
    """A plain text reply, with the first token's top logprobs if given (a reply to a logprobs
    request without ``top_logprobs`` is the "endpoint returns no logprobs" case)."""
    tops = None if top_logprobs is None else tuple((str(t), float(lp)) for t, lp in top_logprobs)
    return ChatReply(
        content=content, top_logprobs=tops, usage=usage, model=model, cached_tokens=cached_tokens
    )


def tool_call(
    arguments: Mapping[str, Any] | str,
    *,
    name: str | None = None,
    usage: tuple[int, int] | None = None,
    cached_tokens: int | None = None,
) -> ChatReply:
    """A tool call. ``arguments`` as a mapping is sent as JSON; as a string it is sent raw (use it
    for malformed JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ChatReply(tool_calls=((name, raw),), usage=usage, cached_tokens=cached_tokens)


def tool_call_in_content(
    arguments: Mapping[str, Any], *, name: str, usage: tuple[int, int] | None = None
) -> ChatReply:
    """A tool call written as JSON text in ``content`` (what llama.cpp's server does for
    ``tool_choice="required"``): ``{"name": ..., "arguments": {...}}``."""
    body = json.dumps({"name": name, "arguments": dict(arguments)})
    return ChatReply(content=body, usage=usage)


def error(
    status: int,
    message: str | None = None,
    *,
    retry_after: float | None = None,
    endpoint: str | None = None,
) -> Fault:
    """An HTTP error reply for the next request to ``endpoint`` (default: chat)."""
    return Fault(status, message or f"scripted fault {status}", retry_after, endpoint)


def raw(body: bytes | str, *, status: int = 200, endpoint: str | None = None) -> RawReply:
    """A reply with exactly this body (e.g. not JSON, or JSON in the wrong shape)."""
    return RawReply(body.encode() if isinstance(body, str) else body, status, endpoint)


def delay(seconds: float, then: Item | None = None, *, endpoint: str | None = None) -> Delay:
    """A reply that arrives after ``seconds``."""
    return Delay(seconds, then, endpoint)


def trickle(
    interval: float, then: Item | None = None, *, chunk: int = 1, endpoint: str | None = None
) -> Trickle:
    """A reply whose body arrives ``chunk`` bytes every ``interval`` seconds."""
    if interval < 0 or chunk < 1:
        raise ValueError("trickle needs interval >= 0 and chunk >= 1")
    return Trickle(float(interval), then, int(chunk), endpoint)


def embeddings(
    vectors: Iterable[Sequence[float]] | Callable[[str], Sequence[float]],
) -> EmbeddingReply:
    """An embeddings reply: one vector per input text, or a function text -> vector."""
    if callable(vectors):
        return EmbeddingReply(fn=vectors)
    return EmbeddingReply(vectors=tuple(tuple(float(x) for x in v) for v in vectors))


def moderation(
    flagged: bool = False,
    scores: Mapping[str, float] | None = None,
    categories: Mapping[str, bool] | None = None,
) -> ModerationReply:
    """A moderation result."""
    return ModerationReply(flagged, dict(categories or {}), dict(scores or {}))


def hashed_embedding(value: str, dims: int = 64) -> list[float]:
    """A deterministic unit vector for ``value`` from hashed character trigrams (lower case):
    equal texts give equal vectors, overlapping texts similar ones."""
    vec = [0.0] * dims
    padded = f"  {value.lower()} "
    for i in range(len(padded) - 2):
        digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=8).digest()
        n = int.from_bytes(digest, "little")
        vec[n % dims] += 1.0 if (n >> 32) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


# -- the log --------------------------------------------------------------------------------------


@final
@dataclass
class RecordedRequest:
    """One request as received. Times are ``time.monotonic()`` seconds."""

    method: str
    path: str
    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float
    finished_at: float | None = None
    status: int | None = None
    #: Azure OpenAI's URL shape (``/openai/deployments/{deployment}/...``): the deployment
    deployment: str | None = None
    #: the ``api-version`` query parameter (Azure OpenAI), when sent
    api_version: str | None = None
    #: every query parameter sent, by name (a base URL may carry some, e.g. ``?api_key=``)
    query: dict[str, list[str]] = field(default_factory=dict)


# -- the server -----------------------------------------------------------------------------------


def _endpoint_of(item: Item) -> str:
    if isinstance(item, ChatReply):
        return "chat"
    if isinstance(item, EmbeddingReply):
        return "embeddings"
    if isinstance(item, ModerationReply):
        return "moderations"
    if item.endpoint is not None:
        return item.endpoint
    if isinstance(item, (Delay, Trickle)) and item.then is not None:
        return _endpoint_of(item.then)
    return "chat"


_PATHS = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/embeddings": "embeddings",
    "/embeddings": "embeddings",
    "/v1/moderations": "moderations",
    "/moderations": "moderations",
    "/v1/models": "models",
    "/models": "models",
}


# Azure OpenAI: /openai/deployments/{deployment}/chat/completions?api-version=... (the key in
# the api-key header); deployment-less operations under /openai/.
_AZURE_PATH = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)(?P<rest>/.+)$")


def _route(path: str) -> tuple[str, str | None]:
    """The endpoint a request path asks for, and the Azure deployment it names (if any)."""
    m = _AZURE_PATH.match(path)
    if m is not None:
        return _PATHS.get(m.group("rest"), "unknown"), unquote(m.group("deployment"))
    if path.startswith("/openai/"):
        return _PATHS.get(path[len("/openai") :], "unknown"), None
    return _PATHS.get(path, "unknown"), None


#: Control route: request counts (GET), or counts then clear the log (POST).
STATS_PATH = "/_test/stats"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    owner: OpenAITestServer


@final
class OpenAITestServer:
    """A scripted OpenAI-compatible server on 127.0.0.1. Thread-safe.

    ``port``: the port to listen on; 0 (the default) takes a free one, a new port each start.
    A fixed port keeps the same :attr:`base_url` across runs, and so the same judge identity
    (cached verdicts are found again, a baseline stays comparable); a port another process
    holds is an :class:`OSError` naming it. ``latency`` seconds are added to every API call
    (for benchmarks). ``model`` is what ``/v1/models`` lists. Use as a context manager, or call
    :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        latency: float = 0.0,
        model: str = "test-judge",
        chat_default: ChatDefault | None = None,
    ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be a whole number from 0 to 65535, not {port!r}")
        self._port = port
        self.latency = float(latency)
        self.model = model
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Item]] = {e: deque() for e in ENDPOINTS}
        self._defaults: dict[str, ChatDefault | None] = {e: None for e in ENDPOINTS}
        self._defaults["chat"] = chat_default
        self._log: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._rejections: list[_Rejection] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._call_ids = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> OpenAITestServer:
        if self._httpd is not None:
            return self
        try:
            httpd = _HTTPServer(("127.0.0.1", self._port), _Handler)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"the test server cannot listen on 127.0.0.1:{self._port}: "
                f"{exc.strerror or exc} (is another process using that port? port=0 takes a "
                "free one)",
            ) from exc
        httpd.owner = self
        self._stopping.clear()
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="openai-test-server",
        )
        thread.start()
        self._httpd, self._thread = httpd, thread
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        self._stopping.set()  # wake requests sleeping in a delay
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the test server is not running; call start() or use `with`")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of this server (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ------------------------------------------------------------------------

    def enqueue(self, *items: Item, endpoint: str | None = None) -> None:
        """Queue replies, in order. Each goes to its endpoint's queue (chat for chat replies and,
        unless ``endpoint`` or the item says otherwise, for faults and delays)."""
        if endpoint is not None and endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {ENDPOINTS}, not {endpoint!r}")
        with self._lock:
            for item in items:
                self._queues[endpoint or _endpoint_of(item)].append(item)

    def set_default(self, reply: ChatDefault | None, *, endpoint: str = "chat") -> None:
        """The reply given when ``endpoint``'s queue is empty: an item, or a function of the
        request body returning one; ``None`` restores the built-in default."""
        if endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {ENDPOINTS}, not {endpoint!r}")
        with self._lock:
            self._defaults[endpoint] = reply

    def reject_parameter(
        self,
        model: str,
        param: str,
        *,
        code: str = "unsupported_value",
        allowed: Any = _NO_VALUE,
        message: str | None = None,
    ) -> None:
        """Answer chat requests for ``model`` that carry ``param`` with OpenAI's 400 for a
        parameter the model does not support, without using up a queued reply. ``allowed`` is
        the one value still accepted (OpenAI's reasoning models take ``temperature`` 1 only).
        ``code`` is ``unsupported_value`` or ``unsupported_parameter``; the message is OpenAI's
        wording unless given."""
        with self._lock:
            self._rejections.append(_Rejection(model, param, code, allowed, message))

    def pending(self, endpoint: str | None = None) -> int:
        """How many scripted replies are still queued (for one endpoint or all)."""
        with self._lock:
            if endpoint is not None:
                return len(self._queues[endpoint])
            return sum(len(q) for q in self._queues.values())

    def clear(self) -> None:
        """Drop queued replies, the request log and the in-flight maximum."""
        with self._lock:
            for q in self._queues.values():
                q.clear()
            self._log.clear()
            self._max_in_flight = self._in_flight

    # -- observation ----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every API request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._log)

    def requests_to(self, endpoint: str) -> list[RecordedRequest]:
        """The requests to one endpoint (``chat``, ``embeddings``, ``moderations``, ``models``)."""
        return [r for r in self.requests if r.endpoint == endpoint]

    def stats(self, *, clear: bool = False) -> dict[str, Any]:
        """Request counts per endpoint and the in-flight maximum (what ``GET /_test/stats``
        returns; ``POST /_test/stats`` returns them and then clears the log)."""
        with self._lock:
            counts: dict[str, int] = {}
            for rec in self._log:
                counts[rec.endpoint] = counts.get(rec.endpoint, 0) + 1
            out = {"requests": counts, "max_in_flight": self._max_in_flight}
        if clear:
            self.clear()
        return out

    @property
    def max_in_flight(self) -> int:
        """The most requests being answered at the same moment so far."""
        with self._lock:
            return self._max_in_flight

    # -- request handling (handler threads) -----------------------------------------------

    def _begin(self, record: RecordedRequest) -> Item | None:
        with self._lock:
            self._log.append(record)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            if record.endpoint not in ENDPOINTS:
                return None
            if record.endpoint == "chat":
                for rule in self._rejections:
                    refusal = rule.refusal(record.body)
                    if refusal is not None:
                        return refusal
            queue = self._queues[record.endpoint]
            if queue:
                return queue.popleft()
            default = self._defaults[record.endpoint]
        return self._resolve_default(default, record)

    def _resolve_default(self, default: ChatDefault | None, record: RecordedRequest) -> Item:
        if default is None:
            if record.endpoint == "embeddings":
                return EmbeddingReply(fn=hashed_embedding)
            if record.endpoint == "moderations":
                return ModerationReply()
            return Fault(
                400,
                "test server: no chat reply is queued and no default is set "
                "(use server.enqueue(...) or server.set_default(...))",
            )
        if callable(default) and not isinstance(
            default, (ChatReply, EmbeddingReply, ModerationReply, Fault, RawReply, Delay, Trickle)
        ):
            return default(record.body)
        return default

    def _end(self, record: RecordedRequest, status: int) -> None:
        with self._lock:
            self._in_flight -= 1
            record.finished_at = time.monotonic()
            record.status = status

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _next_call_id(self) -> str:
        with self._lock:
            self._call_ids += 1
            return f"call_{self._call_ids}"

    def answer(
        self, record: RecordedRequest, item: Item | None
    ) -> tuple[int, dict[str, str], dict[str, Any] | bytes]:
        """(status, headers, JSON body) for a request; the server's core, usable without HTTP."""
        if record.endpoint == "models":
            data = [{"id": self.model, "object": "model", "created": 0, "owned_by": "test"}]
            return 200, {}, {"object": "list", "data": data}
        if item is None:
            return 404, {}, _error_body(f"test server: no route for {record.path}", "not_found")
        self._sleep(self.latency)
        while isinstance(item, (Delay, Trickle)):
            if isinstance(item, Delay):
                self._sleep(item.seconds)
            # (a Trickle is unwrapped here; the handler paces its body)
            item = item.then or self._resolve_default(self._default_of(record.endpoint), record)
        if isinstance(item, RawReply):
            return item.status, {}, item.body
        if isinstance(item, Fault):
            headers = {}
            if item.retry_after is not None:
                headers["Retry-After"] = f"{item.retry_after:g}"
            kind = _error_type(item.status)
            body = _error_body(item.message, kind, item.param, item.code or kind)
            return item.status, headers, body
        try:
            if record.endpoint == "chat" and isinstance(item, ChatReply):
                return 200, {}, self._chat(record.body, item)
            if record.endpoint == "embeddings" and isinstance(item, EmbeddingReply):
                return 200, {}, _embeddings(record.body, item)
            if record.endpoint == "moderations" and isinstance(item, ModerationReply):
                return 200, {}, _moderations(record.body, item)
        except _BadRequest as exc:
            return 400, {}, _error_body(str(exc), "invalid_request_error")
        return (
            500,
            {},
            _error_body(
                f"test server: scripted {type(item).__name__} does not fit the {record.endpoint} "
                "endpoint",
                "server_error",
            ),
        )

    def _default_of(self, endpoint: str) -> ChatDefault | None:
        with self._lock:
            return self._defaults[endpoint]

    def _chat(self, body: dict[str, Any], item: ChatReply) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("'messages' must be a non-empty list")
        model = item.model or str(body.get("model") or self.model)
        message: dict[str, Any] = {"role": "assistant", "content": item.content}
        finish = "stop"
        out_text = item.content or ""
        if item.tool_calls:
            calls = []
            for name, raw in item.tool_calls:
                calls.append(
                    {
                        "id": self._next_call_id(),
                        "type": "function",
                        "function": {"name": name or _forced_tool(body), "arguments": raw},
                    }
                )
                out_text += raw
            message["tool_calls"] = calls
            finish = "tool_calls"
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        choice["logprobs"] = None
        if body.get("logprobs") and item.top_logprobs:
            n = body.get("top_logprobs")
            tops = list(item.top_logprobs)[: int(n)] if isinstance(n, int) and n > 0 else []
            first_token, first_lp = item.top_logprobs[0]
            choice["logprobs"] = {
                "content": [
                    {
                        "token": first_token,
                        "logprob": first_lp,
                        "bytes": list(first_token.encode()),
                        "top_logprobs": [
                            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in tops
                        ],
                    }
                ],
                "refusal": None,
            }
        if item.usage is not None:
            prompt, completion = item.usage
        else:
            prompt = len(json.dumps(messages)) // 4 + 1
            completion = len(out_text) // 4 + 1
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if item.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": item.cached_tokens}
        return {
            "id": f"chatcmpl-{self._next_call_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": usage,
        }


class _BadRequest(ValueError):
    pass


def _forced_tool(body: Mapping[str, Any]) -> str:
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        if isinstance(fn, Mapping) and fn.get("name"):
            return str(fn["name"])
    tools = body.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], Mapping):
        fn = tools[0].get("function")
        if isinstance(fn, Mapping) and fn.get("name"):
            return str(fn["name"])
    return "tool"


def _texts(body: Mapping[str, Any]) -> list[str]:
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _BadRequest("'input' must be a string or a list of strings")


def _embeddings(body: Mapping[str, Any], item: EmbeddingReply) -> dict[str, Any]:
    texts = _texts(body)
    if item.vectors is not None:
        if len(item.vectors) != len(texts):
            raise _BadRequest(
                f"scripted {len(item.vectors)} vectors for a request with {len(texts)} inputs"
            )
        vectors = [list(v) for v in item.vectors]
    else:
        fn = item.fn or hashed_embedding
        vectors = [[float(x) for x in fn(t)] for t in texts]
    b64 = body.get("encoding_format") == "base64"
    data = []
    for i, vec in enumerate(vectors):
        emb: Any = vec
        if b64:
            emb = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    tokens = sum(len(t.split()) for t in texts) or 1
    return {
        "object": "list",
        "data": data,
        "model": str(body.get("model") or "test-embedding"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _moderations(body: Mapping[str, Any], item: ModerationReply) -> dict[str, Any]:
    texts = _texts(body)
    names = list(MODERATION_CATEGORIES) + [
        c for c in (*item.categories, *item.category_scores) if c not in MODERATION_CATEGORIES
    ]
    names = list(dict.fromkeys(names))
    categories = {c: bool(item.categories.get(c, False)) for c in names}
    scores = {c: float(item.category_scores.get(c, 0.0)) for c in names}
    result = {
        "flagged": item.flagged,
        "categories": categories,
        "category_scores": scores,
        "category_applied_input_types": {c: ["text"] for c in names},
    }
    return {
        "id": "modr-test",
        "model": str(body.get("model") or "omni-moderation-latest"),
        "results": [dict(result) for _ in texts],
    }


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_exceeded"
    if status >= 500:
        return "server_error"
    if status == 401:
        return "invalid_api_key"
    return "invalid_request_error"


def _error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code or kind}}


def _shown(value: Any) -> str:
    """A value as OpenAI's messages print it (0.0 as 0)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value)


@dataclass(frozen=True)
class _Rejection:
    model: str
    param: str
    code: str
    allowed: Any
    message: str | None

    def refusal(self, body: Mapping[str, Any]) -> Fault | None:
        if body.get("model") != self.model or self.param not in body:
            return None
        value = body[self.param]
        if self.allowed is not _NO_VALUE and value == self.allowed:
            return None
        message = self.message
        if message is None:
            if self.code == "unsupported_value":
                shown = _shown(value)
                message = (
                    f"Unsupported value: '{self.param}' does not support {shown} with this model."
                )
                if self.allowed is not _NO_VALUE:
                    message += f" Only the default ({_shown(self.allowed)}) value is supported."
            else:
                message = f"Unsupported parameter: '{self.param}' is not supported with this model."
                if self.param == "max_tokens":
                    message += " Use 'max_completion_tokens' instead."
        return Fault(400, message, param=self.param, code=self.code)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses connections
    # Buffer the reply so headers and body leave in one segment, and turn Nagle off: otherwise
    # the body waits for the client's delayed ACK of the headers (~40 ms per reply).
    wbufsize = -1
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests read the request log instead

    def do_GET(self) -> None:
        self._handle(with_body=False)

    def do_POST(self) -> None:
        self._handle(with_body=True)

    def _handle(self, *, with_body: bool) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == STATS_PATH:
            # Control route for a server in another process; not logged.
            if with_body:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(200, {}, owner.stats(clear=with_body))
            return
        endpoint, deployment = _route(path)
        query = parse_qs(self.path.split("?", 1)[1]) if "?" in self.path else {}
        body: dict[str, Any] = {}
        bad: str | None = None
        if with_body:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                parsed = json.loads(raw or b"{}")
                if isinstance(parsed, dict):
                    body = parsed
                else:
                    bad = "the request body must be a JSON object"
            except ValueError:
                bad = "the request body is not JSON"
        record = RecordedRequest(
            method=self.command,
            path=path,
            endpoint=endpoint,
            body=body,
            headers={k.lower(): v for k, v in self.headers.items()},
            received_at=time.monotonic(),
            deployment=deployment,
            api_version=query["api-version"][0] if query.get("api-version") else None,
            query=query,
        )
        status = 500
        headers: Mapping[str, str] = {}
        payload: Mapping[str, Any] | bytes
        ended = False
        pace: Trickle | None = None
        try:
            item = owner._begin(record)
            if isinstance(item, Trickle):
                pace = item
            if bad is not None:
                status, payload = 400, _error_body(bad, "invalid_request_error")
            else:
                status, headers, payload = owner.answer(record, item)
            # Mark the request done before the client can see the reply, so that a test reading
            # the log right after its call finds it complete.
            owner._end(record, status)
            ended = True
            self._send(status, headers, payload, pace)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timed out) before the reply
        finally:
            if not ended:
                owner._end(record, status)

    def _send(
        self,
        status: int,
        headers: Mapping[str, str],
        payload: Mapping[str, Any] | bytes,
        pace: Trickle | None = None,
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if pace is None:
            self.wfile.write(data)
            self.wfile.flush()
            return
        self.wfile.flush()  # the headers now, the body piece by piece
        # Past the buffered writer: a client that hangs up leaves nothing to flush at the end.
        self.close_connection = True
        stopping = self.server.owner._stopping
        for start in range(0, len(data), pace.chunk):
            if stopping.wait(pace.interval):
                return
            try:
                self.connection.sendall(data[start : start + pace.chunk])
            except OSError:
                return  # the client gave up


# -- running the server in its own process -------------------------------------------------------


def _parse_top_logprobs(value: str) -> list[tuple[str, float]]:
    out = []
    for part in value.split(","):
        token, _, lp = part.rpartition("=")
        out.append((token, float(lp)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_llmeval.testing``: serve until interrupted (SIGINT or
    SIGTERM), printing the base URL as the first line of stdout (on ``--port``, default a free
    port; a port in use is an error on stderr and exit status 1).

    Every chat request gets the same default reply: a forced tool call with ``--tool-arguments``
    when the request offers tools and those are given, else ``--reply-text`` with the first
    token's ``--top-logprobs`` (``Yes=-0.1,No=-2.5``). Counts: ``GET /_test/stats``.
    Useful for tests run with pytest-xdist (one server for every worker) and for benchmarks
    (the server's own CPU time stays out of the measuring process).
    """
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(prog="python -m pytest_llmeval.testing")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per call")
    parser.add_argument("--reply-text", default="Yes")
    parser.add_argument("--top-logprobs", type=_parse_top_logprobs, default=None)
    parser.add_argument("--tool-arguments", type=json.loads, default=None)
    parser.add_argument("--model", default="test-judge")
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: a free one)"
    )
    args = parser.parse_args(argv)

    plain = text(args.reply_text, top_logprobs=args.top_logprobs)
    tool = None if args.tool_arguments is None else tool_call(args.tool_arguments)

    def default(body: dict[str, Any]) -> Item:
        return tool if tool is not None and body.get("tools") else plain

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    srv = OpenAITestServer(
        port=args.port, latency=args.latency, model=args.model, chat_default=default
    )
    try:
        srv.start()
    except OSError as exc:
        print(f"error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    with srv:
        print(srv.base_url, flush=True)
        try:
            while not stop.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

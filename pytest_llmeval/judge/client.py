"""The judge client: one OpenAI-compatible endpoint driven with a concurrency limit, retries,
validated structured replies, usage accounting and a budget.

Every judge scorer talks to its endpoint through :class:`JudgeClient`, obtained from
``ctx.judge(options)``. The official ``openai`` package does the HTTP work (imported lazily, so
importing pytest-llmeval stays cheap) with its own retries turned off: this module retries, so that
the concurrency limit, the Retry-After header, the number of tries and the timeouts are all under
one roof and a failure ends in one :class:`JudgeError` that names the endpoint, the model and the
last cause.

Limits that hold whatever the server does: a request is bounded from sending to the last byte of
its reply (a server trickling its body a byte at a time does not reset it), one scoring's judge
time is bounded in all (``overall_timeout``), a reply is capped in size while it is read, token
counts that cannot be true are not priced, and an endpoint that timed out on several requests in a
row is not waited on again. Parameters a model refuses are not sent (:mod:`.params`).

The API key is only ever handed to the SDK: it never appears in a repr, an error message or a log,
and error text coming back from an endpoint is scrubbed of it.

Why this module is long: one HTTP client with everything a paid call needs in one place
(concurrency limit, rate limit, retries with backoff, structured replies validated and re-asked,
usage, cost and budget); each of those reads and changes the same request state, which a split
would have to pass around.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import random
import re
import struct
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from pytest_llmeval.core.errors import BudgetExceededError, JudgeError, ScorerConfigError
from pytest_llmeval.core.options import env_value
from pytest_llmeval.core.redaction import MIN_REMEMBERED, redact_logs, redact_text, redact_url
from pytest_llmeval.core.scores import Usage
from pytest_llmeval.core.settings import JUDGE_MODES, JudgeSettings
from pytest_llmeval.core.slots import JudgeSlots, SlotDemand
from pytest_llmeval.core.usage import JudgeClock, current_usage
from pytest_llmeval.judge import params
from pytest_llmeval.judge.prices import Price, cost_usd
from pytest_llmeval.stores.ratelimit import estimate_tokens

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from pytest_llmeval.core.usage import UsageLedger
    from pytest_llmeval.stores.ratelimit import RateLimiter

__all__ = [
    "DEFAULT_ENDPOINT",
    "ChatResult",
    "JudgeClient",
    "ModerationResult",
    "StructuredResult",
    "extract_json",
    "schema_instruction",
]


#: Where the SDK goes when no base URL is configured.
DEFAULT_ENDPOINT = "https://api.openai.com/v1"
#: The key sent to endpoints that need none (local servers): the SDK insists on some key.
NO_KEY = "no-key"
#: What messages name as the endpoint of an Azure judge whose endpoint is not configured.
NO_AZURE_ENDPOINT = "(Azure OpenAI endpoint not set)"
#: Longest wait between tries when the endpoint gives no Retry-After.
MAX_BACKOFF_S = 30.0
_STATUS_RETRYABLE = frozenset({408, 409, 429})
#: Requests in a row that ended in timeouts after which an endpoint is not waited on again in
#: this process: N tests against a hung server must not take N times the scoring timeout.
STALL_LIMIT = 3
#: More tokens than any model takes or writes in one call: such a count is not believed.
MAX_PLAUSIBLE_TOKENS = 10_000_000
#: Longest error text from an endpoint kept in a message.
MAX_CAUSE_CHARS = 1000
#: The host whose prices the built-in table lists and which needs an API key.
OPENAI_HOST = "api.openai.com"


@final
@dataclass(frozen=True)
class ChatResult:
    """A plain chat reply.

    ``top_logprobs`` are the first generated token's top alternatives as ``(token, logprob)`` in
    the order the endpoint returned them; ``None`` when the reply carries no logprobs.
    """

    content: str | None
    top_logprobs: list[tuple[str, float]] | None
    usage: Usage
    model: str
    """The model the endpoint says answered (its reply's ``model``), else the one asked for."""


@final
@dataclass(frozen=True)
class StructuredResult:
    """A structured reply: ``arguments`` validated against the schema that was asked for.

    ``usage`` covers every call made for it (two when the first reply was re-asked); ``raw_text``
    is the reply's raw arguments or text; ``model`` is the model the endpoint says answered.
    """

    arguments: dict[str, Any]
    usage: Usage
    raw_text: str | None
    model: str | None = None


@final
@dataclass(frozen=True)
class ModerationResult:
    """One moderations-endpoint verdict; category names as the endpoint spells them."""

    flagged: bool
    categories: dict[str, bool]
    category_scores: dict[str, float]
    usage: Usage


@dataclass
class _LoopState:
    """The SDK client and the concurrency limit, bound to one event loop (httpx pools and
    asyncio primitives must not cross loops)."""

    client: AsyncOpenAI
    slots: JudgeSlots


@dataclass(frozen=True)
class _Failure:
    retryable: bool
    cause: str
    retry_after: float | None
    status: int | None = None
    timed_out: bool = False
    #: the request parameter an HTTP 400 names as unsupported (OpenAI's error ``param``)
    unsupported_param: str | None = None


class _ReplyTooLarge(Exception):
    """The reply body grew past the byte cap while it was read."""


@final
class JudgeClient:
    """A client for one judge setting (endpoint, model, sampling, limits).

    All methods are coroutines; from sync code run them with ``ctx.run(...)``. Raises
    :class:`JudgeError` when the endpoint fails for good (after retries for transient failures, at
    once for a rejected request), :class:`BudgetExceededError` before a call once the run's budget
    is spent.
    """

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        ledger: UsageLedger | None = None,
        budget_usd: float | None = None,
        prices: Mapping[str, Price] | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        if ledger is None:
            from pytest_llmeval.core.usage import UsageLedger

            ledger = UsageLedger()
        self.settings = settings
        self.ledger = ledger
        self.budget_usd = budget_usd
        self.prices: Mapping[str, Price] = dict(prices or {})
        #: the run's rate limit (--llm-eval-rpm/--llm-eval-tpm): every request waits for it
        self.limiter = limiter
        self._lock = threading.Lock()
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._usage_warned = False
        self._model_warned = False

    # -- identity ---------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """Cache-key material: the judge model and the sampling parameters actually sent (a
        parameter the model does not take is left out; no URL, no key)."""
        return params.sent_identity(self.settings.identity())

    @property
    def is_azure(self) -> bool:
        """Whether the endpoint is Azure OpenAI (``--llm-eval-judge-provider azure``)."""
        return self.settings.provider == "azure"

    @property
    def endpoint(self) -> str:
        """The base URL calls go to, as messages show it (user-info and secret parameters
        masked: :func:`~pytest_llmeval.core.redaction.redact_url`); for Azure, the resource
        endpoint."""
        if self.is_azure:
            return redact_url(_azure_endpoint(self.settings) or NO_AZURE_ENDPOINT)
        return redact_url(_base_url(self.settings) or DEFAULT_ENDPOINT)

    @property
    def is_openai(self) -> bool:
        """Whether calls go to OpenAI's own API (which needs a key and charges list prices).
        Azure OpenAI is not: its prices come from ``llm_eval_prices`` alone."""
        if self.is_azure:
            return False
        from urllib.parse import urlsplit

        host = (urlsplit(self.endpoint).hostname or "").lower().rstrip(".")
        return host == OPENAI_HOST

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.settings.model!r}, endpoint={self.endpoint!r})"

    # -- public calls -----------------------------------------------------------------------

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        scorer: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
    ) -> ChatResult:
        """One chat completion. ``temperature`` defaults to the settings'; the seed is sent when
        set. With ``logprobs`` the first token's top alternatives come back in ``top_logprobs``
        (``None`` if the endpoint did not return any); a model that does not take logprobs is a
        JudgeError naming it, since the caller cannot do without them."""
        kwargs = self._chat_kwargs(messages, temperature)
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        required: frozenset[str] = frozenset()
        if logprobs:
            kwargs["logprobs"] = True
            if top_logprobs is not None:
                kwargs["top_logprobs"] = top_logprobs
            required = frozenset(params.REQUIRED_FOR["logprobs"])
        resp = await self._create_chat(kwargs, scorer, required)
        usage = self._account(resp)
        choice = self._first_choice(resp, scorer)
        content = choice["message"].get("content")
        return ChatResult(
            content=content if isinstance(content, str) else None,
            top_logprobs=_first_token_top_logprobs(choice),
            usage=usage,
            model=_reply_model(resp) or self.settings.model,
        )

    async def structured(
        self,
        messages: list[dict[str, Any]],
        *,
        name: str,
        description: str,
        schema: dict[str, Any],
        scorer: str | None = None,
        temperature: float | None = None,
        check: Callable[[dict[str, Any]], str] | None = None,
        schema_in_prompt: bool = False,
    ) -> StructuredResult:
        """A JSON object matching ``schema``, asked for as the arguments of a function ``name``.

        The settings' ``mode`` chooses how: ``tool`` (a forced tool call; a call returned as JSON
        text in the content, as llama.cpp does, is accepted too), ``json`` (JSON mode plus the
        schema in the prompt) or ``text`` (the first JSON object in a plain reply). An invalid
        reply is re-asked once with the problem stated; a second invalid reply is a JudgeError.

        ``check`` (optional) sees arguments that match the schema and returns a problem (or
        ``""``) that the schema cannot express (say, one item per claim); a problem is handled
        like an invalid reply. ``schema_in_prompt``: the messages already state the schema (see
        :func:`schema_instruction`; the judge step puts it before the case, so that every case's
        prompt shares the prefix), so ``json``/``text`` mode does not append it again.
        """
        mode = self.settings.mode
        if mode not in JUDGE_MODES:
            raise ScorerConfigError(
                scorer or "judge",
                "mode",
                f"is {mode!r}, not one of {', '.join(JUDGE_MODES)}",
                hint="Use 'tool' for endpoints with tool calling, 'json' or 'text' otherwise",
            )
        validator = _validator(schema, scorer)
        convo = [dict(m) for m in messages]
        if mode != "tool" and not schema_in_prompt:
            convo = _with_instruction(convo, schema_instruction(name, description, schema))
        total = Usage()
        problem = ""
        for attempt in (1, 2):
            kwargs = self._chat_kwargs(convo, temperature)
            if mode == "tool":
                function = {"name": name, "description": description, "parameters": schema}
                kwargs["tools"] = [{"type": "function", "function": function}]
                kwargs["tool_choice"] = {"type": "function", "function": {"name": name}}
            elif mode == "json":
                kwargs["response_format"] = {"type": "json_object"}
            resp = await self._create_chat(kwargs, scorer)
            total = total + self._account(resp)
            message = self._first_choice(resp, scorer)["message"]
            raw, parsed, problem = _parse_structured(message, name, mode)
            if parsed is not None:
                problem = _validation_problem(validator, parsed)
                if not problem and check is not None:
                    problem = check(parsed)
                if not problem:
                    return StructuredResult(
                        arguments=parsed, usage=total, raw_text=raw, model=_reply_model(resp)
                    )
            if attempt == 1:
                convo = [
                    *convo,
                    {"role": "assistant", "content": raw or ""},
                    {"role": "user", "content": _correction(name, problem, mode)},
                ]
        raise JudgeError(
            f"the judge's reply for {name!r} was invalid twice (asked again once): {problem}",
            scorer=scorer,
            endpoint=self.endpoint,
            model=self.settings.model,
        )

    async def embed(
        self, texts: list[str], *, model: str | None = None, scorer: str | None = None
    ) -> tuple[list[list[float]], Usage]:
        """Embeddings of ``texts`` (in order) from the endpoint; ``model`` defaults to the
        settings' ``embedding_model``."""
        if not texts:
            return [], Usage()
        use = model or self.settings.embedding_model

        body = {"input": list(texts), "model": use, "encoding_format": "float"}
        resp = await self._call("embeddings", "/embeddings", body, scorer, use)
        try:
            data = sorted(
                (d for d in resp.get("data") or [] if isinstance(d, dict)),
                key=lambda d: int(d.get("index", 0)),
            )
            vectors = [_vector(d.get("embedding")) for d in data]
        except (TypeError, ValueError) as exc:
            raise self._malformed("embeddings", scorer, use, str(exc)) from None
        if len(vectors) != len(texts):
            raise self._malformed(
                "embeddings", scorer, use, f"{len(vectors)} vectors for {len(texts)} texts"
            )
        usage = self._account(resp, use)
        return vectors, usage

    async def moderate(
        self, text: str, *, model: str | None = None, scorer: str | None = None
    ) -> ModerationResult:
        """One moderations-endpoint verdict for ``text`` (``model`` None: endpoint default)."""

        body: dict[str, Any] = {"input": text}
        if model is not None:
            body["model"] = model
        label = model or "(endpoint default)"
        resp = await self._call("moderations", "/moderations", body, scorer, label)
        results = resp.get("results")
        first = results[0] if isinstance(results, list) and results else None
        if not isinstance(first, dict):
            raise self._malformed("moderations", scorer, label, "no result")
        models = (_reply_model(resp), model)
        usage = Usage(0, 0, 1, cost_usd(models, 0, 0, self.prices, builtin=self.is_openai))
        self.ledger.add(usage)
        categories = first.get("categories") or {}
        scores = first.get("category_scores") or {}
        try:
            return ModerationResult(
                flagged=bool(first.get("flagged")),
                categories={str(k): bool(v) for k, v in categories.items() if v is not None},
                category_scores={str(k): float(v) for k, v in scores.items() if v is not None},
                usage=usage,
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._malformed("moderations", scorer, label, str(exc)) from None

    async def close(self) -> None:
        """Close the HTTP client bound to the running loop (others are dropped)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._states.pop(loop, None)
            self._states.clear()
        if state is not None:
            await state.client.close()

    # -- machinery --------------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._states.get(loop)
            if state is None:
                state = _LoopState(
                    client=_make_sdk_client(self.settings),
                    slots=_shared_slots(loop, self.settings.concurrency, self.ledger.slots),
                )
                self._states[loop] = state
            return state

    def _chat_kwargs(
        self, messages: list[dict[str, Any]], temperature: float | None
    ) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": messages,
            "temperature": s.temperature if temperature is None else temperature,
        }
        if s.seed is not None:
            kwargs["seed"] = s.seed
        return kwargs

    async def _create_chat(
        self, body: dict[str, Any], scorer: str | None, required: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        model = self.settings.model
        missing = required & params.unsupported(model)
        if missing:
            raise self._needs(scorer, sorted(missing)[0], "it is not accepted by this model")
        body = params.apply(body, params.unsupported(model))
        resp = await self._call(
            "chat",
            "/chat/completions",
            body,
            scorer,
            model,
            cap_bytes=_body_cap(int(self.settings.max_reply_chars)),
            required=required,
        )
        self._check_reply_size(resp, scorer)
        self._check_served_model(resp)
        return resp

    def _check_served_model(self, resp: dict[str, Any]) -> None:
        """Say once when a server other than OpenAI's answers as another model while the judge
        model is still the default name: cache keys and reports would name a model that never
        judged."""
        served = _reply_model(resp)
        model = self.settings.model
        if served is None or served == model or model != JudgeSettings.model or self.is_openai:
            return
        with self._lock:
            if self._model_warned:
                return
            self._model_warned = True
        import warnings

        warnings.warn(
            f"llm-eval: the judge endpoint {self.endpoint} answers as model {served!r}, but the "
            f"judge model is the default {model!r}; set --llm-eval-judge-model={served} (or "
            "ini llm_eval_judge_model) so cache keys and reports name the model that judged. "
            "Its cost is unknown unless llm_eval_prices lists it",
            RuntimeWarning,
            stacklevel=2,
        )

    def _needs(self, scorer: str | None, param: str, why: str) -> JudgeError:
        return JudgeError(
            f"this call needs {param!r} ({scorer or 'the scorer'} cannot work without it) but "
            f"{why}; choose a judge model that returns logprobs (e.g. gpt-4.1-mini or a local "
            "llama.cpp server) with the scorer option model=... or --llm-eval-judge-model",
            scorer=scorer,
            endpoint=self.endpoint,
            model=self.settings.model,
        )

    def _check_reply_size(self, resp: dict[str, Any], scorer: str | None) -> None:
        cap = int(self.settings.max_reply_chars)
        longest = 0
        choices = resp.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            message = _dig(choice, "message")
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            longest = max(longest, len(content) if isinstance(content, str) else 0)
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                args = _dig(call, "function", "arguments")
                if isinstance(args, str):
                    longest = max(longest, len(args))
        if longest > cap:
            raise self._too_large(scorer, f"the reply is {longest} characters long")

    def _too_large(self, scorer: str | None, what: str) -> JudgeError:
        cap = int(self.settings.max_reply_chars)
        return JudgeError(
            f"{what}, over the cap of {cap} characters (--llm-eval-max-reply-chars); it was "
            "neither kept nor cached. A judge verdict is short: check the prompt and the "
            "endpoint (a runaway generation?), or raise the cap if this length is expected",
            scorer=scorer,
            endpoint=self.endpoint,
            model=self.settings.model,
        )

    def _account(self, resp: dict[str, Any], model: str | None = None) -> Usage:
        """Usage of one reply, priced by the model the endpoint says answered (then the one
        asked for). Token counts that cannot be true are not believed: the call's cost is
        unknown (never a credit that would disable the budget), with one warning."""
        asked = self.settings.model if model is None else model
        raw = resp.get("usage")
        prompt = _token_count(_dig(raw, "prompt_tokens"))
        completion = _token_count(_dig(raw, "completion_tokens"))
        # OpenAI counts prompt-cache hits inside prompt_tokens; more cached than prompt tokens
        # cannot be true.
        cached = _token_count(_dig(raw, "prompt_tokens_details", "cached_tokens"))
        if cached is not None and prompt is not None and cached > prompt:
            cached = None
        cost: float | None = None
        if prompt is None or completion is None or cached is None:
            self._warn_usage(raw)
        elif isinstance(raw, dict):  # no usage at all: tokens and cost unknown
            models = (_reply_model(resp), asked)
            cost = cost_usd(
                models,
                prompt,
                completion,
                self.prices,
                builtin=self.is_openai,
                cached_prompt_tokens=cached,
            )
        served = _reply_model(resp) or asked
        usage = Usage(prompt or 0, completion or 0, 1, cost, (served,), cached or 0)
        self.ledger.add(usage)
        return usage

    def _warn_usage(self, raw: Any) -> None:
        with self._lock:
            if self._usage_warned:
                return
            self._usage_warned = True
        import warnings

        shown = _clip(json.dumps(raw, default=str), self._redact, 200)
        warnings.warn(
            f"llm-eval: the judge endpoint {self.endpoint} (model {self.settings.model!r}) "
            f"reported token usage that cannot be true ({shown}); such calls are counted with "
            "an unknown cost and no tokens, so --llm-eval-budget does not see them",
            RuntimeWarning,
            stacklevel=2,
        )

    def _first_choice(self, resp: dict[str, Any], scorer: str | None) -> dict[str, Any]:
        choices = resp.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            raise self._malformed("chat", scorer, self.settings.model, "no message in 'choices'")
        return choice

    def _malformed(
        self, what: str, scorer: str | None, model: str | None, problem: str
    ) -> JudgeError:
        return JudgeError(
            f"the {what} reply is not in the OpenAI format: {problem}",
            scorer=scorer,
            endpoint=self.endpoint,
            model=model,
        )

    def _check_budget(self, scorer: str | None, model: str | None) -> None:
        if self.budget_usd is None:
            return
        spent = self.ledger.spent_usd
        if spent >= self.budget_usd:
            raise BudgetExceededError(
                f"the judge budget of ${self.budget_usd:.4f} is spent (${spent:.4f} used so far); "
                "no new judge call was started. Raise --llm-eval-budget or score fewer cases",
                scorer=scorer,
                endpoint=self.endpoint,
                model=model,
            )

    async def _call(
        self,
        what: str,
        path: str,
        body: dict[str, Any],
        scorer: str | None,
        model: str | None,
        *,
        cap_bytes: int | None = None,
        required: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """POST one JSON request with the concurrency limit, retries and timeouts; the JSON reply.

        The SDK's generic ``post`` sends the body as given (already in wire format) and returns
        the raw bytes: this skips the SDK's per-call parameter transformation and response model
        building, which cost more CPU than the whole rest of a judge call, while keeping its
        auth, base URL, timeouts and error mapping.

        Each request is bounded by ``timeout`` from sending to the last byte of the reply
        (httpx's own timeouts only bound each wait for the next byte). The judge time of the
        scoring it belongs to (``current_usage``; this call alone outside a scoring) is bounded
        by ``overall_timeout``. A 400 naming a parameter the model does not take is retried once
        without it, and remembered for the model (:mod:`.params`).
        """
        self._check_key(scorer, model)
        self._check_budget(scorer, model)
        self._check_stalled(what, scorer, model)
        s = self.settings
        state = self._state()
        tries = max(1, int(s.max_tries))
        limit = float(s.overall_timeout)
        collector = current_usage.get()
        clock = collector.clock if collector is not None else JudgeClock()
        failure = _Failure(False, "no try was made", None)
        attempt = 0
        while attempt < tries:
            attempt += 1
            async with state.slots:
                if clock.elapsed() >= limit:  # earlier calls of this scoring used up its time
                    attempt -= 1
                    break
                if attempt == 1:
                    # Checked again once a slot is free: many callers (concurrent cases, a
                    # batch) wait here at once, and the calls that finished meanwhile spent.
                    self._check_budget(scorer, model)
                # The run's rate limit: waited for outside the scoring's judge time, like the
                # slot (a queue is not the endpoint being slow), right before sending.
                reservation = (
                    None
                    if self.limiter is None
                    else await self.limiter.acquire(estimate_tokens(body, what))
                )
                sent = False
                used: int | None = None
                try:
                    if reservation is not None and attempt == 1:
                        self._check_budget(scorer, model)  # others spent while this one waited
                    with clock.running():
                        remaining = limit - clock.elapsed()
                        if remaining <= 0:  # parallel calls of this scoring used up its time
                            attempt -= 1
                            break
                        timeout = min(float(s.timeout), remaining)
                        sent = True
                        try:
                            raw = await asyncio.wait_for(
                                self._post(state, path, body, timeout, cap_bytes), timeout
                            )
                        except (asyncio.TimeoutError, TimeoutError):
                            failure = self._timed_out(timeout)
                        except _ReplyTooLarge as exc:
                            raise self._too_large(scorer, str(exc)) from None
                        except Exception as exc:
                            failure = self._classify(exc, timeout)
                            if failure.status is not None and 400 <= failure.status < 500:
                                used = 0  # refused: the endpoint generated nothing
                        else:
                            self.ledger.stalls.pop(self.endpoint, None)
                            data = self._decode(what, raw, scorer, model)
                            used = _used_tokens(data)
                            return data
                finally:
                    if reservation is not None and self.limiter is not None:
                        await self.limiter.settle(reservation, sent=sent, used_tokens=used)
            param = failure.unsupported_param
            if param is not None and param in body and model is not None:
                if param in required:
                    raise self._needs(
                        scorer, param, f"the endpoint refused it ({failure.cause})"
                    ) from None
                params.learn(model, param, endpoint=self.endpoint, reason=failure.cause)
                body = params.apply(body, {param})
                attempt -= 1  # the refused request does not count as a try
                continue
            if not failure.retryable:
                hint = ""
                if "tools" in body and failure.status in (400, 422):
                    hint = (
                        "; if this endpoint cannot do forced tool calls, use judge mode 'json' "
                        "or 'text' (scorer option mode=..., or the run's judge mode setting)"
                    )
                raise JudgeError(
                    f"the {what} request was rejected{hint}",
                    scorer=scorer,
                    endpoint=self.endpoint,
                    model=model,
                    cause=failure.cause,
                ) from None
            if attempt >= tries:
                break
            delay = self._delay(attempt, failure.retry_after)
            if clock.elapsed() + delay > limit:
                self._note_stall(failure)
                raise JudgeError(
                    f"the {what} request did not succeed within the scoring timeout of "
                    f"{limit:g} s (--llm-eval-scoring-timeout; {attempt} tries; the next would "
                    f"wait {delay:.1f} s)",
                    scorer=scorer,
                    endpoint=self.endpoint,
                    model=model,
                    cause=failure.cause,
                )
            with clock.running():
                await asyncio.sleep(delay)
        self._note_stall(failure)
        if attempt < tries:
            raise JudgeError(
                f"the {what} request did not succeed within the scoring timeout of {limit:g} s "
                f"(--llm-eval-scoring-timeout; {attempt} tries, the scoring's judge time is used "
                "up)",
                scorer=scorer,
                endpoint=self.endpoint,
                model=model,
                cause=failure.cause,
            )
        raise JudgeError(
            f"the {what} request failed after {attempt} tries (max_tries={tries}, scoring "
            f"timeout {limit:g} s)",
            scorer=scorer,
            endpoint=self.endpoint,
            model=model,
            cause=failure.cause,
        )

    async def _post(
        self,
        state: _LoopState,
        path: str,
        body: dict[str, Any],
        timeout: float,
        cap_bytes: int | None,
    ) -> bytes:
        """The reply body of one POST; with ``cap_bytes``, read as a stream and abandoned as
        soon as it grows past the cap, so a huge reply is never held whole."""
        if cap_bytes is None:
            return await state.client.post(
                path, cast_to=bytes, body=body, options={"timeout": timeout}
            )
        # The header the SDK's own with_streaming_response sets: the body is not read yet.
        stream = {"X-Stainless-Raw-Response": "stream"}
        resp: Any = await state.client.post(
            path, cast_to=bytes, body=body, options={"timeout": timeout, "headers": stream}
        )
        if isinstance(resp, bytes):  # an SDK that read it anyway: still capped
            if len(resp) > cap_bytes:
                raise _ReplyTooLarge(f"the reply body is {len(resp)} bytes")
            return resp
        http = resp.http_response
        try:
            declared = http.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > cap_bytes:
                raise _ReplyTooLarge(f"the reply body announces {int(declared)} bytes")
            chunks: list[bytes] = []
            size = 0
            async for chunk in http.aiter_bytes():
                size += len(chunk)
                if size > cap_bytes:
                    raise _ReplyTooLarge(f"the reply body passed {cap_bytes} bytes while read")
                chunks.append(chunk)
        finally:
            await http.aclose()
        return b"".join(chunks)

    def _timed_out(self, timeout: float) -> _Failure:
        cause = f"no reply within the timeout of {timeout:.3g} s (request to last byte)"
        if timeout < float(self.settings.timeout):
            cause = (
                f"no reply within the {timeout:.3g} s left of the scoring timeout of "
                f"{self.settings.overall_timeout:g} s (--llm-eval-scoring-timeout)"
            )
        return _Failure(True, cause, None, timed_out=True)

    def _note_stall(self, failure: _Failure) -> None:
        if failure.timed_out:
            stalls = self.ledger.stalls
            stalls[self.endpoint] = stalls.get(self.endpoint, 0) + 1

    def _check_stalled(self, what: str, scorer: str | None, model: str | None) -> None:
        count = self.ledger.stalls.get(self.endpoint, 0)
        if count >= STALL_LIMIT:
            s = self.settings
            raise JudgeError(
                f"the endpoint timed out on the last {count} judge requests of this run (each "
                f"after its tries) and has not answered since; this {what} request was not sent, "
                "so that every remaining test does not wait out its timeout too. Check that the "
                "endpoint is up, or if it is only slow raise --llm-eval-timeout "
                f"(now {s.timeout:g} s) and --llm-eval-scoring-timeout "
                f"(now {s.overall_timeout:g} s)",
                scorer=scorer,
                endpoint=self.endpoint,
                model=model,
            )

    def _check_key(self, scorer: str | None, model: str | None) -> None:
        if self.is_azure:
            self._check_azure(scorer, model)
            return
        if self.settings.api_key or not self.is_openai:
            return
        raise JudgeError(
            "no API key is set for OpenAI's API, so no judge call was made. Set one in the "
            "environment (export OPENAI_API_KEY=sk-...; ini llm_eval_api_key_env names another "
            "variable), or point the judge at a local OpenAI-compatible server with "
            "--llm-eval-judge-base-url=http://127.0.0.1:8080/v1 (or OPENAI_BASE_URL); runs "
            "that only replay the cache need neither (--llm-eval-cache=replay)",
            scorer=scorer,
            endpoint=self.endpoint,
            model=model,
        )

    def _check_azure(self, scorer: str | None, model: str | None) -> None:
        """Azure OpenAI needs an endpoint, a key and an api-version: say which are missing
        before any call (the SDK would fail with a less precise message)."""
        missing = []
        if not _azure_endpoint(self.settings):
            missing.append(
                "the resource endpoint (AZURE_OPENAI_ENDPOINT=https://NAME.openai.azure.com, or "
                "--llm-eval-judge-base-url)"
            )
        if not self.settings.api_key:
            missing.append(
                "the API key (AZURE_OPENAI_API_KEY; ini llm_eval_api_key_env names another "
                "variable)"
            )
        if not _azure_api_version(self.settings):
            missing.append("the API version (OPENAI_API_VERSION, e.g. 2024-10-21)")
        if missing:
            raise JudgeError(
                "the judge provider is azure but "
                + "; ".join(missing)
                + (" is" if len(missing) == 1 else " are")
                + " not set, so no judge call was made",
                scorer=scorer,
                endpoint=self.endpoint,
                model=model,
            )

    def _decode(
        self, what: str, raw: bytes, scorer: str | None, model: str | None
    ) -> dict[str, Any]:
        try:
            data = json.loads(raw)
        except ValueError:
            snippet = raw[:80].decode("utf-8", "replace")
            raise self._malformed(what, scorer, model, f"not JSON ({snippet!r})") from None
        if not isinstance(data, dict):
            raise self._malformed(what, scorer, model, f"a JSON {type(data).__name__}")
        return data

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # Honour the server's wish; a little jitter on top spreads a thundering herd.
            return retry_after * (1.0 + 0.1 * random.random())
        base = max(0.0, float(self.settings.retry_backoff))
        ceiling = min(MAX_BACKOFF_S, base * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * random.random())

    def _classify(self, exc: Exception, timeout: float) -> _Failure:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return self._timed_out(timeout)
        if isinstance(exc, openai.APIConnectionError):
            inner = exc.__cause__ or exc.__context__
            detail = f"{type(inner).__name__}: {inner}" if inner is not None else str(exc)
            return _Failure(True, _clip(f"connection error ({detail})", self._redact), None)
        if isinstance(exc, openai.APIStatusError):
            status = int(exc.status_code)
            retryable = status in _STATUS_RETRYABLE or status >= 500
            message = _status_message(exc)
            return _Failure(
                retryable,
                _clip(f"HTTP {status}: {message}", self._redact),
                _retry_after(exc.response.headers) if retryable else None,
                status,
                unsupported_param=_unsupported_param(exc) if status == 400 else None,
            )
        if isinstance(exc, openai.OpenAIError):
            return _Failure(False, _clip(f"{type(exc).__name__}: {exc}", self._redact), None)
        raise exc

    def _redact(self, text: str) -> str:
        """``text`` from an endpoint or the HTTP client without the key, URL credentials or
        anything shaped like a key (endpoints echo keys, masked or not, in 401 messages)."""
        key = self.settings.api_key.get() if self.settings.api_key else ""
        # A key of a few characters (a local server's "test", "dummy") is no secret, and masking
        # it would blank out words of the endpoint's message.
        return redact_text(text, (key,) if len(key) >= MIN_REMEMBERED else ())


# The concurrency limit is per process, not per client: scorers with different judge options
# (another model, a per-call seed) get different clients but must share the run's limit. One set
# of slots per event loop and limit (None: the automatic one); asyncio futures cannot cross loops.
_SLOTS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[int | None, int], JudgeSlots]
] = weakref.WeakKeyDictionary()
_SLOTS_LOCK = threading.Lock()


def _shared_slots(
    loop: asyncio.AbstractEventLoop, limit: int | None, demand: SlotDemand
) -> JudgeSlots:
    key = (None if limit is None else max(1, int(limit)), id(demand))
    with _SLOTS_LOCK:
        per_loop = _SLOTS.setdefault(loop, {})
        slots = per_loop.get(key)
        if slots is None or slots.demand is not demand:
            slots = per_loop[key] = JudgeSlots(key[0], demand)
        return slots


def _azure_endpoint(settings: JudgeSettings) -> str | None:
    return settings.base_url or env_value("llm_eval_judge_base_url", azure=True)


def _base_url(settings: JudgeSettings) -> str | None:
    """The OpenAI base URL as configured (the SDK would read ``OPENAI_BASE_URL`` itself)."""
    return settings.base_url or env_value("llm_eval_judge_base_url")


def _azure_api_version(settings: JudgeSettings) -> str | None:
    return settings.api_version or env_value("openai_api_version")


@dataclass(frozen=True)
class _SplitURL:
    """A base URL taken apart for the SDK: the URL without user-info or query, the query's
    parameters, and the user-info as (user, password)."""

    url: str | None
    query: dict[str, str]
    basic_auth: tuple[str, str] | None


def _split_url(url: str | None) -> _SplitURL:
    """Take the credentials and the query out of a base URL.

    The SDK appends each call's path to the base URL as a string: a query there would end up in
    the middle of the path (``/v1?api_key=K/chat/completions``), so its parameters go with every
    request instead (the SDK's ``default_query``). User-info becomes HTTP basic auth, as httpx
    made of it (it replaces the bearer key); out of the URL, it is in no URL the HTTP client
    logs or puts in an error."""
    if not url:
        return _SplitURL(url, {}, None)
    from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return _SplitURL(url, {}, None)  # the SDK says what is wrong with it
    auth = None
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        auth = (unquote(user), unquote(password))
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    bare = urlunsplit((parts.scheme, netloc, parts.path, "", ""))  # a fragment is never sent
    return _SplitURL(bare, query, auth)


def _make_sdk_client(settings: JudgeSettings) -> AsyncOpenAI:
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    azure = settings.provider == "azure"
    target = _split_url(_azure_endpoint(settings) if azure else _base_url(settings))
    url = target.url
    http_options: dict[str, Any] = {}
    if _plain_loopback(url):
        # A local judge over plain HTTP never uses TLS: skip loading the CA bundle (about
        # 0.2 s of CPU in every process, i.e. every xdist worker). No redirects, so no request
        # can end up on an unverified https:// host.
        http_options = {"verify": False, "follow_redirects": False}
    if target.basic_auth is not None:
        # What httpx made of user-info in the URL (it takes the place of the key's header).
        http_options["auth"] = target.basic_auth
    http_client = DefaultAsyncHttpxClient(**http_options) if http_options else None
    # The HTTP client logs each request's URL (at INFO), query included.
    redact_logs(*_http_loggers())
    query = target.query or None
    if azure:
        from openai import AsyncAzureOpenAI

        # The deployment is the request body's "model" (the judge model name): the SDK puts it
        # in the path, /openai/deployments/{model}/chat/completions?api-version=..., and sends
        # the key in the api-key header. Endpoint, key and version were checked before.
        return AsyncAzureOpenAI(
            api_key=settings.api_key.get() if settings.api_key else NO_KEY,
            azure_endpoint=url or "",
            api_version=_azure_api_version(settings),
            max_retries=0,
            timeout=float(settings.timeout),
            http_client=http_client,
            default_query=query,
        )
    return AsyncOpenAI(
        api_key=settings.api_key.get() if settings.api_key else NO_KEY,
        base_url=url,
        max_retries=0,
        timeout=float(settings.timeout),
        http_client=http_client,
        default_query=query,
    )


def _http_loggers() -> tuple[str, ...]:
    """The logger of the HTTP client library the SDK uses (``httpx``, or a renamed build of it:
    the package its client class comes from)."""
    from openai import DefaultAsyncHttpxClient

    names = {"httpx"}
    names.update(c.__module__.split(".")[0] for c in DefaultAsyncHttpxClient.__mro__[1:-1])
    names.discard("openai")
    return tuple(sorted(names))


def _plain_loopback(base_url: str | None) -> bool:
    """Whether ``base_url`` is ``http://`` on this machine (localhost, 127.0.0.0/8, ::1)."""
    if not base_url:
        return False
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.scheme != "http":
        return False
    host = (parts.hostname or "").lower().rstrip(".")
    if host == "localhost":
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a DNS name: it could resolve anywhere
        return False


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", exc))


def _clip(text: str, redact: Callable[[str], str], limit: int = MAX_CAUSE_CHARS) -> str:
    """Endpoint error text, redacted, cut to a readable length. A server may send megabytes:
    only the start is redacted and shown, and the redaction comes first (a cut can leave half a
    URL that no longer looks like one)."""
    scan = text[: 4 * limit]
    shown = redact(scan)
    if len(scan) < len(text):
        # The word the scan's end went through may be half a secret: it is not shown.
        words = shown.rsplit(None, 1)
        shown = words[0] if len(words) == 2 else ""
    elif len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... ({len(text) - min(len(shown), limit)} more characters)"


_UNSUPPORTED_TEXT = re.compile(r"Unsupported (?:value|parameter): '(?P<param>[A-Za-z_]+)'")


def _unsupported_param(exc: Any) -> str | None:
    """The parameter a 400 refuses as unsupported, from OpenAI's error shape
    ``{"error": {"param": "temperature", "code": "unsupported_value", ...}}`` (or its message,
    for servers that copy the text without the fields); None for any other 400."""
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(err, Mapping):
        return None
    param, code = err.get("param"), err.get("code")
    if code in ("unsupported_value", "unsupported_parameter") and isinstance(param, str):
        return param if param in params.DROPPABLE else None
    m = _UNSUPPORTED_TEXT.search(str(err.get("message") or ""))
    if m is not None and m.group("param") in params.DROPPABLE:
        return m.group("param")
    return None


def _reply_model(resp: Mapping[str, Any]) -> str | None:
    """The model the endpoint says answered (its reply's ``model``), if it says."""
    model = resp.get("model")
    return model.strip() if isinstance(model, str) and model.strip() else None


def _token_count(value: Any) -> int | None:
    """A reply's token count; None when it cannot be true (negative, fractional, absurdly
    large, not a number). Missing counts as 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    count = int(value)
    if count < 0 or count > MAX_PLAUSIBLE_TOKENS:
        return None
    return count


def _used_tokens(resp: Mapping[str, Any]) -> int | None:
    """The tokens a reply says it used (prompt + completion), or None when it does not say or
    says what cannot be true (the rate limit then keeps its estimate)."""
    raw = resp.get("usage")
    if not isinstance(raw, dict):
        return None
    prompt = _token_count(raw.get("prompt_tokens"))
    completion = _token_count(raw.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    return prompt + completion


def _body_cap(max_chars: int) -> int:
    """Bytes a chat reply body may have when its texts are capped at ``max_chars``: room for
    the content and the tool arguments both at the cap, every character escaped as a JSON
    surrogate pair (12 bytes), plus the envelope; so the byte cap, which only keeps a huge body
    from being held whole, never refuses a reply the character check would take."""
    return 24 * max(0, max_chars) + 1024 * 1024


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _vector(value: Any) -> list[float]:
    if isinstance(value, str):  # base64 float32, when an endpoint ignores encoding_format
        raw = base64.b64decode(value)
        return [float(x) for x in struct.unpack(f"<{len(raw) // 4}f", raw)]
    if not isinstance(value, list):
        raise TypeError(f"an embedding is a {type(value).__name__}, not a list of numbers")
    return [float(x) for x in value]


def _first_token_top_logprobs(choice: dict[str, Any]) -> list[tuple[str, float]] | None:
    content = _dig(choice, "logprobs", "content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    tops = first.get("top_logprobs")
    try:
        if not isinstance(tops, list) or not tops:
            return [(str(first["token"]), float(first["logprob"]))]
        return [(str(t["token"]), float(t["logprob"])) for t in tops]
    except (KeyError, TypeError, ValueError):
        return None


# -- structured replies -------------------------------------------------------------------------


def _validator(schema: dict[str, Any], scorer: str | None) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ScorerConfigError(
            scorer or "judge", "schema", f"is not a valid JSON schema: {exc.message}"
        ) from None
    return cls(schema)


def _validation_problem(validator: Any, value: dict[str, Any]) -> str:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path) or "top level"
    return f"arguments do not match the schema at {where}: {error.message}"


def schema_instruction(name: str, description: str, schema: dict[str, Any]) -> str:
    """What ``json`` and ``text`` mode tell the judge: reply with the arguments of ``name`` as
    one JSON object matching ``schema``."""
    return (
        f"Give your answer as the arguments of the function `{name}` ({description}). Reply "
        "with one JSON object and nothing else (no prose, no code fence), matching this JSON "
        f"schema:\n{json.dumps(schema, indent=2)}"
    )


def _with_instruction(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    # Extend the last user turn rather than adding a second one in a row: some chat templates
    # insist on alternating roles.
    if (
        messages
        and messages[-1].get("role") == "user"
        and isinstance(messages[-1].get("content"), str)
    ):
        last = dict(messages[-1])
        last["content"] = f"{last['content']}\n\n{text}"
        return [*messages[:-1], last]
    return [*messages, {"role": "user", "content": text}]


def _correction(name: str, problem: str, mode: str) -> str:
    how = (
        f"Call the function `{name}` again"
        if mode == "tool"
        else "Reply again with only the JSON object"
    )
    return (
        f"Your previous reply could not be used: {problem}. {how}, with arguments that match "
        "the schema exactly."
    )


def extract_json(text: str) -> Any:
    """The first JSON object (or array) embedded in ``text``; ``None`` when there is none."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def _unwrap_call(value: Any, name: str) -> Any:
    """Arguments from a call written as JSON text: ``{"name": ..., "arguments": {...}}``, the
    same under ``"function"``, or a list of such calls; anything else is taken as the arguments."""
    if isinstance(value, list):
        calls = [v for v in value if isinstance(v, dict)]
        if not calls:
            return value
        value = calls[0]
    if isinstance(value, dict):
        inner = value.get("function")
        if isinstance(inner, dict) and inner.get("name") == name:
            value = inner
        if value.get("name") == name:
            for key in ("arguments", "parameters"):
                if key in value:
                    args = value[key]
                    if isinstance(args, str):
                        try:
                            return json.loads(args)
                        except ValueError:
                            return args
                    return args
    return value


def _parse_structured(message: dict[str, Any], name: str, mode: str) -> tuple[str | None, Any, str]:
    """(raw text, parsed dict or None, problem) from one reply message."""
    if mode == "tool":
        calls = message.get("tool_calls") or []
        if isinstance(calls, list) and calls:
            raw = _dig(calls[0], "function", "arguments")
            called = _dig(calls[0], "function", "name")
            if isinstance(raw, dict):  # some servers send the arguments as an object
                raw = json.dumps(raw)
            if called and called != name:
                return raw, None, f"the reply called function {called!r} instead of {name!r}"
            if not isinstance(raw, str) or not raw.strip():
                return raw, None, f"the call to {name!r} has no arguments"
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                return raw, None, f"the arguments of {name!r} are not valid JSON ({exc})"
            if isinstance(parsed, str):
                # Some servers double-encode the arguments.
                found = extract_json(parsed)
                parsed = found if found is not None else parsed
            return _as_object(raw, parsed, name)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        what = "a tool call or JSON text" if mode == "tool" else "a JSON object"
        return content, None, f"the reply has neither {what}"
    found = extract_json(content)
    if found is None:
        return content, None, "the reply contains no JSON object"
    return _as_object(content, _unwrap_call(found, name), name)


def _as_object(raw: str | None, parsed: Any, name: str) -> tuple[str | None, Any, str]:
    if not isinstance(parsed, dict):
        kind = type(parsed).__name__
        return raw, None, f"the arguments of {name!r} are a {kind}, not a JSON object"
    return raw, parsed, ""

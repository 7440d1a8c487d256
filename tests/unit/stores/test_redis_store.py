"""The mode wrappers (store_modes) and the Redis result store, against a real redis-server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from redis_store_support import HMAC_SECRET, _redis

from pytest_llmeval.stores.store_modes import (
    NULL_STORE,
    ReplayStore,
    WriteOnlyStore,
    for_mode,
    inner_store,
    misses_are_errors,
)


class _Mem:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def put(self, key: str, scorer: str, value: Any) -> None:
        self.data[key] = dict(value)

    def close(self) -> None:
        pass


def test_each_mode_is_a_wrapper_chosen_once() -> None:
    mem = _Mem()
    mem.put("k", "s", {"value": 1.0})
    assert for_mode(mem, "use") is mem  # the warm path stays one call on the store
    assert for_mode(mem, "off") is NULL_STORE and for_mode(None, "use") is NULL_STORE
    refresh = for_mode(mem, "refresh")
    assert isinstance(refresh, WriteOnlyStore) and refresh.get("k") is None
    refresh.put("k2", "s", {"value": 0.5})
    assert mem.data["k2"] == {"value": 0.5}
    replay = for_mode(mem, "replay")
    assert isinstance(replay, ReplayStore) and replay.get("k") == {"value": 1.0}
    replay.put("k3", "s", {"value": 0.0})
    assert "k3" not in mem.data
    assert misses_are_errors(replay) and not misses_are_errors(mem)
    assert not misses_are_errors(refresh)
    assert inner_store(replay) is mem and replay.explain_miss("x", None) is None  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a cache mode"):
        for_mode(mem, "sometimes")


def test_the_context_applies_the_mode_to_a_given_store(tmp_path: Path) -> None:
    from pytest_llmeval.core.settings import Settings
    from pytest_llmeval.engine.context import ScoringContext

    mem = _Mem()
    mem.put("k", "s", {"value": 1.0})
    replay = ScoringContext(Settings(cache_mode="replay", cache_dir=tmp_path), cache=mem)
    store = replay.result_cache()
    assert store is not None and store.get("k") == {"value": 1.0}
    store.put("new", "s", {"value": 0.0})
    assert "new" not in mem.data  # a plugin's store is never written in replay
    refresh = ScoringContext(Settings(cache_mode="refresh", cache_dir=tmp_path), cache=mem)
    store = refresh.result_cache()
    assert store is not None and store.get("k") is None
    off = ScoringContext(Settings(cache_mode="off", cache_dir=tmp_path), cache=mem)
    assert off.result_cache() is None
    use = ScoringContext(Settings(cache_dir=tmp_path), cache=mem)
    assert use.result_cache() is mem


def test_store_read_errors_are_misses_and_reprs_hide_the_password(redis_server_auth: Any) -> None:
    from pytest_llmeval.stores.redis_store import RedisStore, RedisUnavailable

    url = f"redis://:s3cret-Pa55-xyz@127.0.0.1:{redis_server_auth.port}/0"
    store = RedisStore(url, prefix="t-unit:", ttl=30)
    store.connect()
    assert "s3cret" not in repr(store) and "s3cret" not in store.url
    store.put("k", "s", {"value": 1.0})
    assert store.get("k") == {"value": 1.0}
    _redis(redis_server_auth).set("t-unit:bad", b"[1, 2]")
    assert store.get("bad") is None and store.get("absent") is None
    store.close()
    bad = RedisStore(url.replace("s3cret-Pa55-xyz", "nope-nope-42"), prefix="t-unit:")
    with pytest.raises(RedisUnavailable) as info:
        bad.connect()
    assert "nope-nope-42" not in str(info.value)
    dead = RedisStore(f"redis://127.0.0.1:{redis_server_auth.port + 0}/0", timeout=0.5)
    assert dead.get("k") is None  # NOAUTH: a read error is a miss
    with pytest.warns(UserWarning, match="could not write") as caught:
        dead.put("a", "s", {"value": 1.0})
        dead.put("b", "s", {"value": 1.0})
    # (only ours: a stray ResourceWarning that garbage collection emits here under load is not)
    assert len([w for w in caught if issubclass(w.category, UserWarning)]) == 1


def test_url_checks_and_tls_scheme() -> None:
    pytest.importorskip("redis")
    import redis

    from pytest_llmeval.core.errors import LLMEvalError
    from pytest_llmeval.stores.redis_store import RedisStore, redact_url

    tls = RedisStore("rediss://:pw-Secret-9@example.invalid:6380/2")
    assert tls._client.connection_pool.connection_class is redis.SSLConnection
    assert tls.url == "rediss://***@example.invalid:6380/2" and "pw-Secret" not in repr(tls)
    with pytest.raises(LLMEvalError, match="use redis://host:port/db") as info:
        RedisStore("http://user:pw-Secret-9@example.invalid/0")
    assert "pw-Secret" not in str(info.value)
    with pytest.raises(LLMEvalError, match="--llm-eval-cache-ttl must be a positive"):
        RedisStore("redis://localhost/0", ttl=0)
    assert redact_url("redis://u:p@h:1/0") == "redis://***@h:1/0"
    assert redact_url("redis://h:1/0?password=p") == "redis://h:1/0?password=***"


def test_tiered_store_outage_notes_unpushed_keys_and_push_keys_sends_them(
    tmp_path: Path, restartable_redis: Any
) -> None:
    from pytest_llmeval.stores.cache import ResultCache
    from pytest_llmeval.stores.cache_entries import CacheWarning
    from pytest_llmeval.stores.redis_store import PushOutcome, RedisStore, TieredStore, push_keys

    server = restartable_redis
    keys = [f"{i:064x}" for i in range(5)]
    local = ResultCache(tmp_path / "local")
    remote = RedisStore(server.url, prefix="t-tier:", timeout=1.0)
    store = TieredStore(local, remote, retry_after=600)
    store.put(keys[0], "s", {"value": 1.0})
    assert store.unpushed == set() and remote.get(keys[0]) == {"value": 1.0}
    server.stop()
    with pytest.warns(CacheWarning, match="stopped answering") as caught:
        store.put(keys[1], "s", {"value": 0.5})
        assert store.get(keys[2]) is None  # Redis left alone while down: a local miss
        store.put(keys[3], "s", {"value": 0.25})
    # one CacheWarning for the outage (other warnings, e.g. a ResourceWarning a loaded machine's
    # garbage collection emits meanwhile, are not this store's); all shown if it fails
    ours = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(ours) == 1, [f"{w.category.__name__}: {w.message}" for w in caught]
    assert store.unpushed == {keys[1], keys[3]}
    assert store.get(keys[1]) == {"value": 0.5}  # the local store has it
    down = push_keys(local, remote, store.unpushed)
    assert down.remaining == 2 and down.pushed == 0
    assert down.error == (
        f"ConnectionRefusedError connecting to 127.0.0.1:{server.port}: "
        "[Errno 111] Connection refused"
    )
    server.start()
    back = push_keys(local, remote, [*store.unpushed, keys[4]])
    assert back == PushOutcome(pushed=2, present=0, missing=1)
    assert remote.get(keys[1]) == {"value": 0.5} and remote.get(keys[3]) == {"value": 0.25}
    assert push_keys(local, remote, store.unpushed) == PushOutcome(present=2)
    store.close()


def test_read_through_never_keeps_a_value_its_scorer_refuses(
    tmp_path: Path, redis_server: Any
) -> None:
    from pytest_llmeval.stores.cache import ResultCache
    from pytest_llmeval.stores.cache_entries import CacheWarning
    from pytest_llmeval.stores.redis_store import RedisStore, TieredStore

    keys = [f"{i:064x}" for i in range(3)]
    writer = RedisStore(redis_server.url, prefix="t-through:")
    for k in keys:
        writer.put(k, "s", {"value": 100})  # a [0, 1] scorer's lookup refuses it
    local = ResultCache(tmp_path / "local")
    store = TieredStore(local, RedisStore(redis_server.url, prefix="t-through:"))
    assert store.get(keys[0]) == {"value": 100}
    with pytest.warns(CacheWarning, match=f"Redis {redis_server.url} prefix 't-through:'"):
        store.reject(keys[0], "'value' 100 is outside the scorer's range [0.0, 1.0]")
    # read, written to the local store (another thread's flush), then refused: removed again
    assert store.get(keys[1]) == {"value": 100}
    store.flush()
    assert local.get(keys[1]) == {"value": 100}
    with pytest.warns(CacheWarning, match=keys[1]):
        store.reject(keys[1], "'value' 100 is outside the scorer's range [0.0, 1.0]")
    assert store.get(keys[2]) == {"value": 100}  # not refused: kept, as any Redis hit
    store.close()
    again = ResultCache(tmp_path / "local")
    assert [again.get(k) for k in keys] == [None, None, {"value": 100}]
    assert store.invalid(keys[0]) is not None and store.invalid(keys[2]) is None
    again.close()
    writer.close()


def test_nan_in_redis_is_refused_by_the_store_and_never_copied(
    tmp_path: Path, redis_server: Any
) -> None:
    from pytest_llmeval.stores.cache import ResultCache
    from pytest_llmeval.stores.cache_entries import CacheWarning
    from pytest_llmeval.stores.redis_store import RedisStore, TieredStore

    key = "ab" * 32
    client = _redis(redis_server)
    client.set("t-nan:" + key, '{"key": "' + key + '", "scorer": "s", "value": {"value": NaN}}')
    local = ResultCache(tmp_path / "local")
    store = TieredStore(local, RedisStore(redis_server.url, prefix="t-nan:"))
    with pytest.warns(CacheWarning, match="NaN is not a JSON number"):
        assert store.get(key) is None
    store.close()
    assert ResultCache(tmp_path / "local").get(key) is None
    client.close()


def test_an_entry_copied_under_another_key_is_a_miss(redis_server: Any) -> None:
    from pytest_llmeval.stores.cache_entries import CacheWarning
    from pytest_llmeval.stores.redis_store import RedisStore

    k1, k2 = "11" * 32, "22" * 32
    store = RedisStore(redis_server.url, prefix="t-bound:")
    store.put(k1, "s", {"value": 1.0})
    client = _redis(redis_server)
    raw = client.get("t-bound:" + k1)
    assert json.loads(raw)["key"] == k1
    client.set("t-bound:" + k2, raw)  # a passing result copied over another case's key
    with pytest.warns(CacheWarning, match=f"invalid entry {k2}: it is bound to another key"):
        assert store.get(k2) is None
    assert store.get(k1) == {"value": 1.0}
    # an entry from before entries were bound (no "key") still reads without a signing key
    client.set("t-bound:" + k2, json.dumps({"scorer": "s", "value": {"value": 0.5}}))
    assert store.get(k2) == {"value": 0.5}
    store.close()
    client.close()


def test_signed_entries_only_with_the_hmac_key_and_the_key_never_shows(
    redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import hmac

    from pytest_llmeval.stores.cache_entries import CacheWarning, Entry
    from pytest_llmeval.stores.redis_store import RedisStore

    k1, k2, k3 = "a1" * 32, "b2" * 32, "c3" * 32
    client = _redis(redis_server)
    monkeypatch.setenv("LLM_EVAL_CACHE_HMAC_KEY", HMAC_SECRET)
    signed = RedisStore(redis_server.url, prefix="t-sig:")
    signed.put(k1, "s", {"value": 0.25})
    raw = client.get("t-sig:" + k1)
    data = json.loads(raw)
    assert HMAC_SECRET.encode() not in raw and len(data["sig"]) == 64
    assert signed.get(k1) == {"value": 0.25}
    forged = [  # (key written, text, what the warning says)
        (k2, json.dumps({"key": k2, "scorer": "s", "value": {"value": 1.0}}), "not signed"),
        (k2, json.dumps({"scorer": "s", "value": {"value": 1.0}}), "not signed"),
        (k1, raw.decode().replace("0.25", "1.0"), "signature does not match"),
        (
            k1,
            json.dumps(
                {
                    **{k: v for k, v in data.items() if k != "sig"},
                    "value": {"value": 1.0},
                    "sig": hmac.new(b"guess", b"x", hashlib.sha256).hexdigest(),
                }
            ),
            "signature does not match",
        ),
        (k2, raw.decode(), "bound to another key"),
        # signed for k1, its key changed to k2: the signature covers the key
        (k2, raw.decode().replace(k1, k2), "signature does not match"),
    ]
    messages = []
    for key, text, problem in forged:
        client.set("t-sig:" + key, text)
        reader = RedisStore(redis_server.url, prefix="t-sig:")  # each warns for its first 3
        with pytest.warns(CacheWarning) as caught:
            assert reader.get(key) is None
        reader.close()
        (message,) = [str(w.message) for w in caught if w.category is CacheWarning]
        assert problem in message, message
        messages.append(message)
    signed.put(k1, "s", {"value": 0.25})
    # what the cache tools push is signed too
    assert signed.push([Entry(k3, "s", {"value": 0.5})]) == (1, 0)
    assert signed.get(k3) == {"value": 0.5}
    assert all(HMAC_SECRET not in m for m in messages) and HMAC_SECRET not in repr(signed)
    # without the key: signed entries read (they cannot be checked), and so do unsigned ones
    monkeypatch.delenv("LLM_EVAL_CACHE_HMAC_KEY")
    plain = RedisStore(redis_server.url, prefix="t-sig:")
    client.set("t-sig:" + k2, forged[0][1])
    assert plain.get(k1) == {"value": 0.25} and plain.get(k2) == {"value": 1.0}
    monkeypatch.setenv("LLM_EVAL_CACHE_HMAC_KEY", "")  # a fork's CI gets an empty secret
    assert not RedisStore(redis_server.url, prefix="t-sig:").signed
    for s in (signed, plain):
        s.close()
    client.close()


def test_a_huge_redis_value_is_refused_after_reading_a_bounded_part(redis_server: Any) -> None:
    """A 20 MiB value under a result key: a lookup fetches at most 8 MiB + 1 byte of it and
    refuses it (what a single GET would have pulled whole into every reader)."""
    from pytest_llmeval.stores.cache_entries import MAX_ENTRY_CHARS, CacheWarning
    from pytest_llmeval.stores.redis_store import RedisStore

    key = "dd" * 32
    client = _redis(redis_server)
    huge = json.dumps({"key": key, "scorer": "s", "value": {"value": 0.5, "x": "y" * (20 << 20)}})
    client.set("t-huge:" + key, huge)
    store = RedisStore(redis_server.url, prefix="t-huge:")
    sent_before = client.info("stats")["total_net_output_bytes"]
    with pytest.warns(CacheWarning, match=f"invalid entry {key}: .*larger than any result"):
        assert store.get(key) is None
    sent = client.info("stats")["total_net_output_bytes"] - sent_before
    # the server sent the bounded part (and a few kB of INFO), not the 20 MiB
    assert MAX_ENTRY_CHARS < sent < MAX_ENTRY_CHARS + 64 * 1024, sent
    assert store.get("ee" * 32) is None  # absent: a plain miss, no warning
    store.close()
    client.delete("t-huge:" + key)
    client.close()

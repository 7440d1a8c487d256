"""The interface of a result store (the built-in SQLite cache or one from a plugin hook), the key
function, and the key's parts: what a store may keep beside a value to say why a lookup missed."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, final, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pytest_llmeval.core.scores import canonical_json

__all__ = ["KeyAbout", "ResultStore", "describe_differences", "input_key", "key_parts"]


def _utf8(text: str) -> bytes:
    # Strings read from JSON may hold lone surrogates ("\ud800" is valid JSON); strict UTF-8
    # cannot encode them. "surrogatepass" encodes every code point on its own (a surrogate as the
    # three bytes ED A0..BF xx, which no valid UTF-8 text contains), so distinct strings keep
    # distinct bytes and the key stays stable.
    return text.encode("utf-8", "surrogatepass")


def input_key(identity_json: str, inputs: Mapping[str, Any]) -> str:
    """The result key: sha256 of the scorer's canonical identity JSON and the canonical JSON of
    the inputs (values JSON cannot express are keyed by their repr)."""
    h = hashlib.sha256(_utf8(identity_json))
    h.update(b"\x00")
    h.update(_utf8(canonical_json(inputs)))
    return h.hexdigest()


# -- key parts ---------------------------------------------------------------------------------

# Option names whose values are never written out, even though the key hashes them.
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|key|secret|password|passwd|token|access_token|auth|authorization|"
    r"credentials?)$",
    re.IGNORECASE,
)
_HIDDEN = "<hidden>"
_INPUTS = "inputs."


def _digest(text: str) -> str:
    return hashlib.sha256(_utf8(text)).hexdigest()[:16]


def _public(name: str, value: Any) -> Any:
    """``value`` as it may be stored in plain text: secrets hidden, URLs without credentials or
    query (which may carry a key)."""
    if _SECRET_NAME.search(name):
        return _HIDDEN
    if isinstance(value, (Mapping, list, tuple)):
        from pytest_llmeval.core.redaction import hide_secrets

        return hide_secrets(value)  # e.g. headers={"Authorization": ...}
    if isinstance(value, str) and "://" in value:
        try:
            url = urlsplit(value)
        except ValueError:
            return _HIDDEN
        if url.scheme and url.hostname:
            host = url.hostname + (f":{url.port}" if url.port else "")
            return urlunsplit((url.scheme, host, url.path, "", ""))
    return value


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and not prefix.startswith("options."):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        name = prefix.rsplit(".", 1)[-1]
        out[prefix] = _public(name, value)


def key_parts(identity: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a result key, flat: ``version``, ``code``, ``options.<name>``,
    ``extra.prompt_sha256``, ``extra.judge.model``, ... and ``inputs.<field>`` (a short hash of
    each input, never the text). Secrets and URL credentials are left out; the key itself still
    covers them, so two keys may differ where their parts look alike."""
    parts: dict[str, Any] = {}
    _flatten("", {k: v for k, v in identity.items() if k != "name"}, parts)
    for name, value in inputs.items():
        parts[_INPUTS + str(name)] = _digest(canonical_json(value))
    return parts


def inputs_digest(parts: Mapping[str, Any]) -> str:
    """One hash over the input hashes of ``parts``: finds entries recorded for the same inputs."""
    return _digest(canonical_json({k: v for k, v in parts.items() if k.startswith(_INPUTS)}))


_LABELS = {
    "version": "scorer version",
    "code": "scorer code",
    "extra.prompt_sha256": "prompt",
}
# Parts whose values are hashes: saying they differ is all there is to say.
_HASHED = ("code", "extra.prompt_sha256", "sha256")


def _label(path: str) -> str:
    if path in _LABELS:
        return _LABELS[path]
    if path.startswith("options."):
        return "option " + path[len("options.") :]
    if path.startswith(_INPUTS):
        return "input " + path[len(_INPUTS) :]
    if path.startswith("extra."):
        path = path[len("extra.") :]
    return path.replace(".", " ").replace("_", " ")


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else canonical_json(value)
    return text if len(text) <= 60 else text[:57] + "..."


_UNSET = object()


def describe_differences(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between two entries' parts, one phrase per part, key-identity parts first
    (judge model, prompt, options) and inputs last, e.g. ``judge model: recorded 'local', now
    'gpt-4o-mini'``."""
    out: list[tuple[bool, str]] = []
    for path in sorted(set(recorded) | set(now)):
        r, n = recorded.get(path, _UNSET), now.get(path, _UNSET)
        if r == n and type(r) is type(n):
            continue
        label = _label(path)
        opaque = path.startswith(_INPUTS) or path.endswith(_HASHED) or _HIDDEN in (r, n)
        if r is _UNSET:
            phrase = (
                f"{label} (given now, not when recorded)"
                if opaque
                else f"{label}: unset when recorded, now {_show(n)}"
            )
        elif n is _UNSET:
            phrase = (
                f"{label} (given when recorded, not now)"
                if opaque
                else f"{label}: recorded {_show(r)}, unset now"
            )
        elif opaque:
            phrase = f"{label} (other content)"
        else:
            phrase = f"{label}: recorded {_show(r)}, now {_show(n)}"
        out.append((path.startswith(_INPUTS), phrase))
    return [phrase for _, phrase in sorted(out, key=lambda p: p[0])]


@final
@dataclass(frozen=True)
class KeyAbout:
    """What a result key was made of, for a store that keeps it to explain misses.

    ``locator`` names "the same case" across runs (scorer, test file, test, case id) when a test
    is running, else None; ``case`` is how messages name that case (``faq.jsonl:3``)."""

    scorer: str
    parts: Mapping[str, Any] = field(default_factory=dict)
    locator: str | None = None
    case: str | None = None

    @property
    def inputs(self) -> str:
        return inputs_digest(self.parts)

    def parts_json(self) -> str:
        # ASCII, so a lone surrogate in an option value survives SQLite's UTF-8.
        return json.dumps(self.parts, sort_keys=True, ensure_ascii=True, default=repr)


@runtime_checkable
class ResultStore(Protocol):
    """Maps a result key to the JSON-safe value of a score. A read error must be a miss."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, scorer: str, value: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ExplainingStore(ResultStore, Protocol):
    """A store that also keeps each key's parts and can say why a key is missing (optional: the
    pipeline uses it when a store has ``explain_miss``)."""

    def put(
        self, key: str, scorer: str, value: Mapping[str, Any], about: KeyAbout | None = None
    ) -> None: ...

    def explain_miss(self, key: str, about: KeyAbout) -> str | None: ...

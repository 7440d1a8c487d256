"""Secrets kept out of everything pytest-llmeval shows or stores.

A URL may carry credentials (``http://user:password@host/v1``, ``?api_key=...``) and an error
text may carry a URL, an ``Authorization`` header or an API key that an endpoint echoed back.
:func:`redact_url` and :func:`redact_text` replace those secrets with :data:`MASK` and leave the
rest as it was, so the text still says which host, path and parameter were involved:

- the user-info of a URL (``user:password@``, or a lone user name, which is often a token) becomes
  ``***@``;
- the value of a query (or fragment) parameter whose name looks secret (:func:`is_secret_name`)
  becomes ``***``; the path is left alone;
- in free text, besides every ``scheme://`` URL: ``Authorization: Bearer ...`` and other
  credential headers or assignments, strings shaped like well-known API keys (``sk-...``), and
  the value of every :class:`~pytest_llmeval.core.settings.Secret` made in this process
  (:func:`remember_secret`) or given by the caller.

Redaction is applied where a value is made (settings reprs, error messages, the report's judge URL,
log records of the HTTP client), so every output built from it inherits it. Standard library
only, cheap to import.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, final
from urllib.parse import quote, unquote_plus

__all__ = [
    "HIDDEN",
    "MASK",
    "RedactingFilter",
    "hide_secrets",
    "is_secret_name",
    "redact_logs",
    "redact_text",
    "redact_url",
    "remember_secret",
]

#: What a secret is replaced with.
MASK = "***"

#: Parameter names that always hold a secret (compared lower-cased, percent-decoded).
SECRET_NAMES = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "client_secret",
        "sig",
        "signature",
        "auth",
        "authorization",
        "x-api-key",
        "credential",
        "credentials",
        "jwt",
        "session",
        "sessionid",
    }
)
#: Any parameter whose name ends with one of these holds a secret too (``subscription-key``,
#: ``X-Amz-Security-Token``, ``X-Amz-Signature``, ``db_password``...).
SECRET_SUFFIXES = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "signature",
    "credential",
    "credentials",
)

#: Remembered secrets shorter than this are not searched for in free text: every text is searched
#: for them, and a short value (the key "test" or "dummy" a local server is given) would blank out
#: ordinary words of every message. Real keys and passwords are longer; URL user-info and secret
#: parameters are masked whatever their length.
MIN_REMEMBERED = 8

_remembered: set[str] = set()
_remembered_lock = threading.Lock()
_remembered_sorted: tuple[str, ...] = ()


def remember_secret(value: str) -> None:
    """From now on, :func:`redact_text` hides ``value`` (and its percent-encoded form) wherever
    it appears. :class:`~pytest_llmeval.core.settings.Secret` calls this for every value it
    holds."""
    global _remembered_sorted
    if len(value) < MIN_REMEMBERED:
        return
    with _remembered_lock:
        if value in _remembered:
            return
        _remembered.add(value)
        # Longest first: a secret that contains another is replaced whole.
        _remembered_sorted = tuple(sorted(_remembered, key=len, reverse=True))


#: what a hidden value is shown as
HIDDEN = "<hidden>"

#: header-like names whose value is a credential whatever the header (``is_secret_name`` covers
#: parameter-like names)
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "auth", "cookie", "x-api-key"})


def hide_secrets(value: Any) -> Any:
    """``value`` (an option, a scorer's identity: JSON-like) as it may be shown or stored in
    plain text: the value under any secret-looking name, at any depth, as :data:`HIDDEN` (a
    scorer's ``password=``, ``token=``, ``headers={"Authorization": ...}``), and every URL without
    its credentials. What is hashed (a cache key) may keep them; what is written may not."""
    if isinstance(value, Mapping):
        return {
            k: HIDDEN
            if isinstance(k, str)
            and (is_secret_name(k) or k.strip().lower() in _SECRET_HEADERS)
            and v not in (None, "")
            else hide_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [hide_secrets(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


def is_secret_name(name: str) -> bool:
    """Whether a query parameter (or header, or assignment) called ``name`` holds a secret:
    one of :data:`SECRET_NAMES`, or a name ending with one of :data:`SECRET_SUFFIXES`
    (case-insensitive, percent-decoded)."""
    try:
        plain = unquote_plus(name)
    except (TypeError, ValueError):  # pragma: no cover - unquote_plus takes any str
        plain = name
    plain = plain.strip().strip("[]").strip().lower()
    return plain in SECRET_NAMES or plain.endswith(SECRET_SUFFIXES)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def redact_url(url: str) -> str:
    """``url`` with its user-info and the values of its secret-looking query and fragment
    parameters replaced by :data:`MASK` (``http://***@host:8080/v1?api_key=***&x=1``).

    Nothing else changes (no normalisation), the result is redacted again to itself, and a
    string that is not a URL comes back as it was. Works without a scheme
    (``user:pw@host/v1``), with IPv6 hosts, and with an unencoded ``@`` in the password (the
    user-info ends at the last ``@`` before the path).
    """
    if not url:
        return url
    head = ""
    rest = url
    m = _SCHEME.match(url)
    if m is not None and url[m.end() : m.end() + 2] == "//":
        head, rest = url[: m.end() + 2], url[m.end() + 2 :]
    elif url.startswith("//"):
        head, rest = "//", url[2:]
    elif m is not None and "@" not in url[: _authority_end(url)]:
        # "mailto:x", "redis:..." without "//": no authority, only parameters to look at.
        head, rest = url[: m.end()], url[m.end() :]
    end = _authority_end(rest)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = f"{MASK}@{authority.rsplit('@', 1)[1]}"
    return head + authority + _redact_tail(tail)


def _authority_end(text: str) -> int:
    return min(
        (i for i in (text.find("/"), text.find("?"), text.find("#")) if i >= 0), default=len(text)
    )


def _redact_tail(tail: str) -> str:
    """Path, query and fragment: the secret parameters of the query and fragment masked."""
    before, hash_, fragment = tail.partition("#")
    path, question, query = before.partition("?")
    if question:
        query = _redact_params(query)
    if hash_ and "=" in fragment:  # "#access_token=..." (OAuth implicit flow)
        fragment = _redact_params(fragment)
    return path + question + query + hash_ + fragment


def _redact_params(params: str) -> str:
    pieces = params.split("&")
    for i, piece in enumerate(pieces):
        # ";" separates parameters for some servers: a secret after one is masked to the end
        # of the piece, so a value holding a raw ";" is not half shown either.
        subs = piece.split(";")
        for j, sub in enumerate(subs):
            name, eq, value = sub.partition("=")
            if eq and value and is_secret_name(name):
                pieces[i] = ";".join([*subs[:j], f"{name}={MASK}"])
                break
    return "&".join(pieces)


# -- free text ---------------------------------------------------------------------------------


@final
class _TextPatterns:
    """The free-text patterns, compiled on first use (importing this module stays cheap: most
    runs never redact a text)."""

    def __init__(self) -> None:
        # The user-info of a URL runs to the last "@" before the host, whatever characters it
        # holds (a quote in a password must not end it early and leave the rest shown).
        self.userinfo = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#]*@")
        # A URL ends at white space or a quote; trailing punctuation is peeled off (_url_match).
        self.url = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`]+")
        # A query parameter in text that is no whole URL (a path, a URL without a scheme, a URL
        # cut short): "?token=abc", "&sig=abc".
        self.param = re.compile(r"(?<=[?&;#])([A-Za-z0-9_.%\-\[\]]+)=([^\s&#\"'<>`]+)")
        # "Authorization: Bearer abc", "'authorization': 'Basic abc'", "Proxy-Authorization=..."
        self.auth_header = re.compile(
            r"(?i)\b((?:proxy-)?authorization)([\"']?\s*[:=]\s*[\"']?)"
            r"((?:bearer|basic|token|digest|apikey)\s+)?([^\s\"',;}\]]+)"
        )
        self.bearer = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]+=*)")
        # "api_key=abc", "x-api-key: abc", "'client_secret': 'abc'", "password=abc".
        self.assignment = re.compile(
            r"(?i)(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]*(?:api[-_]?key|access[-_]?token|auth[-_]?token|"
            r"refresh[-_]?token|secret|password|passwd))([\"']?\s*[:=]\s*[\"']?)"
            r"([^\s\"',;&}\]]+)"
        )
        # Strings shaped like well-known API keys, kept with their prefix so the kind stays
        # visible: OpenAI (``sk-``, also the masked ``sk-abc***xyz`` endpoints echo), Stripe,
        # Hugging Face, GitHub, Slack, Google, AWS. The tails are the keys' own shapes, so
        # ordinary words (``hf_hub_download``, ``disk-space``) are left alone.
        self.keylike = re.compile(
            r"(?<![A-Za-z0-9_\-*.])(?:"
            r"(sk-)[A-Za-z0-9_\-*.]{3,}[A-Za-z0-9_\-*]"
            r"|((?:sk|rk|pk)_(?:live|test)_)[A-Za-z0-9]{8,}"
            r"|(hf_)[A-Za-z0-9]{20,}"
            r"|(gh[pousr]_)[A-Za-z0-9]{20,}"
            r"|(github_pat_)[A-Za-z0-9_]{20,}"
            r"|(xox[abprs]-)[A-Za-z0-9\-]{10,}"
            r"|(AIza)[0-9A-Za-z_\-]{30,}"
            r"|(AKIA)[0-9A-Z]{16}"
            r")"
        )


@functools.cache
def _patterns() -> _TextPatterns:
    return _TextPatterns()


_TRAILING = ".,;:!?"
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_PEEL = ".,:!?)]}"


def _placeholder(value: str) -> bool:
    """A value that stands for a secret in help text (``sk-...``, ``$OPENAI_API_KEY``,
    ``<key>``) or is masked already (``***``): left as it is, so that hints stay readable."""
    core = value.rstrip(".…")
    return len(core) < 4 or value.startswith(("$", "<", "{", MASK))


def _url_match(m: re.Match[str]) -> str:
    found = m.group()
    # Closing brackets without their opening one in the URL belong to the text around it.
    unopened = {c: found.count(c) - found.count(o) for c, o in _CLOSERS.items()}
    end = len(found)
    while end:
        last = found[end - 1]
        if last in _TRAILING:
            end -= 1
        elif last in unopened and unopened[last] > 0:
            unopened[last] -= 1
            end -= 1
        else:
            break
    return redact_url(found[:end]) + found[end:]


def _param_match(m: re.Match[str]) -> str:
    name, value = m.group(1), m.group(2)
    if not is_secret_name(name) or value.startswith(MASK):
        return m.group(0)
    core = value.rstrip(_PEEL)
    return f"{name}={MASK}{value[len(core) :]}"


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret it shows replaced by :data:`MASK`: each ``scheme://`` URL as
    :func:`redact_url` does, ``Authorization`` headers, ``Bearer`` tokens, secret assignments
    (``api_key=...``), strings shaped like API keys (``sk-...`` becomes ``sk-***``), the given
    ``secrets`` (any non-empty value) and every value :func:`remember_secret` was given (of at
    least :data:`MIN_REMEMBERED` characters), each also in its percent-encoded form.

    Redact before cutting a text short: a cut can leave half a URL that no longer looks like one.
    """
    if not text:
        return text
    known = [s for s in secrets if s]
    known.extend(_remembered_sorted)
    for secret in sorted(set(known), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
        encoded = quote(secret, safe="")
        if encoded != secret and encoded in text:
            text = text.replace(encoded, MASK)
    p = _patterns()
    if "://" in text:
        text = p.userinfo.sub(lambda m: f"{m.group(1)}{MASK}@", text)
        text = p.url.sub(_url_match, text)
    if "=" in text:
        text = p.param.sub(_param_match, text)
    text = p.auth_header.sub(
        lambda m: (
            m.group(0)
            if _placeholder(m.group(4))
            else f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{MASK}"
        ),
        text,
    )
    text = p.bearer.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = p.assignment.sub(
        lambda m: m.group(0) if _placeholder(m.group(3)) else f"{m.group(1)}{m.group(2)}{MASK}",
        text,
    )
    return p.keylike.sub(lambda m: f"{next(g for g in m.groups() if g)}{MASK}", text)


# -- log records -------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """A logger filter that redacts each record's message (:func:`redact_text`).

    The HTTP client logs every request URL (``HTTP Request: POST http://host/v1/...?api_key=``)
    at INFO: the filter sits on that logger, so pytest's log capture, ``-rA``, ``--log-file``
    and any handler a user adds see the redacted text."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging module's to report, not ours
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


_FILTER = RedactingFilter()
_filtered: set[str] = set()


def redact_logs(*names: str) -> None:
    """Put :class:`RedactingFilter` on the loggers ``names`` (once each). A logger filter applies
    to the records made by that logger itself, so name the logger that logs, not a parent."""
    for name in names:
        with _remembered_lock:
            if name in _filtered:
                continue
            _filtered.add(name)
        logging.getLogger(name).addFilter(_FILTER)

"""The redaction functions (pytest_llmeval/core/redaction.py): a table of URLs and texts, the
property that a secret given never comes back, and the log filter."""

from __future__ import annotations

import logging
import uuid
from urllib.parse import quote

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from pytest_llmeval.core.redaction import (
    MASK,
    is_secret_name,
    redact_logs,
    redact_text,
    redact_url,
    remember_secret,
)

URLS = [
    # user-info, whole (a lone user name is often a token)
    ("http://user:s3cret@host/v1", "http://***@host/v1"),
    ("https://TOKEN123@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
    ("redis://:pass@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
    ("rediss://default:pw@cache.example:6380/2", "rediss://***@cache.example:6380/2"),
    # ports and IPv6 hosts stay as they are
    ("http://u:p@[::1]:8080/v1", "http://***@[::1]:8080/v1"),
    ("http://[2001:db8::7]:443/v1?api_key=abc", "http://[2001:db8::7]:443/v1?api_key=***"),
    ("http://u:p@[fe80::1%25eth0]/x", "http://***@[fe80::1%25eth0]/x"),
    # percent-encoded user-info, and an unencoded "@" in the password (the last "@" ends it)
    ("http://us%40er:p%40ss%2Fword@host/v1", "http://***@host/v1"),
    ("http://user:p@ss@host:1/v1", "http://***@host:1/v1"),
    # secret-looking query parameters, case-insensitive, by name or by suffix
    ("http://h/v1?api_key=SECRET&model=x", "http://h/v1?api_key=***&model=x"),
    ("http://h/v1?API_KEY=S&Key=T&token=U", "http://h/v1?API_KEY=***&Key=***&token=***"),
    (
        "http://h/?access_token=a&password=b&secret=c",
        "http://h/?access_token=***&password=***&secret=***",
    ),
    (
        "http://h/?sig=a&signature=b&auth=c&x-api-key=d",
        "http://h/?sig=***&signature=***&auth=***&x-api-key=***",
    ),
    (
        "https://h/o?subscription-key=a&X-Amz-Security-Token=b",
        "https://h/o?subscription-key=***&X-Amz-Security-Token=***",
    ),
    (
        "http://h/?db_password=a&client_secret=b&apikey=c",
        "http://h/?db_password=***&client_secret=***&apikey=***",
    ),
    ("http://h/?api%5Fkey=a", "http://h/?api%5Fkey=***"),  # a percent-encoded name
    # other parameters, empty values and flags stay
    ("http://h/v1?api-version=2024-10-21&model=m", "http://h/v1?api-version=2024-10-21&model=m"),
    ("http://h/v1?api_key=&token", "http://h/v1?api_key=&token"),
    # ";" separated parameters: a secret after one is masked to the end of its piece
    ("http://h/?a=1;token=abc;def&b=2", "http://h/?a=1;token=***&b=2"),
    # fragments: parameters are masked there too, a plain anchor stays
    ("http://h/cb#access_token=abc&state=1", "http://h/cb#access_token=***&state=1"),
    ("http://h/doc#section-key", "http://h/doc#section-key"),
    ("http://u:p@h/p?key=1#top", "http://***@h/p?key=***#top"),
    # "key=" in the path is a path, not a parameter
    ("http://h/key=abc/v1?x=1", "http://h/key=abc/v1?x=1"),
    ("http://h/v1/api_key=abc", "http://h/v1/api_key=abc"),
    # no scheme
    ("user:pw@host:8080/v1?token=t", "***@host:8080/v1?token=***"),
    ("//user:pw@host/v1", "//***@host/v1"),
    ("localhost:8080/v1?api_key=k", "localhost:8080/v1?api_key=***"),
    ("/v1/chat?api_key=k", "/v1/chat?api_key=***"),
    # nothing to hide, or not a URL at all
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("(Azure OpenAI endpoint not set)", "(Azure OpenAI endpoint not set)"),
    ("", ""),
    ("http://[::1", "http://[::1"),  # unparsable for urllib: still handled, nothing lost
]


@pytest.mark.parametrize(("url", "shown"), URLS)
def test_redact_url_table(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # redacting again changes nothing


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("API-KEY", True),
        ("x-api-key", True),
        ("sig", True),
        ("My_Token", True),
        ("azure-subscription-KEY", True),
        ("refresh_token", True),
        ("api%5Fkey", True),
        ("api-version", False),
        ("model", False),
        ("signal", False),
        ("keys", False),
        ("tokens", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


TEXTS = [
    (
        "judge error (endpoint http://user:pw1234@h:8/v1?api_key=KEY99): rejected",
        "judge error (endpoint http://***@h:8/v1?api_key=***): rejected",
    ),
    (
        "connect to 'redis://:hunter22@10.0.0.1:6379/0' failed.",
        "connect to 'redis://***@10.0.0.1:6379/0' failed.",
    ),
    ('{"url": "https://a:b@x/y?token=zz"}', '{"url": "https://***@x/y?token=***"}'),
    ("headers: Authorization: Bearer abc.def-123", "headers: Authorization: Bearer ***"),
    ("{'authorization': 'Basic dXNlcjpwYXNz'}", "{'authorization': 'Basic ***'}"),
    ("sent bearer eyJhbGciOi.eyJzdWIi.sig", "sent bearer ***"),
    ("x-api-key: abcdef123 and api_key=zzzz9999", "x-api-key: *** and api_key=***"),
    ("redis password=hunter2, user secret: s3cr", "redis password=***, user secret: ***"),
    ("{'client_secret': 'shh-123456'}", "{'client_secret': '***'}"),
    (
        "Incorrect API key provided: sk-proj-abc***wxyz. See the docs",
        "Incorrect API key provided: sk-***. See the docs",
    ),
    ("hf token hf_AbCdEfGhIjKlMnOpQrStUv", "hf token hf_***"),
    ("AWS AKIAIOSFODNN7EXAMPLE here", "AWS AKIA*** here"),
    # ordinary words and hints stay readable
    (
        "disk-space fine; task-12345; hf_hub_download",
        "disk-space fine; task-12345; hf_hub_download",
    ),
    (
        "Set one (export OPENAI_API_KEY=sk-...; ini llm_eval_api_key_env)",
        "Set one (export OPENAI_API_KEY=sk-...; ini llm_eval_api_key_env)",
    ),
    (
        "password (in the URL or LLM_EVAL_REDIS_PASSWORD)",
        "password (in the URL or LLM_EVAL_REDIS_PASSWORD)",
    ),
    ("the key 3f9a2b... is missing", "the key 3f9a2b... is missing"),
    ("", ""),
]


@pytest.mark.parametrize(("text", "shown"), TEXTS)
def test_redact_text_table(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    assert redact_text(shown) == shown


def test_redact_text_hides_given_and_remembered_secrets_also_percent_encoded() -> None:
    text = "key Zq-given/77 in a body, Zq-given%2F77 in a URL path, and plain words"
    assert redact_text(text, ["Zq-given/77", None, ""]) == (
        "key *** in a body, *** in a URL path, and plain words"
    )
    value = f"Wm-{uuid.uuid4().hex[:12]}"  # remembered for the rest of the process: a new one
    assert redact_text(f"x {value} y") == f"x {value} y"
    remember_secret(value)
    assert redact_text(f"x {value} y") == "x *** y"
    # a remembered value too short to search for is not (it would blank out words)
    remember_secret("dummy")
    assert redact_text("a dummy key") == "a dummy key"


def test_url_in_text_keeps_its_trailing_punctuation() -> None:
    assert redact_text("see (http://u:p@h/v1?key=1).") == "see (http://***@h/v1?key=***)."
    assert redact_text("at http://h/(a)?token=t, then") == "at http://h/(a)?token=***, then"


# -- the property: whatever the secret, it does not come back -----------------------------------

_HOSTS = st.sampled_from(["h.example", "127.0.0.1", "[::1]", "[2001:db8::1]", "localhost"])
_SECRET_PARAMS = st.sampled_from(
    [
        "api_key",
        "ApiKey",
        "token",
        "access_token",
        "password",
        "secret",
        "sig",
        "x-api-key",
        "my_token",
    ]
)
# Raw secrets without the characters that would end the user-info or the value in a URL (a real
# URL percent-encodes them; that case is the quote()d one below).
_RAW = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/?#@&;[]% \t\r\n\x0b\x0c"),
    min_size=4,
    max_size=30,
)
# Values also without quotes and angle brackets, which end a URL in running text (a URL holds
# them percent-encoded); a password may hold them: the user-info runs to its "@".
_RAW_VALUE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/?#@&;[]% \t\r\n\x0b\x0c\"'`<>"),
    min_size=4,
    max_size=30,
)
_ANY = st.text(min_size=4, max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http://", "https://", "redis://", ""]),
    user=st.text(alphabet="abcxyz", max_size=5),
    password=st.one_of(_RAW, _ANY.map(lambda s: quote(s, safe=""))),
    host=_HOSTS,
    port=st.one_of(st.none(), st.integers(1, 65535)),
    param=_SECRET_PARAMS,
    value=st.one_of(_RAW_VALUE, _ANY.map(lambda s: quote(s, safe=""))),
    fragment=st.booleans(),
)
@example(
    scheme="http://",
    user="u",
    password="s3cretpass",
    host="127.0.0.1",
    port=8080,
    param="api_key",
    value="SECRETKEY123",
    fragment=False,
)
def test_redact_url_never_returns_the_secret(
    scheme: str,
    user: str,
    password: str,
    host: str,
    port: int | None,
    param: str,
    value: str,
    fragment: bool,
) -> None:
    where = host + (f":{port}" if port is not None else "")
    url = f"{scheme}{user}:{password}@{where}/v1?model=m&{param}={value}" + (
        f"#{param}={value}" if fragment else ""
    )
    skeleton = f"{scheme}{MASK}@{where}/v1?model=m&{param}={MASK}" + (
        f"#{param}={MASK}" if fragment else ""
    )
    # A secret that is part of what is meant to stay (the host, "model=m") cannot be told apart.
    assume(password not in skeleton and value not in skeleton)
    shown = redact_url(url)
    assert password not in shown and value not in shown
    assert shown == skeleton
    # ... and the same URL inside a message (a URL without a scheme cannot be told from other
    # words there, but its secret parameters can)
    if not scheme:
        url = url.split("@", 1)[1]
    if any(ch.isspace() for ch in password + value):
        return  # white space ends a URL in text; in a real URL it is percent-encoded
    in_text = redact_text(f"error (endpoint {url}): refused")
    assert password not in in_text and value not in in_text


# -- log records -------------------------------------------------------------------------------


def test_log_filter_redacts_the_records_of_its_logger(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test_redaction.http")
    redact_logs("test_redaction.http", "test_redaction.http")  # once, however often asked
    assert len(logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="test_redaction.http"):
        logger.info(
            'HTTP Request: %s %s "%s %d"',
            "POST",
            "http://u:pw9999@h/v1?api_key=K1234",
            "HTTP/1.1",
            200,
        )
        logger.info("nothing to hide: %d", 7)
    assert [r.getMessage() for r in caplog.records] == [
        'HTTP Request: POST http://***@h/v1?api_key=*** "HTTP/1.1 200"',
        "nothing to hide: 7",
    ]
    assert "pw9999" not in caplog.text and "K1234" not in caplog.text

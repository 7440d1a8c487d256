"""The mode wrappers (store_modes) and the Redis result store, against a real redis-server."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT


def _redis(server: Any) -> Any:
    import redis

    return redis.Redis(port=server.port, password=server.password)


@pytest.fixture
def restartable_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from redis_server import RestartableRedis

    server = RestartableRedis(str(tmp_path_factory.mktemp("redis-data")))
    server.start()
    pidfile = Path(server.directory) / "restarted.pid"
    try:
        yield server
    finally:
        server.stop()
        if pidfile.exists():  # the copy the run itself started again
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


HMAC_SECRET = "hmac-Secret-7f3a-do-not-print"


def readme_acl() -> list[list[str]]:
    """The ``user ...`` lines of the users.acl block of the trust model (the caching guide,
    docs/guides/caching.md), each as ACL SETUSER arguments."""
    text = (ROOT / "docs" / "guides" / "caching.md").read_text(encoding="utf-8")
    start = text.index("<!-- redis-acl -->")
    block = text[start:].split("```", 2)[1]
    return [line.split()[1:] for line in block.splitlines() if line.startswith("user ")]

"""Judge throughput against the scripted test server (100 ms added latency per call).

(a) 400 rows through ``pytest_llmeval.score_many("l3score", ...)`` at concurrency 16, cold cache:
    the time and its ratio to the ideal 400 x 0.1 / 16 s (target: ratio <= 1.3).
(c) the same 400 rows again with the cache warm: the number of judge calls (target: 0).

The server runs in its own process by default (``--server process``), as a real endpoint would:
its CPU time then stays out of the measured process. ``--server thread`` runs it in-process
(same GIL as the client) for comparison.

Run: ``python benchmarks/bench_judge.py [--rows 400] [--latency 0.1] [--concurrency 16]``.
Exits non-zero when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _services import test_judge


async def _raw_client(base_url: str, rows: int, concurrency: int) -> None:
    """The same chat calls made by a bare asyncio HTTP/1.1 client over ``concurrency`` kept-alive
    connections: what this machine allows right now, with no SDK and no scoring at all."""
    import asyncio

    host_port = base_url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    body = json.dumps(
        {
            "model": "test-judge",
            "messages": [{"role": "user", "content": "x" * 600}],
            "temperature": 0.0,
            "logprobs": True,
            "top_logprobs": 5,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host_port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    per = [rows // concurrency + (1 if i < rows % concurrency else 0) for i in range(concurrency)]

    async def worker(n: int) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        for _ in range(n):
            writer.write(head + body)
            await writer.drain()
            headers = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in headers.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
        writer.close()

    await asyncio.gather(*(worker(n) for n in per if n))


def raw_baseline(base_url: str, rows: int, concurrency: int) -> float:
    import asyncio

    t0 = time.perf_counter()
    asyncio.run(_raw_client(base_url, rows, concurrency))
    return time.perf_counter() - t0


class _Local:
    """The test server in this process."""

    def __init__(self, latency: float) -> None:
        from pytest_llmeval.testing import OpenAITestServer, text

        self.server = OpenAITestServer(latency=latency).start()
        self.server.set_default(text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)]))
        self.base_url = self.server.base_url

    def stats(self, *, clear: bool = False) -> dict[str, Any]:
        return self.server.stats(clear=clear)


@contextlib.contextmanager
def local_server(latency: float) -> Iterator[_Local]:
    local = _Local(latency)
    try:
        yield local
    finally:
        local.server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-ratio", type=float, default=1.3)
    parser.add_argument("--server", choices=("process", "thread"), default="process")
    parser.add_argument(
        "--repeat", type=int, default=3, help="cold runs (fresh rows each); the best one counts"
    )
    args = parser.parse_args(argv)

    import pytest_llmeval
    from pytest_llmeval.core.settings import JudgeSettings, Secret, Settings

    def make_rows(rep: int) -> list[dict[str, str]]:
        # Distinct inputs per repetition, so that every cold run starts with a cold cache.
        return [
            {
                "input": f"Run {rep}, question {i}: what is {i} + {i}?",
                "expected": str(2 * i),
                "output": f"The answer is {2 * i}.",
            }
            for i in range(args.rows)
        ]

    ideal = args.rows * args.latency / args.concurrency
    serve = test_judge if args.server == "process" else local_server
    print(
        f"rows={args.rows} latency={args.latency}s concurrency={args.concurrency} "
        f"server={args.server} repeat={args.repeat}"
    )

    with tempfile.TemporaryDirectory() as tmp, serve(args.latency) as server:
        judge = JudgeSettings(
            base_url=server.base_url,
            model="test-judge",
            api_key=Secret("sk-bench"),
            concurrency=args.concurrency,
            timeout=30.0,
        )
        pytest_llmeval.configure(
            Settings(judge=judge, cache_mode="use", cache_dir=Path(tmp) / ".llmeval")
        )
        # Warm-up outside the timing: SDK import, connection pool, cache file creation.
        pytest_llmeval.score("l3score", input="warm-up", expected="a", output="a")
        server.stats(clear=True)

        runs: list[tuple[float, float, float, int, int]] = []
        for rep in range(max(1, args.repeat)):
            # The bare-client baseline right before each run: both see the same machine load.
            baseline = raw_baseline(server.base_url, args.rows, args.concurrency)
            server.stats(clear=True)
            rows = make_rows(rep)
            t0, c0 = time.perf_counter(), time.process_time()
            cold = pytest_llmeval.score_many("l3score", rows)
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            stats = server.stats(clear=True)
            calls = stats["requests"].get("chat", 0)
            runs.append((elapsed, cpu, baseline, calls, stats["max_in_flight"]))
            print(
                f"    cold run {rep + 1}: {elapsed:.3f} s (ratio {elapsed / ideal:.3f}), "
                f"bare-client baseline {baseline:.3f} s, {calls} calls, "
                f"CPU {1000 * cpu / max(1, calls):.1f} ms/call"
            )
        elapsed, cpu, baseline, cold_calls, peak = min(runs)
        ratio = elapsed / ideal

        t1 = time.perf_counter()
        warm = pytest_llmeval.score_many("l3score", rows)
        warm_elapsed = time.perf_counter() - t1
        warm_calls = server.stats()["requests"].get("chat", 0)
        pytest_llmeval.get_context().close()

    ok_values = all(abs(v - 0.916827) < 1e-5 for v in cold.values) and warm.values == cold.values
    print(
        f"(a) best cold run: {elapsed:.3f} s for {cold_calls} judge calls, ideal {ideal:.3f} s, "
        f"ratio {ratio:.3f} (target <= {args.max_ratio}); peak in flight {peak}; "
        f"CPU time of this process {cpu:.3f} s ({1000 * cpu / max(1, cold_calls):.1f} ms/call)"
    )
    print(
        f"    baseline (bare asyncio HTTP client, same server, same run): {baseline:.3f} s, "
        f"ratio to ideal {baseline / ideal:.3f}; engine / baseline {elapsed / baseline:.3f}"
    )
    print(
        f"(c) warm: {warm_elapsed:.3f} s, {warm_calls} judge calls (target 0), "
        f"{sum(s.cached for s in warm.scores)} of {len(warm.scores)} from the cache"
    )
    print(f"scores correct and identical cold/warm: {ok_values}")
    all_calls_made = all(r[3] == args.rows for r in runs)
    failed = ratio > args.max_ratio or warm_calls != 0 or not all_calls_made or not ok_values
    print("RESULT:", "FAIL" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

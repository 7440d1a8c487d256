"""HTML report benchmark (issue 10): does a 20,000-record report open and filter fast?

Builds a synthetic run (N records over three scorers, judged texts of a few hundred characters,
some errors, a baseline comparison for a tenth of the records, two gates), renders it with
``pytest_llmeval.report.html.write_html`` and opens it in headless Chromium from ``file://`` with
``#bench=1``. The page writes its own figures (``performance.now()``) on ``<body>``:

* ``ready``: navigation start to the end of the first render (JSON parse, cards, gates, first rows,
  a forced layout): what a reader waits for;
* ``render``: the page script alone;
* one figure per interaction (failed, errored, regressed, text search, sort by score, one
  scorer, back to all): re-filtering all records and re-rendering the visible rows, with a
  forced layout.

The target is under 2 s for ``ready`` and for each interaction at 20,000 records; the script
exits 1 when a figure misses it. The wall time of the whole Chromium process (start-up included)
is printed for reference, not checked.

Usage: python benchmarks/bench_html.py [--records 20000] [--repeat 3] [--keep out.html]
(needs `chromium` on PATH)
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmeval.report.html import write_html

TARGET_MS = 2000.0
WORDS = [
    "the",
    "a",
    "model",
    "answer",
    "question",
    "paris",
    "capital",
    "france",
    "apples",
    "basket",
    "red",
    "green",
    "quickly",
]


def _text(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def synthetic_report(n: int, seed: int = 1) -> dict[str, Any]:
    rnd = random.Random(seed)
    scorers = ("exact_match", "llm_judge", "rouge_l")
    recs: list[dict[str, Any]] = []
    for i in range(n):
        scorer = scorers[i % 3]
        err = "JudgeError: judge timed out after 3 retries" if rnd.random() < 0.02 else None
        score = None if err else rnd.betavariate(4, 2)
        recs.append(
            {
                "file": f"tests/test_suite_{i % 7}.py",
                "test": "test_answers",
                "case_id": f"case-{i // 3:05d}",
                "scorer": scorer,
                "index": 0,
                "score": score,
                "min": 0.5,
                "max": None,
                "passed": None if score is None else score >= 0.5,
                "cached": rnd.random() < 0.5,
                "duration_s": 0.01,
                "rationale": _text(rnd, 30),
                "error": err,
                "where": f"tests/data/qa.jsonl:{i // 3 + 1}",
                "metadata": {},
                "prompt_tokens": 300 if scorer == "llm_judge" else 0,
                "completion_tokens": 60 if scorer == "llm_judge" else 0,
                "judge_calls": 1 if scorer == "llm_judge" else 0,
                "cost_usd": 0.00008 if scorer == "llm_judge" else None,
                "inputs": {
                    "input": _text(rnd, 25),
                    "expected": _text(rnd, 15),
                    "output": _text(rnd, 60) + (" needle" if i % 97 == 0 else ""),
                },
            }
        )
    cases = []
    for r in recs[: n // 10]:
        b = dict(r, score=None if r["score"] is None else min(1.0, r["score"] + 0.05))
        cases.append(
            {
                "key": [r["file"], r["test"], r["case_id"], r["scorer"], r["index"]],
                "baseline": b,
                "current": r,
                "delta": None if r["score"] is None else r["score"] - b["score"],
            }
        )
    check = {
        "metric": "mean",
        "side": "min",
        "bound": 0.6,
        "verdict": "pass",
        "needed": None,
        "interval": {"estimate": 0.66, "low": 0.65, "high": 0.67, "confidence": 0.95},
    }
    return {
        "version": 1,
        "run": {"started": time.time(), "duration_s": 600.0, "exitstatus": 1},
        "aggregates": {},
        "records": recs,
        "gates": [
            {
                "spec": {"scorer": s},
                "verdict": "pass",
                "reason": "",
                "checks": [check],
                "n_cases": n // 3,
                "flaky": [],
            }
            for s in scorers[:2]
        ],
        "comparison": {"baseline": {"git_commit": "0" * 40}, "scorers": [], "cases": cases},
    }


def run_once(chromium: str, page: Path) -> tuple[dict[str, float], float]:
    url = page.resolve().as_uri() + "#bench=1"
    t = time.perf_counter()
    out = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,900",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    wall = time.perf_counter() - t
    m = re.search(r"<body([^>]*)>", out.stdout)
    if out.returncode != 0 or m is None:
        sys.exit(f"chromium failed ({out.returncode}): {out.stderr[-2000:]}")
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))
    if attrs.get("ready") != "1":
        sys.exit("the page script did not finish (no data-ready on <body>)")
    figures = {k[:-3]: float(v) for k, v in attrs.items() if k.endswith("-ms")}
    figures.update({k: float(v) for k, v in attrs.items() if k.endswith("-shown")})
    return figures, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="also keep the page here")
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = args.keep or Path(tmp) / "report.html"
        t = time.perf_counter()
        write_html(page, synthetic_report(args.records))
        build_s = time.perf_counter() - t
        size_mb = page.stat().st_size / 1e6
        print(f"{args.records} records: page {size_mb:.1f} MB, written in {build_s:.2f} s")
        runs = [run_once(chromium, page) for _ in range(args.repeat)]
    keys = [
        "ready",
        "render",
        "bench-failed",
        "bench-errored",
        "bench-regressed",
        "bench-search",
        "bench-sort",
        "bench-scorer",
        "bench-all",
    ]
    print(f"{'figure':<16}{'median ms':>10}{'max ms':>10}  rows shown")
    worst = 0.0
    for k in keys:
        vals = sorted(r[0][k] for r in runs)
        med, mx = vals[len(vals) // 2], vals[-1]
        worst = max(worst, mx)
        shown = runs[0][0].get(f"{k}-shown")
        print(f"{k:<16}{med:>10.1f}{mx:>10.1f}  {'' if shown is None else int(shown)}")
    walls = sorted(w for _, w in runs)
    print(f"chromium process wall time (start-up included): median {walls[len(walls) // 2]:.2f} s")
    ok = worst < TARGET_MS
    print(f"target: every figure under {TARGET_MS:.0f} ms -> {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

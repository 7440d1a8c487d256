"""Reference fidelity: do our classifiers give Autoevals 0.4.1's verdicts on clear cases?

One shared set of labelled cases (``benchmarks/data/agreement_cases.jsonl``: per case the scorer,
its inputs, the choice the reference's question calls for, and for the cases that test an audited
difference, what it tests) is scored on the SAME local judge by:

* ``new``: our scorers as they are (``closed_qa``, ``possible``, ``sql``, ``translation``);
* ``old``: our scorers with the version-2 templates (``benchmarks/data/classifier_prompts_v2.json``,
  the questions before the fidelity change), everything else identical;
* ``autoevals``: Autoevals 0.4.1's ``ClosedQA``, ``Possible``, ``Sql`` and ``Translation``
  (``pip install -e ".[bench]"``), given an ``openai`` client pointed at the same server.

All at temperature 0, with chain of thought (both libraries' default) unless ``--no-cot``. The
judge is the project's local one (Qwen2.5-Coder-1.5B-Instruct Q4_K_M on llama.cpp, installed by
``scripts/setup_local_judge.sh``), started here unless ``--base-url`` names a running
OpenAI-compatible server. A judge error (no valid choice after our one re-ask; Autoevals: no tool
call or a choice outside the set) counts as a disagreement and is shown in its own column.

Prints, per scorer: n, the agreement of each system with the labels, the agreement of ours
(new) with Autoevals, and the same on the audited cases only; with ``--details``, every case's
choices. Exits 1 when ours (new) agrees with the labels less often than Autoevals for any scorer.

Run: ``python benchmarks/bench_agreement.py [--systems old,new,autoevals] [--scorers sql,...]
[--details] [--json results.json [--resume]]``. About 160 judge calls: 15 to 40 minutes on 2
idle cores with chain of thought.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = Path(__file__).resolve().parent / "data"
CASES = DATA / "agreement_cases.jsonl"
OLD_PROMPTS = DATA / "classifier_prompts_v2.json"
SCORERS = ("closed_qa", "possible", "sql", "translation")
SYSTEMS = ("old", "new", "autoevals")
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_ALIAS = "local"
ERROR = "error"


# ------------------------------------------------------------------------------- the judge


def _model_path() -> Path:
    env = os.environ.get("LLM_EVAL_LOCAL_JUDGE_GGUF")
    if env:
        return Path(env)
    root = os.environ.get("PYTEST_LLMEVAL_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "pytest-llmeval"
    return base / "models" / MODEL_FILE


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
            body = json.loads(resp.read().decode("utf-8"))
    except (OSError, ValueError):
        return False
    return any(m.get("id") == MODEL_ALIAS for m in body.get("data", []))


@contextmanager
def local_judge(threads: int) -> Iterator[str]:
    """A llama.cpp server for the local judge (model name ``local``) on a free port."""
    path = _model_path()
    if not path.is_file():
        sys.exit(f"bench_agreement: no judge model at {path}; run scripts/setup_local_judge.sh")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    fd, log_name = tempfile.mkstemp(prefix="bench_agreement_judge_", suffix=".log")
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(path),
        "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "4096", "--n_threads", str(threads),
    ]  # fmt: skip
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"bench_agreement: the local judge did not start; see {log_name}")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


# ------------------------------------------------------------------------------- the systems


def load_cases(path: Path, scorers: tuple[str, ...]) -> list[dict[str, Any]]:
    cases = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        case = json.loads(line)
        if case["scorer"] not in SCORERS:
            sys.exit(f"{path}:{lineno}: unknown scorer {case['scorer']!r} (one of {SCORERS})")
        if case["scorer"] in scorers:
            cases.append(case)
    return cases


class Ours:
    """Our scorers through the public ``score()`` on a context whose judge is the local one."""

    def __init__(self, base_url: str, *, use_cot: bool) -> None:
        from pytest_llmeval.core.settings import JudgeSettings, Settings
        from pytest_llmeval.engine.context import ScoringContext, set_context
        from pytest_llmeval.engine.registry import default_registry

        judge = JudgeSettings(
            base_url=base_url,
            model=MODEL_ALIAS,
            temperature=0.0,
            seed=0,
            timeout=600.0,
            max_tries=2,
            overall_timeout=1200.0,
            concurrency=1,
            mode="tool",
        )
        self._tmp = tempfile.TemporaryDirectory(prefix="bench_agreement_")
        self.ctx = ScoringContext(
            Settings(judge=judge, cache_mode="off", cache_dir=Path(self._tmp.name))
        )
        self._prev = set_context(self.ctx)
        self.scorers: dict[tuple[str, str], Any] = {}
        old_prompts = json.loads(OLD_PROMPTS.read_text(encoding="utf-8"))
        for name in SCORERS:
            cls = default_registry.get(name)
            self.scorers["new", name] = cls(use_cot=use_cot)
            spec = old_prompts[name]
            if dict(spec["choice_scores"]) != dict(cls.choice_scores):
                sys.exit(f"bench_agreement: {name}: the old choices differ from today's")
            old = type(
                cls.__name__ + "V2",
                (cls,),
                {"template": spec["template"], "version": spec["version"]},
            )
            self.scorers["old", name] = old(use_cot=use_cot)

    def choose(self, system: str, case: dict[str, Any]) -> str:
        from pytest_llmeval import score
        from pytest_llmeval.core.errors import JudgeError

        try:
            result = score(self.scorers[system, case["scorer"]], **case["inputs"])
        except JudgeError:
            return ERROR
        return str(result.metadata["choice"])

    def close(self) -> None:
        from pytest_llmeval.engine.context import set_context

        set_context(self._prev)
        self.ctx.close()
        self._tmp.cleanup()


class Autoevals:
    """Autoevals 0.4.1's classifiers with an ``openai`` client on the same server."""

    def __init__(self, base_url: str, *, use_cot: bool) -> None:
        try:
            import autoevals
        except ImportError:
            sys.exit('bench_agreement: autoevals is missing; pip install -e ".[bench]"')
        from autoevals.version import VERSION
        from openai import OpenAI

        if VERSION != "0.4.1":
            sys.exit(f"bench_agreement: autoevals {VERSION} is installed; the reference is 0.4.1")
        client = OpenAI(base_url=base_url, api_key="local", timeout=600.0, max_retries=1)
        kw: dict[str, Any] = {
            "model": MODEL_ALIAS,
            "temperature": 0,
            "client": client,
            "use_cot": use_cot,
        }
        self.scorers = {
            "closed_qa": autoevals.ClosedQA(**kw),
            "possible": autoevals.Possible(**kw),
            "sql": autoevals.Sql(**kw),
            "translation": autoevals.Translation(**kw),
        }

    def choose(self, system: str, case: dict[str, Any]) -> str:
        inputs = dict(case["inputs"])
        output = inputs.pop("output")
        expected = inputs.pop("expected", None)
        try:
            result = self.scorers[case["scorer"]].eval(output=output, expected=expected, **inputs)
        except (KeyError, ValueError):  # no tool call, or a choice outside the set
            return ERROR
        if result.error is not None:
            return ERROR
        return str(result.metadata["choice"])

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------- the table


def _pct(hits: int, n: int) -> str:
    return f"{hits}/{n} ({100 * hits / n:.0f}%)" if n else "-"


def table(cases: list[dict[str, Any]], systems: tuple[str, ...]) -> tuple[str, list[str]]:
    """The printed table and the scorers where ours (new) trails Autoevals on the labels."""
    head = ["scorer", "n"] + [f"{s} = label" for s in systems]
    pair = "new" in systems and "autoevals" in systems
    if pair:
        head += ["new = autoevals"]
    head += ["audited cases: " + " / ".join(systems), "errors: " + " / ".join(systems)]
    rows = [head]
    worse = []
    for name in (*SCORERS, "all"):
        sel = [c for c in cases if name in (c["scorer"], "all") and c.get("got")]
        if not sel:
            continue
        # A system's column counts the cases it scored (all of them unless a run was cut short).
        by = {s: [c for c in sel if s in c["got"]] for s in systems}
        hits = {s: sum(c["got"][s] == c["label"] for c in by[s]) for s in systems}
        row = [name, str(len(sel))] + [_pct(hits[s], len(by[s])) for s in systems]
        if pair:
            both = [c for c in sel if "new" in c["got"] and "autoevals" in c["got"]]
            row.append(_pct(sum(c["got"]["new"] == c["got"]["autoevals"] for c in both), len(both)))
        row.append(
            " / ".join(
                _pct(
                    sum(c["got"][s] == c["label"] for c in by[s] if c.get("audit")),
                    sum(1 for c in by[s] if c.get("audit")),
                ).split(" ")[0]
                for s in systems
            )
        )
        row.append(" / ".join(str(sum(c["got"][s] == ERROR for c in by[s])) for s in systems))
        rows.append(row)
        if pair and name != "all":
            # Compared on the cases both scored.
            new_hits = sum(c["got"]["new"] == c["label"] for c in both)
            auto_hits = sum(c["got"]["autoevals"] == c["label"] for c in both)
            if new_hits < auto_hits:
                worse.append(name)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines), worse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", help="a running OpenAI-compatible server serving model 'local'")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--scorers", default=",".join(SCORERS))
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    ap.add_argument(
        "--no-cot",
        action="store_true",
        help="use_cot=False in both libraries: the choice only, no reasons (3 to 5x fewer tokens)",
    )
    ap.add_argument("--details", action="store_true", help="print every case's choices")
    ap.add_argument(
        "--json", type=Path, help="write every case's choices to this file (after each case)"
    )
    ap.add_argument(
        "--table-only",
        action="store_true",
        help="print the table of the choices in --json FILE without calling the judge",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the choices already in --json FILE and score only what is missing",
    )
    args = ap.parse_args(argv)
    systems = tuple(s for s in args.systems.split(",") if s)
    scorers = tuple(s for s in args.scorers.split(",") if s)
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"--systems: unknown system {s!r} (one of {', '.join(SYSTEMS)})")
    for s in scorers:
        if s not in SCORERS:
            ap.error(f"--scorers: unknown scorer {s!r} (one of {', '.join(SCORERS)})")
    cases = load_cases(args.cases, scorers)

    @contextmanager
    def judge() -> Iterator[str]:
        if args.base_url:
            yield args.base_url
        else:
            with local_judge(args.threads) as url:
                yield url

    use_cot = not args.no_cot
    if args.table_only:
        args.resume = True
    if args.resume:
        if not args.json or not args.json.is_file():
            ap.error("--resume needs --json FILE naming the results of an earlier run")
        done = json.loads(args.json.read_text(encoding="utf-8"))
        if done.get("use_cot") != use_cot:
            ap.error(f"--resume: {args.json} was measured with use_cot={done.get('use_cot')}")
        got = {(c["scorer"], c["id"]): c.get("got", {}) for c in done["cases"]}
        for case in cases:
            case["got"] = dict(got.get((case["scorer"], case["id"]), {}))

    # Round robin over the scorers and, within a scorer, over the labels; every system on a case
    # before the next case: a run cut short still has every scorer, every label and every
    # system on the same cases. Cases already scored (--resume) are skipped.
    def round_robin(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        width = max(map(len, groups), default=0)
        return [g[i] for i in range(width) for g in groups if i < len(g)]

    def pending(c: dict[str, Any]) -> bool:
        return not set(systems) <= set(c.get("got", {}))

    queues = []
    for name in SCORERS:
        mine = [c for c in cases if c["scorer"] == name and pending(c)]
        labels = list(dict.fromkeys(c["label"] for c in mine))
        queues.append(round_robin([[c for c in mine if c["label"] == lab] for lab in labels]))
    order = round_robin(queues)

    t0 = time.monotonic()
    with contextlib.nullcontext("") if args.table_only else judge() as url:
        live = not args.table_only
        ours = Ours(url, use_cot=use_cot) if live and {"old", "new"} & set(systems) else None
        auto = Autoevals(url, use_cot=use_cot) if live and "autoevals" in systems else None
        try:
            for case in [] if args.table_only else order:
                for system in systems:
                    got = case.setdefault("got", {})
                    if system in got:
                        continue
                    runner = auto if system == "autoevals" else ours
                    assert runner is not None
                    t = time.monotonic()
                    got[system] = runner.choose(system, case)
                    mark = "ok" if got[system] == case["label"] else "MISS"
                    print(
                        f"[{system}] {case['scorer']}/{case['id']}: {got[system]} "
                        f"(label {case['label']}, {mark}, {time.monotonic() - t:.1f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
                if args.json:
                    args.json.write_text(
                        json.dumps({"use_cot": use_cot, "cases": cases}, ensure_ascii=False),
                        encoding="utf-8",
                    )
        finally:
            if ours is not None:
                ours.close()
    elapsed = time.monotonic() - t0
    missing = {s: sum(s not in c.get("got", {}) for c in cases) for s in systems}

    text, worse = table(cases, systems)
    print(text)
    timing = f" (this run: {elapsed:.0f} s)" if not args.table_only else ""
    print(
        f"\n{len(cases)} cases, {', '.join(systems)}, on the local judge "
        "(Qwen2.5-Coder-1.5B-Instruct Q4_K_M), temperature 0, "
        f"{'no chain of thought' if args.no_cot else 'chain of thought'}{timing}"
    )
    for s, k in missing.items():
        if k:
            print(f"NOTE: {s} did not score {k} of the {len(cases)} cases (the run was cut short)")
    if args.details:
        print()
        for c in cases:
            got = " ".join(f"{s}={c.get('got', {}).get(s, '-')}" for s in systems)
            print(f"{c['scorer']}/{c['id']}: label={c['label']} {got}  {c.get('audit', '')}")
    if worse:
        print(f"\nFAIL: ours agrees with the labels less often than Autoevals: {', '.join(worse)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

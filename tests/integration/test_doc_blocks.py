"""Every fenced block of README.md and docs/**/*.md is run or checked (issue 23): a test file is
run with ``--llm-eval`` against the scripted judge (the OpenAI-compatible test server), a script is
executed, shell commands are run in the page's project, and output shown on a page is compared with
what the block before it really printed. What cannot run here is marked ``not-run`` with a reason
and still compiled or parsed. The directives: tests/helpers/doc_blocks.py (DIRECTIVES)."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from doc_blocks import DIRECTIVES, Block, blocks, doc_files, missing_lines, terminal_text
from paths import ROOT
from pty_run import run_on_pty, terminal_env

from pytest_llmeval.core.options import OPTIONS
from pytest_llmeval.testing import OpenAITestServer, text, tool_call

PAGES = [p.relative_to(ROOT) for p in doc_files(ROOT)]
KINDS = {d.split()[0].rstrip(":") for d in DIRECTIVES}
FLAGS = {o.flag for o in OPTIONS if o.flag}
#: a Redis URL on this machine in a command: the page's redis-server is put in its place
_LOCAL_REDIS = re.compile(r"(redis://(?:[^@/\s]*@)?127\.0\.0\.1:)\d+")


def _block(body: dict[str, Any], tag: str) -> str:
    """The text of a prompt's ``<tag_SUFFIX>`` block (the candidate answer, a response), or ""."""
    prompt = "\n".join(
        m["content"] for m in body.get("messages", []) if isinstance(m.get("content"), str)
    )
    m = re.search(rf"<{tag}_(\w+)>(.*?)</{tag}_\1>", prompt, re.DOTALL)
    return m[2] if m else ""


def _judge(body: dict[str, Any]) -> Any:
    """The scripted judge: the answer a good judge gives the docs' examples. A forced tool
    call gets every required argument (an enum its best-looking choice: "Y", "C" (Factuality's
    "same details"), "Yes", else the first; the last for a rude reply and for
    knowledge_retention's "does it forget?"); a logprobs request gets "Yes" at P=0.9 (L3Score) or
    "5" (G-Eval).

    judges.md's rules, as that page states them: the judge says No (P(yes)=0.08) to an answer
    that says "bad" (Battle: No when response 1 says "bad", else Yes, whichever comes first),
    and to one that says "maybe" when the request's seed is odd."""
    asked = json.dumps(body.get("messages", []))
    # the custom-scorers page's rude reply; knowledge_retention asks "does it forget?"
    rude = "Stop bothering me" in asked or "forgets or contradicts" in asked
    candidate = _block(body, "candidate_answer").lower()
    no = "bad" in candidate or ("maybe" in candidate and (body.get("seed") or 0) % 2 == 1)
    rude = rude or "bad" in _block(body, "response_1").lower()
    tools = body.get("tools") or []
    if tools:
        fn = tools[0]["function"]
        params = fn.get("parameters", {})
        args: dict[str, Any] = {}
        for name in params.get("required", []):
            spec = params.get("properties", {}).get(name, {})
            if "enum" in spec:
                enum = spec["enum"]
                args[name] = (
                    enum[-1] if rude else next((c for c in ("Y", "C", "Yes") if c in enum), enum[0])
                )
            elif spec.get("type") == "array":
                args[name] = []
            elif spec.get("type") in ("integer", "number"):
                args[name] = spec.get("maximum", 1)
            elif spec.get("type") == "boolean":
                args[name] = True
            else:
                args[name] = "The answer states the expected facts."
        return tool_call(args, name=fn["name"])
    if body.get("logprobs") and "Yes" in asked and no:
        return text("No", top_logprobs=[("No", -0.1), ("Yes", -2.5)])
    if body.get("logprobs") and "Yes" in asked:
        return text("Yes", top_logprobs=[("Yes", -0.1), ("No", -2.5)])
    if body.get("logprobs"):  # G-Eval: a score on its scale
        return text("5", top_logprobs=[("5", -0.1), ("4", -2.5)])
    return text("Yes")


class Page:
    """One page's project: its blocks run in order in one pytester directory."""

    def __init__(self, pytester: pytest.Pytester, server: OpenAITestServer) -> None:
        self.p = pytester
        self.server = server
        self.setups: dict[str, str] = {}
        self.last_output: str | None = None
        self.last_where = ""
        self.status = 0
        #: blocks that could not run here, with the reason (the page is skipped at its end)
        self.skipped: list[str] = []
        self._redis: Any = None  # the page's redis-server (redis_server.RestartableRedis)
        self._redis_dir: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        if self._redis is not None:
            self._redis.stop()
        if self._redis_dir is not None:
            self._redis_dir.cleanup()

    def redis_port(self) -> int:
        """The page's own redis-server on a free 127.0.0.1 port, started when a command first
        names a ``redis://127.0.0.1:PORT`` URL, and again (its data kept) when a command names
        it after a block shut it down (the test skips, saying why, without redis-server or
        redis-py: redis_server.RestartableRedis)."""
        if self._redis is None:
            from redis_server import RestartableRedis

            self._redis_dir = tempfile.TemporaryDirectory(prefix="doc-redis-")
            server = RestartableRedis(self._redis_dir.name)
            server.start()
            self._redis = server
        elif self._redis.proc.poll() is not None:  # a block shut it down: back, with its data
            self._redis.start()
        return int(self._redis.port)

    # -- runners --------------------------------------------------------------------------------
    def pytest(self, args: list[str]) -> str:
        # The run is in this process: a module of the suite with the name of one of the page's
        # test files (tests/unit/analysis/test_panel.py and the page's test_panel.py) would make
        # its collection an "import file mismatch". Set aside while the page's run collects.
        names = {f.stem for f in self.p.path.glob("test_*.py")}
        aside = {n: sys.modules.pop(n) for n in names if n in sys.modules}
        try:
            result = self.p.runpytest(*args)
        finally:
            sys.modules.update(aside)
        self.status = int(result.ret)
        return "\n".join(result.outlines + result.errlines)

    def command(self, line: str, tty: bool = False) -> str:
        """Run one command line (``*`` expanded in the project; on a pseudo-terminal with
        ``tty``); its exit status is left in ``self.status``. ``$REDIS_URL`` is the page's
        redis-server (:meth:`redis_port`)."""
        self.status = 0
        if "$REDIS_URL" in line:
            line = line.replace("$REDIS_URL", f"redis://127.0.0.1:{self.redis_port()}/0")
        argv = shlex.split(line, comments=True)
        if not argv:
            return ""
        if argv[0] == "cd":
            return ""
        if any(a.startswith("examples/") for a in argv) and not (self.p.path / "examples").exists():
            shutil.copytree(ROOT / "examples", self.p.path / "examples")
        argv = [
            w
            for a in argv
            for w in (sorted(glob.glob(a, root_dir=self.p.path)) if "*" in a else [a]) or [a]
        ]
        if any(_LOCAL_REDIS.search(a) for a in argv):  # the page's redis-server, on its port
            port = self.redis_port()
            argv = [_LOCAL_REDIS.sub(rf"\g<1>{port}", a) for a in argv]
        env = {}
        while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):  # NAME=value command
            name, _, val = argv.pop(0).partition("=")
            env[name] = val
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return self._command(argv, tty)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _command(self, argv: list[str], tty: bool) -> str:
        if argv[0] == "pytest" and tty:
            return self.pytest_tty(argv[1:])
        if argv[0] == "pytest":
            return self.pytest(argv[1:])
        if argv[:2] == ["python", "-m"]:
            proc = subprocess.run(
                [sys.executable, *argv[1:]],
                cwd=self.p.path,
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.status = proc.returncode
            return proc.stdout + proc.stderr
        raise AssertionError(f"no runner for the command {shlex.join(argv)!r}")

    def pytest_tty(self, args: list[str]) -> str:
        """``pytest ARGS`` as a subprocess whose stdout and stderr are a pseudo-terminal (a
        person's terminal, 120 columns): what the terminal received, as :func:`terminal_text`
        lines."""
        raw, self.status = run_on_pty(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            self.p.path,
            terminal_env(120),
        )
        return terminal_text(raw)

    def script(self, code: str, line: int) -> tuple[str, str | None]:
        """Run a script as a reader would, ``python script.py`` in the project: its stdout, and
        the error it ended with (``ScorerInputError: ...``, the class without its module) or
        None."""
        path = self.p.path / f"doc_block_{line}.py"
        path.write_text(code)
        proc = subprocess.run(
            [sys.executable, path.name],
            cwd=self.p.path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode == 0:
            return proc.stdout, None
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        return proc.stdout, re.sub(r"^(?:\w+\.)+(?=\w+:)", "", last) or proc.stderr

    # -- directives -----------------------------------------------------------------------------
    def handle(self, b: Block, nxt: Block | None) -> None:
        kind, arg = b.kind, b.arg
        code = b.code
        if kind == "uses":
            assert arg in self.setups, f"{b.where}: uses {arg!r}, but no setup {arg!r} before it"
            code = self.setups[arg] + code
        if kind in ("test",) or (kind == "uses" and _is_test(b.code)):
            words = arg.split() if kind == "test" else []
            extra = [w for w in words if w.startswith("--")]
            named = [w for w in words if not w.startswith("--")]
            name = (named[0] if named else None) or _test_name(code) or f"test_doc_{b.line}.py"
            (self.p.path / name).write_text(code)
            if nxt is not None and nxt.kind == "output" and nxt.code.startswith("$ "):
                return  # the transcript that follows runs it
            out = self.pytest(["--llm-eval", "-p", "no:cacheprovider", *extra, name])
            assert re.search(r"==+ .*\d+ passed", out) and not re.search(
                r"\d+ (failed|errors?)\b", out.splitlines()[-1]
            ), f"{b.where}: the test file does not pass:\n{out}"
            self.record(out, b.where)
        elif kind in ("run", "setup", "uses"):
            out, err = self.script(code, b.line)
            if err is not None:
                # an error the page shows: the output block that follows names its class
                shown = nxt.code if nxt is not None and nxt.kind == "output" else ""
                assert shown.startswith(err.split(":")[0] + ":"), f"{b.where} failed:\n{err}"
                out += err
            self.record(out, b.where)
            if kind == "setup":
                self.setups[arg] = code
        elif kind == "file":
            if arg.endswith(".jsonl"):
                [json.loads(ln) for ln in code.splitlines() if ln.strip()]
            elif b.lang == "json":
                json.loads(code)
            elif b.lang == "yaml":
                yaml.safe_load(code)
            target = self.p.path / arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
        elif kind == "excerpt":
            check_excerpt(b)
        elif kind == "shell":
            assert arg in ("", "tty"), f"{b.where}: shell takes nothing or tty, not {arg!r}"
            outs = []
            for ln in _commands(code):
                outs.append(self.command(ln, tty=arg == "tty"))
                assert self.status == 0, f"{b.where}: {ln!r} exited {self.status}:\n{outs[-1]}"
            self.record("\n".join(outs), b.where)
        elif kind == "output":
            self.check_output(b)
        elif kind == "not-run":
            assert arg, f"{b.where}: not-run needs a reason"
            check_not_run(b)
        else:
            raise AssertionError(f"{b.where}: unknown directive {b.directive!r}")

    def record(self, out: str, where: str) -> None:
        self.last_output, self.last_where = out, where

    def check_output(self, b: Block) -> None:
        shown = b.code
        if b.arg:
            target = self.p.path / b.arg
            assert target.is_file(), f"{b.where}: output of {b.arg}, which the page did not make"
            self.record(target.read_text(encoding="utf-8"), f"{b.where} ({b.arg})")
            self.compare(b, shown, self.last_output or "")
            return
        if shown.startswith("$ "):
            # a transcript: each "$ command" is run and the lines after it are its output
            for part in re.split(r"^\$ ", shown, flags=re.MULTILINE)[1:]:
                first, _, rest = part.partition("\n")
                try:
                    real = self.command(first)
                except pytest.skip.Exception as e:  # no redis-server for the page
                    self.skipped.append(f"{b.where}: {e.msg}")
                    continue
                self.compare(b, rest, real)
            return
        else:
            assert self.last_output is not None, f"{b.where}: output, but nothing ran before it"
            real = self.last_output
        self.compare(b, shown, real)

    def compare(self, b: Block, shown: str, real: str) -> None:
        missing = missing_lines(shown, real, self.p.path)
        assert not missing, (
            f"{b.where}: shown output not in the real output of {self.last_where or b.where}:\n"
            + "\n".join(missing)
            + "\n--- real output ---\n"
            + real
        )


def _is_test(code: str) -> bool:
    return bool(re.search(r"^(async )?def test_", code, re.MULTILINE))


def _test_name(code: str) -> str | None:
    m = re.match(r"#\s*(test_\w+\.py)\s*$", code.splitlines()[0] if code else "")
    return m[1] if m else None


def _commands(code: str) -> list[str]:
    return [ln for ln in code.replace("\\\n", " ").splitlines() if ln.strip()]


def check_excerpt(b: Block) -> None:
    """An excerpt of a file of the repository (which is run elsewhere, e.g. an example): its code
    lines are lines of that file, in order (indentation and comments aside)."""
    source = ROOT / b.arg
    assert source.is_file(), f"{b.where}: excerpt of {b.arg}, which does not exist"
    compile(textwrap.dedent(b.code), b.where, "exec")

    def lines(text: str) -> list[str]:
        out = []
        for ln in text.splitlines():
            ln = re.sub(r"\s+#.*$|^\s*#.*$", "", ln).strip()
            if ln:
                out.append(ln)
        return out

    have, pos = lines(source.read_text(encoding="utf-8")), 0
    for ln in lines(b.code):
        assert ln in have[pos:], f"{b.where}: {ln!r} is not (in this order) in {b.arg}"
        pos = have.index(ln, pos) + 1


def check_not_run(b: Block) -> None:
    """What a block that cannot run here still gets: Python compiled, YAML parsed, and every
    --llm-eval option it names a real one."""
    if b.lang == "python":
        compile(b.code, b.where, "exec")
    if b.lang in ("yaml", "yml"):
        yaml.safe_load(b.code)
    if b.lang == "python":
        return  # a Python block may name an option it is about to add (architecture.md)
    for flag in re.findall(r"--llm-eval[\w-]*", b.code):
        assert flag in FLAGS, f"{b.where}: {flag} is not an option (core/options.py OPTIONS)"


# -- the tests ----------------------------------------------------------------------------------


@pytest.fixture
def _registry_restored() -> Any:
    """A page's blocks register scorers in the process's registry: undone after the page."""
    from pytest_llmeval import default_registry as r

    saved = (dict(r._classes), dict(r._lazy), dict(r._index))
    yield
    r._classes, r._lazy, r._index = (dict(d) for d in saved)
    r._resolved.clear()
    r.memo.clear()


def test_every_block_has_a_directive() -> None:
    bad = [
        f"{b.where} ({b.lang or 'no language'}): {b.directive or 'no directive'}"
        for page in PAGES
        for b in blocks(ROOT, ROOT / page)
        if b.kind not in KINDS
    ]
    vocab = "\n".join(f"  <!-- block: {d} -->  {what}" for d, what in DIRECTIVES.items())
    assert not bad, (
        "blocks without a known directive (put one on the line before the fence):\n"
        + "\n".join(bad)
        + "\ndirectives:\n"
        + vocab
    )


@pytest.mark.parametrize("page", PAGES, ids=str)
@pytest.mark.usefixtures("_registry_restored")
def test_page_blocks(
    page: Path,
    pytester: pytest.Pytester,
    judge_server: OpenAITestServer,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    found = [b for b in blocks(ROOT, ROOT / page) if b.kind in KINDS]
    if not any(b.kind not in ("not-run",) for b in found):
        for b in found:
            check_not_run(b)
        return
    judge_server.set_default(_judge)
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doc-blocks")
    # judges.md's panel: a second judge endpoint, here the same server
    monkeypatch.setenv("JUDGE_B", judge_server.base_url)
    monkeypatch.setenv("JUDGE_B_KEY", "sk-doc-blocks-b")
    _stand_ins(pytester)
    page_ = Page(pytester, judge_server)
    try:
        for i, b in enumerate(found):
            page_.handle(b, found[i + 1] if i + 1 < len(found) else None)
    finally:
        page_.close()
    if page_.skipped:
        pytest.skip("the other blocks passed; not run here: " + "; ".join(page_.skipped))


def _stand_ins(p: pytest.Pytester) -> None:
    """The apps the docs' examples test (``my_app``, ``support_bot``, ``travel_agent``) are the
    reader's: here they are fixtures of a conftest.py, and the datasets the examples name exist."""
    p.makeconftest(STAND_INS)
    (p.path / "data").mkdir(exist_ok=True)
    (p.path / "data" / "faq.jsonl").write_text(
        '{"input": "What is the capital of France?", "expected": "Paris"}\n'
    )
    chat = [
        {"role": "user", "content": "I fly to Rome on Friday. Can I take a bike?"},
        {"role": "assistant", "content": "Yes: a bike on your Friday flight to Rome is $50."},
    ]
    (p.path / "data" / "chats.jsonl").write_text(json.dumps({"messages": chat}) + "\n")
    (p.path / "cases.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": "Who wrote Hamlet?", "expected": "Shakespeare"} | row)
            + "\n"
            for i, row in (
                ("c1", {"output": "Shakespeare", "human": True}),
                ("c2", {"output": "Marlowe", "human": False}),
                ("c3", {"output": "Shakespeare wrote it.", "human": None}),
            )
        )
    )
    (p.path / "data" / "qa.jsonl").write_text(
        json.dumps(
            {
                "input": "What is the capital of France?",
                "expected": "Paris",
                "context": "Paris is the capital of France.",
            }
        )
        + "\n"
    )


STAND_INS = """
import pytest

ANSWERS = {"What is the capital of France?": "Paris", "What is 2 + 2?": "4"}


@pytest.fixture
def my_app():
    return lambda question: ANSWERS.get(question, "I don't know")


support_bot = my_app


class App:
    def __call__(self, question):
        return ANSWERS.get(question, "I don't know")

    async def acomplete(self, question):
        return self(question)


@pytest.fixture
def app():
    return App()
"""

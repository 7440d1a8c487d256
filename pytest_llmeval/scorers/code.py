"""``python_unit_testing`` (Arthur Bench ``PythonUnitTesting``): run model-written Python against
unit tests in the sandbox of :mod:`pytest_llmeval.scorers.sandbox`.

Inputs:

- ``output``: the program (Python source), or a list of programs: ``n`` samples for one problem,
  scored as unbiased pass@k.
- ``tests`` (optional input): one test program (a string), a list of them, or a directory whose
  files are read in sorted name order (a ``Path``, or a string without a newline naming an
  existing directory; the cache key holds the files' contents, not the path). Each test runs in
  its own process as ``output + "\\n" + test``; a program passes when every test passes.
- ``test_index`` (optional input): pick one test of the list, as Bench pairs the i-th case of a
  suite with the i-th unit test.

Options: ``unit_tests`` / ``unit_test_dir`` (Bench's constructor arguments; used when a case gives
no ``tests``), ``timeout`` (seconds, Bench: 3), ``k`` (pass@k, default 1), the sandbox limits
``memory_mb``, ``cpu_seconds``, ``max_processes``, ``max_open_files``, ``max_file_size_mb``,
``concurrency`` (sandboxes run at once) and ``require_namespaces`` (refuse the audit-hook
fallback even when the weak sandbox is allowed).

Score: 1 if the tests pass, else 0; with several samples, pass@k = 1 - C(n-c, k) / C(n, k).
Like Bench (and HuggingFace ``code_eval``), a test is just code: it passes when it runs to the end
without an exception. The program runs first, then the test, in one namespace; a pass needs the
sandbox's harness to report (with a token the program cannot reach through a descriptor, a file,
the environment or a frame) that the test returned, for every test: tests run == tests given, and a
test that holds no code is a failure, not a pass. Leaving early is a failure naming how:
``SystemExit`` raised by the program (``sys.exit(0)``, ``exit()``, ``raise SystemExit``) or
``os._exit``; data the program writes to the result pipe makes the run ``tampered``. The one clean
exit that passes is ``unittest.main()``'s after a successful run of every test it collected (at
least one).

Where namespaces are unavailable the scorer refuses unless the weak audit-hook fallback is allowed
(``--llm-eval-allow-weak-sandbox``, ini ``llm_eval_allow_weak_sandbox``,
``LLM_EVAL_ALLOW_WEAK_SANDBOX=1`` or ``configure(sandbox_allow_weak=True)``), and then warns once
per process. Stored text (stderr, traceback, messages) is capped and known secrets (the judge's API
key, secret-looking environment variables of this process) are replaced by ``[REDACTED]``. The
threat model is in ``docs/sandbox.md``.

Running code needs an explicit opt-in (``--llm-eval-allow-code-execution``, the ini option
``llm_eval_allow_code_execution``, ``LLM_EVAL_SANDBOX=1`` or ``configure(sandbox_enabled=True)``);
without it the scorer raises :class:`~pytest_llmeval.core.errors.ScorerNotAvailableError`.
"""

from __future__ import annotations

import ast
import hashlib
import math
import os
import re
import threading
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import (
    ScorerConfigError,
    ScorerInputError,
    ScorerNotAvailableError,
    describe_value,
)
from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext
    from pytest_llmeval.scorers.sandbox import SandboxLimits, SandboxResult

__all__ = [
    "OPT_IN_HELP",
    "WEAK_SANDBOX_HELP",
    "PythonUnitTesting",
    "WeakSandboxWarning",
    "pass_at_k",
]

OPT_IN_HELP = (
    "python_unit_testing runs model-written code and is disabled unless you opt in: run pytest "
    "with --llm-eval-allow-code-execution, or set llm_eval_allow_code_execution = true in the "
    "[pytest] ini section, or (outside pytest) set the environment variable LLM_EVAL_SANDBOX=1 "
    "or call pytest_llmeval.configure(sandbox_enabled=True)"
)

WEAK_SANDBOX_HELP = (
    "python_unit_testing needs Linux namespaces (unshare --mount --net --pid) to contain the "
    "code it runs, and they are not available here. The only other containment is a WEAK "
    "fallback: the code runs as your user (or root) behind audit hooks that it can defeat, so it "
    "may reach the network, write files and read other processes' environments. To run it "
    "anyway, opt in explicitly: --llm-eval-allow-weak-sandbox, or llm_eval_allow_weak_sandbox = "
    "true in the [pytest] ini section, or LLM_EVAL_ALLOW_WEAK_SANDBOX=1, or "
    "pytest_llmeval.configure(sandbox_allow_weak=True). See docs/sandbox.md"
)


class WeakSandboxWarning(UserWarning):
    """python_unit_testing runs code in the weak audit-hook fallback (the user allowed it)."""


_weak_warned_lock = threading.Lock()
_weak_warned = False

_STDERR_CHARS = 1000
_REDACTED = "[REDACTED]"
# Environment variables whose values count as secrets (besides the judge's API key).
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Shortest secret value redacted (shorter values would blank out ordinary words) and shortest
# piece of one recognised where a cap cut it.
_MIN_SECRET = 8
_MIN_PIECE = 6


def known_secrets(api_key: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """Values the sandbox's output must not carry into a record: the judge's API key and every
    environment variable of this process whose name looks secret. Longest first."""
    env = os.environ if environ is None else environ
    found = {api_key} if api_key and len(api_key) >= _MIN_SECRET else set()
    for name, value in env.items():
        if len(value) >= _MIN_SECRET and _SECRET_NAME.search(name):
            found.add(value)
    return sorted(found, key=lambda v: (-len(v), v))


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``[REDACTED]``; also a secret's end at the start
    of the text and its beginning at the end, where a cap may have cut it."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    for secret in secrets:
        head = 3 if text.startswith("...") else 0
        for size in range(len(secret) - 1, _MIN_PIECE - 1, -1):
            if text.startswith(secret[-size:], head):
                text = text[:head] + _REDACTED + text[head + size :]
                break
        for size in range(len(secret) - 1, _MIN_PIECE - 1, -1):
            if text.endswith(secret[:size]):
                text = text[: len(text) - size] + _REDACTED
                break
    return text


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _holds_no_code(test: str) -> bool:
    """A test with no statement beyond ``pass``, ``...`` or strings tests nothing."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError):
        return False  # the sandbox reports the error
    return all(
        isinstance(node, ast.Pass)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        for node in tree.body
    )


def _warn_weak_once() -> None:
    global _weak_warned
    with _weak_warned_lock:
        if _weak_warned:
            return
        _weak_warned = True
    warnings.warn(
        WeakSandboxWarning(
            "python_unit_testing runs model-written code in the WEAK audit-hook fallback "
            "(no namespaces here; allowed by --llm-eval-allow-weak-sandbox or its twins): the "
            "code runs as this user behind hooks it can defeat. See docs/sandbox.md"
        ),
        stacklevel=3,
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): ``1 - C(n - c, k) / C(n, k)``.

    ``n`` samples of which ``c`` passed; requires ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def _read_test_dir(path: Path, scorer: str, where: str) -> list[str]:
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise ScorerInputError(
            scorer, where, f"names the directory {str(path)!r}, which cannot be read ({exc})"
        ) from None
    tests: list[str] = []
    for name in names:
        file = path / name
        if not file.is_file():
            continue
        try:
            tests.append(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ScorerInputError(
                scorer, where, f"has a test file {str(file)!r} that cannot be read ({exc})"
            ) from None
    if not tests:
        raise ScorerInputError(
            scorer,
            where,
            f"names the directory {str(path)!r}, which holds no test files",
            hint="Put one unit test per file in it (read in sorted name order)",
        )
    return tests


def _is_dir_name(value: Any) -> bool:
    if isinstance(value, os.PathLike):
        return True
    return isinstance(value, str) and "\n" not in value and value != "" and os.path.isdir(value)


def _as_tests(value: Any, scorer: str, where: str) -> list[str]:
    if _is_dir_name(value):
        return _read_test_dir(Path(os.fspath(value)), scorer, where)
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        if not value:
            raise ScorerInputError(scorer, where, "is an empty list", hint="Give at least one test")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ScorerInputError(
                    scorer,
                    where,
                    f"item {i} is {describe_value(item)}, not a string of test code",
                )
        return list(value)
    raise ScorerInputError(
        scorer,
        where,
        f"is {describe_value(value)}",
        hint="Give test source code (a string), a list of them, or a directory of test files",
    )


class PythonUnitTesting(Scorer):
    """1 if the program passes its unit tests in the sandbox, else 0 (pass@k for samples)."""

    name: ClassVar[str] = "python_unit_testing"
    aliases: ClassVar[tuple[str, ...]] = ("PythonUnitTesting",)
    required_inputs: ClassVar[tuple[str, ...]] = ("output",)
    optional_inputs: ClassVar[tuple[str, ...]] = ("tests", "test_index")
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    # 2: program and test run as two phases; early exits and forged reports fail (issue 13).
    version: ClassVar[str] = "2"
    default_options: ClassVar[Mapping[str, Any]] = {
        "unit_tests": None,
        "unit_test_dir": None,
        "timeout": 3.0,
        "k": 1,
        "memory_mb": 512,
        "cpu_seconds": None,
        "max_processes": 16,
        "max_open_files": 64,
        "max_file_size_mb": 16,
        "concurrency": 2,
        "require_namespaces": False,
    }
    description: ClassVar[str] = (
        "Runs the output (Python source) with each unit test appended, in a sandbox; 1 if all "
        "pass. Several samples give pass@k. Needs --llm-eval-allow-code-execution."
    )

    def validate_options(self) -> None:
        opts = self.options
        timeout = opts["timeout"]
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not (0 < float(timeout) <= 3600)
        ):
            raise ScorerConfigError(
                self.name, "timeout", f"must be seconds in (0, 3600], not {timeout!r}"
            )
        k = opts["k"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ScorerConfigError(self.name, "k", f"must be an integer >= 1, not {k!r}")
        for key in (
            "memory_mb",
            "max_processes",
            "max_open_files",
            "max_file_size_mb",
            "concurrency",
        ):
            value = opts[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ScorerConfigError(
                    self.name, key, f"must be a positive integer, not {value!r}"
                )
        if opts["memory_mb"] < 64:
            raise ScorerConfigError(
                self.name, "memory_mb", "must be at least 64 (Python itself needs that much)"
            )
        cpu = opts["cpu_seconds"]
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 1):
            raise ScorerConfigError(
                self.name, "cpu_seconds", f"must be None or an integer >= 1, not {cpu!r}"
            )
        if opts["unit_tests"] is not None and opts["unit_test_dir"] is not None:
            raise ScorerConfigError(
                self.name, "unit_tests", "and unit_test_dir are exclusive", hint="Give one of them"
            )
        self._option_tests: list[str] | None = None
        try:
            if opts["unit_tests"] is not None:
                if isinstance(opts["unit_tests"], str) or not isinstance(
                    opts["unit_tests"], (list, tuple)
                ):
                    raise ScorerConfigError(
                        self.name, "unit_tests", "must be a list of test source strings"
                    )
                self._option_tests = _as_tests(list(opts["unit_tests"]), self.name, "unit_tests")
            elif opts["unit_test_dir"] is not None:
                # Read now, as Bench does, so a wrong directory fails at construction.
                directory = opts["unit_test_dir"]
                if not isinstance(directory, (str, os.PathLike)) or not os.path.isdir(directory):
                    raise ScorerConfigError(
                        self.name,
                        "unit_test_dir",
                        f"must name a readable directory of test files, not {directory!r}",
                    )
                self._option_tests = _read_test_dir(Path(directory), self.name, "unit_test_dir")
        except ScorerInputError as exc:
            raise ScorerConfigError(self.name, exc.field, exc.problem, hint=exc.hint) from None

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        from pytest_llmeval.scorers.sandbox import containment_mode

        # Which containment runs the code (a program that starts a subprocess passes with
        # namespaces and fails under the audit-hook fallback), and the option tests' contents
        # (a directory's files may change under the same path).
        ident: dict[str, Any] = {
            "sandbox": "namespaces" if containment_mode()["namespaces"] else "audit_hooks"
        }
        if self._option_tests is not None:
            joined = "\0".join(self._option_tests).encode("utf-8")
            ident["unit_tests_sha256"] = hashlib.sha256(joined).hexdigest()
        return ident

    def key_inputs(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """A ``tests`` directory is keyed by its files' contents, not its path: editing a test
        must not replay the result cached for the old one."""
        tests = inputs.get("tests")
        if tests is None or not _is_dir_name(tests):
            return inputs
        files = _read_test_dir(Path(os.fspath(tests)), self.name, "tests")
        digest = hashlib.sha256("\0".join(files).encode("utf-8")).hexdigest()
        return {**inputs, "tests": {"test_dir_sha256": digest, "files": len(files)}}

    # -- inputs -------------------------------------------------------------------------------

    def _programs(self, inputs: Mapping[str, Any]) -> tuple[list[str], bool]:
        output = inputs["output"]
        if isinstance(output, str):
            return [output], False
        if isinstance(output, (list, tuple)):
            if not output:
                raise ScorerInputError(
                    self.name, "output", "is an empty list", hint="Give at least one program"
                )
            for i, item in enumerate(output):
                if not isinstance(item, str):
                    raise ScorerInputError(
                        self.name,
                        "output",
                        f"sample {i} is {describe_value(item)}, not Python source",
                    )
            return list(output), True
        raise ScorerInputError(
            self.name,
            "output",
            f"is {describe_value(output)}",
            hint="Give the program as a string of Python source (or a list of samples)",
        )

    def _tests(self, inputs: Mapping[str, Any]) -> list[str]:
        if inputs.get("tests") is not None:
            tests = _as_tests(inputs["tests"], self.name, "tests")
            where = "tests"
        elif self._option_tests is not None:
            tests = self._option_tests
            where = "unit_tests"
        else:
            raise ScorerInputError(
                self.name,
                "tests",
                "is required but was not given",
                hint="Pass tests=... (test source, a list of them, or a directory), or create "
                "the scorer with unit_tests=[...] or unit_test_dir=...",
            )
        index = inputs.get("test_index")
        if index is None:
            return tests
        if isinstance(index, bool) or not isinstance(index, int):
            raise ScorerInputError(
                self.name, "test_index", f"is {describe_value(index)}, not an integer"
            )
        if not -len(tests) <= index < len(tests):
            raise ScorerInputError(
                self.name,
                "test_index",
                f"is {index}, but {where} holds {len(tests)} test(s)",
                hint=f"Use an index from 0 to {len(tests) - 1}",
            )
        return [tests[index]]

    def _limits(self) -> SandboxLimits:
        from pytest_llmeval.scorers.sandbox import SandboxLimits

        o = self.options
        return SandboxLimits(
            timeout_s=float(o["timeout"]),
            memory_mb=int(o["memory_mb"]),
            cpu_s=o["cpu_seconds"],
            max_processes=int(o["max_processes"]),
            max_open_files=int(o["max_open_files"]),
            max_file_size_mb=int(o["max_file_size_mb"]),
        )

    # -- scoring ------------------------------------------------------------------------------

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        if not ctx.settings.sandbox_enabled:
            raise ScorerNotAvailableError(OPT_IN_HELP)
        programs, sampled = self._programs(inputs)
        tests = self._tests(inputs)
        k = int(self.options["k"])
        n = len(programs)
        if k > n:
            raise ScorerInputError(
                self.name,
                "output",
                f"holds {n} sample(s) but pass@k needs at least k={k}",
                hint="Give at least k samples as a list, or lower the option k",
            )
        from pytest_llmeval.scorers.sandbox import SandboxError, containment_mode

        allow_weak = (
            bool(ctx.settings.sandbox_allow_weak) and not self.options["require_namespaces"]
        )
        if not containment_mode()["namespaces"]:
            if not allow_weak:
                if self.options["require_namespaces"]:
                    raise ScorerNotAvailableError(
                        f"scorer {self.name!r}: namespaces are not available here and the option "
                        "require_namespaces=True refuses the weak fallback"
                    )
                raise ScorerNotAvailableError(WEAK_SANDBOX_HELP)
            _warn_weak_once()
        key = ctx.settings.judge.api_key
        secrets = known_secrets(key.get() if key else None)
        limits = self._limits()
        workers = max(1, min(int(self.options["concurrency"]), n))

        def run(program: str) -> dict[str, Any]:
            return self._run_sample(program, tests, limits, allow_weak, secrets)

        try:
            if workers == 1:
                samples = [run(p) for p in programs]
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    samples = list(pool.map(run, programs))
        except SandboxError as exc:
            raise ScorerNotAvailableError(
                f"scorer {self.name!r}: the sandbox could not run the program here: {exc}"
            ) from None
        c = sum(1 for s in samples if s["passed"])
        value = pass_at_k(n, c, k)
        first = samples[0]
        metadata: dict[str, Any] = {
            "n": n,
            "c": c,
            "k": k,
            "tests": len(tests),
            "containment": first.pop("containment"),
        }
        for s in samples[1:]:
            s.pop("containment", None)
        if sampled:
            metadata["pass_at_k"] = value
            metadata["samples"] = samples
            rationale = (
                f"pass@{k} = {value:.4g}: {c} of {n} samples passed all {len(tests)} test(s)"
            )
        else:
            metadata.update(first)
            rationale = first["reason"]
        return Score(value=value, rationale=rationale, metadata=metadata)

    def _run_sample(
        self,
        program: str,
        tests: Sequence[str],
        limits: SandboxLimits,
        allow_weak: bool,
        secrets: Sequence[str],
    ) -> dict[str, Any]:
        from pytest_llmeval.scorers.sandbox import run_python

        total = len(tests)
        for i, test in enumerate(tests):
            if _holds_no_code(test):
                return self._no_tests(i, total)
        result: SandboxResult | None = None
        duration = 0.0
        tests_run = 0
        for i, test in enumerate(tests):
            result = run_python(
                program,
                limits,
                test=test,
                allow_weak=allow_weak,
                require_namespaces=bool(self.options["require_namespaces"]),
            )
            duration += result.duration_s
            if not result.passed or result.tests_run != 1:
                return self._summary(result, i, total, tests_run, duration, secrets)
            tests_run += 1
        assert result is not None  # tests is never empty
        return self._summary(result, None, total, tests_run, duration, secrets)

    @staticmethod
    def _no_tests(index: int, total: int) -> dict[str, Any]:
        return {
            "passed": False,
            "status": "no_tests",
            "reason": f"test {index + 1} of {total} holds no code: 0 tests, nothing was tested",
            "exception": None,
            "message": None,
            "signal": None,
            "failed_test": index,
            "tests_run": 0,
            "stderr": "",
            "traceback": "",
            "violations": [],
            "duration_s": 0.0,
            "containment": {},
        }

    @staticmethod
    def _summary(
        result: SandboxResult,
        failed_test: int | None,
        total: int,
        tests_run: int,
        duration: float,
        secrets: Sequence[str],
    ) -> dict[str, Any]:
        # A pass needs every test run to have been reported as completed by the harness.
        passed = failed_test is None and result.passed and tests_run == total and total > 0
        if passed:
            reason = f"passed all {total} test(s)"
        else:
            detail = result.status
            if result.exception:
                detail += f" ({result.exception}"
                detail += f": {result.message})" if result.message else ")"
            elif result.message:
                detail += f" ({result.message})"
            where = f"test {failed_test + 1} of {total}" if failed_test is not None else "a test"
            reason = f"{where}: {detail}"

        def clean(text: str | None, limit: int = _STDERR_CHARS) -> str:
            # Redact before and after the cap: the sandbox's own cap may have cut a secret.
            return redact(_cap(redact(text or "", secrets), limit), secrets)

        return {
            "passed": passed,
            "status": result.status,
            "reason": clean(reason),
            "exception": clean(result.exception, 200) if result.exception else None,
            "message": clean(result.message, 500) if result.message else None,
            "signal": result.signal,
            "failed_test": failed_test,
            "tests_run": tests_run,
            "stderr": clean(result.stderr),
            "traceback": clean(result.traceback),
            "violations": [clean(v, 300) for v in result.violations],
            "duration_s": round(duration, 3),
            "containment": dict(result.containment),
        }

"""``python_unit_testing`` (Arthur Bench ``PythonUnitTesting``): run model-written Python against
unit tests in the sandbox of :mod:`pytest_llmeval.sandbox`.

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
fallback).

Score: 1 if the tests pass, else 0; with several samples, pass@k = 1 - C(n-c, k) / C(n, k).
Like Bench (and HuggingFace ``code_eval``), a test is just code: it passes when it runs to the end
without an exception. Differences, on purpose: ``SystemExit`` with status 0/None counts as passed
(``unittest.main()`` raises it after a successful run), a non-zero one as a failure.

Running code needs an explicit opt-in (``--llm-eval-allow-code-execution``, the ini option
``llm_eval_allow_code_execution``, ``LLM_EVAL_SANDBOX=1`` or ``configure(sandbox_enabled=True)``);
without it the scorer raises :class:`~pytest_llmeval.errors.ScorerNotAvailableError`.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.errors import (
    ScorerConfigError,
    ScorerInputError,
    ScorerNotAvailableError,
    describe_value,
)
from pytest_llmeval.scoring import Score, Scorer

if TYPE_CHECKING:
    from pytest_llmeval.context import ScoringContext
    from pytest_llmeval.sandbox import SandboxLimits, SandboxResult

__all__ = ["OPT_IN_HELP", "PythonUnitTesting", "pass_at_k"]

OPT_IN_HELP = (
    "python_unit_testing runs model-written code and is disabled unless you opt in: run pytest "
    "with --llm-eval-allow-code-execution, or set llm_eval_allow_code_execution = true in the "
    "[pytest] ini section, or (outside pytest) set the environment variable LLM_EVAL_SANDBOX=1 "
    "or call pytest_llmeval.configure(sandbox_enabled=True)"
)

_STDERR_CHARS = 1000


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
    version: ClassVar[str] = "1"
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
        from pytest_llmeval.sandbox import containment_mode

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
        from pytest_llmeval.sandbox import SandboxLimits

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
        from pytest_llmeval.sandbox import SandboxError

        limits = self._limits()
        workers = max(1, min(int(self.options["concurrency"]), n))
        try:
            if workers == 1:
                samples = [self._run_sample(p, tests, limits) for p in programs]
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    samples = list(pool.map(lambda p: self._run_sample(p, tests, limits), programs))
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
        self, program: str, tests: Sequence[str], limits: SandboxLimits
    ) -> dict[str, Any]:
        from pytest_llmeval.sandbox import run_python

        result: SandboxResult | None = None
        duration = 0.0
        for i, test in enumerate(tests):
            result = run_python(
                program + "\n" + test,
                limits,
                require_namespaces=bool(self.options["require_namespaces"]),
            )
            duration += result.duration_s
            if not result.passed:
                return self._summary(result, i, len(tests), duration)
        assert result is not None  # tests is never empty
        return self._summary(result, None, len(tests), duration)

    @staticmethod
    def _summary(
        result: SandboxResult, failed_test: int | None, total: int, duration: float
    ) -> dict[str, Any]:
        if result.passed:
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
        stderr = result.stderr
        if len(stderr) > _STDERR_CHARS:
            stderr = "..." + stderr[-_STDERR_CHARS:]
        return {
            "passed": result.passed,
            "status": result.status,
            "reason": reason,
            "exception": result.exception,
            "message": result.message,
            "signal": result.signal,
            "failed_test": failed_test,
            "stderr": stderr,
            "traceback": result.traceback[-_STDERR_CHARS:],
            "violations": list(result.violations),
            "duration_s": round(duration, 3),
            "containment": dict(result.containment),
        }

"""``python -m pytest_llmeval SUBCOMMAND ...``: command-line tools around saved runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]


def _report(argv: Sequence[str]) -> int:
    from pytest_llmeval.report.html import main_report

    return main_report(argv)


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "report": (_report, "render a saved JSON report (RUN.json) as a self-contained HTML file"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"} or args[0] not in COMMANDS:
        lines = ["usage: python -m pytest_llmeval SUBCOMMAND [ARGS...]", "", "subcommands:"]
        lines += [f"  {name:<8} {help_text}" for name, (_, help_text) in COMMANDS.items()]
        out = "\n".join(lines)
        if args and args[0] not in {"-h", "--help"}:
            print(f"error: unknown subcommand {args[0]!r}\n{out}", file=sys.stderr)
            return 2
        print(out, file=sys.stderr if not args else sys.stdout)
        return 0 if args else 2
    return COMMANDS[args[0]][0](args[1:])


if __name__ == "__main__":
    sys.exit(main())

"""``python -m pytest_llmeval <command>``: tools that work on saved runs and JSON reports.

Each command is a function ``(argv) -> exit status`` in :data:`COMMANDS`; a new command adds one
entry (and keeps its code in its own module).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

__all__ = ["COMMANDS", "main"]


def _compare(argv: Sequence[str]) -> int:
    from pytest_llmeval.cli.compare import main as compare_main

    return compare_main(argv)


def _merge(argv: Sequence[str]) -> int:
    from pytest_llmeval.cli.merge import main as merge_main

    return merge_main(argv)


def _report(argv: Sequence[str]) -> int:
    from pytest_llmeval.report.html import main_report

    return main_report(argv)


def _cache(argv: Sequence[str]) -> int:
    from pytest_llmeval.cli.cache_cli import main as cache_main

    return cache_main(argv)


#: command name -> (function taking the remaining arguments and returning the exit status, help)
COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "compare": (_compare, "compare two runs (saved runs or JSON reports): BASELINE CURRENT"),
    "cache": (
        _cache,
        "result cache tools (local or Redis): stats | prune | export | import | push",
    ),
    "report": (_report, "render a saved run or JSON report (RUN.json) as one HTML file: -o OUT"),
    "merge": (_merge, "merge the JSON reports of a run's shards and judge its gates: -o OUT"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in COMMANDS:
        out = sys.stdout if args and args[0] in ("-h", "--help") else sys.stderr
        if args and args[0] not in ("-h", "--help"):
            print(f"unknown command {args[0]!r}", file=out)
        print("usage: python -m pytest_llmeval COMMAND [ARGS...]\n\ncommands:", file=out)
        for name, (_fn, text) in COMMANDS.items():
            print(f"  {name:<10} {text}", file=out)
        return 0 if out is sys.stdout else 2
    fn, _text = COMMANDS[args[0]]
    return fn(args[1:])


if __name__ == "__main__":
    sys.exit(main())

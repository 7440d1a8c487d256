"""What a user sees of the plugin's options, read from pytest's own parser: each command-line
option of the ``llm-eval`` group (flags, dest, action, type, default, const, nargs, choices,
metavar, help) and each ``llm_eval*`` ini key (type, help), in the order pytest lists them.

tests/data/options_house.json is this surface as it was on branch ``house`` before the option
table (issue 22, part 2), written by ``python tests/helpers/option_surface.py`` on that tree;
tests/unit/core/test_options.py compares today's surface with it. Deliberate changes since are
edited into the file by hand, each named here: issue 24 made ``--llm-eval-concurrency`` default
to none (the judge limit follows the most concurrent test) and said so in its help. The
environment twins are not in pytest's parser: they were read off the code of ``house`` by hand
and are listed in the file too (``env``), with every ``LLM_EVAL_*`` name the package's code
spelled out (``env_names``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from paths import DATA

SNAPSHOT = DATA / "options_house.json"


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if callable(value):
        return getattr(value, "__name__", repr(value))
    return value


def surface(config: pytest.Config) -> dict[str, Any]:
    """The options and ini keys of a parsed config (see the module docstring)."""
    parser = config._parser
    group = parser.getgroup("llm-eval")
    options = []
    for argument in group.options:
        attrs = argument.attrs()
        options.append(
            {
                "flags": list(argument.names()),
                **{
                    key: _plain(attrs.get(key))
                    for key in (
                        "dest",
                        "action",
                        "type",
                        "default",
                        "const",
                        "nargs",
                        "choices",
                        "metavar",
                        "help",
                    )
                },
            }
        )
    inis = [
        # pytest shows an ini key registered without a type as (string)
        {"name": name, "type": kind or "string", "help": text}
        for name, (text, kind, _default) in parser._inidict.items()
        if name.startswith("llm_eval")
    ]
    # the heading --help shows above the group (pytest 9 keeps it on the argparse group)
    arggroup = getattr(group, "_arggroup", None)
    title = arggroup.title if arggroup is not None else (group.description or group.name)
    return {"group": title, "options": options, "ini": inis}


def main() -> None:
    """Write the snapshot from the tree on ``sys.path`` (run it on branch ``house``)."""
    from _pytest.config import _prepareconfig

    config = _prepareconfig(["-p", "no:cacheprovider", "-p", "no:randomly"])
    try:
        data = surface(config)
    finally:
        config._ensure_unconfigure()
    # what pytest's parser does not hold (env twins, defaults, the note) is kept as written
    previous = json.loads(SNAPSHOT.read_text("utf-8")) if SNAPSHOT.exists() else {}
    data.update({key: v for key, v in previous.items() if key not in data})
    SNAPSHOT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {SNAPSHOT}: {len(data['options'])} options, {len(data['ini'])} ini keys")


if __name__ == "__main__":
    sys.exit(main())

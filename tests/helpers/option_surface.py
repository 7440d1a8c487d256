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
spelled out (``env_names``).

The options are read off the argparse action pytest made of each (found by its first flag in
pytest's argparse parser), the same way on every supported pytest. Before 9.1 pytest's
``Argument.attrs()`` was the keyword arguments given to ``addoption`` (what the snapshot was
written from); 9.1 turned ``Argument`` into a wrapper of the argparse action and ``attrs()``
into that action's ``__dict__`` (no ``action`` key, and ``nargs``/``const``/``default`` filled in
by argparse: 0/True/False for a ``store_true``). So the action is named from its class (through
argparse's own registry; argparse's default ``store`` counts as unnamed, as when no ``action``
was given) and ``nargs``, ``const`` and ``default`` are given only where they differ from what
that action class sets by itself: the keyword arguments given, unless one restates argparse's
own value (a ``store_true`` given ``default=False`` reads as no default)."""

from __future__ import annotations

import argparse
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


def _argparse_parser(parser: Any) -> argparse.ArgumentParser:
    """pytest's argparse parser: pytest 9 keeps one (``optparser``); pytest 8 builds it
    from its groups on each parse (``_getparser``)."""
    getparser = getattr(parser, "_getparser", None)
    if getparser is not None:  # pytest 8.x
        built: argparse.ArgumentParser = getparser()
        return built
    kept: argparse.ArgumentParser = parser.optparser
    return kept


def _action_name(optparser: argparse.ArgumentParser, action: argparse.Action) -> Any:
    """What ``action=`` said: argparse's name of the action's class (None for ``store``,
    argparse's default), or the class itself when argparse has no name for it."""
    names = optparser._registries["action"]
    if names.get(None) is type(action):
        return None
    for name, cls in names.items():
        if cls is type(action) and name is not None:
            return name
    return type(action)


def _implied(action: argparse.Action) -> dict[str, Any]:
    """``nargs``, ``const`` and ``default`` as the action's class sets them unasked."""
    try:
        bare = type(action)(option_strings=list(action.option_strings), dest=action.dest)
    except TypeError:  # a class that needs more: nothing is implied
        return {}
    return {key: getattr(bare, key, None) for key in ("nargs", "const", "default")}


def _given(value: Any, implied: dict[str, Any], key: str) -> Any:
    if key in implied and value == implied[key] and type(value) is type(implied[key]):
        return None
    return value


def surface(config: pytest.Config) -> dict[str, Any]:
    """The options and ini keys of a parsed config (see the module docstring)."""
    parser = config._parser
    group = parser.getgroup("llm-eval")
    optparser = _argparse_parser(parser)
    options = []
    for argument in group.options:
        flags = list(argument.names())
        action = optparser._option_string_actions[flags[0]]
        implied = _implied(action)
        read = {
            "dest": action.dest,
            "action": _action_name(optparser, action),
            "type": action.type,
            "default": _given(action.default, implied, "default"),
            "const": _given(action.const, implied, "const"),
            "nargs": _given(action.nargs, implied, "nargs"),
            "choices": action.choices,
            "metavar": action.metavar,
            "help": action.help,
        }
        options.append({"flags": flags, **{key: _plain(value) for key, value in read.items()}})
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

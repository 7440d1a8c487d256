"""MkDocs hook: the reference pages that are generated from the code's own tables at build time.

A page holds a marker line such as ``<!-- generated: options -->``; :func:`on_page_markdown`
replaces it with Markdown built from

- ``options``: the option table (:data:`pytest_llmeval.core.options.OPTIONS`), the one table the
  plugin registers its flags, ini keys and environment variables from;
- ``scorers``: the scorer registry (:data:`pytest_llmeval.default_registry`): each class's name,
  aliases, inputs, range, direction, options and, for a judge, the prompt it sends
  (``pytest_llmeval/prompts/*.yaml``);
- ``errors``: the error classes of :mod:`pytest_llmeval.core.errors` and their docstrings;
- ``report-schema``: the JSON report schema (``pytest_llmeval/schemas/report.schema.json``);
- ``api``: one mkdocstrings block per name in ``pytest_llmeval.__all__``.

So none of these pages is a hand-kept copy that can drift from the code. A marker that names no
generator stops the build.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from importlib.resources import files
from typing import Any

_MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


_CODE_SPAN = re.compile(r"(`+[^`]*`+)")


def _prose(text: str) -> str:
    """A docstring or help text as Markdown: reST roles and double backticks become code spans,
    and an angle bracket outside code is shown, not taken for an HTML tag."""
    text = re.sub(r":(?:class|func|meth|data|mod|attr|exc):`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    parts = _CODE_SPAN.split(text)
    return "".join(
        part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;")
        for i, part in enumerate(parts)
    )


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return _prose(str(text)).replace("|", "\\|").replace("\n", " ")


def _code(text: object) -> str:
    value = str(text)
    tick = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{tick}{pad}{value}{pad}{tick}"


def _default(option: Any) -> str:
    if option.secret:
        return "(not shown)"
    if option.default is None or option.default == () or option.default == []:
        return "-"
    if isinstance(option.default, bool):
        return _code("true" if option.default else "false")
    return _code(option.default)


def options_page() -> str:
    from pytest_llmeval.core.options import OPTIONS

    lines = [
        f"{len(OPTIONS)} options, in the order the plugin registers them.",
        "",
        "| option | ini key | environment | kind | default | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        flag = _code(o.flag + (f"={o.metavar}" if o.metavar else "")) if o.flag else ""
        env = ", ".join(_code(e) for e in (o.env, o.azure_env) if e)
        if o.azure_env:
            env += " (the second with the `azure` provider)"
        kind = ", ".join(_code(c) for c in o.choices) if o.choices else o.kind
        lines.append(
            f"| {_cell(flag)} | {_code(o.ini) if o.ini else ''} | {_cell(env)} | {_cell(kind)} "
            f"| {_cell(_default(o))} | {_cell(o.help)} |"
        )
    return "\n".join(lines) + "\n"


def _prompts() -> dict[str, Any]:
    import yaml

    found: dict[str, Any] = {}
    for entry in sorted(files("pytest_llmeval").joinpath("prompts").iterdir(), key=str):
        if entry.name.endswith(".yaml"):
            data = yaml.safe_load(entry.read_text("utf-8"))
            for key, value in (data or {}).items():
                if isinstance(value, dict) and "template" in value:
                    found.setdefault(key, (entry.name, value))
    return found


def _first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    if not doc or doc == inspect.getdoc(obj.__mro__[1]):
        return ""
    return doc.split("\n\n")[0].replace("\n", " ")


#: inputs of one example for each scorer that needs no judge, model or sandbox: the hook scores
#: them when the site is built (cache off), so the value shown is the scorer's own (not
#: specificity: loading its tagger would add 1.8 s to every build)
EXAMPLES: dict[str, dict[str, Any]] = {
    "exact_match": {"output": "Paris", "expected": "paris", "case_sensitive": False},
    "levenshtein": {"output": "kitten", "expected": "sitting"},
    "numeric_diff": {"output": 95, "expected": 100},
    "json_diff": {
        "output": {"city": "Paris", "population": 2100000},
        "expected": {"city": "Paris", "population": 2161000},
    },
    "valid_json": {"output": '{"a": 1}', "schema": {"type": "object", "required": ["a"]}},
    "list_contains": {"output": ["Paris", "Rome"], "expected": ["Paris", "Berlin"]},
    "word_count_match": {
        "output": "The cat sat on the mat",
        "expected": "A cat sat on the red mat today",
    },
    "readability": {"output": "The cat sat on the mat. It was warm and happy."},
    "tool_correctness": {
        "output": ["search_flights", "book_flight"],
        "expected": ["search_flights", "book_flight", "send_receipt"],
    },
    "tool_call_accuracy": {
        "output": [{"name": "search_flights", "arguments": {"to": "Rome"}}],
        "expected": [{"name": "search_flights", "arguments": {"to": "Rome", "date": "2026-12-01"}}],
    },
}


def _literal(value: Any) -> str:
    """A Python literal of an example value, double-quoted as ruff format writes it."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, str) and '"' in value and "'" not in value:
        return repr(value)  # single quotes: fewer escapes
    return json.dumps(value, ensure_ascii=False)


def _example(name: str) -> list[str]:
    """A runnable example of ``name`` and what it printed when the site was built."""
    from pytest_llmeval import configure, score

    configure(cache_mode="off")
    inputs = EXAMPLES[name]
    result = score(name, **inputs)
    args = "".join(f", {k}={_literal(v)}" for k, v in inputs.items())
    code = [
        "from pytest_llmeval import score",
        "",
        f'result = score("{name}"{args})',
        "print(round(result.value, 4), result.rationale)",
    ]
    if len(code[2]) > 99:
        lines = [f'result = score(\n    "{name}",']
        lines += [f"    {k}={_literal(v)}," for k, v in inputs.items()]
        code[2:3] = [*lines, ")"]
    return [
        "",
        "Example (run when this page was built; the output is what it printed):",
        "",
        "```python",
        *code,
        "```",
        "",
        "```text",
        f"{round(result.value, 4)} {result.rationale}",
        "```",
    ]


def scorers_page(quirks: str = "") -> str:
    """``quirks``: the text of docs/quirks.md; a scorer it names (by any spelling, as code)
    links there for its reference parity and documented quirks."""
    from pytest_llmeval import default_registry
    from pytest_llmeval.judge.params import JUDGE_OPTIONS

    prompts = _prompts()
    names = default_registry.names()
    out = [f"{len(names)} scorers are registered.", ""]
    out += ["| scorer | inputs | range | direction | judge |", "|---|---|---|---|---|"]
    classes = {name: default_registry.get(name) for name in names}
    for name, cls in classes.items():
        low, high = cls.score_range
        out.append(
            f"| [`{name}`](#{name}) | {', '.join(cls.required_inputs)} | {low:g} to {high:g} "
            f"| {'higher' if cls.higher_is_better else 'lower'} is better "
            f"| {'yes' if cls.uses_judge else 'no'} |"
        )
    for name, cls in classes.items():
        low, high = cls.score_range
        out += ["", f"## `{name}` {{#{name}}}", ""]
        about = cls.description or _first_paragraph(cls)
        if about:
            out += [_prose(about[0].upper() + about[1:]), ""]
        if cls.aliases:
            out.append(f"- **Also spelt**: {', '.join(_code(a) for a in cls.aliases)}")
        out.append(f"- **Inputs**: {', '.join(_code(i) for i in cls.required_inputs)}")
        if cls.optional_inputs:
            out.append(f"- **Optional inputs**: {', '.join(_code(i) for i in cls.optional_inputs)}")
        direction = "higher is better" if cls.higher_is_better else "lower is better"
        out.append(f"- **Range**: {low:g} to {high:g}, {direction}")
        out.append(f"- **Uses a judge**: {'yes' if cls.uses_judge else 'no'}")
        out.append(f"- **Version** (part of the cache key): {_code(cls.version)}")
        if any(f"`{spelling}`" in quirks for spelling in (name, *cls.aliases)):
            out.append("- **Reference parity and quirks**: see [Reference quirks](../quirks.md)")
        options = dict(cls.default_options)
        if options:
            shown = ", ".join(f"{_code(k)} = {_code(repr(v))}" for k, v in options.items())
            out.append(f"- **Options** (defaults): {shown}")
        if cls.uses_judge:
            extra = [k for k in JUDGE_OPTIONS if k not in options]
            out.append(f"- **Judge options**: {', '.join(_code(k) for k in extra)}")
        if name in EXAMPLES:
            out += _example(name)
        bound = "min" if cls.higher_is_better else "max"
        edge = high if cls.higher_is_better else low
        fields = list(cls.required_inputs)
        for extra_field in ("expected", "output"):
            if extra_field not in fields and extra_field in cls.optional_inputs:
                fields.insert(0, extra_field)
        args = "".join(f"{i}={i}, " for i in fields)
        out += [
            "",
            "Call shape (the values are yours):",
            "",
            "```text",
            f'assert_score("{name}", {args}{bound}={edge:g})',
            "```",
        ]
        if name in prompts:
            source, prompt = prompts[name]
            out += [
                "",
                f'??? note "What it asks the judge (`pytest_llmeval/prompts/{source}`)"',
                "",
                "    ```text",
                *("    " + line for line in str(prompt["template"]).splitlines()),
                "    ```",
            ]
            if "choice_scores" in prompt:
                scores = ", ".join(f"{k}: {v}" for k, v in prompt["choice_scores"].items())
                out += ["", f"    Choice scores: {scores}"]
    return "\n".join(out) + "\n"


def errors_page() -> str:
    from pytest_llmeval.core import errors
    from pytest_llmeval.core.trace import EmptyTraceError
    from pytest_llmeval.engine.assertions import LLMEvalAssertionError

    classes = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
    ]
    classes += [LLMEvalAssertionError, EmptyTraceError]
    out: list[str] = []
    for cls in sorted(classes, key=lambda c: c.__name__):
        bases = ", ".join(_code(b.__name__) for b in cls.__bases__)
        doc = inspect.getdoc(cls) or ""
        out += [f"## `{cls.__name__}`", "", f"`{cls.__module__}.{cls.__name__}` ({bases})", ""]
        out += [_prose(doc), ""]
    return "\n".join(out)


def _schema_rows(props: Mapping[str, Any], required: list[str]) -> list[str]:
    rows = ["| field | type | required | description |", "|---|---|---|---|"]
    for key, spec in props.items():
        kind = spec.get("type") or (spec.get("$ref", "").rsplit("/", 1)[-1] or "")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        if not kind and ("anyOf" in spec or "oneOf" in spec):
            kind = "one of several"
        rows.append(
            f"| {_code(key)} | {_cell(kind)} | {'yes' if key in required else ''} "
            f"| {_cell(spec.get('description', ''))} |"
        )
    return rows


def schema_page() -> str:
    text = files("pytest_llmeval").joinpath("schemas", "report.schema.json").read_text("utf-8")
    schema = json.loads(text)
    out = [_prose(schema.get("description", "")), "", "## Top level", ""]
    out += _schema_rows(schema.get("properties", {}), schema.get("required", []))
    for name, spec in schema.get("$defs", {}).items():
        out += ["", f"## `{name}`", ""]
        if spec.get("description"):
            out += [_prose(spec["description"]), ""]
        if "properties" in spec:
            out += _schema_rows(spec["properties"], spec.get("required", []))
        else:
            out += ["```json", json.dumps(spec, indent=2), "```"]
    out += ["", "## The whole schema", "", '??? note "report.schema.json"', "", "    ```json"]
    out += ["    " + line for line in text.splitlines()]
    out += ["    ```", ""]
    return "\n".join(out)


def api_page() -> str:
    import pytest_llmeval

    out = [f"`pytest_llmeval.__version__` is {_code(pytest_llmeval.__version__)} here.", ""]
    for name in pytest_llmeval.__all__:
        if name.startswith("__"):
            continue
        out += [f"::: pytest_llmeval.{name}", "    options:", "      heading_level: 2", ""]
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "options": options_page,
    "scorers": lambda: scorers_page(_QUIRKS[0] if _QUIRKS else ""),
    "errors": errors_page,
    "report-schema": schema_page,
    "api": api_page,
}


_QUIRKS: list[str] = []


def on_config(config: Any) -> Any:
    from pathlib import Path

    _QUIRKS[:] = [(Path(config["docs_dir"]) / "quirks.md").read_text("utf-8")]
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_uri}: no generator named {name!r}")
        return GENERATORS[name]()

    return _MARKER.sub(replace, markdown)


_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """The docstrings' reST roles (``:class:`Scorer```) as plain code, not role text: the
    Python handler renders the backticked name as code and leaves the role's name before it."""
    return _ROLE.sub("", html)

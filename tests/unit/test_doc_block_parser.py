"""The parser behind tests/integration/test_doc_blocks.py: fences, directives, output matching."""

from __future__ import annotations

from pathlib import Path

from doc_blocks import blocks, missing_lines, terminal_text

PAGE = """# A page

<!-- block: test test_a.py -->
```python
def test_a():
    pass
```

<!-- block: not-run: an install -->

```bash
pip install x
```

??? note "indented"

    <!-- block: output -->
    ```text
    1 passed in 0.70s
    ```

````markdown
~~~text
inner
~~~
````

```
no directive
```
"""


def test_blocks_their_lines_directives_and_code(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text(PAGE)
    found = blocks(tmp_path, tmp_path / "p.md")
    assert [(b.line, b.lang, b.kind, b.arg) for b in found] == [
        (4, "python", "test", "test_a.py"),
        (11, "bash", "not-run", "an install"),  # a blank line between is allowed
        (18, "text", "output", ""),
        (22, "markdown", "", ""),  # the ~~~ block inside the ```` one is its content
        (28, "", "", ""),
    ]
    assert found[0].code == "def test_a():\n    pass\n"
    assert found[2].code == "1 passed in 0.70s\n"  # dedented out of the admonition
    assert found[3].code == "~~~text\ninner\n~~~\n"
    assert str(found[1].where) == "p.md:11"


def test_shown_output_matches_modulo_timings_ports_paths_and_rules(tmp_path: Path) -> None:
    real = (
        f"rootdir: {tmp_path}\n"
        "=============== 4 passed in 2.07s ===============\n"
        "judge at http://127.0.0.1:41995/v1 took 9.9 s\n"
    )
    shown = (
        "rootdir: /somewhere/else\n...\n"
        "==== 4 passed in 1.82s ====\n"
        "judge at http://127.0.0.1:58409/v1 took 8.6 s\n"
    )
    assert missing_lines(shown, real, tmp_path) == ["rootdir: /somewhere/else"]
    assert missing_lines(shown.replace("/somewhere/else", str(tmp_path)), real, tmp_path) == []
    # the project's directory as a page writes it
    assert missing_lines(shown.replace("/somewhere/else", "/path/to/project"), real, tmp_path) == []
    # in order: a line shown before one it follows in the real output is missing
    assert missing_lines("b\na\n", "a\nb\n") == ["a"]
    assert missing_lines("5 passed\n", real) == ["5 passed"]


def test_arguments_of_shell_and_output(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text(
        "<!-- block: shell tty -->\n```bash\npytest\n```\n\n"
        "<!-- block: output llm-eval.md -->\n```markdown\n# x\n```\n"
    )
    found = blocks(tmp_path, tmp_path / "p.md")
    assert [(b.kind, b.arg) for b in found] == [("shell", "tty"), ("output", "llm-eval.md")]


def test_terminal_text_keeps_a_line_drawn_then_erased() -> None:
    # pytest's dots, then a status line drawn below them in colour, erased and redrawn: each
    # drawing is a line, the escape sequences gone
    raw = (
        "test_a.py ..\r\n\x1b[32mllm-eval: 2/4 cases\x1b[0m\r\x1b[K\x1b[1A\x1b[12C."
        "\r\nllm-eval: 3/4 cases\r\x1b[K\x1b]8;;http://x\x07link\x1b]8;;\x07\n"
    )
    assert terminal_text(raw).splitlines() == [
        "test_a.py ..",
        "llm-eval: 2/4 cases",
        ".",
        "llm-eval: 3/4 cases",
        "link",
    ]
    assert missing_lines("llm-eval: 3/4 cases\n", terminal_text(raw)) == []


def test_opentelemetry_ids_are_placeholders() -> None:
    shown = 'ev 4a7bbaf78acffb0866e766187588dce1 1688c9c3f49b3b30 {"id": "2d4863f0bef096d4"}'
    real = 'ev 0123456789abcdef0123456789abcdef 0123456789abcdef {"id": "fedcba9876543210"}'
    assert missing_lines(shown, real) == []
    # a trace id is not a span id, and other hex (a short hash) is kept
    assert missing_lines("id 1688c9c3f49b3b30\n", "id 4a7bbaf78acffb0866e766187588dce1\n")
    assert missing_lines("commit 1688c9c\n", "commit 2d4863f\n")


def test_dates_and_result_sizes_are_placeholders() -> None:
    shown = "entries: 5, 4593 bytes of results; oldest 2026-11-22 17:29:19 UTC\n"
    real = "entries: 5, 4592 bytes of results; oldest 2026-11-26 22:00:25 UTC\n"
    assert missing_lines(shown, real) == []
    assert missing_lines(shown, real.replace("5,", "6,")) == [
        "entries: 5, <n> bytes of results; oldest <date>"
    ]
    # a file's size on disk is compared as it is
    assert missing_lines("28672 bytes on disk\n", "32768 bytes on disk\n")

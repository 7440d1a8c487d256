"""The Markdown summary for CI (``--llm-eval-markdown``, ``merge --markdown``, the GitHub step
summary), read the way GitHub reads it: rendered by a real CommonMark renderer with GFM tables
(markdown-it-py, ``gfm-like``: tables, strikethrough, autolinks, raw HTML on), and checked by the
cells of the tables it parses to, never by matching strings in the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

MD = MarkdownIt("gfm-like")


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    #: the inline token types of each body cell (a hostile text must stay one code span)
    kinds: list[list[list[str]]] = field(default_factory=list)

    def column(self, name: str) -> list[str]:
        i = self.header.index(name)
        return [r[i] for r in self.rows]

    def row(self, **match: str) -> dict[str, str]:
        found = [
            dict(zip(self.header, r, strict=True))
            for r in self.rows
            if all(dict(zip(self.header, r, strict=True))[k] == v for k, v in match.items())
        ]
        assert len(found) == 1, (match, self.rows)
        return found[0]


def _inline_text(token: Token) -> str:
    out = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
    return "".join(out)


def _kinds(token: Token) -> list[str]:
    return [c.type for c in token.children or () if c.type != "text" or c.content.strip()]


@dataclass
class Doc:
    """A Markdown text as markdown-it parses it: its headings, the tables under each, the
    paragraphs and the fenced blocks (keyed by the paragraph before them)."""

    source: str
    tokens: list[Token]
    tables: dict[str, list[Table]] = field(default_factory=dict)
    paragraphs: list[str] = field(default_factory=list)
    fences: dict[str, list[str]] = field(default_factory=dict)
    headings: list[str] = field(default_factory=list)
    quotes: list[str] = field(default_factory=list)

    def table(self, heading: str) -> Table:
        (table,) = self.tables[heading]
        return table

    def all_tokens(self) -> Iterator[Token]:
        for t in self.tokens:
            yield t
            yield from t.children or ()


def parse(source: str) -> Doc:
    tokens = MD.parse(source)
    doc = Doc(source, tokens)
    heading = ""
    last_paragraph = ""
    i = 0
    in_quote = False
    while i < len(tokens):
        t = tokens[i]
        if t.type == "heading_open":
            heading = _inline_text(tokens[i + 1])
            doc.headings.append(heading)
        elif t.type == "blockquote_open":
            in_quote = True
        elif t.type == "blockquote_close":
            in_quote = False
        elif t.type == "paragraph_open":
            last_paragraph = _inline_text(tokens[i + 1])
            (doc.quotes if in_quote else doc.paragraphs).append(last_paragraph)
        elif t.type == "fence":
            doc.fences[last_paragraph] = t.content.splitlines()
        elif t.type == "table_open":
            header: list[str] = []
            rows: list[list[str]] = []
            kinds: list[list[list[str]]] = []
            i += 1
            while tokens[i].type != "table_close":
                tok = tokens[i]
                if tok.type == "tr_open":
                    rows.append([])
                    kinds.append([])
                elif tok.type == "inline":
                    rows[-1].append(_inline_text(tok))
                    kinds[-1].append(_kinds(tok))
                i += 1
            header, body = rows[0], rows[1:]
            assert all(len(r) == len(header) for r in body), (header, body)
            doc.tables.setdefault(heading, []).append(Table(header, body, kinds[1:]))
        i += 1
    return doc


def _markup_tokens(doc: Doc) -> list[str]:
    """Links, images, raw HTML and strikethrough anywhere: none of them is ever this writer's."""
    bad = {"link_open", "image", "html_inline", "html_block", "s_open"}
    return [t.type for t in doc.all_tokens() if t.type in bad]

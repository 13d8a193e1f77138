"""The code blocks of the README and of the site's pages (``docs/**/*.md``), for the tests that run them.

A fenced block is ```` ```<lang> ```` … ```` ``` ````; a block that a test must not run is preceded by the line
``<!-- not run: <reason> -->`` (the reason is required: tests/test_doc_snippets.py checks it).
"""

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: the README and every page of the site (generated API pages and the build excluded)
PAGES = [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*.md")
                                      if not {"_build", "generated"} & set(p.relative_to(DOCS).parts))
_FENCE = re.compile(r"(?:<!-- not run: (?P<reason>[^>]*?) -->\s*\n)?^```(?P<lang>[a-z]*)[^\n]*\n(?P<text>.*?)^```\s*$",
                    re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page, language, first line (1-based), text and, if it is not run, why."""

    page: Path
    lang: str
    line: int
    text: str
    not_run: str | None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(page: Path, lang: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (of language ``lang`` if given), in order."""
    source = page.read_text()
    out = []
    for m in _FENCE.finditer(source):
        if lang is None or m.group("lang") == lang:
            line = source.count("\n", 0, m.start("lang")) + 1
            out.append(Block(page, m.group("lang"), line, m.group("text"), m.group("reason")))
    return out

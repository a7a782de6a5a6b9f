"""Find and run the code blocks of the Markdown docs (README.md and docs/**/*.md).

A fenced block is run according to its language:

- ``python``: executed in the page's namespace (blocks of a page run in order and share it, as a
  reader would type them). A block that holds ``>>>`` prompts is a doctest instead: each output
  shown must be the real output (``...`` matches anything, whitespace is normalised).
- ``console``: each ``$ command`` line is run in a shell and its output must match the lines shown
  under it (the same doctest comparison: a line ``...`` skips lines, ``...`` inside a line skips
  text).
- ``bash``: install commands; run by tests/test_getting_started.py (the Getting started page and
  the README), not here.
- anything else (``text``, ``toml``, ``json``): shown, not run.

A block is left out only with a reason, written in an HTML comment on the line before its fence:
``<!-- not run: needs a PostgreSQL server -->``. A Python block left out is still compiled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"^\s*<!--\s*not run:\s*(.+?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
RUN_LANGS = {"python", "console"}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None  # the reason it is not run, or None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def is_doctest(self) -> bool:
        return self.lang == "python" and any(ln.lstrip().startswith(">>>") for ln in self.code.splitlines())


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path``, with their indentation removed."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.group(1), m.group(2), m.group(3).lower()
        skip = None
        if i > 0 and (s := SKIP.match(lines[i - 1])):
            skip = s.group(1)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip() == ticks and lines[j].startswith(indent)):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        out.append(Block(path, i + 1, lang, "\n".join(body) + "\n", skip))
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for p in markdown_files() for b in blocks(p)]


def console_commands(code: str) -> list[tuple[str, str]]:
    """``[(command, expected output)]`` of a console block."""
    out: list[tuple[str, str]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], ""))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + line + "\n")
    return out

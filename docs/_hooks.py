"""MkDocs hooks for the context-compactor site (``hooks:`` in mkdocs.yml), and a script.

- The configuration table of ``docs/configuration.md`` is generated from ``CompactionConfig``
  (``dataclasses.fields``: names and defaults) and the ``#:`` comment above each field in
  ``config.py`` (its meaning), between the two ``<!-- generated: ... -->`` markers. The build
  regenerates it, so the site cannot drift; ``python docs/_hooks.py`` rewrites the committed
  page (which ``tests/test_docs_config.py`` checks), so the Markdown read unrendered cannot
  either.
- ``llms.txt`` (the page list with each page's first sentence) and ``llms-full.txt`` (every
  page's Markdown, in nav order) are generated into the site (https://llmstxt.org). Nothing is
  fetched.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PAGE = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- generated: config-table (python docs/_hooks.py) -->"
END = "<!-- end generated: config-table -->"


def _field_comments() -> dict[str, str]:
    """The ``#:`` comment block right above each field of ``CompactionConfig`` in config.py."""
    import context_compactor.config as config

    lines = Path(config.__file__).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("class CompactionConfig"))
    out: dict[str, str] = {}
    comment: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("    def ") or line.startswith("    @"):
            break
        stripped = line.strip()
        if stripped.startswith("#:"):
            comment.append(stripped[2:].strip())
            continue
        m = re.match(r"^    (\w+): ", line)
        if m and comment:
            out[m.group(1)] = " ".join(comment)
        comment = []
    return out


def _rst_to_md(text: str) -> str:
    """The comments' reStructuredText roles and literals as Markdown."""
    text = re.sub(r":(?:class|attr|meth|func):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def _default(field: dataclasses.Field[Any]) -> str:
    if field.name == "selective_rules":
        return "see below"
    value = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"`{value:_}`"
    return f"`{value!r}`"


def config_table() -> str:
    """The Markdown of the generated part of the configuration page."""
    from context_compactor.config import DEFAULT_SELECTIVE_RULES, PRESETS, CompactionConfig

    meanings = _field_comments()
    missing = [f.name for f in dataclasses.fields(CompactionConfig) if f.name not in meanings]
    if missing:
        raise SystemExit(f"CompactionConfig fields without a '#:' comment in config.py: {missing}")
    rows = ["| field | default | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(CompactionConfig):
        rows.append(f"| `{f.name}` | {_default(f)} | {_rst_to_md(meanings[f.name])} |")
    rules = ["| item | action | priority |", "|---|---|---|"]
    rules += [f"| `{r.item}` | `{r.action}` | {r.priority} |" for r in DEFAULT_SELECTIVE_RULES]
    keys = sorted({k for values in PRESETS.values() for k in values})
    presets = ["| preset | " + " | ".join(f"`{k}`" for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, values in PRESETS.items():
        presets.append(f"| `{name}` | " + " | ".join(f"{values.get(k, '')!r}" for k in keys) + " |")
    return "\n".join(
        [
            BEGIN,
            f"`CompactionConfig` has {len(rows) - 2} fields; every one is also a keyword of `ContextCompactor`.",
            "",
            *rows,
            "",
            "The default `selective_rules`, in priority order (lower runs first):",
            "",
            *rules,
            "",
            "The presets (`CompactionConfig.preset(name, **overrides)`):",
            "",
            *presets,
            END,
        ]
    )


def render_config_page(text: str) -> str:
    """``text`` (the configuration page) with its generated part replaced by the current one."""
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        raise SystemExit(f"{CONFIG_PAGE}: the markers {BEGIN!r} ... {END!r} are missing")
    return text[:begin] + config_table() + text[end + len(END) :]


# --- MkDocs hooks -------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "configuration.md":
        return render_config_page(markdown)
    return markdown


def _nav_pages(nav: Any) -> list[str]:
    """The ``src_uri`` of every page of the nav, in order."""
    out: list[str] = []
    for item in nav:
        if isinstance(item, dict):
            for value in item.values():
                out += _nav_pages(value) if isinstance(value, list) else [value]
        elif isinstance(item, list):
            out += _nav_pages(item)
        else:
            out.append(item)
    return out


def _first_sentence(markdown: str) -> str:
    """The first sentence of a page's first paragraph of prose (not a heading, list, table or code)."""
    markdown = re.sub(r"^(\s*)(`{3,}).*?^\1\2\s*$", "", markdown, flags=re.M | re.S)
    for block in re.split(r"\n\s*\n", markdown):
        block = block.strip()
        if not block or block[0] in "#|-*<>!" or block.startswith(("::: ", "--8<--")) or block[0].isdigit():
            continue
        text = " ".join(block.split())
        m = re.match(r"(.+?[.:])(\s|$)", text)
        return (m.group(1) if m else text)[:300]
    return ""


def _title(markdown: str, fallback: str) -> str:
    m = re.search(r"^# (.+)$", markdown, re.M)
    return m.group(1).strip() if m else fallback


def on_files(files: Any, config: Any) -> Any:
    """Add llms.txt and llms-full.txt, made from the pages' Markdown sources in nav order."""
    from mkdocs.structure.files import File

    docs_dir = Path(config["docs_dir"])
    index = [f"# {config['site_name']}", "", f"> {config.get('site_description') or ''}", ""]
    full: list[str] = []
    index.append("## Docs")
    index.append("")
    for src in _nav_pages(config["nav"] or []):
        md = (docs_dir / src).read_text(encoding="utf-8")
        if src == "configuration.md":
            md = render_config_page(md)
        url = src[: -len(".md")] + ".html"
        index.append(f"- [{_title(md, src)}]({url}): {_first_sentence(md)}")
        full += [f"<!-- page: {url} -->", md.rstrip(), ""]
    files.append(File.generated(config, "llms.txt", content="\n".join(index) + "\n"))
    files.append(File.generated(config, "llms-full.txt", content="\n".join(full)))
    return files


if __name__ == "__main__":
    check = "--check" in sys.argv
    current = CONFIG_PAGE.read_text(encoding="utf-8")
    wanted = render_config_page(current)
    if check:
        sys.exit(0 if wanted == current else f"{CONFIG_PAGE} is out of date: run python docs/_hooks.py")
    if wanted != current:
        CONFIG_PAGE.write_text(wanted, encoding="utf-8")
        print(f"rewrote {CONFIG_PAGE}")

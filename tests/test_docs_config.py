"""The docs cannot drift from the code: the configuration table is generated, README figures exist once.

- docs/configuration.md holds the table docs/_hooks.py generates from ``CompactionConfig`` (every
  field, its default and the ``#:`` comment above it in config.py); the site build regenerates it,
  and this test keeps the committed Markdown (read unrendered, e.g. on a forge) current too.
- Each figure of the README's "Figures" table is on the page it links to, with the same numbers,
  so no figure is in two places with two values.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

from context_compactor import CompactionConfig

REPO = Path(__file__).resolve().parent.parent


def _hooks():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_docs_hooks", REPO / "docs" / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_page_is_the_generated_one() -> None:
    hooks = _hooks()
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert hooks.render_config_page(page) == page, "docs/configuration.md is stale: run `make docs-config`"


def test_every_field_is_in_the_table_with_its_default() -> None:
    table = _hooks().config_table()
    for f in dataclasses.fields(CompactionConfig):
        row = next((ln for ln in table.splitlines() if ln.startswith(f"| `{f.name}` |")), None)
        assert row is not None, f.name
        if f.name != "selective_rules":
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            shown = row.split("|")[2].strip().strip("`").replace("_", "")
            assert shown == repr(default).replace("_", ""), (f.name, shown)


def test_the_readme_figures_are_those_of_their_pages() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Figures", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "](docs/" in ln]
    assert len(rows) >= 5
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        value, link = cells[1], cells[-1]
        page = REPO / re.search(r"\]\((docs/[^)#]+)", link).group(1)  # type: ignore[union-attr]
        text = page.read_text(encoding="utf-8")
        for number in re.findall(r"\d[\d,.]*\d|\d", value):
            assert number in text, f"README figure {value!r} ({cells[0]}): {number} is not on {page.name}"

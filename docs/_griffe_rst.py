"""A griffe extension for the API reference (mkdocs.yml, mkdocstrings' ``extensions``).

The docstrings are Google style with Sphinx roles (``:class:`Session```, ``:meth:`apply```) and
doubled backticks, and their examples sit under ``Example:``. Rendered by mkdocstrings, a role
shows as raw text and an ``Example:`` section is an admonition whose ``>>>`` lines read as a
block quote. This rewrites each docstring before it is parsed: roles and ``literals`` as Markdown
code, ``Example:`` as ``Examples:`` (which griffe renders as Python console blocks).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj|const):`~?\.?([^`]+)`")


class RstToMarkdown(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        doc = obj.docstring
        if doc is None:
            return
        text = ROLE.sub(r"`\1`", doc.value)
        text = re.sub(r"``([^`]+)``", r"`\1`", text)
        text = re.sub(r"^(\s*)Example:\s*$", r"\1Examples:", text, flags=re.M)
        doc.value = text

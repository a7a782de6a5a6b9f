"""The adapters are optional: importing the package (or ``context_compactor.integrations``)
imports no framework."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_package_imports_no_framework() -> None:
    code = (
        "import sys, context_compactor, context_compactor.integrations\n"
        "c = context_compactor.ContextCompactor()\n"
        "bad = [m for m in ('langchain', 'langchain_core', 'langgraph', 'pydantic_ai') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""Context windows per model, for the proxy (``--models FILE`` adds to or overrides the table).

A model name matches the longest entry it starts with (``gpt-4o-2024-08-06`` → ``gpt-4o``), so
dated snapshots need no entry of their own. An unknown model is forwarded unchanged (the proxy
cannot tell when it would be over its window) and the response says so in ``X-Compactor``.

The figures are the providers' documented input windows as of this release (total context;
the reply's ``max_tokens`` is the reserve).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["BUILTIN_WINDOWS", "Windows"]

BUILTIN_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "codex-mini": 200_000,
    # Anthropic (the 1M-token beta is opt-in per request: give it with --models)
    "claude-": 200_000,
}


class Windows:
    """Window lookup: exact name first, then the longest table entry the name starts with."""

    def __init__(self, overrides: Mapping[str, int] | None = None) -> None:
        self.table = {**BUILTIN_WINDOWS, **(overrides or {})}
        self._prefixes = sorted(self.table, key=len, reverse=True)

    def get(self, model: object) -> int | None:
        """The window of ``model``, ``None`` when it is not in the table."""
        if not isinstance(model, str) or not model:
            return None
        exact = self.table.get(model)
        if exact is not None:
            return exact
        for prefix in self._prefixes:
            if model.startswith(prefix):
                return self.table[prefix]
        return None

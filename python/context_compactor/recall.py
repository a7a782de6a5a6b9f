"""The ``recall`` tool: the agent reads back what a compaction cleared, cut or summarized.

With ``recall=True`` every placeholder the compactor writes (cleared tool output, cut call
arguments, a summary) names the id of its original text, e.g. ``[context-compactor: output of
bash cleared, 10256 chars / ~2900 tokens; recall("3f9a0c1d2e4b")]``. The originals are kept by
a :class:`~context_compactor.Session` (in its store, with the compaction that wrote them) or in
``offload_dir`` (``recall-<id>.txt``). This module gives the tool's definition in each wire
format and the one handler that answers it::

    recall = Recall(session)                        # or Recall("/path/to/offload_dir", config=cfg)
    tools = [recall.definition("openai"), ...]       # counts toward the budget like any tool
    text = recall.call(tool_name, arguments)         # the name may carry an MCP prefix

Pages: ``recall(id, start=0, count=None, pattern=None)`` returns at most ``page_tokens`` tokens
(``min(2000, 10% of the budget)``) of the original from character ``start`` (a header names
the next ``start``), or, with ``pattern`` (a regular expression, or a plain substring when it is
not one), the matching lines with their numbers from line ``start``, at most ``count`` of them.
Framework tools (LangChain, pydantic-ai, the Agents SDK) are in each integration module
(``recall_tool``); an MCP server is in :mod:`context_compactor.mcp_server`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError
from context_compactor.tokens import TokenCounter

__all__ = ["DESCRIPTION", "PARAMETERS", "TOOL_NAME", "Recall", "is_recall_tool", "recall_ids"]

#: The tool's name (an MCP client shows it prefixed: ``mcp__context-compactor__recall``).
TOOL_NAME = "recall"
#: What the model reads about the tool.
DESCRIPTION = (
    "Read back the original text that context compaction replaced. Placeholders and summaries "
    'in this conversation name an id, e.g. recall("3f9a0c1d2e4b"): pass it as `id`. Returns one '
    "page of the original from character `start` (the header gives the next `start`), or with "
    "`pattern` (a regular expression or plain text) the matching lines with their numbers."
)
#: The arguments' JSON schema.
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": 'The id a placeholder names: recall("<id>").'},
        "start": {
            "type": "integer",
            "description": "Character offset to read from (with pattern: the first line number to search).",
        },
        "count": {
            "type": "integer",
            "description": "At most this many characters (with pattern: matching lines). Pages are bounded anyway.",
        },
        "pattern": {"type": "string", "description": "Return only the lines matching this regex or text."},
    },
    "required": ["id"],
}

_ID = re.compile(r"[0-9a-f]{12}")
#: ``recall("<id>")`` as placeholders write it (escaped inside JSON arguments: ``recall(\"<id>\")``).
_REF = re.compile(r'recall\(\\?"([0-9a-f]{12})\\?"\)')
#: Pages are at most this many tokens, and at most a tenth of the budget.
MAX_PAGE_TOKENS = 2_000

if TYPE_CHECKING:
    # The formats' names are declared once, in the stub (`_core.FORMATS` at run time).
    from context_compactor._core import _Format as Format


def is_recall_tool(name: str) -> bool:
    """Whether ``name`` is the recall tool: ``recall``, or with an MCP-style prefix
    (``mcp__context-compactor__recall``, ``context-compactor.recall``, ``server/recall``).
    The same rule as the core's, which keeps recall results from being stored again."""
    base = re.split(r"[./:]", name)[-1]
    return base.split("__")[-1] == TOOL_NAME


def recall_ids(text: str) -> list[str]:
    """The recall ids ``text`` names, in order (each once)."""
    return list(dict.fromkeys(_REF.findall(text)))


class Recall:
    """The recall handler over one session's originals (or one ``offload_dir``).

    Args:
        source: A :class:`~context_compactor.Session`, or the ``offload_dir`` path the compactor
            wrote ``recall-<id>.txt`` files to.
        config: The compaction config (its budget bounds the page, its tokenizer counts it);
            taken from the session when ``source`` is one, else the defaults.
        page_tokens: Override the page size (never above ``min(2000, budget // 10)``).

    Example:
        recall = Recall(session)
        recall("3f9a0c1d2e4b")            # the first page of that original
    """

    def __init__(self, source: Any, *, config: CompactionConfig | None = None, page_tokens: int | None = None) -> None:
        self._dir: str | None = None
        self._store: Any = None
        self._session_id = ""
        if isinstance(source, (str, os.PathLike)):
            self._dir = os.fspath(source)
        elif hasattr(source, "store") and hasattr(source, "compactor") and hasattr(source, "id"):
            self._store, self._session_id = source.store, source.id
            config = config or source.compactor.config
        else:
            raise ConfigError(
                f"recall: expected a Session or an offload_dir path, got {type(source).__name__}", "recall"
            )
        cfg = config or CompactionConfig()
        limit = max(64, min(MAX_PAGE_TOKENS, cfg.budget // 10))
        self.page_tokens = limit if page_tokens is None else max(1, min(page_tokens, limit))
        self._counter = TokenCounter(cfg.tokenizer)

    @classmethod
    def from_store(cls, store: Any, session_id: str, *, config: CompactionConfig | None = None) -> Recall:
        """The handler over one session of a :class:`~context_compactor.SessionStore` (opened
        read-only in effect: nothing is written), e.g. for the MCP server."""
        self = cls.__new__(cls)
        cls.__init__(self, "", config=config)
        self._dir, self._store, self._session_id = None, store, session_id
        return self

    # -- where the originals are ----------------------------------------------------------------------

    def lookup(self, id: str) -> str | None:
        """The original text under ``id``, or ``None`` (unknown, pruned, or its file removed)."""
        id = id.strip().strip('"').lower()
        if not _ID.fullmatch(id):
            return None
        if self._dir is not None:
            path = os.path.join(self._dir, f"recall-{id}.txt")
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        for c in reversed(self._store.compactions(self._session_id)):
            found = (c.details.get("recall") or {}).get(id)
            if found is not None:
                return str(found)
        return None

    def originals(self) -> Iterator[tuple[str, str]]:
        """Every ``(id, original)`` of this session or directory (each id once)."""
        seen: set[str] = set()
        if self._dir is not None:
            try:
                names = sorted(os.listdir(self._dir))
            except FileNotFoundError:
                return
            for n in names:
                m = re.fullmatch(r"recall-([0-9a-f]{12})\.txt", n)
                if m and m.group(1) not in seen:
                    text = self.lookup(m.group(1))
                    if text is not None:
                        seen.add(m.group(1))
                        yield m.group(1), text
            return
        for c in self._store.compactions(self._session_id):
            for id, text in (c.details.get("recall") or {}).items():
                if id not in seen:
                    seen.add(id)
                    yield id, str(text)

    # -- the handler ----------------------------------------------------------------------------------

    def __call__(self, id: str, start: int = 0, count: int | None = None, pattern: str | None = None) -> str:
        """One page of the original under ``id`` (see the module note); a message the model
        can act on when the id is unknown or the arguments are wrong."""
        if not isinstance(id, str) or not id.strip():
            return 'recall: pass the id a placeholder names, e.g. recall("3f9a0c1d2e4b").'
        text = self.lookup(id)
        key = id.strip().strip('"').lower()
        if text is None:
            return (
                f'recall: no original is stored under id "{key}" (unknown, pruned with its session, or '
                "its offload file removed). Check the id in the placeholder (12 hex digits); if it is "
                "right, the text cannot be read back: run the tool that produced it again if you need it."
            )
        try:
            start = max(0, int(start or 0))
            count = None if count is None else max(1, int(count))
        except (TypeError, ValueError):
            return "recall: start and count must be integers."
        if pattern:
            return self._grep(key, text, pattern, start, count)
        return self._page(key, text, start, count)

    def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Answer a tool call by name (with or without an MCP prefix) and arguments (a mapping or
        the JSON text a provider sends).

        Raises:
            ValueError: ``name`` is not the recall tool.
        """
        if not is_recall_tool(name):
            raise ValueError(f"{name!r} is not the recall tool")
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                return 'recall: the arguments are not JSON; call it as recall({"id": "<id>"}).'
            arguments = parsed if isinstance(parsed, dict) else {}
        args: dict[str, Any] = dict(arguments or {})
        return self(
            str(args.get("id", "")),
            start=args.get("start") or 0,
            count=args.get("count"),
            pattern=args.get("pattern"),
        )

    def search(self, query: str, *, regex: bool = False, max_hits: int = 20) -> str:
        """The lines of this session's originals that contain ``query`` (a regular expression with
        ``regex=True``), as ``<id>:<line>: <text>``: at most ``max_hits`` (50 at most) lines of at
        most 300 characters, within one page. Only this handler's session (or directory) is read."""
        if not query:
            return "search: pass a non-empty query."
        if regex:
            try:
                rx = re.compile(query)
            except re.error as e:
                return f"search: {query!r} is not a valid regular expression ({e}); pass regex=false for plain text."
        max_hits = max(1, min(int(max_hits), 50))
        hits: list[str] = []
        used = 0
        total = 0
        for id, text in self.originals():
            for i, line in enumerate(text.splitlines()):
                if not (rx.search(line) if regex else query in line):
                    continue
                total += 1
                if len(hits) >= max_hits:
                    continue
                entry = f"{id}:{i}: {line[:300]}"
                cost = self._counter.count(entry) + 1
                if used + cost > self.page_tokens:
                    max_hits = len(hits)
                    continue
                hits.append(entry)
                used += cost
        head = f"[search {json.dumps(query)}: {total} matching lines, {len(hits)} shown"
        head += '; read one with recall("<id>", pattern=...)]' if hits else "]"
        return "\n".join([head, *hits])

    def page_text(self, page: str) -> str:
        """The original's part of a page this handler returned (without its header line)."""
        return page.split("\n", 1)[1] if "\n" in page else ""

    def _fits(self, text: str) -> bool:
        return self._counter.count(text) <= self.page_tokens

    def _page(self, id: str, text: str, start: int, count: int | None) -> str:
        n = len(text)
        start = min(start, n)
        end = n if count is None else min(n, start + count)
        # About four characters a token first, then shrink until it fits the page.
        end = min(end, start + self.page_tokens * 4)
        while end > start + 1 and not self._fits(text[start:end]):
            end = start + max(1, (end - start) * 4 // 5)
        if end < n:
            # End on a line when one ends in the last fifth of the page.
            nl = text.rfind("\n", start, end)
            if nl >= start + (end - start) * 4 // 5:
                end = nl + 1
        more = f'; next: recall("{id}", start={end})' if end < n else " (end)"
        return f"[recall {id}: characters {start}-{end} of {n}{more}]\n{text[start:end]}"

    def _grep(self, id: str, text: str, pattern: str, start: int, count: int | None) -> str:
        try:
            rx: re.Pattern[str] | None = re.compile(pattern)
        except re.error:
            rx = None  # not a regex: a substring

        def match(line: str) -> bool:
            return bool(rx.search(line)) if rx is not None else pattern in line

        lines = text.splitlines()
        hits = [(i, line) for i, line in enumerate(lines) if i >= start and match(line)]
        shown: list[str] = []
        used = 0
        for i, line in hits[: count or len(hits)]:
            entry = f"{i}: {line}"
            cost = self._counter.count(entry) + 1
            if used + cost > self.page_tokens:
                if not shown:
                    shown.append(entry[: self.page_tokens * 2])
                break
            shown.append(entry)
            used += cost
        more = ""
        if len(shown) < len(hits):
            nxt = hits[len(shown)][0]
            more = f'; next: recall("{id}", pattern={json.dumps(pattern)}, start={nxt})'
        head = (
            f"[recall {id}: {len(hits)} lines match {json.dumps(pattern)} from line {start}, {len(shown)} shown{more}]"
        )
        return "\n".join([head, *shown])

    # -- tool definitions -------------------------------------------------------------------------------

    def definition(self, format: Format = "openai", *, name: str = TOOL_NAME) -> dict[str, Any]:
        """The tool's definition in a wire format: ``"openai"`` (a Chat Completions function),
        ``"anthropic"`` (a Messages tool), ``"responses"`` (a Responses function tool),
        ``"gemini"`` (a function declaration: put it in ``Tool(function_declarations=[...])``)."""
        return definition(format, name=name)


def definition(format: Format = "openai", *, name: str = TOOL_NAME) -> dict[str, Any]:
    """:meth:`Recall.definition` without a handler (the definition is the same for every source)."""
    params = json.loads(json.dumps(PARAMETERS))
    if format == "openai":
        return {"type": "function", "function": {"name": name, "description": DESCRIPTION, "parameters": params}}
    if format == "anthropic":
        return {"name": name, "description": DESCRIPTION, "input_schema": params}
    if format == "responses":
        return {"type": "function", "name": name, "description": DESCRIPTION, "parameters": params, "strict": False}
    if format == "gemini":
        return {"name": name, "description": DESCRIPTION, "parameters_json_schema": params}
    raise ConfigError(f"format: expected 'openai', 'anthropic', 'responses' or 'gemini', got {format!r}", "format")

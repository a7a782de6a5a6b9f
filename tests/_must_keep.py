"""Must-keep facts per corpus file (issue #23's done-when: >= 98% at windows of 30% and 128k, the
Codex rollout included; at 10% whatever is dropped is in ``must_keep_missing``), counted by a
probe of its own: neither the core's fact scanner nor the eval's reader
(``context_compactor.eval.facts``) decides what a fact is here.

The probe reads the *input* only where DESIGN says facts are (user and assistant text, and the
string values of tool-call arguments; never tool output, system prompts or reasoning) and takes
three narrow kinds, conservative on purpose (a fact it takes is one no reader would dispute):

- URLs: ``http(s)://`` and a letter or digit, then ASCII URL characters, trailing ``.,;:!?*``
  stripped;
- exception names: a capitalised identifier ending in ``Error`` or ``Exception`` with something
  before the suffix;
- paths: relative ``dir/name.ext`` with a common source or data extension, absolute paths of
  three segments or more, and bare ``name.ext`` for source extensions (``fields.py``).

Data URIs and base64 runs are blanked first. A fact is *kept* when its exact text is a substring
of some string of the compacted request (messages and system prompt), wherever it is (the kept
task or tail, the summary, a cut marker); *listed* when it is lost and some entry of
``result.must_keep_missing`` contains it.

``python tests/_must_keep.py [--windows 30%,128k,10%] [--json OUT] FILES...`` (``make must-keep``
runs the corpus) prints one line per file and window: one ``compact(force=True)`` with the
library's defaults and ``max_context_tokens`` set to the window (a share of the file's own tokens,
at least 1,500, or an absolute count such as ``128k``). ``tests/test_must_keep.py`` plants facts in
corpus conversations and checks them with the same probe.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from context_compactor import ContextCompactor
from context_compactor.io import Transcript, load

#: The smallest window a share gives (the eval's: a tiny conversation at 10% would not hold its task).
MIN_WINDOW = 1500

URL = re.compile(r"https?://[A-Za-z0-9][A-Za-z0-9\-._~:/?#@!$&*+,;=%]*")
ERROR = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Za-z0-9_]*[a-z0-9](?:Error|Exception)(?![A-Za-z0-9_])")
_EXT = r"(?:py|rs|js|ts|tsx|jsx|md|json|toml|yaml|yml|txt|c|h|cpp|go|java|rb|sh|cfg|ini|html|css|pony|jsonl)"
_SRC = r"(?:py|rs|ts|tsx|jsx|go|java|rb|sh|toml|yaml|yml|pony)"
_BEFORE = r"(?<![A-Za-z0-9_./~$@*)\]}:-])"
RELATIVE = re.compile(_BEFORE + r"(?:[A-Za-z0-9_\-]+/)+[A-Za-z0-9_\-]+\." + _EXT + r"(?![A-Za-z0-9_(/])")
ABSOLUTE = re.compile(_BEFORE + r"/(?:[A-Za-z0-9_\-.]+/){2,}[A-Za-z0-9_\-.]*[A-Za-z0-9_]")
BARE = re.compile(_BEFORE + r"[A-Za-z_][A-Za-z0-9_\-]*\." + _SRC + r"(?![A-Za-z0-9_(/])")
BINARY = re.compile(r"data:[a-z]+/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]*|[A-Za-z0-9+/=]{64,}")


def _strings(x: Any) -> Iterator[str]:
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _strings(v)


def _argument_strings(args: Any) -> Iterator[str]:
    if isinstance(args, str):
        try:
            yield from _strings(json.loads(args))
        except ValueError:
            yield args
    else:
        yield from _strings(args)


def texts(messages: Iterable[Any]) -> Iterator[str]:
    """User and assistant text and tool-call argument values (OpenAI messages, Anthropic blocks,
    Responses items)."""
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("type") in ("function_call", "custom_tool_call"):
            yield from _argument_strings(m.get("arguments", m.get("input", "")))
            continue
        if m.get("role") not in ("user", "assistant"):
            continue
        content = m.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                if b.get("type") in ("text", "input_text", "output_text"):
                    yield str(b.get("text", ""))
                elif b.get("type") in ("tool_use", "server_tool_use"):
                    yield from _argument_strings(b.get("input", {}))
        for call in m.get("tool_calls") or []:
            yield from _argument_strings((call.get("function") or {}).get("arguments", ""))


def facts_of(messages: Iterable[Any]) -> set[str]:
    """The probe's facts of ``messages``."""
    out: set[str] = set()
    for s in texts(messages):
        s = BINARY.sub(" ", s)
        out.update(u.rstrip(".,;:!?*") for u in URL.findall(s))
        s = URL.sub(" ", s)
        out.update(ERROR.findall(s))
        out.update(RELATIVE.findall(s))
        out.update(p.rstrip(".") for p in ABSOLUTE.findall(s))
        out.update(BARE.findall(s))
    return out


def request_text(messages: Sequence[Any], system: Any = None) -> str:
    """Every string of a request, one a line (a fact is kept when it is a substring of one)."""
    return "\n".join([*_strings(list(messages)), *_strings(system)])


@dataclass
class Row:
    file: str
    window: str
    window_tokens: int
    tokens_in: int
    tokens_after: int
    strategy: str
    over_budget: bool
    facts: int
    kept: int
    lost: list[str] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.kept / self.facts if self.facts else 1.0


def window_of(tokens: int, window: str) -> int:
    """``"30%"`` of ``tokens`` (at least :data:`MIN_WINDOW`), or an absolute ``"128k"`` / ``"4000"``."""
    if window.endswith("%"):
        return max(MIN_WINDOW, int(tokens * float(window[:-1]) / 100))
    return int(float(window[:-1]) * 1000) if window.endswith("k") else int(window)


def measure(transcript: Transcript, window: str, name: str = "") -> Row:
    """One forced compaction of ``transcript`` at ``window``, its facts counted by the probe."""
    t = transcript
    tokens = ContextCompactor().counter.count_each(t.messages, system=t.system, tools=t.tools, format=t.format).total
    w = window_of(tokens, window)
    r = ContextCompactor(max_context_tokens=w).compact(
        t.messages, system=t.system, tools=t.tools, format=t.format, force=True
    )
    facts = facts_of(t.messages)
    out = request_text(r.messages, r.system if r.system is not None else t.system)
    lost = sorted(f for f in facts if f not in out)
    silent = [f for f in lost if not any(f in m for m in r.must_keep_missing)]
    return Row(name or str(t.path), window, w, tokens, r.tokens_after, r.strategy, r.over_budget, len(facts),
               len(facts) - len(lost), lost, silent)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--windows", default="30%,128k,10%")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    rows = []
    for f in args.files:
        t = load(f)
        for w in args.windows.split(","):
            row = measure(t, w, f"{f.parent.name}/{f.name}")
            rows.append(row)
            print(
                f"{row.file[:64]:64} {w:>5} window {row.window_tokens:>7,} in {row.tokens_in:>7,} "
                f"after {row.tokens_after:>6,} {row.strategy:>12} over_budget={int(row.over_budget)} "
                f"facts {row.kept:>3}/{row.facts:<3} {100 * row.share:5.1f}% lost {len(row.lost)} "
                f"silent {len(row.silent)}",
                flush=True,
            )
            for fact in row.lost:
                print(f"    lost{' SILENTLY' if fact in row.silent else ', listed'}: {fact}")
    for w in args.windows.split(","):
        sel = [r for r in rows if r.window == w]
        below = [r.file for r in sel if r.share < 0.98]
        print(
            f"{w}: {sum(r.kept for r in sel)}/{sum(r.facts for r in sel)} facts kept; files under 98%: "
            f"{len(below)} {below}; silent losses: {sum(len(r.silent) for r in sel)}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    return 1 if any(r.silent for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

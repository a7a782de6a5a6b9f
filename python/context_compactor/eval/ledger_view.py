"""Where a summary's ledger starts, read the way a user reads the summary message.

The ledger (DESIGN, "The ledger") is the part of the summary the library carries verbatim: the
user's words, preserved details and the artifact trail, after the narrative, marked by a
versioned sentinel. The eval needs to tell it from the narrative (the growth probe leaves it
out; the chains check that it does not grow without new input), and it must not ask the core
where it is: this is the eval's own reading of the text, from the marks a reader sees. A
summary written before the ledger (0.2) has no sentinel: its sections start at their headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context_compactor.eval.facts import is_summary, string_values, text_of

__all__ = ["LEDGER_MARKS", "SENTINEL", "growth_allowance", "ledger_text", "narrative"]

#: The sentinel line that starts the ledger (``[context-compactor ledger v1]``: the version
#: follows the stem). As a reader sees it in the summary message, not asked of the core.
SENTINEL = "[context-compactor ledger"
#: Without a sentinel, the sections the library appended to a summary before the ledger existed
#: (English and Chinese), the first one found.
LEDGER_MARKS = (
    "\n\nPreserved details:",
    "\n\nThe user's own messages in the compacted part",
    "\n\n保留的细节：",
    "\n\n用户在被压缩部分中的原话",
)


def _start(text: str) -> int | None:
    # The last sentinel: a narrative may quote one (a summarizer that lies: the core strips it,
    # but the eval does not count on that); the library's comes after the narrative.
    i = text.rfind(SENTINEL)
    if i >= 0:
        return i
    hits = [i for m in LEDGER_MARKS if (i := text.find(m)) >= 0]
    return min(hits) if hits else None


def ledger_text(summary: str) -> str:
    """The ledger of a summary's text (``""`` when it has none)."""
    i = _start(summary)
    return "" if i is None else summary[i:]


def narrative(summary: str) -> str:
    """The summary without its ledger: what the summarizer wrote (the growth probe's subject)."""
    i = _start(summary)
    return summary if i is None else summary[:i]


#: Room for a section header or a sentinel a ledger gains with its first entry of a kind.
HEADER_SLACK = 300


def growth_allowance(before: Sequence[Any], after: Sequence[Any]) -> int:
    """How many characters a ledger may grow by when ``before`` (a context) is compacted into
    ``after``: only what was in ``before`` outside the ledger can add entries — the text of the
    messages that left the context for the summary, and the earlier summary's narrative (a fact
    the summarizer wrote there may move into the ledger when the next narrative drops it). ``0``
    when neither: the ledger must not grow at all."""
    kept = {id(m) for m in after}
    moved = [m for m in before if id(m) not in kept and not is_summary(m)]
    narratives = [narrative(text_of(m)) for m in before if is_summary(m)]
    room = sum(len(s) for s in string_values(moved)) + sum(len(n) for n in narratives)
    return room + HEADER_SLACK if room else 0

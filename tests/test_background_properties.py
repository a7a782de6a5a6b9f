"""Invariants of background compaction under any order of appends, ``prepare()`` calls and summaries
arriving (hypothesis): the early start, the rule summary at the hard threshold, the LLM job after
it and the late re-apply never leave an invalid context, a context over the window without
``over_budget``, a lost original, or a store that disagrees with the Session."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from _hypothesis_profiles import examples
from context_compactor import ContextCompactor, SummaryRequest, validate_messages
from context_compactor.session import Session
from test_session import integrity, tool_round


class Released:
    """A summarizer whose every call waits until the test releases the calls made so far."""

    def __init__(self) -> None:
        self.waiting: list[threading.Event] = []
        self.lock = threading.Lock()
        self.open = False

    def __call__(self, request: SummaryRequest) -> str:
        ev = threading.Event()
        with self.lock:
            if not self.open:
                self.waiting.append(ev)
            else:
                ev.set()
        ev.wait(5)
        facts = ", ".join(request.must_keep)
        return f"<summary>LLM summary of {request.replaced_count} messages. Facts: {facts}</summary>"

    def release(self) -> None:
        """Let every summary started so far finish (also those whose call has not begun yet)."""
        with self.lock:
            self.open = True
            for ev in self.waiting:
                ev.set()
            self.waiting.clear()


# A grow appends one tool round of 40-400 lines (about 120-1,200 tokens: past the hard threshold of
# the 3,000-token window in one step at the top); each grow is followed by a prepare() most times.
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["grow", "grow", "summary"]),
        st.integers(min_value=40, max_value=400),
        st.booleans(),
    ),
    min_size=15,
    max_size=50,
)


@settings(max_examples=examples(0.6))
@given(actions=ACTIONS)
def test_background_invariants(tmp_path_factory: Any, actions: list[tuple[str, int, bool]]) -> None:
    path: Path = tmp_path_factory.mktemp("bgprop") / "p.db"
    summarize = Released()
    c = ContextCompactor(
        max_context_tokens=3000, reserve_tokens=300, summarizer=summarize, background=True, summarizer_timeout_s=20
    )
    s = Session("s", compactor=c, store=path)
    appended: list[dict[str, Any]] = [{"role": "user", "content": "Fix the KeyError in /srv/app please."}]
    s.append(appended[0])
    budget = c.config.budget
    try:
        for k, (kind, size, skip) in enumerate(actions):
            note(f"{k}: {kind} {size} -> {s.check().current_tokens} tokens, pending {s.pending!r}")
            if kind == "grow":
                msgs = tool_round(k, size=size)
                s.extend(msgs)
                appended += msgs
                if skip and size % 3 == 0:
                    continue  # no model call after this one
            if kind == "summary":
                summarize.release()
                job = s.pending
                if job is not None:
                    assert job.wait(5)
                continue
            summarize.open = False  # a job this call starts waits for the next "summary"
            result = s.prepare()
            ctx = s.context()
            if result is not None:
                reapplied = any(name == "reapply" for name, _ in result.phases)
                event(f"{result.strategy}/{result.summary_source}{' re-applied' if reapplied else ''}")
                if reapplied:
                    # The context the late summary would have given applied directly with the delta.
                    # A job rebased onto in-place edits (a micro-compaction, the cut of a jump) saves
                    # the edited copies of the rows past what it covered between the two: each is
                    # the original message of its place or that message cut with the marker.
                    upto = s.compactions()[-1].upto_seq
                    head, delta = list(result.messages), s.history()[upto:]
                    assert ctx[: len(head)] == head
                    assert ctx[len(ctx) - len(delta) :] == delta
                    middle = ctx[len(head) : len(ctx) - len(delta)]
                    originals = s.history()[upto - len(middle) : upto]
                    for got, orig in zip(middle, originals, strict=True):
                        assert got.get("role") == orig.get("role")
                        assert got.get("tool_call_id") == orig.get("tool_call_id")
                        assert got == orig or "chars omitted]" in json.dumps(got, ensure_ascii=False)
            assert validate_messages(ctx, format="openai") == []
            if s.check().current_tokens > budget:
                assert result is not None and result.over_budget
        assert s.history() == appended
    finally:
        summarize.release()
        s.close()
    again = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=path)
    try:
        reopened = again.context()
    finally:
        again.close()
    s2 = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=path)
    assert s2.context() == reopened
    s2.close()
    integrity(path)

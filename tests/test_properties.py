"""Property-based tests: DESIGN's invariants 1-6 on generated conversations in both formats.

Conversations come from ``strategies.py`` (valid by construction: English, Chinese, emoji, code,
parallel and pending calls, thinking with signatures, images, mid-conversation system messages,
pinned messages, SDK objects mixed with dicts), and so do random configurations and summarizers
that succeed, fail with transient errors or return garbage. After ``micro_compact``,
``compact`` (rule summary and scripted summarizers), ten chained compactions, a switch to a
smaller window and a ``Session`` resume, every invariant of DESIGN.md is checked by
:func:`check_result`. Profiles: ``_hypothesis_profiles.py`` (``ci`` by default, ``fuzz`` for
``make fuzz``). Over 600 lines: :func:`check_result` holds every invariant in one place, and each
property runs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from _hypothesis_profiles import examples
from _messages import get, role, snapshot, strings
from context_compactor import (
    SUMMARY_MARKER,
    CompactionConfig,
    CompactResult,
    ContextCompactor,
    ConversationState,
    InvalidConversationError,
    TokenCounter,
    analyze_conversation,
    validate_messages,
)
from strategies import (
    FAILING,
    PIN_MARK,
    Case,
    ScriptedSummarizer,
    broken,
    cases,
    configs,
    render,
    reply_for,
    scripts,
    summarizer_behaviours,
)

# -- summaries (reading messages of any kind: _messages.py) ----------------------------------------


def is_summary(m: Any) -> bool:
    return any(s.lstrip().startswith(SUMMARY_MARKER) for s in strings(get(m, "content"))[:1])


def pinned_predicate(i: int, m: Any) -> bool:
    return any(PIN_MARK in s for s in strings(get(m, "content")))


def calls_of(messages: list[Any]) -> dict[str, tuple[str, Any]]:
    """Tool-call id → (name, arguments) for every call in ``messages``."""
    out: dict[str, tuple[str, Any]] = {}
    for m in messages:
        for c in get(m, "tool_calls") or []:
            f = get(c, "function")
            out[get(c, "id")] = (get(f, "name"), get(f, "arguments"))
        content = get(m, "content")
        if isinstance(content, list):
            for b in content:
                if get(b, "type") == "tool_use":
                    out[get(b, "id")] = (get(b, "name"), snapshot(get(b, "input")))
    return out


def results_of(messages: list[Any]) -> dict[str, Any]:
    """Tool-call id → result content for every result in ``messages``."""
    out: dict[str, Any] = {}
    for m in messages:
        if role(m) == "tool":
            out[get(m, "tool_call_id")] = snapshot(get(m, "content"))
        content = get(m, "content")
        if isinstance(content, list):
            for b in content:
                if get(b, "type") == "tool_result":
                    out[get(b, "tool_use_id")] = snapshot(get(b, "content"))
    return out


# -- the invariants -------------------------------------------------------------------------------


@dataclasses.dataclass
class Call:
    """One call of the library: its input, and a snapshot of it taken before."""

    fmt: str
    messages: list[Any]
    system: Any
    tools: list[Any]
    compactor: ContextCompactor
    pinned: Any = None
    before: Any = None

    def __post_init__(self) -> None:
        self.before = (
            snapshot(self.messages),
            [id(m) for m in self.messages],
            snapshot(self.system),
            snapshot(self.tools),
        )

    def pinned_indices(self) -> set[int]:
        if self.pinned is None:
            return set()
        if callable(self.pinned):
            return {i for i, m in enumerate(self.messages) if self.pinned(i, m)}
        return {i % len(self.messages) for i in self.pinned}

    def plan(self, **kw: Any) -> Any:
        return self.compactor.plan(
            self.messages, system=self.system, tools=self.tools, format=self.fmt, pinned=self.pinned, **kw
        )

    def compact(self, **kw: Any) -> CompactResult:
        return self.compactor.compact(
            self.messages, system=self.system, tools=self.tools, format=self.fmt, pinned=self.pinned, **kw
        )

    def micro(self, **kw: Any) -> CompactResult:
        return self.compactor.micro_compact(
            self.messages, system=self.system, tools=self.tools, format=self.fmt, pinned=self.pinned, **kw
        )


def pending_calls(messages: list[Any]) -> set[str]:
    """Ids of the calls in the last message that have no result yet (a trailing call waiting)."""
    if not messages:
        return set()
    return set(calls_of(messages[-1:])) - set(results_of(messages))


def check_result(call: Call, result: CompactResult, *, mode: str = "compact", valid_input: bool = True) -> None:
    """DESIGN's invariants for one result. ``mode``: ``"compact"`` or ``"micro"``."""
    messages, fmt, cfg = call.messages, call.fmt, call.compactor.config
    if currently_in_test_context():
        note(f"strategy={result.strategy} phases={result.phases} over_budget={result.over_budget_reason}")
        event(f"{call.fmt} {mode}: {result.strategy}{' (over budget)' if result.over_budget else ''}")
    n = len(messages)

    # 4. The input is never mutated (the list, its messages, SDK objects, system, tools).
    assert (snapshot(messages), [id(m) for m in messages], snapshot(call.system), snapshot(call.tools)) == call.before

    # 1. Valid for the provider (and strict when configured).
    problems = validate_messages(result.messages, format=fmt, system=result.system, tools=call.tools)
    assert problems == [], (problems, result.repairs, result.phases)
    if cfg.profile == "strict":
        assert validate_messages(result.messages, format=fmt, system=result.system, profile="strict") == []
    if fmt == "anthropic" and n:
        assert result.messages, "an Anthropic request needs at least one message"
    strict_problems = (
        validate_messages(messages, format=fmt, system=call.system, profile="strict") if cfg.profile == "strict" else []
    )
    if valid_input:
        if strict_problems:
            assert result.repairs, ("strict-profile problems are repaired and listed", strict_problems)
        if not strict_problems:
            # Valid input is never repaired: no input message is dropped or edited by repair. (The
            # compactor also lists in ``repairs`` the fillers it adds to its own output, e.g. a user
            # message before the first assistant one when the summary went into the system prompt.)
            assert not [e for e in result.record if e.action in ("repaired", "dropped")], (
                "valid input needs no repair",
                result.repairs,
            )
        # A trailing call waiting for its result stays last: its result is appended next.
        if pending_calls(messages):
            assert result.messages and result.messages[-1] is messages[-1], "the pending call must be kept"

    out_ids = {id(m) for m in result.messages}

    # 2. System prompt, developer messages and pinned messages never change.
    for i, m in enumerate(messages):
        if role(m) in ("system", "developer") and not is_summary(m):
            assert id(m) in out_ids, f"system/developer message {i} must come back as the same object"
    lead = 0
    while lead < n and role(messages[lead]) in ("system", "developer"):
        lead += 1
    leading = [id(m) for m in messages[:lead] if not is_summary(m)]  # an earlier summary is updated
    if leading:
        out_pos = {id(m): k for k, m in enumerate(result.messages)}
        first_turn = next(
            (k for k, m in enumerate(result.messages) if role(m) not in ("system", "developer")), len(result.messages)
        )
        assert all(out_pos.get(i, first_turn) < first_turn for i in leading), (
            "the leading system/developer messages stay before the conversation"
        )
        assert [i for i in out_pos if i in set(leading)] == leading, "in their order"
    for i in call.pinned_indices():  # an earlier summary too: pinned is never changed (DESIGN, invariant 2)
        assert id(messages[i]) in out_ids, f"pinned message {i} must come back as the same object"
    if result.system is not call.system:
        # Our earlier summary in it is replaced in place, or leaves it when the new summary is a
        # message (the ledger read back from it); the client's own part stays.
        ours_before = SUMMARY_MARKER in "\n".join(strings(call.system))
        assert fmt == "anthropic" and result.summary is not None, "the system prompt changes only for a summary"
        assert cfg.summary_role == "system" or ours_before, (
            "the separate system prompt changes only to carry a summary_role='system' summary"
        )
        out_system = "\n".join(strings(result.system))
        for s in strings(call.system):
            own = s.split(SUMMARY_MARKER)[0].rstrip()  # an earlier summary is updated
            assert own in out_system, "the original system prompt is kept inside the new one"

    # 7. The task (the first user message) is always there: the same object, or shortened.
    cut = {e.index for e in result.record if e.action in ("shortened", "truncated")}
    # (When an earlier summary comes first, the conversation starts with what a compaction left
    # and that summary carries the task: by design, see test_the_kept_head_ends_at_an_earlier_summary.)
    task = next((i for i, m in enumerate(messages) if role(m) == "user" or is_summary(m)), None)
    if valid_input and task is not None and not is_summary(messages[task]):
        shortened_task = ("edited", task) in result.origins and task in cut
        assert id(messages[task]) in out_ids or shortened_task, "the task is never removed"

    # 3. The kept head and the recent tail are the same objects (unless the record names them
    # shortened or truncated by the ladder, or over budget).
    shortened = any(p == "tail_shortened" for p, _ in result.phases)
    if valid_input and not result.over_budget:
        head = 0
        for k, m in enumerate(messages):
            if head >= cfg.keep_first_messages:
                break
            if is_summary(m):
                # The kept head ends at an earlier summary (any role): it is updated, never kept
                # verbatim, and what follows it is later than the compacted start (by design).
                break
            if role(m) in ("system", "developer"):
                continue
            head += 1
            assert id(m) in out_ids or k in cut, "the kept head must come back as the same object"
        tail = list(range(n - min(cfg.keep_recent_messages, n), n))
        for i in tail[-1:] if shortened else tail:
            assert id(messages[i]) in out_ids or i in cut, "the recent tail must come back as the same object"

    # 5. Under the soft threshold, or over_budget with the reason; the count is true; no growth.
    if mode == "compact":
        assert result.tokens_after <= cfg.soft_threshold or result.over_budget, (
            result.tokens_after,
            cfg.soft_threshold,
        )
    if result.over_budget:
        assert result.over_budget_reason
    counter = call.compactor.counter
    recount = counter.count_messages(result.messages, system=result.system, tools=call.tools, format=fmt)
    assert result.tokens_after == recount, (result.tokens_after, recount)
    if result.strategy != "none" and valid_input:
        assert result.tokens_after <= result.tokens_before, "a compaction never grows the conversation"

    # 6. Nothing is lost silently.
    named = {r.index for r in result.record}
    gone = {i for i, m in enumerate(messages) if id(m) not in out_ids}
    assert gone <= named, sorted(gone - named)[:10]
    assert all(0 <= i < n for i in named)
    assert result.original_count == n
    if result.strategy == "none" and not result.repairs:
        assert [id(m) for m in result.messages] == [id(m) for m in messages], "nothing done, nothing changed"

    # Protected tools: their calls and results are never edited.
    if cfg.protected_tools:
        calls_in, results_in = calls_of(messages), results_of(messages)
        calls_out, results_out = calls_of(result.messages), results_of(result.messages)
        for cid, (name, args) in calls_in.items():
            if name not in cfg.protected_tools:
                continue
            if mode == "micro":
                assert cid in calls_out
            if cid in calls_out:
                assert calls_out[cid] == (name, args), f"protected call {cid} was edited"
            if cid in results_out and cid in results_in:
                assert results_out[cid] == results_in[cid], f"result of protected call {cid} was edited"

    if mode == "micro":
        assert result.summary is None
        assert result.strategy in ("micro", "none")
        if valid_input and not strict_problems:
            assert len(result.messages) == n


def assert_same_result(a: CompactResult, b: CompactResult) -> None:
    """Determinism: same input + config + summary ⇒ the same output."""
    assert snapshot(a.messages) == snapshot(b.messages)
    assert [type(m) for m in a.messages] == [type(m) for m in b.messages]
    assert snapshot(a.system) == snapshot(b.system)
    fa = {f.name: getattr(a, f.name) for f in dataclasses.fields(a) if f.name not in ("messages", "system")}
    fb = {f.name: getattr(b, f.name) for f in dataclasses.fields(b) if f.name not in ("messages", "system")}
    assert fa == fb


# -- drawing a whole setting ---------------------------------------------------------------------


def total_tokens(case: Case) -> int:
    return TokenCounter().count_messages(case.messages, system=case.system, tools=case.tools, format=case.fmt)


def continue_after(messages: list[Any], more: list[Any]) -> list[Any]:
    """``messages + more``, with an assistant acknowledgement between two user turns."""
    if messages and role(messages[-1]) in ("user", "tool") and more and role(more[0]) == "user":
        return [*messages, {"role": "assistant", "content": "Understood."}, *more]
    return [*messages, *more]


@st.composite
def settings_for(draw: st.DrawFn, case: Case) -> dict[str, Any]:
    strict_ok = validate_messages(case.messages, format=case.fmt, system=case.system, profile="strict") == []
    kw = draw(configs(total_tokens(case), strict_ok=strict_ok))
    how = draw(st.sampled_from(["none", "none", "indices", "predicate"]))
    pinned: Any = None
    if how == "indices":
        pinned = draw(st.lists(st.integers(0, len(case.messages) - 1), max_size=3, unique=True))
    elif how == "predicate":
        pinned = pinned_predicate
    return {"config": kw, "pinned": pinned}


@st.composite
def with_earlier_summary(draw: st.DrawFn, case: Case) -> Case:
    """Sometimes: compact the conversation first (an earlier summary), then continue it."""
    if case.script.pending or draw(st.integers(0, 2)) != 0:
        return case
    pre = ContextCompactor(
        max_context_tokens=max(total_tokens(case) // 2, 300),
        reserve_tokens=0,
        keep_recent_messages=draw(st.integers(0, 4)),
        summary_role=draw(st.sampled_from(["user", "system"])),
        summarizer=lambda req: reply_for("ok", req),
    )
    r = pre.compact(case.messages, system=case.system, tools=case.tools, format=case.fmt, force=True)
    more = draw(scripts(case.fmt, min_turns=1, max_turns=3))
    messages = continue_after(r.messages, render(case.fmt, more, prefix="b"))
    return dataclasses.replace(case, messages=messages, system=r.system, script=more)


def make_call(case: Case, setting: dict[str, Any], **extra: Any) -> Call:
    return Call(
        case.fmt,
        case.messages,
        case.system,
        case.tools,
        ContextCompactor(**setting["config"], **extra),
        pinned=setting["pinned"],
    )


# -- the properties --------------------------------------------------------------------------------


@settings(max_examples=examples(2))
@given(st.data())
def test_micro_and_rule_summary_and_smaller_window(data: st.DataObject) -> None:
    case = data.draw(cases())
    case = data.draw(with_earlier_summary(case))
    setting = data.draw(settings_for(case))
    note(f"fmt={case.fmt} n={len(case.messages)} config={setting['config']} pinned={setting['pinned']}")
    call = make_call(case, setting)

    # check() never raises for well-typed input and agrees with the counter.
    chk = call.compactor.check(case.messages, system=case.system, tools=case.tools, format=case.fmt)
    assert chk.current_tokens == call.compactor.counter.count_messages(
        case.messages, system=case.system, tools=case.tools, format=case.fmt
    )

    micro = call.micro()
    check_result(call, micro, mode="micro")
    assert_same_result(micro, call.micro())

    force = data.draw(st.booleans())
    plan = call.plan(force=force)
    result = plan.apply(None)
    check_result(call, result)
    if result.summary is not None:
        assert result.strategy in ("rule_summary", "truncation")
    # Determinism: a fresh compactor with the same config and the same (rule) summary.
    again = dataclasses.replace(call, compactor=ContextCompactor(call.compactor.config)).plan(force=force).apply(None)
    assert_same_result(result, again)

    # A switch to a config with a smaller window, on the compacted conversation.
    cfg = call.compactor.config
    window = max(cfg.max_context_tokens // data.draw(st.sampled_from([2, 4])), 64)
    smaller = ContextCompactor(
        cfg.replace(
            max_context_tokens=window,
            reserve_tokens=min(cfg.reserve, window // 4),
            keep_recent_tokens=None,
        )
    )
    nxt = Call(case.fmt, result.messages, result.system, case.tools, smaller)
    check_result(nxt, nxt.compact(force=data.draw(st.booleans())))


@settings(max_examples=examples(2))
@given(st.data())
def test_compact_with_flaky_summarizers(data: st.DataObject) -> None:
    case = data.draw(cases())
    case = data.draw(with_earlier_summary(case))
    setting = data.draw(settings_for(case))
    behaviours = data.draw(summarizer_behaviours)
    note(f"fmt={case.fmt} n={len(case.messages)} config={setting['config']} behaviours={behaviours}")
    summarizer = ScriptedSummarizer(behaviours)
    call = make_call(case, setting, summarizer=summarizer)
    force = data.draw(st.booleans())
    result = call.compact(force=force)
    check_result(call, result)
    if summarizer.calls and behaviours[0] in FAILING and len(summarizer.requests) == 1 and result.strategy != "none":
        assert result.fallback_reason, "a failed or unusable reply is reported"
        assert result.strategy in ("rule_summary", "truncation")
    # Determinism with a summarizer that behaves the same way again, sync and async.
    twin = dataclasses.replace(
        call, compactor=ContextCompactor(call.compactor.config, summarizer=ScriptedSummarizer(behaviours))
    )
    assert_same_result(result, twin.compact(force=force))
    atwin = ContextCompactor(call.compactor.config, summarizer=ScriptedSummarizer(behaviours))
    aresult = asyncio.run(
        atwin.acompact(
            case.messages, system=case.system, tools=case.tools, format=case.fmt, pinned=call.pinned, force=force
        )
    )
    assert_same_result(result, aresult)


@settings(max_examples=examples(0.4))
@given(st.data())
def test_ten_chained_compactions(data: st.DataObject) -> None:
    case = data.draw(cases(max_turns=3, pending=False))
    setting = data.draw(settings_for(case))
    # Pin through the predicate only: indices do not survive a compaction.
    if setting["pinned"] is not None:
        setting["pinned"] = pinned_predicate
    behaviours = data.draw(summarizer_behaviours)
    note(f"fmt={case.fmt} config={setting['config']} behaviours={behaviours}")
    compactor = ContextCompactor(**setting["config"], summarizer=ScriptedSummarizer(behaviours))
    state = ConversationState()
    messages, system = case.messages, case.system
    for k in range(10):
        if k:
            more = data.draw(scripts(case.fmt, min_turns=1, max_turns=2, pending=None if k == 9 else False))
            messages = continue_after(messages, render(case.fmt, more, prefix=f"r{k}"))
            if compactor.config.profile == "strict" and any(t.system_before for t in more.turns):
                compactor = compactor.with_config(profile=None)
        call = Call(case.fmt, messages, system, case.tools, compactor, pinned=setting["pinned"])
        result = call.compact(state=state, force=data.draw(st.booleans()))
        check_result(call, result)
        messages, system = result.messages, result.system
    summaries = [m for m in messages if is_summary(m)]
    assert len(summaries) <= 1, "one summary message, updated in place"


@settings(max_examples=examples(1))
@given(st.data())
def test_invalid_input_is_repaired_or_refused(data: st.DataObject) -> None:
    case = data.draw(cases(max_turns=4))
    messages, kind = data.draw(broken(case))
    setting = data.draw(settings_for(case))
    setting["config"].pop("profile", None)
    setting["pinned"] = None
    problems = validate_messages(messages, format=case.fmt, system=case.system)
    note(f"fmt={case.fmt} break={kind} problems={problems}")
    repaired = dataclasses.replace(case, messages=messages)
    call = make_call(repaired, setting)
    # check() never raises for well-typed input, valid or not.
    call.compactor.check(messages, system=case.system, tools=case.tools, format=case.fmt)
    result = call.plan(force=data.draw(st.booleans())).apply(None)
    check_result(call, result, valid_input=False)
    if problems:
        assert result.repairs, "invalid input is repaired, and the repairs are listed"
    check_result(call, call.micro(), mode="micro", valid_input=False)

    strict = make_call(repaired, {"config": {**setting["config"], "repair": False}, "pinned": None})
    if problems:
        with pytest.raises(InvalidConversationError) as e:
            strict.plan(force=True)
        assert e.value.problems
    else:
        check_result(strict, strict.plan(force=True).apply(None))


def _session_class() -> Callable[..., Any] | None:
    if importlib.util.find_spec("context_compactor.session") is None:
        return None
    from context_compactor import session

    return getattr(session, "Session", None)


def check_session_step(session: Any, fmt: str, before_ids: list[int], result: CompactResult | None) -> None:
    """Invariants of one ``Session.prepare()``: a valid context, rows named by row id, budget."""
    cfg = session.compactor.config
    context, ids = session.context(), session.context_ids()
    assert len(context) == len(ids)
    assert validate_messages(context, format=fmt, system=session.system, tools=session.tools) == []
    if result is None:
        assert ids == before_ids, "no compaction, same context"
        return
    assert result.tokens_after <= cfg.soft_threshold or result.over_budget
    named = {r.index for r in result.record}
    gone = set(before_ids) - set(ids)
    assert gone <= named, ("every row that left the context is named by row id", sorted(gone - named))
    assert named <= set(before_ids), "record entries are row ids of the compacted context"


@pytest.mark.skipif(_session_class() is None, reason="context_compactor.session.Session does not exist yet")
@settings(max_examples=examples(0.4))
@given(data=st.data())
def test_session_resume(data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    Session = _session_class()
    assert Session is not None
    case = data.draw(cases(max_turns=3, pending=False))
    setting = data.draw(settings_for(case))
    setting["config"].pop("profile", None)
    behaviours = data.draw(summarizer_behaviours)
    note(f"fmt={case.fmt} config={setting['config']} behaviours={behaviours}")
    compactor = ContextCompactor(**setting["config"], summarizer=ScriptedSummarizer(behaviours))
    path = str(tmp_path_factory.mktemp("session") / "s.db")
    s = Session(compactor=compactor, store=path, system=case.system, tools=case.tools or None, format=case.fmt)
    appended = len(case.messages)
    s.extend(case.messages)
    for k in range(3):
        before = s.context_ids()
        result = s.prepare(force=data.draw(st.booleans()))
        check_session_step(s, case.fmt, before, result)
        more = data.draw(scripts(case.fmt, min_turns=1, max_turns=2, pending=False))
        ctx = s.context()
        new = continue_after(ctx, render(case.fmt, more, prefix=f"s{k}"))[len(ctx) :]
        s.extend(new)
        appended += len(new)

    context, ids, system, history = s.context(), s.context_ids(), snapshot(s.system), s.history()
    records = s.compactions()
    s.close()
    resumed = Session(s.id, compactor=compactor, store=path, format=case.fmt)
    assert resumed.context() == context, "a resumed session continues from the same context"
    assert resumed.context_ids() == ids
    assert snapshot(resumed.system) == system
    assert resumed.history() == history
    assert len(history) == appended, "a session keeps every original"
    assert [r.id for r in resumed.compactions()] == [r.id for r in records]
    for r in records:
        originals = resumed.expand(r.id)
        assert all(m in history for m in originals), "expand returns originals"
    # And it goes on working after the resume.
    before = resumed.context_ids()
    check_session_step(resumed, case.fmt, before, resumed.prepare(force=True))
    resumed.close()


def test_config_window_switch_keeps_validity_on_a_fixed_example() -> None:
    """A deterministic smoke example of the smaller-window switch (also a quick failure signal)."""
    msgs: list[Any] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix /srv/a.py"}]
    for i in range(12):
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "out " * 300})
    msgs.append({"role": "assistant", "content": "done"})
    big = ContextCompactor(CompactionConfig(max_context_tokens=6000, reserve_tokens=0))
    call = Call("openai", msgs, None, [], big)
    r = call.compact()
    check_result(call, r)
    small = Call("openai", r.messages, None, [], big.with_config(max_context_tokens=1500))
    check_result(small, small.compact())


# -- regressions: minimal reproducers of the bugs these properties found (all fixed) ------------------------


def _call(cid: str, name: str = "bash", args: str = "{}") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}],
    }


def test_pending_call_is_kept() -> None:
    messages: list[Any] = [{"role": "user", "content": "Fix it."}]
    for _ in range(5):
        messages += [{"role": "assistant", "content": "Looking. " * 100}, {"role": "user", "content": "ok"}]
    messages.append(_call("t1"))  # the agent is about to run this call
    r = ContextCompactor(max_context_tokens=600, reserve_tokens=0, keep_recent_messages=0).compact(messages)
    assert r.messages[-1] is messages[-1], "the pending call must stay last"
    nxt = [*r.messages, {"role": "tool", "tool_call_id": "t1", "content": "a.py"}]
    assert validate_messages(nxt) == [], "appending the call's result keeps the request valid"


def test_anthropic_summary_in_system_keeps_a_message_and_counts_right() -> None:
    messages = [
        {"role": "user", "content": "Fix the billing bug. " * 40},
        {"role": "assistant", "content": "Looking at it. " * 100},
    ]
    c = ContextCompactor(
        max_context_tokens=600, reserve_tokens=0, keep_first_messages=0, keep_recent_messages=0, summary_role="system"
    )
    r = c.plan(messages, system="Be brief.", format="anthropic", force=True).apply("<summary>Billing bug.</summary>")
    assert r.tokens_after == c.counter.count_messages(r.messages, system=r.system, format="anthropic")
    assert r.messages, "an Anthropic request needs at least one message"


def test_openai_strict_summary_in_system_stays_first() -> None:
    messages = [
        {"role": "user", "content": "The user asked to fix the failing test in the billing module."},
        {"role": "assistant", "content": "I will look at it. " * 3},
        {"role": "user", "content": "Thanks, go on."},
        {"role": "assistant", "content": "Done."},
    ]
    c = ContextCompactor(
        max_context_tokens=200,
        reserve_tokens=0,
        keep_first_messages=1,
        keep_recent_messages=1,
        summary_role="system",
        profile="strict",
        min_savings_ratio=0.0,
    )
    r = c.compact(messages, force=True)
    assert validate_messages(r.messages, profile="strict") == []


def test_a_compaction_never_grows_the_conversation() -> None:
    messages = [
        {"role": "user", "content": "The user asked to fix the failing test in the billing module."},
        {"role": "assistant", "content": "I will look at it. " * 3},
        {"role": "user", "content": "Thanks, go on."},
        {"role": "assistant", "content": "Done."},
    ]
    c = ContextCompactor(
        max_context_tokens=200, reserve_tokens=0, keep_first_messages=1, keep_recent_messages=1, min_savings_ratio=0.0
    )
    r = c.compact(messages, force=True)
    assert r.strategy == "none" or r.tokens_after <= r.tokens_before, (r.tokens_before, r.tokens_after)


def test_summary_goes_after_the_leading_system_message() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Fix the failing test."},
        {"role": "assistant", "content": "Looking. " * 200},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "Done."},
    ]
    c = ContextCompactor(max_context_tokens=400, reserve_tokens=0, keep_first_messages=0, keep_recent_messages=2)
    r = c.compact(messages)
    assert r.messages[0] is messages[0], "the system prompt stays first"
    assert validate_messages(r.messages) == []


def test_openai_system_summaries_do_not_pile_up() -> None:
    c = ContextCompactor(max_context_tokens=1000, reserve_tokens=0, keep_recent_messages=2, summary_role="system")
    messages: list[Any] = [{"role": "system", "content": "Be brief."}]
    for k in range(3):
        turn = [
            {"role": "user", "content": f"Question {k}? " + "billing " * 200},
            {"role": "assistant", "content": "Answer. " * 200},
        ]
        messages = c.compact(messages + turn * 2).messages
    assert sum(1 for m in messages if is_summary(m)) == 1, [m["content"][:30] for m in messages]


def test_strict_repairs_are_listed_and_complete() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "Done."},
    ]
    assert validate_messages(messages) == [] and validate_messages(messages, profile="strict")
    r = ContextCompactor(profile="strict").compact(messages)
    changed = [i for i, m in enumerate(messages) if not any(m is o for o in r.messages)]
    assert r.repairs or (len(r.messages) == len(messages) and not changed), (r.strategy, r.repairs, r.messages)
    later = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "late"},
        {"role": "assistant", "content": "x"},
    ]
    r = ContextCompactor(profile="strict").compact(later)
    assert validate_messages(r.messages, profile="strict") == [], "a strict repair leaves a strict-valid request"


def test_the_kept_head_ends_at_an_earlier_summary() -> None:
    """By design. ``keep_first_messages`` keeps the start of the conversation (the task) verbatim.
    Once that start was itself compacted, the conversation opens with the earlier summary and the
    messages after it are later ones, not the task: keeping them verbatim would put them either
    before the new summary (which also covers what came after them: the order of events is lost) or
    after the old summary kept as it is (summaries would pile up, see
    :func:`test_openai_system_summaries_do_not_pile_up`: an earlier summary is updated, never kept).
    So the head ends at an earlier summary, which the new summary replaces together with the
    messages up to the tail; each is named in the record.
    """
    summary = (
        f"{SUMMARY_MARKER} The earlier part of this conversation was compacted; this summary replaces it."
        "\n\nThe user wants the billing bug fixed."
    )
    messages = [
        {"role": "user", "content": summary},
        {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "Look at tax.py " * 80},
        {"role": "assistant", "content": "Done. " * 200},
    ]
    c = ContextCompactor(max_context_tokens=600, reserve_tokens=0, keep_first_messages=2, keep_recent_messages=0)
    plan = c.plan(messages, force=True)
    assert plan.request is not None and plan.request.previous_summary == "The user wants the billing bug fixed."
    r = plan.apply("<summary>Short.</summary>")
    assert r.strategy == "summary" and not r.over_budget
    assert len(r.messages) == 1 and is_summary(r.messages[0]), "one summary, updated in place"
    assert [(e.index, e.action) for e in r.record] == [(i, "summarized") for i in range(4)]
    check_result(Call("openai", messages, None, [], c), r)
    # A task before the earlier summary is the head and stays; what follows the summary does not.
    task = {"role": "user", "content": "Fix the billing bug."}
    c3 = c.with_config(keep_first_messages=3)
    r = c3.plan([task, *messages], force=True).apply("<summary>Short.</summary>")
    assert r.messages[0] is task and not any(m is messages[1] for m in r.messages)
    assert sum(is_summary(m) for m in r.messages) == 1
    check_result(Call("openai", [task, *messages], None, [], c3), r)


def test_repair_keeps_the_first_result_as_the_same_object() -> None:
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}
    messages = [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]},
        result,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},  # duplicate
        {"role": "assistant", "content": "Done."},
    ]
    r = ContextCompactor().plan(messages).apply(None)
    named = {e.index for e in r.record}
    assert any(m is result for m in r.messages) or 2 in named, "message 2 is rebuilt but not named in the record"


def test_completed_thinking_loop_can_be_compacted() -> None:
    messages: list[Any] = [{"role": "user", "content": "task"}]
    for i in range(8):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm " * 50, "signature": "sig"},
                    {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": "ls"}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "out " * 500}]}
        )
    messages.append({"role": "assistant", "content": "done"})  # the loop is over
    assert validate_messages(messages) == []
    c = ContextCompactor(max_context_tokens=2000, reserve_tokens=0, keep_recent_messages=2, clear_at_least_tokens=0)
    assert len(analyze_conversation(messages).cut_points) > 3, "cuts between the loop's blocks"
    assert c.micro_compact(messages).strategy == "micro", "old tool output of a finished loop can be cleared"
    r = c.compact(messages)
    assert not r.over_budget and validate_messages(r.messages, format="anthropic") == []


def test_system_message_in_a_shortened_tail_is_kept() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": f"the {n} tool",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            },
        }
        for n in ("bash", "read_file", "search", "memory")
    ]
    s = "The user asked to fix the failing test in the billing module."
    line = " ".join([s] * 4)
    messages = [
        _call("c0", args=json.dumps({"cmd": s, "content": s})),
        {"role": "tool", "tool_call_id": "c0", "content": s[:20]},
        _call("c1", args=json.dumps({"cmd": s})),
        {"role": "tool", "tool_call_id": "c1", "content": "\n".join([line] * 40)[:3000]},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "\n".join([line] * 2)},
    ]
    c = ContextCompactor(
        max_context_tokens=1761,
        reserve_tokens=352,
        trigger_ratio=0.5,
        target_ratio=0.2,
        keep_first_messages=0,
        keep_recent_messages=3,
        keep_recent_tool_results=0,
        max_tool_arg_chars=16,
        clear_at_least_tokens=0,
        summary_max_tokens=16,
        user_messages_budget_tokens=0,
        transcript_item_max_chars=16,
        min_savings_ratio=0.0,
        message_overhead_tokens=0,
    )
    r = c.compact(messages, tools=tools)
    assert any(m is messages[4] for m in r.messages), (r.phases, r.record)


def test_args_cut_counts_control_characters_like_the_recount() -> None:
    # The cut arguments of a tool_use are parsed back into an object and a recount writes control
    # characters as ``\\u00xx``: the cut must be counted in that form (it was written with ``\\b``).
    def messages(value: str) -> list[Any]:
        return [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"content": value}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            {"role": "assistant", "content": "Done."},
        ]

    s = "The user asked to fix the failing test in the billing module. "
    c = ContextCompactor(
        keep_first_messages=0,
        keep_recent_messages=0,
        keep_recent_tool_results=0,
        clear_at_least_tokens=0,
        micro_min_gain_ratio=0.0,
        max_tool_arg_chars=16,
        min_savings_ratio=0.0,
    )
    r = c.micro_compact(messages(s * 3 + "\b\f\x01\b"))
    assert r.strategy == "micro" and [e.action for e in r.record] == ["args_cut"]
    assert r.messages[1]["content"][0]["input"]["content"].endswith("\b\f\x01\b")
    assert r.tokens_after == c.counter.count_messages(r.messages)
    # Counted right, this cut saves nothing (the marker costs what the cut frees): refused.
    r = c.micro_compact(messages(s + "\b\b\b"))
    assert r.strategy == "none" and r.tokens_after == c.counter.count_messages(r.messages)


def test_repair_names_the_message_it_edits() -> None:
    messages = [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]},
        {"role": "user", "content": "Thanks, what next?"},  # the result is missing before this
        {"role": "assistant", "content": "Done."},
    ]
    r = ContextCompactor().plan(messages).apply(None)
    assert r.repairs
    kept = {id(m) for m in r.messages}
    edited = {i for i, m in enumerate(messages) if id(m) not in kept}
    assert edited <= {e.index for e in r.record}, (edited, r.record)  # {2} vs record naming only 1


@pytest.mark.parametrize("summary_role", ["user", "system"])
@pytest.mark.parametrize("profile", [None, "strict"])
def test_new_summary_goes_after_the_system_prompt(summary_role: str, profile: str | None) -> None:
    messages = [
        {"role": "system", "content": SUMMARY_MARKER + " The earlier part was compacted.\n\nOld summary."},
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use tabs."},
        {"role": "user", "content": "Fix the failing test. " * 40},
        {"role": "assistant", "content": "Done. " * 100},
    ]
    c = ContextCompactor(
        max_context_tokens=200,
        reserve_tokens=0,
        keep_first_messages=0,
        keep_recent_messages=0,
        summary_role=summary_role,
        profile=profile,
    )
    r = c.compact(messages, force=True)
    assert r.messages[0] is messages[1] and r.messages[1] is messages[2], [
        (m["role"], m["content"][:20]) for m in r.messages
    ]
    assert sum(is_summary(m) for m in r.messages) == 1 and is_summary(r.messages[2])
    assert validate_messages(r.messages, profile=profile) == []
    assert r.tokens_after == c.counter.count_messages(r.messages)
    check_result(Call("openai", messages, None, [], c), r)

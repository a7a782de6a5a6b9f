"""Session and its stores: resume, expand, row-id records, usage, concurrency (SIGKILL durability on every
store: tests/test_store_durability.py). Over 600 lines: the Session's behaviour over its whole API,
one short test each (the store operations are tests/test_store_ops.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from context_compactor import (
    SUMMARY_MARKER,
    ContextCompactor,
    MessageTypeError,
    StoreError,
    SummaryRequest,
    validate_messages,
)
from context_compactor._sqlite import MIGRATIONS, SCHEMA_VERSION
from context_compactor.io import load
from context_compactor.session import Session
from context_compactor.stores import SessionStore

EXAMPLE = REPO / "examples" / "agent_session.json"


def tool_round(i: int, size: int = 60) -> list[dict[str, Any]]:
    """An assistant tool call and its result (OpenAI format), numbered ``i``."""
    cid = f"call_{i}"
    return [
        {
            "role": "assistant",
            "content": f"Step {i}: checking /srv/app/mod{i}.py for the KeyError.",
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "bash", "arguments": f'{{"cmd": "cat mod{i}.py"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": f"line {i}\n" * size},
    ]


def small(**kw: Any) -> ContextCompactor:
    kw.setdefault("max_context_tokens", 3000)
    kw.setdefault("reserve_tokens", 300)
    return ContextCompactor(**kw)


def agent_run(session: Session, rounds: int, start: int = 0) -> list[Any]:
    """Feed tool rounds as an agent would (prepare before each assistant message); the results."""
    results = []
    if len(session) == 0:
        session.append({"role": "system", "content": "You are a coding agent."})
        session.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    for i in range(start, start + rounds):
        r = session.prepare()
        if r is not None:
            results.append(r)
        session.extend(tool_round(i))
    return results


def integrity(path: Path, session_id: str = "s") -> None:
    """Every compaction is whole: its context, derived rows and links all present (no partial write)."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        for cid, details in conn.execute("SELECT id, details FROM compactions WHERE session = ?", (session_id,)):
            d = json.loads(details)
            items = conn.execute("SELECT COUNT(*) FROM context_items WHERE compaction = ?", (cid,)).fetchone()[0]
            derived = conn.execute("SELECT COUNT(*) FROM messages WHERE compaction = ?", (cid,)).fetchone()[0]
            links = conn.execute("SELECT COUNT(*) FROM summary_of WHERE compaction = ?", (cid,)).fetchone()[0]
            assert (items, derived, links) == (d["context_count"], d["derived_count"], d["record_count"])
        head = conn.execute("SELECT head FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
        if head is not None:
            assert conn.execute("SELECT 1 FROM compactions WHERE id = ?", (head,)).fetchone()
        seqs = [r[0] for r in conn.execute("SELECT seq FROM messages WHERE seq IS NOT NULL ORDER BY seq")]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        conn.close()


# -- basics ------------------------------------------------------------------------------------------------


def test_append_context_history_and_row_ids(store_target: str) -> None:
    s = Session("a", compactor=ContextCompactor(), store=store_target)
    r1 = s.append({"role": "user", "content": "hi"})
    r2, r3 = s.extend([{"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}])
    assert r1 < r2 < r3
    assert (
        s.context()
        == s.history()
        == [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye"},
        ]
    )
    assert s.context_ids() == s.history_ids() == [r1, r2, r3]
    assert s.message(r2) == {"role": "assistant", "content": "hello"}
    assert len(s) == 3 and s.prepare() is None and s.compactions() == []
    assert s.store.session_ids() == ["a"]
    with pytest.raises(KeyError):
        s.message(999)
    s.close()


def test_bad_messages_are_rejected_and_nothing_is_stored(tmp_path: Path) -> None:
    s = Session(compactor=ContextCompactor(), store=":memory:")
    s.append({"role": "user", "content": "ok"})
    with pytest.raises(MessageTypeError):
        s.append("not a message")
    with pytest.raises(MessageTypeError) as e:
        s.extend([{"role": "user", "content": "fine"}, {"role": "user", "content": 42}])
    assert e.value.index == 1
    with pytest.raises(MessageTypeError):
        s.append({"content": "no role"})
    with pytest.raises(MessageTypeError):
        s.append({"role": "user", "content": "x", "bad": float("nan")})
    assert s.history() == [{"role": "user", "content": "ok"}] and len(s.context()) == 1
    s.close()


def test_sdk_objects_are_stored_as_json_and_come_back_as_dicts(store_target: str) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from anthropic.types import TextBlock, ToolUseBlock
    from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
    from openai.types.chat.chat_completion_message_function_tool_call import Function

    reply = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            ChatCompletionMessageFunctionToolCall(
                id="call_1", type="function", function=Function(name="bash", arguments='{"cmd": "ls"}')
            )
        ],
    )
    path = store_target
    with Session("o", compactor=ContextCompactor(), store=path) as s:
        s.append({"role": "user", "content": "list files"})
        s.append(reply)
        s.append({"role": "tool", "tool_call_id": "call_1", "content": "a.py"})
        ctx = s.context()
    assert ctx[1] == reply.model_dump(mode="json", exclude_none=True)
    assert "content" not in ctx[1] and all(isinstance(m, dict) for m in ctx)
    assert validate_messages(ctx) == []
    with Session("o", compactor=ContextCompactor(), store=path) as s:
        assert s.context() == ctx

    content = [
        TextBlock(type="text", text="Let me look.", citations=None),
        ToolUseBlock(type="tool_use", id="toolu_1", name="bash", input={"cmd": "ls"}),
    ]
    with Session("a", compactor=ContextCompactor(), store=path, system="Be brief.") as s:
        s.append({"role": "user", "content": "list files"})
        s.append({"role": "assistant", "content": content})
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]})
        assert s.format == "anthropic"
        ctx = s.context()
    assert ctx[1]["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}
    assert validate_messages(ctx, format="anthropic", system="Be brief.") == []
    with Session("a", compactor=ContextCompactor(), store=path) as s:
        assert s.context() == ctx and s.system == "Be brief." and s.format == "anthropic"


# -- compaction, resume, expand ------------------------------------------------------------------------------


def test_prepare_compacts_and_records_row_ids(store_target: str) -> None:
    s = Session("s", compactor=small(), store=store_target)
    s.append({"role": "system", "content": "You are a coding agent."})
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    results = []
    for i in range(40):
        before = s.context_ids()
        r = s.prepare()
        if r is not None:
            results.append(r)
            assert {e.index for e in r.record} <= set(before), "record entries name row ids of the context"
            assert r.messages == s.context()
            assert validate_messages(s.context()) == []
            assert s.check().current_tokens <= s.compactor.config.soft_threshold
        s.extend(tool_round(i))
    assert len(results) >= 2
    recs = s.compactions()
    assert [c.id for c in recs] == sorted(c.id for c in recs) and len(recs) == len(results)
    for rec, r in zip(recs, results, strict=True):
        assert rec.strategy == r.strategy and rec.summary == r.summary
        assert (rec.tokens_before, rec.tokens_after) == (r.tokens_before, r.tokens_after)
        assert set(rec.replaced) == {e.index for e in r.record}
        assert rec.created_at > 0 and rec.upto_seq > 0
        assert len(repr(rec)) < 300 and f"CompactionRecord(id={rec.id}, strategy=" in repr(rec)
        assert "KeyError" not in repr(rec)  # the summary's size, not its text
    s.close()


def test_rows_are_stored_by_where_the_core_says_they_came_from(tmp_path: Path) -> None:
    # The task quotes the summary marker and is too long for the window: the compaction returns a
    # shortened copy of it. It is stored as an edit of the task (its original comes back from
    # expand()), not mistaken for a summary because of its text.
    task = {
        "role": "user",
        "content": f"Why does {SUMMARY_MARKER} show up in /srv/app/log.txt? " + "Details here. " * 900,
    }
    s = Session("s", compactor=small(), store=tmp_path / "s.db")
    s.append({"role": "system", "content": "You are a coding agent."})
    s.append(task)
    s.extend(tool_round(0))
    r = s.prepare(force=True)
    assert r is not None and not r.over_budget
    kinds = [k for k, _ in r.origins]
    assert kinds.count("summary") <= 1 and ("edited", 1) in r.origins
    assert any(e.index == s.history_ids()[1] and e.action == "shortened" for e in r.record)
    assert task in s.expand(s.compactions()[-1].id)
    shortened = s.context()[1]
    assert shortened["content"].startswith(f"Why does {SUMMARY_MARKER} show up in /srv/app/log.txt?")
    s.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        kinds = conn.execute("SELECT kind FROM messages WHERE json LIKE '%Why does%' ORDER BY id").fetchall()
    finally:
        conn.close()
    assert [k for (k,) in kinds] == ["original", "edited"]


def test_prepare_answers_whenever_the_context_is_over_the_window(store_target: str) -> None:
    # A system prompt bigger than the budget: no compaction can make the context fit (the system
    # prompt is never changed), so every prepare() must say so instead of answering None.
    compactor = ContextCompactor(max_context_tokens=3000)  # reserve 750, budget 2250
    s = Session("o", compactor=compactor, store=store_target, system="You are a coding agent. " + "rule " * 3000)
    r = s.prepare()  # before any message, too
    assert r is not None and r.over_budget and r.strategy == "none" and r.messages == []
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    for i in range(6):
        for force in (False, True):
            r = s.prepare(force=force)
            assert r is not None and r.over_budget and r.over_budget_reason
            assert s.check().current_tokens > s.check().budget
        s.extend(tool_round(i))
    r = asyncio.run(s.aprepare())
    assert r is not None and r.over_budget
    # A compaction that ran and still does not fit is saved with the flag.
    assert all(c.over_budget for c in s.compactions())
    s.close()


def test_prepare_never_leaves_a_claude_code_session_over_the_window_unflagged(corpus_dir: Path) -> None:
    # Issue 12: at 30% of its size this session went over the window with prepare() answering None.
    t = load(corpus_dir / "claude-code" / "cc_3d_feb22da51f_3.jsonl")
    window = ContextCompactor().counter.count_messages(t.messages, system=t.system, tools=t.tools) * 3 // 10
    s = Session(
        compactor=ContextCompactor(max_context_tokens=window),
        store=":memory:",
        system=t.system,
        tools=t.tools,
        format=t.format,
    )
    answered = 0
    for m in t.messages:
        if m["role"] == "assistant":
            before = s.check()
            r = s.prepare()
            after = s.check()
            if before.urgency == "hard" or after.urgency == "hard":
                assert r is not None
            if after.current_tokens > after.budget:
                assert r is not None and r.over_budget, "over the window without over_budget"
            if r is None:
                assert after.urgency != "hard"
            answered += r is not None
        s.append(m)
    assert answered > 0
    s.close()


def test_resume_gives_the_same_context(store_target: str) -> None:
    path = store_target
    s = Session("s", compactor=small(), store=path)
    agent_run(s, 30)
    ctx, ids, chk, recs, hist = s.context(), s.context_ids(), s.check(), s.compactions(), s.history()
    assert recs
    s.close()
    s2 = Session("s", compactor=small(), store=path)
    assert s2.context() == ctx and s2.context_ids() == ids
    assert s2.check() == chk and s2.compactions() == recs and s2.history() == hist
    # And it carries on where it stopped.
    agent_run(s2, 10, start=30)
    assert validate_messages(s2.context()) == []
    assert len(s2) == len(hist) + 20
    s2.close()


def test_expand_returns_the_exact_originals(store_target: str) -> None:
    s = Session("s", compactor=small(), store=store_target)
    appended: dict[int, dict[str, Any]] = {}
    s.append({"role": "system", "content": "You are a coding agent."})
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    for i in range(30):
        s.prepare()
        msgs = tool_round(i)
        for rid, m in zip(s.extend(msgs), msgs, strict=True):
            appended[rid] = m
    recs = s.compactions()
    assert len(recs) >= 2
    first = recs[0]
    originals = [appended[r] for r in sorted(first.replaced)]
    assert s.expand(first.id) == originals
    # A later compaction names the earlier summary row: expand resolves it to the originals.
    later = recs[-1]
    summary_rows = [r for r in later.replaced if r not in appended]
    expanded = s.expand(later.id)
    assert all(m in appended.values() for m in expanded)
    if summary_rows:
        assert len(expanded) > len([r for r in later.replaced if r in appended])
    covered = {json.dumps(m, sort_keys=True) for m in expanded}
    assert all(json.dumps(appended[r], sort_keys=True) in covered for r in later.replaced if r in appended)
    with pytest.raises(KeyError):
        s.expand(10_000)
    s.close()


def test_check_matches_the_compactor_and_counts_only_new_messages(tmp_path: Path) -> None:
    calls = 0

    def counting(text: str) -> int:
        nonlocal calls
        calls += 1
        return len(text) // 4

    t = load(EXAMPLE)
    c = ContextCompactor(max_context_tokens=3000, reserve_tokens=300)
    s = Session(compactor=c, store=":memory:", system=t.system, tools=t.tools, format=t.format)
    for m in t.messages:
        if m["role"] == "assistant":
            s.prepare()
        s.append(m)
        ctx = s.context()
        assert s.check() == c.check(ctx, system=s.system, tools=s.tools, format=t.format, state=s.state)

    # With a big window nothing compacts; the counter runs only for the new message each time.
    big = ContextCompactor(max_context_tokens=10**9, tokenizer=counting)
    per_step = []
    s.close()
    s = Session(compactor=big, store=":memory:")
    for i in range(600):
        calls = 0
        s.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"})
        assert s.prepare() is None
        per_step.append(calls)
    assert max(per_step[10:]) == min(per_step[10:]) == per_step[-1] <= 2
    s.close()


def test_force_and_instructions(tmp_path: Path) -> None:
    s = Session(compactor=ContextCompactor(), store=":memory:")
    agent_run(s, 12)
    assert s.prepare() is None
    seen: list[SummaryRequest] = []

    def summarize(req: SummaryRequest) -> str:
        seen.append(req)
        return "<summary>Looked at the modules for the KeyError.</summary>"

    s2 = Session(s.id, compactor=ContextCompactor(summarizer=summarize), store=s.store)
    r = s2.prepare(force=True, instructions="Keep the module names.")
    assert r is not None and r.strategy == "summary" and seen[0].instructions == "Keep the module names."
    assert "Looked at the modules" in json.dumps(s2.context())
    # The first Session object notices the other's compaction (same store).
    assert s.context() == s2.context()
    s.close()


def test_system_summary_persists_for_anthropic(store_target: str) -> None:
    path = store_target
    c = ContextCompactor(max_context_tokens=3000, reserve_tokens=300, summary_role="system")
    s = Session("a", compactor=c, store=path, system="You are a coding agent.", format="anthropic")
    s.append({"role": "user", "content": "Fix the KeyError in /srv/app please."})
    for i in range(30):
        s.prepare()
        s.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}: reading mod{i}.py"},
                    {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": f"cat mod{i}.py"}},
                ],
            }
        )
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x\n" * 60}]})
    assert s.compactions()
    system, ctx = s.system, s.context()
    assert system != "You are a coding agent." and "You are a coding agent." in json.dumps(system)
    assert validate_messages(ctx, format="anthropic", system=system) == []
    s.close()
    s = Session("a", compactor=c, store=path)
    assert s.system == system and s.context() == ctx
    s.close()


# -- usage ---------------------------------------------------------------------------------------------------


def test_stale_usage_is_ignored_after_a_compaction(store_target: str) -> None:
    path = store_target
    s = Session("u", compactor=ContextCompactor(max_context_tokens=20_000), store=path)
    agent_run(s, 10)
    sent = s.context()
    assert s.record_usage({"prompt_tokens": 2 * s.check().raw_tokens}, model="m1")
    ratio = s.state.calibration
    assert ratio > 1.2
    sent = s.context()
    assert s.prepare(force=True) is not None
    # The report of the call made with the old context arrives after the compaction: stale.
    assert not s.record_usage({"prompt_tokens": 10 * s.check().raw_tokens}, model="m1")
    assert s.state.calibration == ratio
    # Measured on the new context, it is learned again.
    assert len(s.context()) < len(sent)
    assert s.record_usage(int(1.5 * s.check().raw_tokens), model="m1")
    learned = s.state.calibration
    assert learned != ratio
    rows = s.store.query("SELECT model, learned FROM usage ORDER BY id")
    assert rows == [("m1", 1), ("m1", 0), ("m1", 1)]
    s.close()
    # Reopening re-learns the calibration from reports measured on the current context.
    s = Session("u", compactor=ContextCompactor(max_context_tokens=20_000), store=path)
    assert s.state.observations == 1 and s.state.calibration == pytest.approx(1.5, rel=0.01)
    s.close()


# -- store ------------------------------------------------------------------------------------------------------


def test_a_store_shared_between_sessions(store_target: str) -> None:
    store = SessionStore(store_target)
    a = Session("a", compactor=ContextCompactor(), store=store)
    b = Session("b", compactor=ContextCompactor(), store=store)
    a.append({"role": "user", "content": "for a"})
    b.append({"role": "user", "content": "for b"})
    again = Session("a", compactor=ContextCompactor(), store=store)
    assert again.context() == [{"role": "user", "content": "for a"}]
    assert store.session_ids() == ["a", "b"]
    assert store.delete_session("b") and not store.delete_session("b")
    a.close()
    assert not store.closed  # a Session closes only a store it opened
    store.close()
    with pytest.raises(StoreError):
        a.append({"role": "user", "content": "closed"})


def test_migration_from_version_1(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0][1].split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO sessions (id, created_at, updated_at, last_seq) VALUES ('old', 0, 0, 1)")
    conn.execute(
        "INSERT INTO messages (session, seq, kind, role, json, created_at) "
        "VALUES ('old', 1, 'original', 'user', '{\"role\":\"user\",\"content\":\"kept\"}', 0)"
    )
    conn.commit()
    conn.close()
    s = Session("old", compactor=ContextCompactor(), store=path)
    assert s.store.schema_version == SCHEMA_VERSION == 3
    assert s.context() == [{"role": "user", "content": "kept"}]
    s.append({"role": "assistant", "content": "ok"})
    assert s.record_usage(100) is False  # the usage table exists now (too small to learn from)
    s.close()


def test_newer_schema_and_garbage_files_are_refused(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        Session(compactor=ContextCompactor(), store=newer)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError):
        Session(compactor=ContextCompactor(), store=garbage)


def test_a_lock_held_too_long_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    s = Session("l", compactor=ContextCompactor(), store=path, timeout=0.3)
    s.append({"role": "user", "content": "first"})
    # Another connection (think: another process) holds the write lock.
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="locked"):
        s.append({"role": "user", "content": "blocked"})
    assert time.monotonic() - t0 < 5
    other.execute("ROLLBACK")
    other.close()
    s.append({"role": "user", "content": "after"})
    assert [m["content"] for m in s.history()] == ["first", "after"]

    # Another thread holds the store's own lock.
    hold = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with s.store.locked():
            hold.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    hold.wait(5)
    try:
        with pytest.raises(StoreError, match="lock"):
            s.append({"role": "user", "content": "blocked"})
    finally:
        release.set()
        t.join()
    s.close()


# -- concurrency ------------------------------------------------------------------------------------------------


def test_threads_on_one_session_serialise(tmp_path: Path) -> None:
    s = Session("t", compactor=ContextCompactor(max_context_tokens=4000, reserve_tokens=400), store=tmp_path / "t.db")
    s.append({"role": "user", "content": "start"})
    returned: dict[int, dict[str, Any]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        try:
            for k in range(40):
                m = {"role": "user" if k % 2 else "assistant", "content": f"w{w}-{k} " + "text " * 30}
                rid = s.append(m)
                with lock:
                    returned[rid] = m
        except BaseException as e:
            errors.append(e)

    def preparer() -> None:
        try:
            for _ in range(40):
                s.prepare()
                time.sleep(0.001)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)] + [threading.Thread(target=preparer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    history = s.history()
    assert len(history) == 121 and len(returned) == 120
    for rid, m in returned.items():
        assert s.message(rid) == m
    for w in range(3):
        mine = [m["content"].split()[0] for m in history if m["content"].startswith(f"w{w}-")]
        assert mine == [f"w{w}-{k}" for k in range(40)]
    assert s.compactions()
    assert validate_messages(s.context(), format="openai") == []
    s.close()
    integrity(tmp_path / "t.db", "t")


def test_asyncio_tasks_on_one_session(tmp_path: Path) -> None:
    async def summarize(req: SummaryRequest) -> str:
        await asyncio.sleep(0.01)
        return "<summary>Worked through the steps.</summary>"

    s = Session(
        compactor=ContextCompactor(max_context_tokens=4000, reserve_tokens=400, summarizer=summarize), store=":memory:"
    )
    s.append({"role": "user", "content": "start"})

    async def task(w: int) -> int:
        done = 0
        for k in range(25):
            await s.aprepare()
            s.append({"role": "assistant", "content": f"t{w}-{k} " + "words " * 40})
            s.append({"role": "user", "content": f"t{w}-{k} ok"})
            done += 1
            await asyncio.sleep(0)
        return done

    async def main() -> list[int]:
        return await asyncio.gather(*(task(w) for w in range(4)))

    assert asyncio.run(main()) == [25] * 4
    assert len(s) == 201
    assert any(c.strategy == "summary" for c in s.compactions())
    assert validate_messages(s.context(), format="openai") == []
    s.close()


CHILD_APPEND = textwrap.dedent(
    """
    import sys, time
    from context_compactor import ContextCompactor
    from context_compactor.session import Session
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = Session("shared", compactor=ContextCompactor(), store=path, timeout=30)
    for k in range(n):
        s.append({"role": "user", "content": f"{tag}-{k}"})
    print("done", flush=True)
    """
)


def test_two_processes_append_to_one_file(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD_APPEND, encoding="utf-8")
    Session("shared", compactor=ContextCompactor(), store=path).close()
    procs = [
        subprocess.Popen([sys.executable, str(script), str(path), tag, "60"], stdout=subprocess.PIPE, text=True)
        for tag in ("a", "b")
    ]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and "done" in out
    s = Session("shared", compactor=ContextCompactor(), store=path)
    contents = [m["content"] for m in s.history()]
    assert len(contents) == 120
    for tag in ("a", "b"):
        assert [c for c in contents if c.startswith(tag)] == [f"{tag}-{k}" for k in range(60)]
    assert s.context() == s.history()
    s.close()
    integrity(path, "shared")


def test_session_id_first_compactor_and_store_by_keyword(tmp_path: Path) -> None:
    """Session(session_id, compactor=, store=), as the Agents SDK's SQLiteSession(session_id, ...);
    the old positional order still opens the same session, with a DeprecationWarning."""
    c = ContextCompactor()
    with Session("t", compactor=c, store=tmp_path / "a.db") as s:
        s.append({"role": "user", "content": "hi"})
    with pytest.warns(DeprecationWarning, match=r"Session\(session_id, compactor=\.\.\., store=\.\.\.\)"):
        old = Session(c, tmp_path / "a.db", "t")
    assert old.id == "t" and old.context() == [{"role": "user", "content": "hi"}]
    old.close()
    with pytest.warns(DeprecationWarning):
        Session(c, ":memory:").close()

    async def reopen() -> None:
        with pytest.warns(DeprecationWarning, match=r"Session\.aopen"):
            s = await Session.aopen(c, tmp_path / "a.db", "t")
        async with await Session.aopen("t", compactor=c, store=tmp_path / "a.db") as new:
            assert await new.acontext() == await s.acontext()
        await s.aclose()

    asyncio.run(reopen())
    with pytest.raises(TypeError, match="only positional"):
        Session("t", "extra", compactor=c, store=":memory:")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="twice"):
        Session(c, ":memory:", compactor=c)  # type: ignore[call-overload]


def test_a_gemini_session_persists(tmp_path: Path) -> None:
    """format="gemini" is a Session's format like the others: stored, compacted, and detected again
    when reopened without it."""
    contents = [{"role": "user", "parts": [{"text": "修复 src/app.py 的测试"}]}]
    for i in range(8):
        contents.append({"role": "model", "parts": [{"function_call": {"name": "read", "args": {"path": f"m{i}.py"}}}]})
        contents.append(
            {
                "role": "user",
                "parts": [{"function_response": {"name": "read", "response": {"output": f"line {i}\n" * 80}}}],
            }
        )
    with Session("g", compactor=small(), store=tmp_path / "g.db", format="gemini", system="Be brief.") as s:
        s.extend(contents)
        result = s.prepare(force=True)
        assert result is not None and result.compacted
        ctx = s.context()
        assert validate_messages(ctx, format="gemini", system="Be brief.") == []
    with Session("g", compactor=small(), store=tmp_path / "g.db") as again:
        assert again.format == "gemini" and again.context() == ctx and again.history() == contents

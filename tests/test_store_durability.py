"""Durability and concurrency of the session stores, run once per backend (SQLite, PostgreSQL).

- Workers killed with SIGKILL at random moments, appending or compacting: no acknowledged append
  or compaction is lost, an ``extend`` is all or nothing, and the context is valid and is the
  head compaction's followed by every later original.
- Several processes append to shared sessions and compact them in between: no message lost or
  duplicated, each process's messages in its order, every context valid.

The default run is small (``CC_STORE_KILLS`` kills, ``CC_STORE_APPENDS`` appends per process);
``make store-stress`` runs the full sizes (30 kills; 4 processes x 500 appends).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from context_compactor import ContextCompactor, SessionStore, validate_messages
from context_compactor.session import Session

KILLS = int(os.environ.get("CC_STORE_KILLS", "6"))
APPENDS = int(os.environ.get("CC_STORE_APPENDS", "60"))
PROCESSES = 4


def integrity(target: str, session_id: str) -> None:
    """Every compaction is whole (its context, derived rows and links all present) and the
    originals' seqs have no gap: no partial write survived."""
    store = SessionStore(target)
    pg = "://" in target

    def q(sql: str, *params: Any) -> list[Any]:
        return store.query(sql.replace("?", "%s") if pg else sql, params)  # type: ignore[attr-defined,no-any-return]

    try:
        for cid, details in q("SELECT id, details FROM compactions WHERE session = ?", session_id):
            d = json.loads(details)
            items = q("SELECT COUNT(*) FROM context_items WHERE compaction = ?", cid)[0][0]
            derived = q("SELECT COUNT(*) FROM messages WHERE compaction = ?", cid)[0][0]
            links = q("SELECT COUNT(*) FROM summary_of WHERE compaction = ?", cid)[0][0]
            assert (items, derived, links) == (d["context_count"], d["derived_count"], d["record_count"])
        head = q("SELECT head FROM sessions WHERE id = ?", session_id)[0][0]
        if head is not None:
            assert q("SELECT 1 FROM compactions WHERE id = ?", head)
        seqs = [
            r[0] for r in q("SELECT seq FROM messages WHERE session = ? AND seq IS NOT NULL ORDER BY seq", session_id)
        ]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        store.close()


# -- SIGKILL ---------------------------------------------------------------------------------------------------

CHILD_KILLED = textwrap.dedent(
    """
    import sys, time

    def say(*parts):
        sys.stdout.write(" ".join(map(str, parts)) + "\\n")  # one write per line
        sys.stdout.flush()

    from context_compactor import ContextCompactor
    from context_compactor.session import Session
    target, compact = sys.argv[1], sys.argv[2] == "compact"
    c = ContextCompactor(max_context_tokens=3000, reserve_tokens=300, clear_at_least_tokens=0)
    s = Session("s", compactor=c, store=target, timeout=30)
    conn = getattr(s.store, "_conn", None)
    if hasattr(conn, "set_progress_handler"):  # SQLite: slow statements, so kills land inside transactions
        conn.set_progress_handler(lambda: time.sleep(0.0003) or 0, 20)
    if len(s) == 0:
        s.append({"role": "user", "content": "修复 /srv/app 里的 KeyError, please."})
    i = len(s)
    while True:
        if compact:
            r = s.prepare()
            if r is not None:
                say("c", s.compactions()[-1].id)
        cid = f"call_{i}"
        s.extend([
            {"role": "assistant", "content": f"Step {i}: checking mod{i}.py", "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": cid, "content": f"line {i} 输出\\n" * 80},
        ])
        say("a", i)
        i += 2
    """
)


def _run_and_kill(script: Path, target: str, mode: str, delay: float) -> list[list[str]]:
    proc = subprocess.Popen([sys.executable, str(script), target, mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline().split()]  # started: at least one acknowledged write
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return lines + [line.split() for line in rest.splitlines() if line.strip()]


def test_sigkill_at_random_moments_loses_no_acknowledged_write(store_target: str, tmp_path: Path) -> None:
    rng = random.Random(18)
    script = tmp_path / "killed.py"
    script.write_text(CHILD_KILLED, encoding="utf-8")
    acked: set[int] = set()
    compactions: set[int] = set()
    for k in range(KILLS):
        mode = "compact" if k % 2 else "append"
        for kind, value in _run_and_kill(script, store_target, mode, rng.uniform(0.05, 0.6)):
            (acked if kind == "a" else compactions).add(int(value))
        integrity(store_target, "s")
        s = Session("s", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=store_target)
        history = s.history()
        ids = {m["tool_calls"][0]["id"] for m in history if m.get("tool_calls")}
        assert {f"call_{i}" for i in acked} <= ids, "every acknowledged append survived"
        assert len(history) % 2 == 1, "an extend is all or nothing"
        ctx = s.context()
        assert validate_messages(ctx, format="openai") == []
        recs = s.compactions()
        assert compactions <= {c.id for c in recs}, "every acknowledged compaction survived"
        if recs:  # the head compaction's context, then every later original: old or new, never a mix
            head = recs[-1]
            tail = history[head.upto_seq :]
            assert ctx[len(ctx) - len(tail) :] == tail
            assert not set(head.replaced) & set(s.context_ids())
        else:
            assert ctx == history
        s.close()
    if KILLS >= 4:
        assert compactions, "some kills should land after compactions"


# -- several processes -----------------------------------------------------------------------------------------

CHILD_WORKER = textwrap.dedent(
    """
    import sys
    from context_compactor import ContextCompactor
    from context_compactor.session import Session
    target, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = ContextCompactor(max_context_tokens=3000, reserve_tokens=300)
    sessions = [Session(f"shared{j}", compactor=c, store=target, timeout=60) for j in range(2)]
    compacted = 0
    for k in range(n):
        s = sessions[k % 2]
        s.append({"role": "user", "content": f"{tag}-{k} " + "工作 work " * 40})
        if k % 10 >= 8 and s.prepare() is not None:  # both sessions, every 10 appends
            compacted += 1
    for s in sessions:
        s.close()
    print("done", compacted, flush=True)
    """
)


def test_processes_append_and_compact_shared_sessions(store_target: str, tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(CHILD_WORKER, encoding="utf-8")
    for j in range(2):
        Session(f"shared{j}", compactor=ContextCompactor(), store=store_target).close()
    tags = [f"w{p}" for p in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), store_target, tag, str(APPENDS)], stdout=subprocess.PIPE, text=True
        )
        for tag in tags
    ]
    compacted = 0
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0 and out.startswith("done"), out
        compacted += int(out.split()[1])
    assert compacted > 0
    for j in range(2):
        integrity(store_target, f"shared{j}")
        s = Session(
            f"shared{j}", compactor=ContextCompactor(max_context_tokens=3000, reserve_tokens=300), store=store_target
        )
        words = [m["content"].split()[0] for m in s.history()]
        assert len(words) == len(set(words)), "no message stored twice"
        for tag in tags:
            mine = [w for w in words if w.startswith(tag + "-")]
            assert mine == [f"{tag}-{k}" for k in range(j, APPENDS, 2)], "none lost, in each process's order"
        ctx = s.context()
        assert validate_messages(ctx, format="openai") == []
        recs = s.compactions()
        assert recs
        tail = s.history()[recs[-1].upto_seq :]
        assert ctx[len(ctx) - len(tail) :] == tail  # the delta after the head compaction, verbatim
        s.close()

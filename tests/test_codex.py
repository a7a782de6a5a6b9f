"""Loading Codex CLI sessions: the real older-layout rollout of the shared corpus, and files in the
current ``RolloutLine`` layout written here from codex-rs's own schema (``session_meta``,
``response_item``, ``event_msg``, ``turn_context``, ``compacted``), rebuilt into the Responses
items Codex would send next."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import corpus_or_skip
from context_compactor import ContextCompactor, io, validate_messages
from context_compactor.io import TranscriptError

CORPUS = Path(os.environ.get("CORPUS_DIR", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
REAL = CORPUS / "responses" / "codex-session-viewer_example.jsonl"

KNOWN = {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
    "compaction",
}
CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
RESULTS = {"function_call_output", "custom_tool_call_output"}


def assert_valid_items(items: list[dict[str, Any]], *, pending: int = 0) -> None:
    """Every item a known dict; each result right after its call; call ids unique; every run of
    reasoning items followed by a non-reasoning item; ``pending`` calls at the end wait."""
    assert all(isinstance(it, dict) and it.get("type") in KNOWN for it in items)
    seen: set[str] = set()
    for k, it in enumerate(items):
        if it["type"] in CALLS:
            assert it["call_id"] not in seen, it["call_id"]
            seen.add(it["call_id"])
            nxt = items[k + 1] if k + 1 < len(items) else None
            if nxt is None or nxt["type"] not in RESULTS:
                pending -= 1
                assert k >= len(items) - 3, f"call {it['call_id']} at {k} has no result"
            else:
                assert nxt["call_id"] == it["call_id"]
        elif it["type"] in RESULTS:
            assert k > 0 and items[k - 1].get("call_id") == it["call_id"], f"result at {k} not after its call"
        elif it["type"] == "reasoning":
            rest = items[k + 1 :]
            assert rest and any(r["type"] != "reasoning" for r in rest), f"reasoning at {k} has no following item"
    assert pending <= 0


def test_the_real_older_layout_session() -> None:
    corpus_or_skip()
    t = io.load(REAL)
    assert (t.format, t.source) == ("responses", "codex_jsonl")
    kinds = [it["type"] for it in t.messages]
    assert len(t.messages) == 741 and t.skipped == 629 and t.repairs == []
    assert (kinds.count("function_call"), kinds.count("function_call_output")) == (246, 246)
    assert (kinds.count("reasoning"), kinds.count("message")) == (143, 106)
    assert_valid_items(t.messages)
    assert t.system is not None and t.system.startswith("# path: AGENTS.md")
    # Kept items are the file's objects, unchanged: reasoning keeps its encrypted content.
    lines = [json.loads(line) for line in REAL.read_text(encoding="utf-8").split("\n") if line.strip()]
    items = [r for r in lines[1:] if "type" in r]
    assert t.messages == items
    assert all(it["encrypted_content"].startswith("gAAAAA") for it in t.messages if it["type"] == "reasoning")


def line(kind: str, payload: dict[str, Any], ts: str = "2026-11-20T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}, ensure_ascii=False)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def reasoning(n: int) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": f"rs_{n:04d}",
        "summary": [{"type": "summary_text", "text": f"**Step {n}**"}],
        "content": None,
        "encrypted_content": f"gAAAAAB{'x' * 40}{n}",
    }


def call(cid: str, cmd: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "name": "shell",
        "arguments": json.dumps({"command": ["bash", "-lc", cmd]}),
        "call_id": cid,
    }


def output(cid: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def current_layout(tmp_path: Path) -> Path:
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    rows = [
        line(
            "session_meta",
            {
                "id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
                "timestamp": "2026-11-20T10:00:00.000Z",
                "cwd": "/home/dev/proj",
                "originator": "codex_cli_rs",
                "cli_version": "0.63.0",
                "source": "cli",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex, a coding agent."},
                "git": {"commit_hash": "abc123", "branch": "main"},
            },
        ),
        line("response_item", user("<environment_context>\n  <cwd>/home/dev/proj</cwd>\n</environment_context>")),
        line(
            "turn_context",
            {"cwd": "/home/dev/proj", "approval_policy": "on-request", "model": "gpt-5.4", "effort": "medium"},
        ),
        line("response_item", user("修复 src/app.py 里的 bug, then run the tests")),
        line("event_msg", {"type": "user_message", "message": "修复 src/app.py 里的 bug, then run the tests"}),
        line("response_item", reasoning(1)),
        line("response_item", reasoning(2)),  # a run of reasoning before one call
        line("response_item", call("call_a", "cat src/app.py")),
        line("event_msg", {"type": "exec_command_begin", "call_id": "call_a"}),
        line("response_item", output("call_a", "x = 1\n")),
        line("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "deadbeef"}}),
        line("response_item", reasoning(3)),
        line(
            "response_item",
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": "call_p",
                "name": "apply_patch",
                "input": patch,
            },
        ),
        line(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success. Updated src/app.py"},
        ),
        line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 9000}}}),
        line("response_item", output("call_ghost", "orphan output")),  # its call is nowhere
        line("response_item", output("call_b", "2 passed")),  # written before its call
        line("response_item", call("call_b", "pytest -q")),
        line("response_item", call("call_b", "pytest -q")),  # a repeated call id
        line("response_item", call("call_lost", "ls")),  # never answered, not at the end
        line("response_item", assistant("Fixed src/app.py; the tests pass.")),
        line("event_msg", {"type": "agent_message", "message": "Fixed src/app.py; the tests pass."}),
        line("response_item", user("now also update the README")),
        line("response_item", reasoning(4)),
        line("response_item", call("call_c", "sed -n 1,20p README.md")),  # still pending
        line("response_item", reasoning(5)),  # interrupted: nothing follows
    ]
    p = tmp_path / "rollout-2026-11-20T10-00-00-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl"
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return p


def test_the_current_layout(tmp_path: Path) -> None:
    t = io.load(current_layout(tmp_path))
    assert (t.format, t.source, t.system) == ("responses", "codex_jsonl", "You are Codex, a coding agent.")
    kinds = [it["type"] for it in t.messages]
    assert kinds == [
        "message",
        "message",
        "reasoning",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "custom_tool_call",
        "custom_tool_call_output",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "reasoning",
        "function_call",
    ]
    assert_valid_items(t.messages, pending=1)
    # session_meta, turn_context, 4 event_msg, the ghost snapshot.
    assert t.skipped == 7
    assert [it["call_id"] for it in t.messages if it["type"] == "function_call_output"] == [
        "call_a",
        "call_b",
        "call_lost",
    ]
    assert t.messages[12]["output"] == io.NO_RESULT_TEXT
    notes = "\n".join(t.repairs)
    for what in (
        "call_ghost",
        "second call with call_id 'call_b'",
        "written before the call",
        "'call_lost' had no result",
        "reasoning item with no item after it",
    ):
        assert what in notes, (what, t.repairs)
    assert "call_c" not in notes  # a trailing call may wait for its result
    assert t.messages[2]["encrypted_content"] == reasoning(1)["encrypted_content"]


def test_a_compaction_checkpoint_replaces_the_history(tmp_path: Path) -> None:
    summary_item = {"type": "compaction", "encrypted_content": "gAAAAABsummary"}
    rows = [
        line(
            "session_meta",
            {"id": "s1", "timestamp": "t", "cwd": "/p", "originator": "codex_cli_rs", "cli_version": "0.63.0"},
        ),
        line("response_item", user("task: port the parser")),
        line("response_item", call("call_1", "ls")),
        line("response_item", output("call_1", "a.py")),
        line("response_item", assistant("Listed.")),
        line(
            "compacted",
            {"message": "", "replacement_history": [user("task: port the parser"), summary_item]},
        ),
        line("response_item", user("continue")),
        line("response_item", assistant("Done.")),
    ]
    p = tmp_path / "rollout.jsonl"
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    t = io.load(p)
    assert [it["type"] for it in t.messages] == ["message", "compaction", "message", "message"]
    assert t.messages[1] == summary_item
    # An older checkpoint without replacement history: the user messages, then the summary.
    rows[5] = line("compacted", {"message": "Summary: listed the files; a.py holds the parser."})
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    t = io.load(p)
    texts = [it["content"][0]["text"] for it in t.messages]
    assert texts == ["task: port the parser", "Summary: listed the files; a.py holds the parser.", "continue", "Done."]
    assert_valid_items(t.messages)


def test_format_other_than_responses_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="Responses items"):
        io.load(current_layout(tmp_path), format="anthropic")
    # loads() reads the same text.
    assert io.loads(current_layout(tmp_path).read_text(encoding="utf-8")).source == "codex_jsonl"


@pytest.mark.parametrize("share", [0.05, 0.3])
def test_the_real_rollout_validates_and_compacts_as_responses_items(share: float) -> None:
    corpus_or_skip()
    t = io.load(REAL)
    assert validate_messages(t.messages, format="responses", system=t.system) == []
    total = ContextCompactor().check(t.messages, system=t.system, format="responses").current_tokens
    compactor = ContextCompactor(max_context_tokens=int(total * share))
    result = compactor.compact(t.messages, system=t.system, format="responses")
    assert validate_messages(result.messages, format="responses", system=result.system) == []
    assert result.tokens_after <= compactor.config.budget or result.over_budget
    # Reasoning items come back as the loaded objects (opaque, byte-identical), never alone.
    ids = {id(m) for m in t.messages}
    assert all(id(m) in ids for m in result.messages if m.get("type") == "reasoning")
    task = next(m for m in t.messages if m.get("role") == "user")
    assert any(m is task for m in result.messages) or "shortened" in {r.action for r in result.record}

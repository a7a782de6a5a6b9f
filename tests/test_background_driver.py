"""One copy of the compaction's steps: a background job (sync thread, asyncio task) takes the core
driver's steps as ``compact()`` does, so a failure at a given chunk ends the same way on all three
paths: the same messages, summary, ``fallback_reason`` and cool-down, or the same error."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from context_compactor import ContextCompactor, ConversationState, SummarizerError, SummaryRequest
from context_compactor._background import Job
from context_compactor.session import Session


class AuthenticationError(Exception):
    status_code = 401


class ServiceUnavailable(Exception):
    status_code = 503


FAILURES: dict[str, Any] = {
    "timeout": lambda: TimeoutError("the model timed out"),
    "transient": lambda: ServiceUnavailable("overloaded, try again"),
    "permanent": lambda: AuthenticationError("bad key"),
    "empty": lambda: "",
}


class Script:
    """A summarizer that answers call k with ``outcomes[k]``: ``"ok"``, or a failure of
    :data:`FAILURES` (raised, or an empty reply)."""

    def __init__(self, *outcomes: str) -> None:
        self.outcomes = outcomes
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        k = len(self.requests)
        outcome = self.outcomes[k - 1] if k <= len(self.outcomes) else "ok"
        if outcome != "ok":
            failure = FAILURES[outcome]()
            if isinstance(failure, BaseException):
                raise failure
            return str(failure)
        return f"<summary>Part {k}: read /srv/app/mod{k}.py; 修复了 KeyError 的第{k}步.</summary>"


def conversation(rounds: int = 40) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the KeyError in /srv/app please. 请修复这个错误。"},
    ]
    for i in range(rounds):
        step = f"Step {i}: read /srv/app/mod{i}.py. " + "Looked at it. " * 12
        messages.append({"role": "assistant", "content": step})
        messages.append({"role": "user", "content": f"Go on with step {i + 1}."})
    return messages


def make(summarizer: Any, policy: str, **kw: Any) -> ContextCompactor:
    return ContextCompactor(
        summarizer=summarizer,
        max_context_tokens=3000,
        reserve_tokens=300,
        summarizer_max_input_tokens=500,  # the span is summarised in several chunks
        summarizer_timeout_s=20,
        on_summarizer_error=policy,
        cooldown_calls=3,
        **kw,
    )


def outcome(result: Any, cooldown: int) -> tuple[Any, ...]:
    return (result.messages, result.summary, result.summary_source, result.fallback_reason, cooldown)


def foreground(
    outcomes: tuple[str, ...], policy: str, messages: list[dict[str, Any]], force: bool = True
) -> tuple[Any, ...]:
    script = Script(*outcomes)
    state = ConversationState()
    try:
        result = make(script, policy).compact(messages, force=force, state=state)
    except SummarizerError as e:
        return ("raised", str(e), type(e.__cause__).__name__, state.cooldown_remaining, len(script.requests))
    return (*outcome(result, state.cooldown_remaining), len(script.requests))


def job(outcomes: tuple[str, ...], policy: str, messages: list[dict[str, Any]], mode: str) -> tuple[Any, ...]:
    script = Script(*outcomes)
    cc = make(script, policy)
    state = ConversationState()
    snap = SimpleNamespace(messages=messages, system=None, upto_seq=len(messages))
    j = Job(lambda: cc.plan(messages, force=True, state=state), snap, script, cc.config)
    if mode == "thread":
        j.start_thread()
        assert j.wait(10)
    else:

        async def run() -> None:
            j.start_task()
            assert await j.await_done(10)

        asyncio.run(run())
    assert j.done() and not j.cancelled
    if j.result is None:
        error = j.error
        assert isinstance(error, SummarizerError)
        return ("raised", str(error), type(error.__cause__).__name__, j.cooldown_calls, len(script.requests))
    assert (j.error is None) == (j.result.fallback_reason is None)
    assert j.summarizer_calls == len(script.requests)
    return (*outcome(j.result, j.cooldown_calls), len(script.requests))


CASES = [
    (("ok", "ok", "ok", "ok", "ok", "ok"), "fallback"),
    (("ok", "transient"), "fallback"),  # chunk 2 fails: chunk 1's summary is kept
    (("ok", "timeout"), "fallback"),
    (("ok", "empty"), "fallback"),
    (("transient",), "fallback"),  # chunk 1 fails: the rule summary alone
    (("ok", "permanent"), "fallback"),  # raised
    (("ok", "permanent"), "fallback_all"),
    (("ok", "transient"), "raise"),
]


@pytest.mark.parametrize(("outcomes", "policy"), CASES, ids=["-".join(o) + f"-{p}" for o, p in CASES])
def test_a_job_ends_as_compact_does(outcomes: tuple[str, ...], policy: str) -> None:
    messages = conversation()
    fg = foreground(outcomes, policy, messages)
    assert job(outcomes, policy, messages, "thread") == fg
    assert job(outcomes, policy, messages, "task") == fg
    if fg[0] == "raised":
        kind = "permanent" if "permanent" in outcomes else "transient"
        assert fg[1].startswith(f"the summarizer failed ({kind})") and fg[3] == 0
    elif "ok" in outcomes and len(set(outcomes)) > 1:
        # The failure came at a later chunk: the chunks before it are in the summary.
        assert fg[3] is not None and fg[4] == 3 and "Part 1" in (fg[1] or "")
        assert all(f"Part {k}" not in (fg[1] or "") for k in range(2, 7))
    if fg[0] != "raised" and fg[3] is None:
        assert fg[2] == "llm" and fg[4] == 0 and fg[5] > 1  # chunked: several summarizer calls


def test_the_chunk_2_failure_through_a_session_sync_and_async() -> None:
    """The user's path: prepare() starts the job at the soft threshold, the next one applies it;
    the same fallback, summary and cool-down as compact() on the snapshot."""
    messages = conversation(31)  # over the soft threshold, under the hard one
    want = foreground(("ok", "transient"), "fallback", messages, force=False)
    assert want[3] is not None and "Part 1" in want[1]

    def session(script: Script) -> Session:
        s = Session(compactor=make(script, "fallback", background=True), store=":memory:")
        s.extend(messages)
        assert s.check().urgency == "soft"
        return s

    s = session(Script("ok", "transient"))
    assert s.prepare() is None and s.pending is not None and s.pending.wait(10)
    result = s.prepare()
    assert result is not None
    got = (result.summary, result.summary_source, result.fallback_reason, s.state.cooldown_remaining)
    assert got == (want[1], want[2], want[3], want[4]) and s.context() == want[0]
    s.close()

    async def run() -> tuple[Any, ...]:
        s = session(Script("ok", "transient"))
        assert await s.aprepare() is None and s.pending is not None and await s.pending.await_done(10)
        result = await s.aprepare()
        assert result is not None
        out = (result.summary, result.summary_source, result.fallback_reason, s.state.cooldown_remaining)
        assert s.context() == want[0]
        await s.aclose()
        return out

    assert asyncio.run(run()) == got


def test_an_early_job_does_not_ask_for_a_summary_that_cannot_repay_itself() -> None:
    """An early job (started below the soft threshold) over a small span next to a large recent
    tail: applied with a summary as long as the conversation's last one (``expect``), the
    compaction would save less than ``min_savings_ratio`` and be refused whatever the summarizer
    says, so the summarizer is not called and nothing changes; with a short last summary it is."""
    requests: list[SummaryRequest] = []

    def summarizer(request: SummaryRequest) -> str:
        requests.append(request)
        return "<summary>Read the modules.</summary>"

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the KeyError in /srv/app please."},
    ]
    for i in range(4):
        messages += [
            {"role": "assistant", "content": f"Step {i}: read /srv/app/mod{i}.py. " + "Looked at it. " * 6},
            {"role": "user", "content": f"Go on {i}."},
        ]
    for i in range(3):
        messages += [
            {"role": "assistant", "content": f"Big {i}: " + "A long recent reply about the module. " * 60},
            {"role": "user", "content": f"More {i}."},
        ]
    cc = ContextCompactor(summarizer=summarizer, max_context_tokens=3000, reserve_tokens=300, min_savings_ratio=0.58)
    now = cc.check(messages).current_tokens
    early = ContextCompactor(cc.config.replace(soft_threshold_tokens=now), summarizer=summarizer)
    snap = SimpleNamespace(messages=messages, system=None, upto_seq=len(messages))
    long_summary = "Read /srv/app/mod0.py and found the KeyError. " * 10
    for expect, asked in ((long_summary, 0), ("Read the modules.", 1), (None, 1)):
        requests.clear()
        j = Job(lambda: early.plan(messages), snap, summarizer, cc.config, early=True, expect=expect)
        j.run()
        assert j.done() and j.error is None and j.result is not None
        assert len(requests) == asked and j.summarizer_calls == asked
        if asked:
            assert j.result.changed and j.result.summary_source == "llm"
        else:
            assert not j.result.changed and j.result.messages == messages
            assert "min_savings_ratio" in (j.result.reason or "")

"""Canaries: statements a user says once, planted in copies of real conversations, looked for
after every compaction.

What an outsider measures, written from DESIGN's definition of an instruction and nothing of
the core's: no classifier, no constraint rule, no ledger parser decides what a canary is or
whether it is there. A canary is one sentence with a token of its own (``CN-1A2B3C``); it
survived a compaction when the exact sentence, byte for byte, is a substring of some string of
the compacted request (its messages and its system prompt).

- **Kinds** (:data:`KINDS`): a safety rule, a hard constraint, a fact the user stated, a goal,
  a preference.
- **Forms** (:data:`FORMS`): imperative ("Never delete …"), conditional ("Before you run any
  migration, …", "When you finish, …") and every/each ("End every reply with …").
- **Languages**: English and Chinese (:data:`TEMPLATES`: 5 kinds x 3 forms x 2 languages).
- **Positions** (:data:`POSITIONS`): the top (10% into the conversation, after the task), the
  middle (50%) and the bottom (90%), each as a new user message where the format allows one
  there, else appended to the nearest user message (:func:`plant`). A copy is made in memory;
  the corpus is never written.

Each position of a conversation gets one canary of every kind; the form and the language turn
with the conversation and the position (:func:`canaries_for`), so the corpus covers every
template.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from context_compactor import _core
from context_compactor.io import Transcript

__all__ = ["FORMS", "KINDS", "POSITIONS", "TEMPLATES", "Canary", "canaries_for", "plant", "survivors"]

KINDS = ("safety", "constraint", "fact", "goal", "preference")
FORMS = ("imperative", "conditional", "every")
#: Where canaries go: a share of the conversation's messages.
POSITIONS = {"top": 0.1, "middle": 0.5, "bottom": 0.9}

#: (kind, form, language) -> the sentence, ``{t}`` being the canary's token.
TEMPLATES: dict[tuple[str, str, str], str] = {
    ("safety", "imperative", "en"): "Never delete the backups in the storage bucket {t}.",
    ("safety", "conditional", "en"): "Before you run any migration, take a snapshot of the database {t}.",
    ("safety", "every", "en"): "Every command that touches the production cluster {t} needs my approval first.",
    ("constraint", "imperative", "en"): "Do not change the public interface of the module {t}.",
    ("constraint", "conditional", "en"): "When you finish, run the linter with the profile {t}.",
    ("constraint", "every", "en"): "End every reply with the word {t}.",
    ("fact", "imperative", "en"): "Remember that the staging server is called {t}.",
    ("fact", "conditional", "en"): "If you need the staging database, its host name is {t}.",
    ("fact", "every", "en"): "Each service in this repository sits behind the gateway {t}.",
    ("goal", "imperative", "en"): "Get the nightly job {t} green again.",
    ("goal", "conditional", "en"): "Once this is done, the dashboard {t} should load in under two seconds.",
    ("goal", "every", "en"): "Every endpoint of the service {t} should return JSON.",
    ("preference", "imperative", "en"): "Please use pytest instead of unittest for the suite {t}.",
    ("preference", "conditional", "en"): "If you write a commit message, I prefer the style of the project {t}.",
    ("preference", "every", "en"): "Write every log message in lower case, like the logger {t} does.",
    ("safety", "imperative", "zh"): "绝对不要删除存储桶 {t} 里的备份。",
    ("safety", "conditional", "zh"): "在运行任何迁移之前，先给数据库 {t} 做快照。",
    ("safety", "every", "zh"): "每次执行涉及生产集群 {t} 的命令都要先经过我确认。",
    ("constraint", "imperative", "zh"): "不要修改模块 {t} 的公开接口。",
    ("constraint", "conditional", "zh"): "如果你完成了，就用配置 {t} 运行代码检查。",
    ("constraint", "every", "zh"): "每条回复都以 {t} 结尾。",
    ("fact", "imperative", "zh"): "记住，预发布服务器叫 {t}。",
    ("fact", "conditional", "zh"): "如果需要预发布数据库，它的主机名是 {t}。",
    ("fact", "every", "zh"): "这个仓库的每个服务都在网关 {t} 后面。",
    ("goal", "imperative", "zh"): "让夜间任务 {t} 重新通过。",
    ("goal", "conditional", "zh"): "等这个完成后，仪表盘 {t} 应该在两秒内加载完。",
    ("goal", "every", "zh"): "服务 {t} 的每个接口都应该返回 JSON。",
    ("preference", "imperative", "zh"): "请在测试集 {t} 里用 pytest 而不是 unittest。",
    ("preference", "conditional", "zh"): "如果你写提交信息，我更喜欢项目 {t} 的风格。",
    ("preference", "every", "zh"): "每条日志信息都用小写，就像日志器 {t} 那样。",
}


@dataclass(frozen=True)
class Canary:
    """One planted sentence.

    Attributes:
        token: Its unique token (``CN-`` and six hex digits).
        kind: One of :data:`KINDS`.
        form: One of :data:`FORMS`.
        language: ``"en"`` or ``"zh"``.
        position: One of :data:`POSITIONS`.
        text: The exact sentence.
        index: The index of the message that holds it in the planted copy (set by :func:`plant`).
    """

    token: str
    kind: str
    form: str
    language: str
    position: str
    text: str
    index: int = -1


def canaries_for(name: str, slot: int) -> list[Canary]:
    """The canaries of one conversation (``slot``: its place in the grid, to turn forms and
    languages): one of every kind at every position."""
    out = []
    for p, position in enumerate(POSITIONS):
        for k, kind in enumerate(KINDS):
            combo = (3 * slot + p + k) % (len(FORMS) * 2)
            form, language = FORMS[combo % len(FORMS)], ("en", "zh")[combo // len(FORMS)]
            digest = hashlib.sha256(f"{name}\0{position}\0{kind}".encode()).hexdigest()[:6].upper()
            token = f"CN-{digest}"
            out.append(Canary(token, kind, form, language, position, TEMPLATES[kind, form, language].format(t=token)))
    return out


def _get(m: Any, key: str) -> Any:
    return m.get(key) if isinstance(m, dict) else None


def _new_user_message(text: str, fmt: str) -> dict[str, Any]:
    if fmt == "responses":
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return {"role": "user", "content": text}


def _appended(message: Any, text: str, fmt: str) -> dict[str, Any] | None:
    """A copy of a user message with ``text`` added at its end (``None``: not a user message)."""
    if _get(message, "role") != "user" or (fmt == "responses" and _get(message, "type") not in (None, "message")):
        return None
    m: dict[str, Any] = copy.deepcopy(message)
    content = m.get("content")
    if isinstance(content, str):
        m["content"] = f"{content}\n\n{text}" if content else text
    elif isinstance(content, list):
        part = "input_text" if fmt == "responses" else "text"
        m["content"] = [*content, {"type": part, "text": text}]
    else:
        return None
    return m


def _problems(messages: list[Any], t: Transcript) -> set[str]:
    return {p.rule for p in _core.validate_messages(messages, format=t.format, system=t.system, tools=t.tools)}


def plant(transcript: Transcript, canaries: Sequence[Canary]) -> tuple[Transcript, list[Canary]]:
    """A copy of ``transcript`` with each position's canaries (one line each) in a user message
    near that position: a new user message at the nearest index where it keeps the request as
    valid as it was, else appended to the nearest user message after the task. Returns the copy
    and the canaries with the index of the message that holds them."""
    messages = list(transcript.messages)
    base = _problems(messages, transcript)
    placed: list[Canary] = []
    # Bottom first: an insertion does not move the indices of the positions above it.
    for position in sorted(POSITIONS, key=POSITIONS.__getitem__, reverse=True):
        group = [c for c in canaries if c.position == position]
        if not group:
            continue
        text = "\n".join(c.text for c in group)
        n = len(messages)
        target = min(max(1, round(POSITIONS[position] * n)), n)
        order = sorted(range(1, n + 1), key=lambda i: (abs(i - target), i))
        index = None
        for i in order:
            trial = [*messages[:i], _new_user_message(text, transcript.format), *messages[i:]]
            if _problems(trial, transcript) <= base:
                messages, index = trial, i
                break
        if index is None:
            for i in order:
                if i >= n:
                    continue
                m = _appended(messages[i], text, transcript.format)
                if m is not None:
                    trial = [*messages[:i], m, *messages[i + 1 :]]
                    if _problems(trial, transcript) <= base:
                        messages, index = trial, i
                        break
        if index is None:
            continue  # nowhere valid (a conversation of one message): the position is left out
        # Positions planted earlier (below this one) moved down by one when a message was inserted.
        inserted = len(messages) > n
        placed = [replace(c, index=c.index + 1) if inserted and c.index >= index else c for c in placed]
        placed += [replace(c, index=index) for c in group]
    planted = replace(transcript, messages=messages)
    return planted, sorted(placed, key=lambda c: (c.index, KINDS.index(c.kind)))


def survivors(canaries: Sequence[Canary], haystack: str) -> list[bool]:
    """Whether each canary's exact sentence is in ``haystack`` (every string of a request)."""
    return [c.text in haystack for c in canaries]

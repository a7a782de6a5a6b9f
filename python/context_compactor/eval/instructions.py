"""The user's orders, read by the eval (:func:`constraints`, :func:`is_instruction`): sentences of
the user's own messages that a reader takes as an instruction, to be kept verbatim through
compaction. DESIGN's definition ("Instruction") is the guide; the rules are the eval's own,
kept apart from the core's instruction classifier on purpose: the probe is a second opinion on
what the core carries, so it must not ask the core what an instruction is.

- an imperative ("don't", "do not", "never", "always", "must", "only"; 不要, 别, 不能, 禁止, 必须,
  一定, 务必, 只, 总是, 永远不, 绝不, 不许, 不准), or a sentence that starts with an order's verb
  ("Create a script …", "Please …"; 查看, 提交, 先…, …);
- a condition with an order ("When you finish, run …", "Before you edit, …", "Once it is done, X
  should …"), a rule for every reply or action ("End every reply with …", "Every command …
  needs …"), a preference ("I prefer …", "Please use …", "… instead of …", "we recommend") or a
  goal ("The goal is …", "I want …", "make sure …"), and the Chinese forms (请, 每次, 以后,
  如果…就…, 先…再…, 更喜欢, 目标是, 仅, 应该, …).

Questions, headings ("Create a new file:"), code and harness messages are not orders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from context_compactor.eval.facts import role, text_of

__all__ = ["HARNESS_PREFIXES", "constraints", "is_instruction", "is_user_prose", "normalize"]

#: Messages a harness wrote in the user's role (not the user's words). Kept here on purpose,
#: apart from the core's list (``src/summary/rule.rs``): the eval judges the core, so it reads
#: the transcripts its own way; a prefix added to one list is not silently added to the other.
HARNESS_PREFIXES = (
    "<local-command-caveat>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<system-reminder>",
    "<task-notification>",
    "<user-prompt-submit-hook>",
    "[Request interrupted",
    "[context-compactor summary]",
    "This session is being continued from a previous conversation",
)


def normalize(text: str) -> str:
    """Whitespace collapsed to one space: how texts are compared verbatim."""
    return " ".join(text.split())


# -- the orders ----------------------------------------------------------------------------------------------------

_EN_IMPERATIVE = re.compile(r"(?<![A-Za-z])(?:don['’]t|do not|never|always|must|only)(?![A-Za-z])", re.I)
_ZH_IMPERATIVE = re.compile(
    r"不要|(?<![区特分识类级个告派差性离辨鉴甄])别(?![的人处])|(?<!能)不能(?!不)|禁止|必须|一定|务必|只(?![是要])|总是|永远不|绝不|不许|不准"
)
# The forms a reader also takes as orders (DESIGN's "Instruction"), written for the eval and kept
# apart from the core's classifier on purpose: a second opinion, not a copy.
#: A condition, then a main clause that starts with a verb: "When you finish, run …", "Before you
#: edit, …", "If it fails, tell me" (not "If you need it, its name is …": a fact).
_EN_CONDITION = re.compile(
    r"^(?:when|whenever|before|after|if|once|until|unless|as soon as)\b[^,.;]{1,160},\s*(?:please\s+)?([A-Za-z']+)",
    re.I,
)
#: A rule for every reply or action: "End every reply with …", "Each commit needs …".
_EN_EVERY = re.compile(r"(?<![A-Za-z])(?:every|each|all)(?![A-Za-z])", re.I)
_EN_RULE_VERB = re.compile(r"(?<![A-Za-z])(?:should|needs?|has to|have to|is required|are required)(?![A-Za-z])", re.I)
#: A preference or a goal: "I prefer …", "Please use …", "use X instead of Y", "The goal is …".
_EN_PREFERENCE_GOAL = re.compile(
    r"(?<![A-Za-z])(?:I(?:['’]d| would)? prefer|I(?:['’]d| would) rather|please (?:use|write|keep|make|avoid|add|run"
    r"|do|put|follow|check|stick|leave)|instead of|the goal is|our goal is|I want|we need|I need you to|make sure"
    r"|ensure|(?:I|we) recommend)(?![A-Za-z])",
    re.I,
)


#: First words that make a clause a statement or a question, not an order given with a verb.
def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_A_VERB = _wordset(
    "i you we he she it they this that these those there the a an my your our its his her their what why how where "
    "which who whom whose when is are was were be been do does did can could would should will shall may might must "
    "here and but so or if then now also just to in on at for of with by as from ok okay yes no thanks thank hi "
    "hello note all every each some any one not i'm it's that's there's you're we're he's she's they're such "
    "maybe perhaps"
)
#: Verbs an order starts with ("Run the tests.", "Create a script to reproduce the issue"): a
#: short list read off the corpus's tasks and the forms DESIGN names; a sentence that starts
#: with one (not a heading ending in ":") is an order.
_ORDER_VERBS = _wordset(
    "add analyze analyse avoid build change check conduct create delete do edit end ensure explain find "
    "finish fix follow get give implement install keep leave let's look make move open please push put read "
    "refactor remember remove rename replace report rerun re-run reply respond run search show start stop "
    "submit take tell test think try update use verify wait write"
)
_ZH_FORMS = re.compile(
    r"请|每次|每个|每条|每一|以后|如果.{0,40}就|先.{0,40}再|之前[，,]|之后[，,]|更喜欢|偏好|目标是|我想要|我们需要|确保|仅"
    r"|然后再|所有|应该"
)
#: A Chinese sentence that starts with a verb has no subject: an order ("在新的分支提交推送" starts
#: with a place, so 在…提交 is matched too).
_ZH_ORDER_START = re.compile(
    r"^(?:在.{1,20}?)?(?:先|查看|提交|推送|阅读|完成|回到|修复|修改|运行|执行|添加|删除|创建|实现|检查|测试|更新|打开"
    r"|切换|保存|恢复|撤销|合并|继续|重新|帮我|带我|给我|让|把|改|写|用)"
)


def _starts_with_verb(clause: str) -> bool:
    """Whether a clause starts with a word that may be a verb (not a label: "MODIFY: …")."""
    first = clause.split(maxsplit=1)[0] if clause.split() else ""
    word = first.lower().strip(",.;!\"'*`")
    return bool(word) and word.isalpha() and word not in _NOT_A_VERB


def is_instruction(sentence: str) -> bool:
    """Whether a sentence of the user's reads as an order: a prohibition or requirement, a
    condition with an order, a rule for every reply or action, a preference or a goal (English
    and Chinese). A question is not one."""
    s = sentence.strip()
    if s.endswith(("?", "？")):
        return False
    if _EN_IMPERATIVE.search(s) or _ZH_IMPERATIVE.search(s) or _ZH_FORMS.search(s) or _EN_PREFERENCE_GOAL.search(s):
        return True
    if _ZH_ORDER_START.match(s) and len(s) >= 6:  # not a heading ("修改方案")
        return True
    words = s.split()
    first = words[0].lower().strip(",.;:!\"'*`") if words else ""
    # Capitalised like a sentence: "make gen-* make check" is a command line, not an order.
    # Not a heading or a label ("Create a new file:", "Fix: kimi-web …").
    label = s.endswith(":") or words[0].endswith(":") if words else True
    if first in _ORDER_VERBS and words[0][:1].isupper() and len(words) >= 3 and not label:
        return True
    m = _EN_CONDITION.match(s)
    if m and (m.group(1).lower() not in _NOT_A_VERB or _EN_RULE_VERB.search(s, m.start(1))):
        return True
    return bool(_EN_EVERY.search(s) and (_starts_with_verb(s) or _EN_RULE_VERB.search(s)))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])|\n+")
MAX_CONSTRAINT_CHARS = 300


def is_user_prose(message: Any) -> bool:
    """A user message the user wrote (not a tool result, a harness wrapper or a summary)."""
    if role(message) != "user":
        return False
    text = text_of(message).lstrip()
    return bool(text) and not text.startswith(HARNESS_PREFIXES)


def _prose(text: str) -> str:
    """The text outside fenced code blocks."""
    out, fence = [], False
    for line in text.splitlines():
        if line.strip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if not fence:
            out.append(line)
    return "\n".join(out)


_LINE_NUMBER = re.compile(r"^\d+[:|]")


def _looks_like_code(s: str) -> bool:
    """A line of a numbered listing (``1463: msg = ...``) or of code (more than four of
    ``{}()[]=;<>``): not an order the user gave."""
    return bool(_LINE_NUMBER.match(s)) or sum(s.count(c) for c in "{}()[]=;<>") > 4


def constraints(messages: Sequence[Any]) -> list[str]:
    """The user's imperatives: each sentence of a user message (outside code) that holds one, as
    written (whitespace collapsed), in order, no repeats."""
    found: dict[str, None] = {}
    for m in messages:
        if not is_user_prose(m):
            continue
        for s in _SENTENCE_END.split(_prose(text_of(m))):
            s = normalize(s.strip(" -*>#\t"))
            if 4 <= len(s) <= MAX_CONSTRAINT_CHARS and not _looks_like_code(s) and is_instruction(s):
                found.setdefault(s, None)
    return list(found)

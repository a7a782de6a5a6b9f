"""Type stubs for the native module ``context_compactor._core`` (the Rust core's boundary)."""

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal, TypeAlias, final

__version__: str

FORMATS: Final[tuple[str, ...]]
"""The wire formats' names (``"openai"``, ``"anthropic"``, ``"responses"``, ``"gemini"``), in the
order the core lists them; the shell's format checks read it."""
SUMMARY_MARKER: Final[str]
"""The first line of every summary message a compaction writes (``"[context-compactor summary]"``):
a message whose text starts with it is an earlier summary, updated by the next compaction."""
LEDGER_SENTINEL: Final[str]
"""The line that starts the ledger in a summary message (``"[context-compactor ledger v1]"``):
the narrative is what comes before it."""
AUTO_MIN: Final[float]
"""The smallest target ``target_ratio="auto"`` chooses, as a share of the budget."""
AUTO_MAX: Final[float]
"""The largest target ``target_ratio="auto"`` chooses, as a share of the budget."""
AUTO_FALLBACK: Final[float]
"""The target ratio of ``"auto"`` without an observed growth."""

PROFILES: Final[tuple[str, ...]]
"""The validity profiles' names: the formats' (``FORMATS``), then ``"strict"`` and
``"responses_stateless"``; ``CompactionConfig.profile`` is checked against it."""

_Format: TypeAlias = Literal["openai", "anthropic", "responses", "gemini"]
"""The formats' names for type checkers: the one place the shell spells them out (``FORMATS`` at
run time); a new format adds its name here."""
_Profile: TypeAlias = _Format | Literal["strict", "responses_stateless"]

@final
class Problem:
    """One way in which a request would be rejected by the provider.

    Attributes:
        index: Index of the offending message (``None`` for the request as a whole, e.g.
            ``"over_window"``).
        rule: Stable rule name, e.g. ``"missing_tool_result"``, ``"orphan_tool_result"``,
            ``"result_not_adjacent"``, ``"first_not_user"``, ``"not_alternating"``,
            ``"over_window"``.
        message: Readable explanation.
    """

    def __new__(cls, index: int | None, rule: str, message: str) -> Problem: ...
    @property
    def index(self) -> int | None: ...
    @property
    def rule(self) -> str: ...
    @property
    def message(self) -> str: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...

@final
class ConversationStructure:
    """The shape of a conversation (see :func:`analyze_conversation`).

    Attributes:
        format: The detected (or given) format.
        tool_blocks: ``(start, end)`` message ranges, inclusive: an assistant message with calls
            plus all their results (parallel calls are one block).
        pending_calls: Calls of the last block still waiting for a result.
        thinking_loops: ``(start, end)`` ranges: an assistant message opening with thinking and
            the tool blocks after it, up to the next user text.
        turns: ``(start, end)`` ranges: a user text message and everything up to the next one.
        cut_points: Indices ``c`` where ``messages[:c]`` / ``messages[c:]`` splits no tool block
            and no pending thinking loop.
    """

    @property
    def format(self) -> _Format: ...
    @property
    def tool_blocks(self) -> list[tuple[int, int]]: ...
    @property
    def pending_calls(self) -> int: ...
    @property
    def thinking_loops(self) -> list[tuple[int, int]]: ...
    @property
    def turns(self) -> list[tuple[int, int]]: ...
    @property
    def cut_points(self) -> list[int]: ...

@final
class MessageCounts:
    """Token counts of a request, part by part."""

    def __new__(
        cls, messages: Sequence[int], system: int = 0, tools: int = 0, format: str = "openai"
    ) -> MessageCounts: ...
    @property
    def messages(self) -> list[int]: ...
    @property
    def system(self) -> int: ...
    @property
    def tools(self) -> int: ...
    @property
    def format(self) -> _Format: ...
    @property
    def total(self) -> int: ...
    @property
    def calibrated_total(self) -> int: ...
    @property
    def counted(self) -> int: ...
    @property
    def message_count(self) -> int: ...

def validate_messages(
    messages: Sequence[Any],
    *,
    format: str | None = None,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    profile: str | None = None,
    max_tokens: int | None = None,
    tokenizer: str | Callable[[str], int] | None = None,
) -> list[Problem]:
    """Check a request against the provider's rules, and with ``max_tokens`` against the window.

    Args:
        messages: OpenAI Chat Completions or Anthropic Messages messages (dicts, mappings, or the
            ``openai``/``anthropic`` SDKs' objects), or Gemini ``contents`` (dicts or
            ``google.genai.types.Content``), read in place and never modified.
        format: ``"openai"``, ``"anthropic"``, ``"responses"`` or ``"gemini"``; detected when omitted.
        system: Anthropic's separate system prompt (a string or text blocks), or Gemini's
            ``system_instruction`` (a string, a ``Content``, parts).
        tools: Tool definitions.
        profile: ``"openai"``, ``"anthropic"``, ``"strict"`` (also strict user/assistant
            alternation and system messages only first), ``"responses"``,
            ``"responses_stateless"`` (``store=false``: no item references, reasoning with its
            encrypted content) or ``"gemini"``; the format's own by default.
        max_tokens: The window's budget (``config.budget``: ``max_context_tokens - reserve``).
            A request counted above it gets an ``"over_window"`` problem with ``index=None`` (it
            is the request as a whole), after the per-message ones; its message gives both
            numbers. The request is counted as ``TokenCounter(tokenizer).count_messages(messages,
            system=system, tools=tools)`` counts it (messages with their overhead, the system
            prompt, the tool definitions).
        tokenizer: ``"approx"`` (``None`` means it), ``"o200k_base"``, ``"cl100k_base"`` or a
            callable ``str -> int``: the choices of :class:`TokenCounter`.

    Returns:
        The problems found, in message order; empty when the request is valid.

    Raises:
        MessageTypeError: A message or field has a wrong Python type (``.index``, ``.field``).
        ConfigError: Unknown ``format``, ``profile`` or ``tokenizer``, or a ``max_tokens`` that
            is not an int >= 0 (``.field`` names it).

    Example:
        >>> validate_messages([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": ""}])
        [Problem(index=1, rule="orphan_tool_result", message="tool result for \\"x\\" has no matching call before it")]
        >>> (p,) = validate_messages([{"role": "user", "content": "word " * 1000}], max_tokens=1000)
        >>> p.index, p.rule
        (None, 'over_window')
        >>> p.message
        'the request is 1029 tokens, over the window of 1000 (max_tokens) by 29'
    """

def analyze_conversation(messages: Sequence[Any], *, format: str | None = None) -> ConversationStructure:
    """Find the tool blocks, thinking loops, turns and legal cut points of a conversation."""

def detect_format(messages: Sequence[Any], *, system: Any = None, tools: Sequence[Any] | None = None) -> _Format:
    """The format DESIGN's detection gives the messages, the one implementation of it (``io``
    uses it too): ``"responses"`` when an item has a Responses item type (or ``input_*``/``output_*``
    parts); else ``"gemini"`` for Gemini contents (``parts`` and no ``content``); else
    ``"anthropic"`` when Anthropic-only blocks appear (``tool_use``, ``tool_result``, ``thinking``,
    ``redacted_thinking``, ``compaction``); else ``"openai"``."""

def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: fast, CJK-aware, and erring high (never under by design).
    A ``text`` that is not a ``str`` raises :class:`MessageTypeError` (``field="text"``)."""

def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Exact tokens of ``text`` in ``"o200k_base"`` or ``"cl100k_base"``, identical to
    tiktoken's ``len(encoding.encode_ordinary(text))``, offline."""

def count_tokens_many(texts: Sequence[str], encoding: str = "o200k_base") -> list[int]:
    """:func:`count_tokens` of each text, in parallel with the GIL released."""

def measure(
    messages: Sequence[Any],
    *,
    format: str | None = None,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    tokenizer: str | Callable[[str], int] | None = None,
    message_overhead_tokens: int = 4,
    image_tokens: int = 1600,
    image_model: str | None = None,
    state: ConversationState | None = None,
) -> MessageCounts:
    """Count a request part by part with a built-in tokenizer (``"approx"`` by default,
    ``"o200k_base"``, ``"cl100k_base"``) or a callable ``str -> int``; through ``state``'s cache
    and calibration when given."""

@final
class ConversationState:
    """What one conversation remembers between calls: cached per-message counts (keyed by a
    content fingerprint, so in-place edits and reused ids cannot serve a stale count), the
    calibration learned from provider usage, the cool-down after a summarizer failure, and the
    last summary. Thread-safe.

    Example:
        >>> state = ConversationState()
        >>> TokenCounter().count_each(messages, state=state).counted   # counts every message once
        40
        >>> messages.append({"role": "user", "content": "Now run the tests."})
        >>> TokenCounter().count_each(messages, state=state).counted   # then only the new ones
        1
        >>> state.observe_usage(4_700, messages=messages)              # the provider's prompt tokens
        True
    """

    def __new__(cls) -> ConversationState: ...
    def observe_usage(
        self,
        usage: int | Any,
        *,
        messages: Sequence[Any] | None = None,
        system: Any = None,
        tools: Sequence[Any] | None = None,
        format: str | None = None,
    ) -> bool:
        """Learn the ratio of the provider's real prompt size to our count.

        Args:
            usage: An int, or an OpenAI/Anthropic usage object or dict (Anthropic's prompt is
                ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``).
            messages: The messages the usage was measured on (else the last ``check``).

        Returns:
            Whether it was learned from: usage measured before the latest compaction (stale) and
            prompts under 64 tokens are ignored. The learned ratio stays within [0.5, 2.0].
        """
    @property
    def calibration(self) -> float: ...
    @property
    def observations(self) -> int: ...
    @property
    def cached_messages(self) -> int: ...
    @property
    def last_counted(self) -> int: ...
    @property
    def compactions(self) -> int: ...
    @property
    def cooldown_remaining(self) -> int: ...
    @property
    def last_summary(self) -> str | None: ...
    @property
    def hold_until(self) -> int | None:
        """After a compaction that could not get under the soft threshold (``over_budget``): the
        context size below which no compaction is due again, unless the hard threshold is
        crossed; ``None`` when nothing is held."""
    @property
    def due_at(self) -> int | None:
        """With ``target_ratio="auto"``: the context size (tokens, calibrated) from which the next
        compaction is due below the soft threshold, chosen when the last one ended; ``None``: the
        soft threshold. A compaction that was due clears it."""
    def set_due_at(self, tokens: int | None) -> None:
        """Set (or clear, with ``None``) :attr:`due_at`: ``target_ratio="auto"`` does it after each
        compaction."""
    @property
    def growth_per_call(self) -> float | None:
        """The context's mean growth per model call (tokens) over the last checks since the
        latest compaction; ``None`` before two."""
    def note_context(self, tokens: int) -> None:
        """Note the context's size (tokens, calibrated) at a model call: ``check()`` and ``plan()``
        with this state do it; the growth per call is read from these."""
    def reset(self) -> None:
        """Forget everything (cache, calibration, cool-down, last summary)."""

@final
class Plan:
    """A compaction waiting for its summary (wrapped by :class:`context_compactor.CompactionPlan`)."""

    def request(self, tokenizer: str | Callable[[str], int] | None = None) -> dict[str, Any] | None:
        """The summary request for the current chunk as a dict, or ``None``; ``tokenizer`` sizes
        the chunks the first time (the transcript is built on first use). Keys: ``system_prompt``,
        ``user_prompt``, ``previous_summary`` (the earlier summary's narrative, without its
        ledger), ``ledger`` (the ledger carried after the summary: read-only context, or
        ``None``), ``instructions``, ``max_tokens``, ``must_keep``, ``language``,
        ``replaced_count``, ``chunk``, ``chunks``."""
    def remaining_chunks(self, tokenizer: str | Callable[[str], int] | None = None) -> int:
        """Chunks after the current one."""
    @property
    def reason(self) -> str | None: ...
    @property
    def tokens_before(self) -> int: ...
    def advance(self, text: str) -> Plan:
        """The plan for the next chunk, ``text`` being the summary of the chunks so far (a
        sentinel or ledger header in it is stripped: only the library writes the ledger)."""
    def apply(
        self, summary: str | None, truncated: bool = False, tokenizer: str | Callable[[str], int] | None = None
    ) -> dict[str, Any]:
        """Finish with ``summary`` (``None``: the built-in rule summary); the result's fields."""

def plan(
    messages: Sequence[Any],
    *,
    config: Any,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    format: str | None = None,
    pinned: Sequence[bool] | None = None,
    mode: str = "auto",
    instructions: str | None = None,
    state: ConversationState | None = None,
) -> Plan:
    """Plan a compaction (``mode``: ``"auto"``, ``"micro"`` or ``"force"``) under a ``CompactionConfig``."""

def plan_many(
    conversations: Iterable[tuple[Sequence[Any], Any, Sequence[Any] | None, str | None]],
    *,
    config: Any,
    mode: str = "auto",
    instructions: str | None = None,
) -> list[Plan | BaseException]:
    """Plan many ``(messages, system, tools, format)`` at once (read attached, planned on the pool
    with the GIL released): a ``Plan`` or the exception of each, in input order."""

def apply_many(
    plans: Sequence[Plan], summaries: Sequence[str | None], *, tokenizer: str
) -> list[dict[str, Any] | BaseException]:
    """``Plan.apply`` for many plans on the pool (GIL released): result dicts in input order."""

def measure_many(
    conversations: Iterable[tuple[Sequence[Any], Any, Sequence[Any] | None, str | None]],
    *,
    tokenizer: str,
    message_overhead_tokens: int = 4,
    image_tokens: int = 1600,
    image_model: str | None = None,
) -> list[tuple[int, int, str] | BaseException]:
    """``(total tokens, message count, format)`` of each conversation, or its exception."""

def start_cooldown(state: ConversationState, calls: int) -> None:
    """Start a cool-down of ``calls`` calls (micro/selective only) after a summarizer failure."""

def message_fingerprints(messages: Sequence[Any]) -> list[int]:
    """Content fingerprints of messages (0: none cheap), to tell whether one changed in place."""

def image_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 data URL or bare base64 image (PNG, JPEG, GIF, WebP), read
    from its header; ``None`` when it cannot be read."""

def image_tokens(
    width: int, height: int, *, model: str | None = None, detail: str | None = None, provider: str = "openai"
) -> int:
    """Tokens of one image by the provider's documented formula (``model``), or the highest
    documented count for ``provider`` when ``model`` is ``None``."""

def auto_target(
    messages: Sequence[Any],
    *,
    config: Any,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    format: str | None = None,
    state: ConversationState | None = None,
    llm: bool = False,
) -> tuple[float, int, int, float | None, float | None, int, list[float]]:
    """What ``target_ratio="auto"`` chooses now: ``(ratio, tokens, floor, growth, cost_per_call,
    fixed, prices)``."""

def due_at(tokens_after: int, *, soft: int, fixed: int, growth: float | None, prices: Sequence[float]) -> int | None:
    """The context size from which the next compaction is due under ``"auto"`` (``None``: soft)."""

def cycle_cost(
    target: int,
    *,
    soft: int,
    fixed: int,
    growth: float,
    prices: Sequence[float],
    llm: bool,
    summary_tokens: int,
) -> float:
    """The predicted billed input per model call (dollars) over a compaction cycle from ``target``."""

def looks_like_error(reply: str) -> bool:
    """Whether a reply without ``<summary>`` tags reads like an error, a traceback or a refusal."""

_BlockKind: TypeAlias = Literal[
    "text",
    "refusal",
    "image",
    "audio",
    "document",
    "tool_call",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "other",
    "reasoning",
    "compaction",
]

@final
class BlockInfo:
    """One block of a message, as :func:`inspect_messages` reads it.

    Attributes:
        kind: The block's kind in the core's view, the same for every format (a Responses
            ``function_call`` item and an Anthropic ``tool_use`` block are both ``"tool_call"``).
        tokens: Tokens the block adds to its message (its text, images, a call's name and framing).
        name: A call's tool name; a result's is the name of the call it answers.
        id: The call's id, or the id a result answers (``None`` for the legacy ``function_call``).
        is_error: An Anthropic ``tool_result`` with ``is_error``.
    """

    @property
    def kind(self) -> _BlockKind: ...
    @property
    def tokens(self) -> int: ...
    @property
    def name(self) -> str | None: ...
    @property
    def id(self) -> str | None: ...
    @property
    def is_error(self) -> bool: ...

@final
class MessageInfo:
    """One message, as :func:`inspect_messages` reads it.

    Attributes:
        role: ``"system"``, ``"developer"``, ``"user"``, ``"assistant"``, ``"tool"``,
            ``"function"`` or ``"other"``: the core's role (a Gemini ``model`` content and a
            Responses call or reasoning item are ``"assistant"``, a Responses output ``"tool"``).
        tokens: The message's tokens, as :func:`measure` counts them: ``message_overhead_tokens``
            plus the sum of its blocks' tokens.
        blocks: Its blocks, in order.
        preview: One line of what it says (at most ``preview_chars`` code points): its text and
            ``→ name`` for its calls, else its tool results, else its thinking, else its block
            kinds in brackets (``[reasoning]``); whitespace folded, a cut ends with ``…``.
    """

    @property
    def role(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def blocks(self) -> list[BlockInfo]: ...
    @property
    def preview(self) -> str: ...

def inspect_messages(
    messages: Sequence[Any],
    *,
    format: str | None = None,
    tokenizer: str | Callable[[str], int] | None = None,
    message_overhead_tokens: int = 4,
    image_tokens: int = 1600,
    image_model: str | None = None,
    preview_chars: int = 60,
) -> list[MessageInfo]:
    """Each message's role, tokens, blocks (kind, tool name, tokens) and a one-line preview, read
    by the same readers as :func:`measure` (every format, framework objects included); what
    ``context-compactor stats`` prints.

    Example:
        >>> from context_compactor._core import inspect_messages
        >>> [b.kind for b in inspect_messages([{"role": "user", "content": "hi"}])[0].blocks]
        ['text']
    """

# -- configuration (src/python/config.rs) --------------------------------------------------------

#: The configuration's field names, in order.
CONFIG_FIELDS: tuple[str, ...]

def config_check(cfg: Any) -> list[int]:
    """Check a ``CompactionConfig``'s fields (``ConfigError`` naming the first bad one); its derived
    values: reserve, budget, soft and hard thresholds, target, task, user words, details, summary
    and micro limits, retry growth."""

def config_defaults() -> dict[str, Any]:
    """Every field's default (selective rules as mappings)."""

def config_default_prices() -> dict[str, tuple[float, float, float, float]]:
    """The default prices of ``target_ratio="auto"`` by format family: ``openai``, ``anthropic``."""

def config_presets() -> dict[str, dict[str, Any]]:
    """The presets: name -> the fields it sets."""

def config_resolve(data: Any, *, allow_preset: bool) -> dict[str, Any]:
    """A mapping's keys resolved: a ``preset`` key starts from that preset, unknown keys raise
    ``ConfigError``; the values as given."""

def default_reserve(max_context_tokens: int) -> int:
    """The reserve a window gets when ``reserve_tokens`` is not given."""

def selective_rule_check(item: Any, action: Any, priority: Any) -> None:
    """Check one selective rule's values (``ConfigError`` naming ``selective_rules``)."""

def selective_rule_of(rule: Any) -> tuple[str, str, int]:
    """A selective rule given as a mapping, checked: ``(item, action, priority)``."""

# -- the compaction driver (src/python/driver.rs) ------------------------------------------------

@final
class DriverStep:
    """One step the shell performs next (see ``ContextCompactor._steps``)."""

    @property
    def kind(
        self,
    ) -> Literal["apply", "before_hook", "summarize", "advance", "after_hook", "unchanged", "raise", "done"]:
        """What to do."""
    @property
    def text(self) -> str | None:
        """``apply``: the summary (``None``: the rule summary); ``advance``: the chunk's summary;
        ``unchanged``: the veto's reason; ``raise``: the error's message."""
    @property
    def truncated(self) -> bool:
        """``apply``: the reply hit its token limit."""
    @property
    def chunk(self) -> int:
        """``summarize``: the chunk asked for (0 first)."""
    @property
    def failure_kind(self) -> str | None:
        """``apply`` after a failure, and ``raise``: the failure's class."""
    @property
    def fallback_reason(self) -> str | None:
        """``apply`` after a failure: its description (``fallback_reason``)."""
    @property
    def cooldown_calls(self) -> int:
        """``apply`` after a failure: start the cool-down for that many calls (0: none)."""

@final
class Driver:
    """The steps of one compaction: the core decides, the shell performs."""

    def __new__(
        cls,
        config: Any,
        *,
        has_request: bool,
        summarizer: bool,
        before_hook: bool,
        after_hook: bool,
        has_state: bool,
    ) -> Driver: ...
    def resume(self) -> DriverStep:
        """The next step where no answer is due (the start, after ``advance`` and ``after_hook``)."""
    def applied(self, compacted: bool) -> DriverStep:
        """The plan was applied; ``compacted``: the result changed the conversation."""
    def hook_done(self, *, veto: str | None, summary: str | None) -> DriverStep:
        """What ``on_before_compact`` decided: a veto's reason, or a summary it supplied."""
    def reply(self, text: str, truncated: bool, remaining_chunks: int) -> DriverStep:
        """The summarizer's reply text for the current chunk."""
    def items_placed(self) -> DriverStep:
        """The reply was a provider's compaction items, placed over the span."""
    def fail(self, kind: str, reason: str) -> DriverStep:
        """The summarizer (or the step after its reply) failed."""
    @property
    def chunks_done(self) -> int:
        """Chunks summarised so far."""

def classify_failure(*, transient_type: bool, class_names: list[str], programming: bool, status: int | None) -> str:
    """The class of a summarizer failure: ``"transient"``, ``"permanent"`` or ``"unknown"``."""

def reply_problem(text: str) -> str | None:
    """Why a reply's text cannot be a summary; ``None`` when it can."""

"""`CompactionConfig`: every knob, its default, presets, and validation.

Definitions (DESIGN): budget = ``max_context_tokens - reserve``; soft threshold =
``soft_threshold_tokens`` or ``trigger_ratio * budget``; hard threshold = ``hard_threshold_tokens``
or the budget; target = ``target_ratio * budget``, capped at the soft threshold.

Design note, the reserve. ``reserve_tokens`` defaults to ``None``, meaning *derived*:
``min(8000, max_context_tokens // 4)`` (:func:`default_reserve`), the one rule the library and the
CLI share. It follows the same convention as ``soft_threshold_tokens``: the field holds what the
user gave (``None`` = the rule), a property (:attr:`CompactionConfig.reserve`) holds the value in
force. So a derived reserve stays derived and an explicit one stays explicit everywhere a config
is copied: ``replace(max_context_tokens=...)`` re-derives a derived reserve for the new window and
keeps an explicit one (which may then raise ``ConfigError`` naming ``reserve_tokens`` when it no
longer fits); ``to_dict()`` writes ``None`` for a derived reserve and ``from_dict()`` reads it
back as derived, so ``from_dict(to_dict(c)) == c``; a TOML file (CLI) derives it when the key is
absent. A derived and an explicit reserve of the same size compare unequal, because they behave
differently under ``replace``. Presets set their own reserve explicitly.

Design note, one copy of each rule. The defaults, the presets, the derived values and every check
live in the Rust core (``src/config/``), shared with the Rust API, so one TOML or JSON document
configures both and a bad value gives the same :class:`ConfigError` (field and message) in both.
This module keeps the dataclass (the fields, their types and comments, Python-only values: a
callable ``tokenizer``, path-like ``offload_dir``) and asks the core for the rest.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from context_compactor import _core

if TYPE_CHECKING:
    # The profiles' names are declared once, in the stub (`_core.PROFILES` at run time).
    from context_compactor._core import _Profile

__all__ = ["DEFAULT_PRICES", "PRESETS", "CompactionConfig", "SelectiveRule", "default_reserve"]

#: Every field's default, from the core (DESIGN's configuration table).
_DEFAULTS: dict[str, Any] = _core.config_defaults()


@dataclass(frozen=True)
class SelectiveRule:
    """What selective compaction does to one type of item outside the recent window.

    Args:
        item: ``"tool_results"``, ``"thinking"`` (of completed turns), ``"images"``,
            ``"assistant_text"`` (of old turns) or ``"user_text"``.
        action: ``"placeholder"``, ``"drop"``, ``"head_tail"`` or ``"never"``.
        priority: Lower runs first; rules run in order until the conversation is under the target.
    """

    item: str
    action: str
    priority: int

    def __post_init__(self) -> None:
        _core.selective_rule_check(self.item, self.action, self.priority)


def _rule(rule: Any) -> Any:
    """A rule given as a mapping as a :class:`SelectiveRule` (checked by the core)."""
    if isinstance(rule, Mapping):
        return SelectiveRule(*_core.selective_rule_of(dict(rule)))
    return rule


DEFAULT_SELECTIVE_RULES: tuple[SelectiveRule, ...] = tuple(_rule(r) for r in _DEFAULTS["selective_rules"])

Tokenizer = str | Callable[[str], int]

#: The default prices of ``target_ratio="auto"``, dollars per million tokens (input, cached read,
#: cache write, output), from the core: the eval's tables (``context_compactor.eval.cost.PRICES``),
#: OpenAI gpt-5 (no charge for a cache write: the input price) and Anthropic Claude Sonnet 4.
DEFAULT_PRICES: dict[str, tuple[float, float, float, float]] = _core.config_default_prices()


def default_reserve(max_context_tokens: int) -> int:
    """The reserve a window gets when ``reserve_tokens`` is not given: 8000, or a quarter of the
    window when that is smaller.

    Example:
        >>> default_reserve(128_000), default_reserve(8_000)
        (8000, 2000)
    """
    return _core.default_reserve(max_context_tokens)


@dataclass(frozen=True)
class CompactionConfig:
    """All settings of a :class:`ContextCompactor`. Immutable; change with :meth:`replace`.

    Every field is also a keyword of ``ContextCompactor(...)``. Bad values raise
    :class:`ConfigError` naming the field.

    Example:
        >>> cfg = CompactionConfig(max_context_tokens=200_000, keep_recent_messages=10)
        >>> cfg.budget, cfg.soft_threshold, cfg.hard_threshold, cfg.target_tokens
        (192000, 153600, 192000, 96000)
        >>> small = CompactionConfig(max_context_tokens=8_000)      # reserve derived: 8000 // 4
        >>> small.reserve_tokens, small.reserve, small.budget
        (None, 2000, 6000)
        >>> small.replace(max_context_tokens=64_000).reserve     # still derived
        8000
        >>> CompactionConfig.preset("development").soft_threshold
        5000
    """

    #: The model's context window, in tokens.
    max_context_tokens: int = _DEFAULTS["max_context_tokens"]
    #: Tokens kept free for the reply. ``None`` (the default) derives it from the window:
    #: ``min(8000, max_context_tokens // 4)``; :attr:`reserve` is the value in force.
    reserve_tokens: int | None = _DEFAULTS["reserve_tokens"]
    #: The soft threshold as a share of the budget (``max_context_tokens - reserve``): from there a
    #: compaction is due.
    trigger_ratio: float = _DEFAULTS["trigger_ratio"]
    #: The soft threshold in tokens; ``None``: ``trigger_ratio`` of the budget.
    soft_threshold_tokens: int | None = _DEFAULTS["soft_threshold_tokens"]
    #: The hard threshold in tokens (compact before sending); ``None``: the budget.
    hard_threshold_tokens: int | None = _DEFAULTS["hard_threshold_tokens"]
    #: Where a compaction aims, as a share of the budget (capped at the soft threshold).
    #: ``"auto"``: per conversation, the target that minimises the predicted billed input per
    #: model call over a compaction cycle, from the growth per call a :class:`ConversationState`
    #: observed and :attr:`price_table` (0.2-0.7 of the budget, never below what keeps the recent
    #: tail, the task, the ledger and the summary; 0.5 without a state, and when what keeps them
    #: is over 0.7 of the budget, which no target within the bounds can keep). With a state it also
    #: chooses when the next compaction is due: from ``T + sqrt(2 (w / r) (T - F) g)`` tokens
    #: after a compaction that left ``T`` (``F`` the system prompt and tools, ``g`` the growth per
    #: call, ``w / r`` the price of uncached input over a cache read) when that is below the soft
    #: threshold (:attr:`ConversationState.due_at`); see ``docs/eval.md``.
    target_ratio: float | Literal["auto"] = _DEFAULTS["target_ratio"]
    #: Leading non-system messages kept verbatim (the task). The kept head ends at an earlier
    #: summary: once the start was compacted, the messages after that summary are later ones and
    #: are summarised with it (one summary, events in order).
    keep_first_messages: int = _DEFAULTS["keep_first_messages"]
    #: The task (the first user message) is never removed: when nothing else makes the context
    #: fit, it is shortened to this many tokens (head + tail, the cut marked, its must-keep facts
    #: kept). ``None``: ``min(2000, budget // 4)`` (:attr:`task_token_limit`).
    task_max_tokens: int | None = _DEFAULTS["task_max_tokens"]
    #: The recent tail kept verbatim, in messages.
    keep_recent_messages: int = _DEFAULTS["keep_recent_messages"]
    #: Also keep at least this many tail tokens; with both set, the longer tail.
    keep_recent_tokens: int | None = _DEFAULTS["keep_recent_tokens"]
    #: Tool results (each result counts) kept intact by micro-compaction.
    keep_recent_tool_results: int = _DEFAULTS["keep_recent_tool_results"]
    #: Older tool-call arguments longer than this are cut to head + tail, the cut marked (JSON stays
    #: valid).
    max_tool_arg_chars: int = _DEFAULTS["max_tool_arg_chars"]
    #: Tools whose calls and results are never touched.
    protected_tools: tuple[str, ...] = tuple(_DEFAULTS["protected_tools"])
    #: Automatic micro-compaction only above this share of the budget.
    micro_trigger_ratio: float = _DEFAULTS["micro_trigger_ratio"]
    #: Skip a clearing that frees less (keeps the cached prefix stable).
    clear_at_least_tokens: int = _DEFAULTS["clear_at_least_tokens"]
    #: Micro-compaction also clears the output of a read that a later call superseded (the same
    #: file read whole again, or changed): a placeholder names the later message.
    supersede_reads: bool = _DEFAULTS["supersede_reads"]
    #: Cache-aware micro-compaction: a clearing must free at least this share of the tokens from
    #: its first edited message to the end (the part of the cached prefix it makes the provider
    #: write again), so old results are cleared in batches that repay the cache write. 0: only
    #: ``clear_at_least_tokens``.
    micro_min_gain_ratio: float = _DEFAULTS["micro_min_gain_ratio"]
    #: Cache-aware cuts: when the ladder has to cut the kept tail's tool output (its last step
    #: before ``over_budget``), it cuts down to the target, not just under the soft threshold.
    #: Each cut breaks the provider's cached prefix from that message on; cutting only to the
    #: threshold made the next call cut again (a prefix break at every call). False: as in 0.1.
    cache_aware_cuts: bool = _DEFAULTS["cache_aware_cuts"]
    #: Where cleared tool output is written (content-hash names, atomic, never outside it); ``None``:
    #: not written.
    offload_dir: str | None = _DEFAULTS["offload_dir"]
    #: Every placeholder, cut argument and summary names a recall id of its original text, which
    #: the ``recall`` tool (:mod:`context_compactor.recall`) reads back. Needs a :class:`Session`
    #: (the originals go into its store) or ``offload_dir`` (``recall-<id>.txt`` files);
    #: ``ConfigError`` otherwise. Changes the placeholders' bytes: a prefix the provider cached
    #: without it is written again once.
    recall: bool = _DEFAULTS["recall"]
    #: What selective compaction does per item type, in priority order (:class:`SelectiveRule`).
    selective_rules: tuple[SelectiveRule, ...] = DEFAULT_SELECTIVE_RULES
    #: The summary's cap, enforced after the reply (at a sentence boundary).
    summary_max_tokens: int = _DEFAULTS["summary_max_tokens"]
    #: ``"user"``; ``"system"`` puts the summary in the system prompt (Anthropic: ``result.system``);
    #: ``"developer"`` for Responses.
    summary_role: Literal["user", "system", "developer"] = _DEFAULTS["summary_role"]
    #: The ledger's user words (the sentences of the user's own messages in every replaced span,
    #: carried verbatim from one compaction to the next). ``None``: 2000 whatever the window (the
    #: ladder evicts words when the context needs the room; :attr:`user_words_token_limit`); 0
    #: turns the section off.
    user_messages_budget_tokens: int | None = _DEFAULTS["user_messages_budget_tokens"]
    #: The ledger's preserved details and artifact trail, outside ``summary_max_tokens`` (which
    #: caps the narrative). ``None``: ``min(1500, budget // 2)``, at least 64
    #: (:attr:`details_token_limit`); 0 turns the sections off.
    details_budget_tokens: int | None = _DEFAULTS["details_budget_tokens"]
    #: Longer spans are summarised in chunks, each updating the previous summary (so the
    #: summarizer may be called several times per compaction); ``None``: the hard threshold.
    summarizer_max_input_tokens: int | None = _DEFAULTS["summarizer_max_input_tokens"]
    #: Each tool output in the transcript sent to the summarizer is cut to this.
    transcript_item_max_chars: int = _DEFAULTS["transcript_item_max_chars"]
    #: Seconds for the whole compaction's summary: every summarizer call of one compaction (each
    #: chunk) shares them; then the fallback ladder.
    summarizer_timeout_s: float = _DEFAULTS["summarizer_timeout_s"]
    #: ``"fallback"``: transient errors (timeout, 429, 5xx, connection) fall back to the rule summary,
    #: permanent ones raise :class:`SummarizerError`; ``"fallback_all"``; ``"raise"``.
    on_summarizer_error: Literal["fallback", "fallback_all", "raise"] = _DEFAULTS["on_summarizer_error"]
    #: Refuse a compaction that saves less, only below the hard threshold and not when it brings the
    #: context under the soft one.
    min_savings_ratio: float = _DEFAULTS["min_savings_ratio"]
    #: The prices ``target_ratio="auto"`` weighs, in dollars per million tokens: ``(input, cached
    #: read, cache write, output)``. ``None``: by the conversation's format, the eval's tables
    #: (:data:`DEFAULT_PRICES`: OpenAI gpt-5 for Chat Completions, Responses and Gemini contents,
    #: Anthropic Claude Sonnet 4 for Anthropic messages).
    prices: tuple[float, float, float, float] | None = _DEFAULTS["prices"]
    #: No compaction loops: after a compaction that could not get under the soft threshold
    #: (``over_budget``, a refusal above it included), or that could not reach the target and
    #: left less room than this under the soft threshold, ``check()``/``should_compact()`` with a
    #: state, ``compact()`` with a state and a Session's ``prepare()`` hold the next compaction
    #: until the context has grown by this many tokens (or crossed the hard threshold); each
    #: retry would end the same way and break the provider's cached prefix. ``None``: the gap
    #: between the soft and the hard threshold (:attr:`retry_growth`); 0: no hold.
    retry_growth_tokens: int | None = _DEFAULTS["retry_growth_tokens"]
    #: After a summarizer failure, that many calls with a state skip the LLM: micro/selective, then the
    #: rule summary if they fall short.
    cooldown_calls: int = _DEFAULTS["cooldown_calls"]
    #: Start the summary from the soft threshold without blocking (a :class:`Session`: a thread for
    #: ``prepare()``, a task for ``aprepare()``); it is applied with the messages appended
    #: meanwhile (the delta, kept verbatim) by a later ``prepare()``.
    background: bool = _DEFAULTS["background"]
    #: ``"approx"`` (fast, errs high), ``"o200k_base"``, ``"cl100k_base"``, or a callable ``str ->
    #: int``.
    tokenizer: Tokenizer = _DEFAULTS["tokenizer"]
    #: Tokens counted per message on top of its content.
    message_overhead_tokens: int = _DEFAULTS["message_overhead_tokens"]
    #: Tokens per image whose size is unknown (URL, file id), audio clip or opaque document.
    image_tokens: int = _DEFAULTS["image_tokens"]
    #: The model whose image formula counts images of known size; ``None``: the highest documented count
    #: for the image's provider.
    image_model: str | None = _DEFAULTS["image_model"]
    #: Repair invalid input (listed in ``result.repairs``); ``False`` raises
    #: :class:`InvalidConversationError`.
    repair: bool = _DEFAULTS["repair"]
    #: The validity profile; ``None``: detected from the format. ``"strict"`` also demands alternation
    #: and system-first.
    profile: _Profile | None = _DEFAULTS["profile"]
    #: Allow message text in log records (never by default).
    log_content: bool = _DEFAULTS["log_content"]
    #: The summary growth bound: the summary's cap is at most this share of the target (and
    #: ``summary_max_tokens``, never under 256 tokens; :attr:`summary_token_limit`). A summary as
    #: large as a small window allows leaves the context near the threshold after every
    #: compaction, and the next call compacts again. ``None`` or 0: ``summary_max_tokens`` alone
    #: (as in 0.1).
    summary_target_share: float | None = _DEFAULTS["summary_target_share"]

    def __post_init__(self) -> None:
        # Normalise sequences given as lists (so the config stays hashable and immutable).
        if isinstance(self.protected_tools, (list, set, frozenset)):
            object.__setattr__(self, "protected_tools", tuple(sorted(self.protected_tools)))
        if isinstance(self.selective_rules, (list, tuple)):
            object.__setattr__(self, "selective_rules", tuple(_rule(r) for r in self.selective_rules))
        if isinstance(self.prices, list):
            object.__setattr__(self, "prices", tuple(self.prices))
        if self.offload_dir is not None and isinstance(self.offload_dir, os.PathLike):
            object.__setattr__(self, "offload_dir", os.fspath(self.offload_dir))
        # The core checks every field (ConfigError naming the first bad one) and works out the
        # derived values once: reserve, budget, thresholds, target and limits.
        object.__setattr__(self, "_derived", _core.config_check(self))

    # -- validation ---------------------------------------------------------------------------------

    # -- derived values (worked out by the core when the config is made) ---------------------------

    def _limit(self, i: int) -> int:
        return cast("list[int]", self.__dict__["_derived"])[i]

    @property
    def reserve(self) -> int:
        """Tokens kept free for the reply: ``reserve_tokens``, or ``min(8000, max_context_tokens // 4)``
        when it is ``None``."""
        return self._limit(0)

    @property
    def budget(self) -> int:
        """Tokens the prompt may use: ``max_context_tokens - reserve``. Over the budget is over the window."""
        return self._limit(1)

    @property
    def soft_threshold(self) -> int:
        """From here compaction is due (``urgency == "soft"``): ``soft_threshold_tokens`` or
        ``trigger_ratio * budget``."""
        return self._limit(2)

    @property
    def hard_threshold(self) -> int:
        """From here the conversation must be compacted before sending (``urgency == "hard"``):
        ``hard_threshold_tokens`` or the budget."""
        return self._limit(3)

    @property
    def target_tokens(self) -> int:
        """Where a compaction aims: ``target_ratio * budget``, never above the soft threshold
        (with ``"auto"``: half the budget here; each compaction chooses its own)."""
        return self._limit(4)

    def price_table(self, format: str) -> tuple[float, float, float, float]:
        """The prices ``target_ratio="auto"`` weighs for a conversation of ``format``."""
        if self.prices is not None:
            return self.prices
        return DEFAULT_PRICES["anthropic" if format == "anthropic" else "openai"]

    @property
    def retry_growth(self) -> int:
        """After a compaction that ended over the soft threshold (or short of the target with
        little room under it), the growth before the next one is due below the hard threshold:
        ``retry_growth_tokens``, or the gap between the soft and the hard threshold."""
        return self._limit(10)

    @property
    def task_token_limit(self) -> int:
        """The task is shortened to this at most: ``task_max_tokens`` or ``min(2000, budget // 4)``."""
        return self._limit(5)

    @property
    def user_words_token_limit(self) -> int:
        """The ledger's user words budget: ``user_messages_budget_tokens``, or
        2000 when it is ``None``."""
        return self._limit(6)

    @property
    def details_token_limit(self) -> int:
        """The ledger's details and trail budget: ``details_budget_tokens``, or
        ``min(1500, budget // 2)`` (at least 64) when it is ``None``."""
        return self._limit(7)

    @property
    def summary_token_limit(self) -> int:
        """The summary's cap: ``summary_max_tokens``, at most ``summary_target_share`` of the
        target (never under 256 tokens)."""
        return self._limit(8)

    @property
    def micro_threshold(self) -> int:
        """Automatic micro-compaction only from here: ``micro_trigger_ratio * budget``."""
        return self._limit(9)

    # -- construction ---------------------------------------------------------------------------------

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> CompactionConfig:
        """A named preset (seed 000): ``"development"``, ``"production"`` or ``"large_context"``.

        Example:
            >>> CompactionConfig.preset("production", keep_recent_messages=8).keep_recent_messages
            8
        """
        return cls.from_dict({"preset": name, **overrides})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionConfig:
        """Build from a mapping (e.g. parsed TOML/JSON). Unknown keys raise :class:`ConfigError`;
        ``selective_rules`` may be given as dicts ``{"item", "action", "priority"}``; a ``preset`` key
        starts from that preset."""
        # The core resolves the keys: the preset, unknown fields (ConfigError naming the first).
        values = _core.config_resolve(data, allow_preset=True)
        if isinstance(values.get("selective_rules"), list):
            values["selective_rules"] = tuple(_rule(r) for r in values["selective_rules"])
        if isinstance(values.get("protected_tools"), list):
            values["protected_tools"] = tuple(values["protected_tools"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values (``selective_rules`` as dicts). Derived values stay ``None``
        (``reserve_tokens``, ``soft_threshold_tokens``, ...), so :meth:`from_dict` derives them again."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["selective_rules"] = [dataclasses.asdict(r) for r in self.selective_rules]
        out["protected_tools"] = list(self.protected_tools)
        return out

    def replace(self, **changes: Any) -> CompactionConfig:
        """A copy with some fields changed (validated again). Derived values are derived again:
        with ``reserve_tokens=None`` (the default), ``replace(max_context_tokens=N)`` gets N's reserve.

        Example:
            >>> CompactionConfig().replace(max_context_tokens=8_000).budget
            6000
            >>> CompactionConfig(reserve_tokens=1_000).replace(max_context_tokens=8_000).budget
            7000
        """
        return dataclasses.replace(self, **_core.config_resolve(changes, allow_preset=False))


#: Seed 000's presets (from the core). ``max_context_tokens`` is the hard threshold plus the
#: reserve, so the hard threshold is the budget.
PRESETS: dict[str, dict[str, Any]] = _core.config_presets()

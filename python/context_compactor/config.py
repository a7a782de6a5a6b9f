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
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from context_compactor import _core
from context_compactor._auto_target import AUTO_FALLBACK
from context_compactor.errors import ConfigError

if TYPE_CHECKING:
    # The profiles' names are declared once, in the stub (`_core.PROFILES` at run time).
    from context_compactor._core import _Profile

__all__ = ["DEFAULT_PRICES", "PRESETS", "CompactionConfig", "SelectiveRule", "default_reserve"]

#: The largest value an integer setting may take (a trillion tokens).
MAX_INT = 10**12

ITEMS = ("tool_results", "thinking", "images", "assistant_text", "user_text")
ACTIONS = ("placeholder", "drop", "head_tail", "never")


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
        if self.item not in ITEMS:
            raise ConfigError(
                f"selective_rules: unknown item {self.item!r}; expected one of {ITEMS}", "selective_rules"
            )
        if self.action not in ACTIONS:
            raise ConfigError(
                f"selective_rules: unknown action {self.action!r}; expected one of {ACTIONS}", "selective_rules"
            )
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ConfigError(f"selective_rules: priority must be an int, got {self.priority!r}", "selective_rules")


DEFAULT_SELECTIVE_RULES: tuple[SelectiveRule, ...] = (
    SelectiveRule("tool_results", "placeholder", 10),
    SelectiveRule("thinking", "drop", 20),
    SelectiveRule("images", "placeholder", 20),
    SelectiveRule("assistant_text", "head_tail", 30),
    SelectiveRule("user_text", "never", 50),
)

Tokenizer = str | Callable[[str], int]

#: The default prices of ``target_ratio="auto"``, dollars per million tokens (input, cached read,
#: cache write, output): the eval's tables (``context_compactor.eval.cost.PRICES``), OpenAI gpt-5
#: (no charge for a cache write: the input price) and Anthropic Claude Sonnet 4.
DEFAULT_PRICES: dict[str, tuple[float, float, float, float]] = {
    "openai": (1.25, 0.125, 1.25, 10.0),
    "anthropic": (3.0, 0.30, 3.75, 15.0),
}

#: The derived reserve is at most this (DESIGN's config table: room for a long reply).
RESERVE_MAX = 8_000


def default_reserve(max_context_tokens: int) -> int:
    """The reserve a window gets when ``reserve_tokens`` is not given: 8000, or a quarter of the
    window when that is smaller.

    Example:
        >>> default_reserve(128_000), default_reserve(8_000)
        (8000, 2000)
    """
    return min(RESERVE_MAX, max_context_tokens // 4)


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
    max_context_tokens: int = 128_000
    #: Tokens kept free for the reply. ``None`` (the default) derives it from the window:
    #: ``min(8000, max_context_tokens // 4)``; :attr:`reserve` is the value in force.
    reserve_tokens: int | None = None
    #: The soft threshold as a share of the budget (``max_context_tokens - reserve``): from there a
    #: compaction is due.
    trigger_ratio: float = 0.8
    #: The soft threshold in tokens; ``None``: ``trigger_ratio`` of the budget.
    soft_threshold_tokens: int | None = None
    #: The hard threshold in tokens (compact before sending); ``None``: the budget.
    hard_threshold_tokens: int | None = None
    #: Where a compaction aims, as a share of the budget (capped at the soft threshold).
    #: ``"auto"``: per conversation, the target that minimises the predicted billed input per
    #: model call over a compaction cycle, from the growth per call a :class:`ConversationState`
    #: observed and :attr:`price_table` (0.2-0.7 of the budget, never below what keeps the recent
    #: tail, the task, the ledger and the summary; 0.5 without a state); see ``docs/eval.md``.
    target_ratio: float | Literal["auto"] = 0.5
    #: Leading non-system messages kept verbatim (the task). The kept head ends at an earlier
    #: summary: once the start was compacted, the messages after that summary are later ones and
    #: are summarised with it (one summary, events in order).
    keep_first_messages: int = 1
    #: The task (the first user message) is never removed: when nothing else makes the context
    #: fit, it is shortened to this many tokens (head + tail, the cut marked, its must-keep facts
    #: kept). ``None``: ``min(2000, budget // 4)`` (:attr:`task_token_limit`).
    task_max_tokens: int | None = None
    #: The recent tail kept verbatim, in messages.
    keep_recent_messages: int = 6
    #: Also keep at least this many tail tokens; with both set, the longer tail.
    keep_recent_tokens: int | None = None
    #: Tool results (each result counts) kept intact by micro-compaction.
    keep_recent_tool_results: int = 4
    #: Older tool-call arguments longer than this are cut to head + tail, the cut marked (JSON stays
    #: valid).
    max_tool_arg_chars: int = 500
    #: Tools whose calls and results are never touched.
    protected_tools: tuple[str, ...] = ()
    #: Automatic micro-compaction only above this share of the budget.
    micro_trigger_ratio: float = 0.5
    #: Skip a clearing that frees less (keeps the cached prefix stable).
    clear_at_least_tokens: int = 2_000
    #: Micro-compaction also clears the output of a read that a later call superseded (the same
    #: file read whole again, or changed): a placeholder names the later message.
    supersede_reads: bool = False
    #: Cache-aware micro-compaction: a clearing must free at least this share of the tokens from
    #: its first edited message to the end (the part of the cached prefix it makes the provider
    #: write again), so old results are cleared in batches that repay the cache write. 0: only
    #: ``clear_at_least_tokens``.
    micro_min_gain_ratio: float = 0.5
    #: Cache-aware cuts: when the ladder has to cut the kept tail's tool output (its last step
    #: before ``over_budget``), it cuts down to the target, not just under the soft threshold.
    #: Each cut breaks the provider's cached prefix from that message on; cutting only to the
    #: threshold made the next call cut again (a prefix break at every call). False: as in 0.1.
    cache_aware_cuts: bool = True
    #: Where cleared tool output is written (content-hash names, atomic, never outside it); ``None``:
    #: not written.
    offload_dir: str | None = None
    #: Every placeholder, cut argument and summary names a recall id of its original text, which
    #: the ``recall`` tool (:mod:`context_compactor.recall`) reads back. Needs a :class:`Session`
    #: (the originals go into its store) or ``offload_dir`` (``recall-<id>.txt`` files);
    #: ``ConfigError`` otherwise. Changes the placeholders' bytes: a prefix the provider cached
    #: without it is written again once.
    recall: bool = False
    #: What selective compaction does per item type, in priority order (:class:`SelectiveRule`).
    selective_rules: tuple[SelectiveRule, ...] = DEFAULT_SELECTIVE_RULES
    #: The summary's cap, enforced after the reply (at a sentence boundary).
    summary_max_tokens: int = 2_000
    #: ``"user"``; ``"system"`` puts the summary in the system prompt (Anthropic: ``result.system``);
    #: ``"developer"`` for Responses.
    summary_role: Literal["user", "system", "developer"] = "user"
    #: The ledger's user words (the sentences of the user's own messages in every replaced span,
    #: carried verbatim from one compaction to the next). ``None``: ``min(2000, budget // 2)``, at
    #: least 64 (:attr:`user_words_token_limit`); 0 turns the section off.
    user_messages_budget_tokens: int | None = None
    #: The ledger's preserved details and artifact trail, outside ``summary_max_tokens`` (which
    #: caps the narrative). ``None``: ``min(1500, budget // 2)``, at least 64
    #: (:attr:`details_token_limit`); 0 turns the sections off.
    details_budget_tokens: int | None = None
    #: Longer spans are summarised in chunks, each updating the previous summary (so the
    #: summarizer may be called several times per compaction); ``None``: the hard threshold.
    summarizer_max_input_tokens: int | None = None
    #: Each tool output in the transcript sent to the summarizer is cut to this.
    transcript_item_max_chars: int = 2_000
    #: Seconds for the whole compaction's summary: every summarizer call of one compaction (each
    #: chunk) shares them; then the fallback ladder.
    summarizer_timeout_s: float = 120.0
    #: ``"fallback"``: transient errors (timeout, 429, 5xx, connection) fall back to the rule summary,
    #: permanent ones raise :class:`SummarizerError`; ``"fallback_all"``; ``"raise"``.
    on_summarizer_error: Literal["fallback", "fallback_all", "raise"] = "fallback"
    #: Refuse a compaction that saves less, only below the hard threshold and not when it brings the
    #: context under the soft one.
    min_savings_ratio: float = 0.1
    #: The prices ``target_ratio="auto"`` weighs, in dollars per million tokens: ``(input, cached
    #: read, cache write, output)``. ``None``: by the conversation's format, the eval's tables
    #: (:data:`DEFAULT_PRICES`: OpenAI gpt-5 for Chat Completions, Responses and Gemini contents,
    #: Anthropic Claude Sonnet 4 for Anthropic messages).
    prices: tuple[float, float, float, float] | None = None
    #: No compaction loops: after a compaction that could not get under the soft threshold
    #: (``over_budget``, a refusal above it included), or that could not reach the target and
    #: left less room than this under the soft threshold, ``check()``/``should_compact()`` with a
    #: state, ``compact()`` with a state and a Session's ``prepare()`` hold the next compaction
    #: until the context has grown by this many tokens (or crossed the hard threshold); each
    #: retry would end the same way and break the provider's cached prefix. ``None``: the gap
    #: between the soft and the hard threshold (:attr:`retry_growth`); 0: no hold.
    retry_growth_tokens: int | None = None
    #: After a summarizer failure, that many calls with a state skip the LLM: micro/selective, then the
    #: rule summary if they fall short.
    cooldown_calls: int = 3
    #: Start the summary from the soft threshold without blocking (a :class:`Session`: a thread for
    #: ``prepare()``, a task for ``aprepare()``); it is applied with the messages appended
    #: meanwhile (the delta, kept verbatim) by a later ``prepare()``.
    background: bool = False
    #: ``"approx"`` (fast, errs high), ``"o200k_base"``, ``"cl100k_base"``, or a callable ``str ->
    #: int``.
    tokenizer: Tokenizer = "approx"
    #: Tokens counted per message on top of its content.
    message_overhead_tokens: int = 4
    #: Tokens per image whose size is unknown (URL, file id), audio clip or opaque document.
    image_tokens: int = 1_600
    #: The model whose image formula counts images of known size; ``None``: the highest documented count
    #: for the image's provider.
    image_model: str | None = None
    #: Repair invalid input (listed in ``result.repairs``); ``False`` raises
    #: :class:`InvalidConversationError`.
    repair: bool = True
    #: The validity profile; ``None``: detected from the format. ``"strict"`` also demands alternation
    #: and system-first.
    profile: _Profile | None = None
    #: Allow message text in log records (never by default).
    log_content: bool = False
    #: The summary growth bound: the summary's cap is at most this share of the target (and
    #: ``summary_max_tokens``, never under 256 tokens; :attr:`summary_token_limit`). A summary as
    #: large as a small window allows leaves the context near the threshold after every
    #: compaction, and the next call compacts again. ``None`` or 0: ``summary_max_tokens`` alone
    #: (as in 0.1).
    summary_target_share: float | None = 0.1

    def __post_init__(self) -> None:
        # Normalise sequences given as lists (so the config stays hashable and immutable).
        if isinstance(self.protected_tools, (list, set, frozenset)):
            object.__setattr__(self, "protected_tools", tuple(sorted(self.protected_tools)))
        if isinstance(self.selective_rules, list):
            object.__setattr__(self, "selective_rules", tuple(self.selective_rules))
        if isinstance(self.prices, list):
            object.__setattr__(self, "prices", tuple(self.prices))
        if self.offload_dir is not None and isinstance(self.offload_dir, os.PathLike):
            object.__setattr__(self, "offload_dir", os.fspath(self.offload_dir))
        self._validate()

    # -- validation ---------------------------------------------------------------------------------

    def _validate(self) -> None:
        def integer(name: str, *, minimum: int = 0, optional: bool = False) -> None:
            v = getattr(self, name)
            if v is None and optional:
                return
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{name}: expected an int, got {v!r}", name)
            if v < minimum:
                raise ConfigError(f"{name}: must be >= {minimum}, got {v}", name)
            # Token counts are machine integers in the core: no window or cost is this large.
            if v > MAX_INT:
                raise ConfigError(f"{name}: must be <= {MAX_INT}, got {v}", name)

        def ratio(name: str, *, low_open: bool = True) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{name}: expected a number, got {v!r}", name)
            if not ((v > 0) if low_open else (v >= 0)) or v > 1:
                raise ConfigError(f"{name}: must be in {'(0' if low_open else '[0'}, 1], got {v}", name)

        def choice(name: str, options: tuple[Any, ...]) -> None:
            v = getattr(self, name)
            if v not in options:
                raise ConfigError(f"{name}: expected one of {options}, got {v!r}", name)

        integer("max_context_tokens", minimum=1)
        integer("reserve_tokens", optional=True)
        if self.reserve_tokens is not None and self.reserve_tokens >= self.max_context_tokens:
            raise ConfigError(
                f"reserve_tokens: must be below max_context_tokens ({self.max_context_tokens}), "
                f"got {self.reserve_tokens}",
                "reserve_tokens",
            )
        ratio("trigger_ratio")
        if self.target_ratio != "auto":
            ratio("target_ratio")
        if self.prices is not None:
            p = self.prices
            if (
                not isinstance(p, tuple)
                or len(p) != 4
                or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in p
                )
            ):
                raise ConfigError(
                    f"prices: expected (input, cached_read, cache_write, output) in dollars per million "
                    f"tokens, each >= 0, got {p!r}",
                    "prices",
                )
        ratio("micro_trigger_ratio", low_open=False)
        ratio("min_savings_ratio", low_open=False)
        if self.summary_target_share is not None:
            ratio("summary_target_share", low_open=False)
        integer("soft_threshold_tokens", minimum=1, optional=True)
        integer("hard_threshold_tokens", minimum=1, optional=True)
        if self.soft_threshold > self.hard_threshold:
            name = "soft_threshold_tokens" if self.soft_threshold_tokens is not None else "trigger_ratio"
            raise ConfigError(
                f"{name}: the soft threshold ({self.soft_threshold}) is above the hard threshold "
                f"({self.hard_threshold})",
                name,
            )
        if self.hard_threshold > self.max_context_tokens:
            raise ConfigError(
                f"hard_threshold_tokens: {self.hard_threshold} is above max_context_tokens ({self.max_context_tokens})",
                "hard_threshold_tokens",
            )
        for name in (
            "keep_first_messages",
            "keep_recent_messages",
            "keep_recent_tool_results",
            "clear_at_least_tokens",
            "cooldown_calls",
            "message_overhead_tokens",
            "image_tokens",
        ):
            integer(name)
        if self.image_model is not None:
            if not isinstance(self.image_model, str):
                raise ConfigError(
                    f"image_model: expected a model name or None, got {self.image_model!r}", "image_model"
                )
            _core.image_tokens(1, 1, model=self.image_model)  # ConfigError for a model no document covers
        integer("keep_recent_tokens", optional=True)
        integer("retry_growth_tokens", optional=True)
        integer("user_messages_budget_tokens", optional=True)
        integer("details_budget_tokens", optional=True)
        integer("task_max_tokens", minimum=16, optional=True)
        integer("max_tool_arg_chars", minimum=16)
        integer("summary_max_tokens", minimum=16)
        integer("summarizer_max_input_tokens", minimum=256, optional=True)
        integer("transcript_item_max_chars", minimum=16)
        t = self.summarizer_timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t)):
            raise ConfigError(f"summarizer_timeout_s: expected a number > 0, got {t!r}", "summarizer_timeout_s")
        choice("summary_role", ("user", "system", "developer"))
        choice("on_summarizer_error", ("fallback", "fallback_all", "raise"))
        choice("profile", (None, *_core.PROFILES))
        if not isinstance(self.repair, bool):
            raise ConfigError(f"repair: expected a bool, got {self.repair!r}", "repair")
        if not isinstance(self.supersede_reads, bool):
            raise ConfigError(f"supersede_reads: expected a bool, got {self.supersede_reads!r}", "supersede_reads")
        if not isinstance(self.cache_aware_cuts, bool):
            raise ConfigError(f"cache_aware_cuts: expected a bool, got {self.cache_aware_cuts!r}", "cache_aware_cuts")
        g = self.micro_min_gain_ratio
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not (0 <= g <= 1):
            raise ConfigError(f"micro_min_gain_ratio: expected a number in [0, 1], got {g!r}", "micro_min_gain_ratio")
        if not isinstance(self.background, bool):
            raise ConfigError(f"background: expected a bool, got {self.background!r}", "background")
        if not isinstance(self.log_content, bool):
            raise ConfigError(f"log_content: expected a bool, got {self.log_content!r}", "log_content")
        if not isinstance(self.protected_tools, tuple) or not all(isinstance(n, str) for n in self.protected_tools):
            raise ConfigError(
                f"protected_tools: expected a sequence of tool names, got {self.protected_tools!r}", "protected_tools"
            )
        if not isinstance(self.selective_rules, tuple) or not all(
            isinstance(r, SelectiveRule) for r in self.selective_rules
        ):
            raise ConfigError("selective_rules: expected a sequence of SelectiveRule", "selective_rules")
        if not isinstance(self.recall, bool):
            raise ConfigError(f"recall: expected a bool, got {self.recall!r}", "recall")
        if self.offload_dir is not None and not isinstance(self.offload_dir, str):
            raise ConfigError(f"offload_dir: expected a path, got {self.offload_dir!r}", "offload_dir")
        tok = self.tokenizer
        if not (callable(tok) or tok in ("approx", "o200k_base", "cl100k_base")):
            raise ConfigError(
                f"tokenizer: expected 'approx', 'o200k_base', 'cl100k_base' or a callable, got {tok!r}", "tokenizer"
            )

    # -- derived values -------------------------------------------------------------------------------

    @property
    def reserve(self) -> int:
        """Tokens kept free for the reply: ``reserve_tokens``, or ``min(8000, max_context_tokens // 4)``
        when it is ``None``."""
        if self.reserve_tokens is not None:
            return self.reserve_tokens
        return default_reserve(self.max_context_tokens)

    @property
    def budget(self) -> int:
        """Tokens the prompt may use: ``max_context_tokens - reserve``. Over the budget is over the window."""
        return self.max_context_tokens - self.reserve

    @property
    def soft_threshold(self) -> int:
        """From here compaction is due (``urgency == "soft"``)."""
        if self.soft_threshold_tokens is not None:
            return self.soft_threshold_tokens
        return int(self.trigger_ratio * self.budget)

    @property
    def hard_threshold(self) -> int:
        """From here the conversation must be compacted before sending (``urgency == "hard"``)."""
        if self.hard_threshold_tokens is not None:
            return self.hard_threshold_tokens
        return self.budget

    @property
    def target_tokens(self) -> int:
        """Where a compaction aims: ``target_ratio * budget``, never above the soft threshold
        (with ``"auto"``: half the budget here; each compaction chooses its own)."""
        ratio = AUTO_FALLBACK if self.target_ratio == "auto" else self.target_ratio
        return min(int(ratio * self.budget), self.soft_threshold)

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
        if self.retry_growth_tokens is not None:
            return self.retry_growth_tokens
        return self.hard_threshold - self.soft_threshold

    @property
    def task_token_limit(self) -> int:
        """The task is shortened to this at most: ``task_max_tokens`` or ``min(2000, budget // 4)``."""
        if self.task_max_tokens is not None:
            return self.task_max_tokens
        return min(2_000, self.budget // 4)

    @property
    def user_words_token_limit(self) -> int:
        """The ledger's user words budget: ``user_messages_budget_tokens``, or
        ``min(2000, budget // 2)`` (at least 64) when it is ``None``."""
        if self.user_messages_budget_tokens is not None:
            return self.user_messages_budget_tokens
        return max(64, min(2_000, self.budget // 2))

    @property
    def details_token_limit(self) -> int:
        """The ledger's details and trail budget: ``details_budget_tokens``, or
        ``min(1500, budget // 2)`` (at least 64) when it is ``None``."""
        if self.details_budget_tokens is not None:
            return self.details_budget_tokens
        return max(64, min(1_500, self.budget // 2))

    @property
    def summary_token_limit(self) -> int:
        """The summary's cap: ``summary_max_tokens``, at most ``summary_target_share`` of the
        target (never under 256 tokens)."""
        if not self.summary_target_share:
            return self.summary_max_tokens
        bound = max(256, int(self.target_tokens * self.summary_target_share))
        return min(self.summary_max_tokens, bound)

    @property
    def micro_threshold(self) -> int:
        """Automatic micro-compaction only from here: ``micro_trigger_ratio * budget``."""
        return int(self.micro_trigger_ratio * self.budget)

    # -- construction ---------------------------------------------------------------------------------

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> CompactionConfig:
        """A named preset (seed 000): ``"development"``, ``"production"`` or ``"large_context"``.

        Example:
            >>> CompactionConfig.preset("production", keep_recent_messages=8).keep_recent_messages
            8
        """
        try:
            values = PRESETS[name]
        except KeyError:
            raise ConfigError(f"preset: unknown preset {name!r}; expected one of {tuple(PRESETS)}", "preset") from None
        return cls.from_dict({**values, **overrides})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionConfig:
        """Build from a mapping (e.g. parsed TOML/JSON). Unknown keys raise :class:`ConfigError`;
        ``selective_rules`` may be given as dicts ``{"item", "action", "priority"}``; a ``preset`` key
        starts from that preset."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"config: expected a mapping, got {type(data).__name__}", "config")
        data = dict(data)
        base: dict[str, Any] = {}
        if "preset" in data:
            preset = data.pop("preset")
            if preset not in PRESETS:
                raise ConfigError(f"preset: unknown preset {preset!r}; expected one of {tuple(PRESETS)}", "preset")
            base = dict(PRESETS[preset])
        names = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in names:
                raise ConfigError(f"{key}: unknown configuration field", str(key))
        values = {**base, **data}
        rules = values.get("selective_rules")
        if rules is not None and not isinstance(rules, tuple):
            if not isinstance(rules, (list, tuple)):
                raise ConfigError("selective_rules: expected a list of rules", "selective_rules")
            parsed = []
            for r in rules:
                if isinstance(r, SelectiveRule):
                    parsed.append(r)
                elif isinstance(r, Mapping):
                    try:
                        parsed.append(SelectiveRule(**r))
                    except TypeError as e:
                        raise ConfigError(f"selective_rules: {e}", "selective_rules") from None
                else:
                    raise ConfigError(f"selective_rules: expected a rule or a mapping, got {r!r}", "selective_rules")
            values["selective_rules"] = tuple(parsed)
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
        names = {f.name for f in dataclasses.fields(self)}
        for key in changes:
            if key not in names:
                raise ConfigError(f"{key}: unknown configuration field", key)
        return dataclasses.replace(self, **changes)


#: Seed 000's presets. ``max_context_tokens`` is the hard threshold plus the reserve, so the hard
#: threshold is the budget.
PRESETS: dict[str, dict[str, Any]] = {
    "development": {
        "max_context_tokens": 10_000,
        "soft_threshold_tokens": 5_000,
        "hard_threshold_tokens": 8_000,
        "reserve_tokens": 2_000,
        "keep_recent_messages": 4,
        "summary_max_tokens": 400,
    },
    "production": {
        "max_context_tokens": 24_000,
        "soft_threshold_tokens": 15_000,
        "hard_threshold_tokens": 20_000,
        "reserve_tokens": 4_000,
        "keep_recent_messages": 6,
        "summary_max_tokens": 800,
    },
    "large_context": {
        "max_context_tokens": 36_000,
        "soft_threshold_tokens": 25_000,
        "hard_threshold_tokens": 30_000,
        "reserve_tokens": 6_000,
        "keep_recent_messages": 10,
        "summary_max_tokens": 1_200,
    },
}

//! [`Config`]: every setting of a compaction, its default, the presets and the rules a value must
//! follow, once for both APIs.
//!
//! The field names are those of Python's `CompactionConfig` and of DESIGN's configuration
//! table, so one TOML or JSON document configures both APIs: serde reads it here, Python's
//! `CompactionConfig.from_dict` hands the same mapping to [`validate::from_raw`] through the
//! binding. A bad value is a [`ConfigError`] naming the field, with the same message in both.
//!
//! Definitions (DESIGN): budget = `max_context_tokens - reserve`; soft threshold =
//! `soft_threshold_tokens` or `trigger_ratio * budget`; hard threshold = `hard_threshold_tokens`
//! or the budget; target = `target_ratio * budget`, capped at the soft threshold. A `None`
//! `reserve_tokens` is derived: `min(8000, max_context_tokens / 4)`.

pub mod auto_target;
pub mod presets;
pub mod raw;
pub mod validate;

use crate::planner::{Action, Item, PlanConfig};
use crate::tokens::counter::Framing;
use crate::validate::Profile;
use raw::Raw;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// The largest value an integer setting may take (a trillion tokens).
pub const MAX_INT: u64 = 1_000_000_000_000;

/// The derived reserve is at most this (room for a long reply).
pub const RESERVE_MAX: usize = 8_000;

/// The ledger's user words when `user_messages_budget_tokens` is `None`, whatever the window.
pub const USER_WORDS_TOKENS: usize = 2_000;

/// `target_ratio = "auto"` without an observed growth (and in the derived `target_tokens`): half
/// the budget.
pub const AUTO_FALLBACK: f64 = 0.5;

/// The default prices of `target_ratio = "auto"`, dollars per million tokens (input, cached read,
/// cache write, output): OpenAI gpt-5 (no charge for a cache write: the input price), used for
/// Chat Completions, Responses and Gemini contents.
pub const OPENAI_PRICES: [f64; 4] = [1.25, 0.125, 1.25, 10.0];
/// The default prices for Anthropic messages: Claude Sonnet 4.
pub const ANTHROPIC_PRICES: [f64; 4] = [3.0, 0.30, 3.75, 15.0];

/// The field names, in the order Python's `CompactionConfig` declares them.
pub const FIELDS: [&str; 42] = [
    "max_context_tokens",
    "reserve_tokens",
    "trigger_ratio",
    "soft_threshold_tokens",
    "hard_threshold_tokens",
    "target_ratio",
    "keep_first_messages",
    "task_max_tokens",
    "keep_recent_messages",
    "keep_recent_tokens",
    "keep_recent_tool_results",
    "max_tool_arg_chars",
    "protected_tools",
    "micro_trigger_ratio",
    "clear_at_least_tokens",
    "supersede_reads",
    "micro_min_gain_ratio",
    "cache_aware_cuts",
    "offload_dir",
    "recall",
    "selective_rules",
    "summary_max_tokens",
    "summary_role",
    "user_messages_budget_tokens",
    "details_budget_tokens",
    "summarizer_max_input_tokens",
    "transcript_item_max_chars",
    "summarizer_timeout_s",
    "on_summarizer_error",
    "min_savings_ratio",
    "prices",
    "retry_growth_tokens",
    "cooldown_calls",
    "background",
    "tokenizer",
    "message_overhead_tokens",
    "image_tokens",
    "image_model",
    "repair",
    "profile",
    "log_content",
    "summary_target_share",
];

/// A bad configuration value: the field it names and the message (which starts with the field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: String,
    message: String,
}

impl ConfigError {
    /// The error of `field`: the message is `"{field}: {what}"`.
    pub fn new(field: &str, what: impl fmt::Display) -> ConfigError {
        ConfigError {
            field: field.to_owned(),
            message: format!("{field}: {what}"),
        }
    }

    /// The field the error names (`"preset"` for an unknown preset, `"config"` when the document
    /// is not a mapping).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The whole message, as Python's `ConfigError` shows it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

macro_rules! names_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)+
        }
        impl $name {
            /// The names a document may give, in order.
            pub const NAMES: [&'static str; [$($text),+].len()] = [$($text),+];
            /// The value a name gives.
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
            /// The value's name in a document.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }
    };
}

names_enum! {
    /// Where the summary goes (`summary_role`).
    SummaryRole {
        /// A user message (the default).
        #[default] User = "user",
        /// The system prompt (Anthropic: the separate `system`).
        System = "system",
        /// A developer message (Responses).
        Developer = "developer",
    }
}

names_enum! {
    /// What a summarizer failure does (`on_summarizer_error`).
    OnSummarizerError {
        /// Transient failures fall back to the rule summary; permanent ones are errors.
        #[default] Fallback = "fallback",
        /// Every failure falls back to the rule summary.
        FallbackAll = "fallback_all",
        /// Every failure is an error.
        Raise = "raise",
    }
}

names_enum! {
    /// The built-in tokenizers (`tokenizer`); Python may also give a callable.
    TokenizerName {
        /// The fast estimate that errs high.
        #[default] Approx = "approx",
        /// Exact BPE of GPT-4o and later.
        O200kBase = "o200k_base",
        /// Exact BPE of GPT-4 and GPT-3.5.
        Cl100kBase = "cl100k_base",
    }
}

/// Where a compaction aims (`target_ratio`): a share of the budget, or `"auto"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TargetRatio {
    /// A share of the budget in (0, 1].
    Ratio(f64),
    /// Per conversation, the target that minimises the predicted billed input per model call
    /// over a compaction cycle (Python's `target_ratio="auto"`); where no choice is made (the
    /// derived `target_tokens`, a conversation without an observed growth) half the budget
    /// ([`AUTO_FALLBACK`]). Both APIs choose with [`auto_target::auto_target`].
    Auto,
}

impl TargetRatio {
    /// The share of the budget in force where no per-conversation choice is made.
    pub fn ratio(self) -> f64 {
        match self {
            TargetRatio::Ratio(r) => r,
            TargetRatio::Auto => AUTO_FALLBACK,
        }
    }
}

impl Serialize for TargetRatio {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TargetRatio::Ratio(r) => s.serialize_f64(*r),
            TargetRatio::Auto => s.serialize_str("auto"),
        }
    }
}

/// What selective compaction does to one type of item outside the recent window.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SelectiveRule {
    /// `"tool_results"`, `"thinking"`, `"images"`, `"assistant_text"` or `"user_text"`.
    pub item: String,
    /// `"placeholder"`, `"drop"`, `"head_tail"` or `"never"`.
    pub action: String,
    /// Lower runs first.
    pub priority: i64,
}

/// Every setting of a compaction (DESIGN's configuration table; Python's `CompactionConfig`).
///
/// Read one from TOML or JSON with serde (a `preset` key starts from that preset; unknown keys
/// and bad values are errors naming the field), or start from [`Config::default`] or
/// [`Config::preset`]. A config changed by hand is checked by [`Config::validate`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// The model's context window, in tokens.
    pub max_context_tokens: usize,
    /// Tokens kept free for the reply; `None`: `min(8000, max_context_tokens / 4)`.
    pub reserve_tokens: Option<usize>,
    /// The soft threshold as a share of the budget.
    pub trigger_ratio: f64,
    /// The soft threshold in tokens; `None`: `trigger_ratio` of the budget.
    pub soft_threshold_tokens: Option<usize>,
    /// The hard threshold in tokens; `None`: the budget.
    pub hard_threshold_tokens: Option<usize>,
    /// Where a compaction aims, as a share of the budget (capped at the soft threshold), or
    /// `"auto"`.
    pub target_ratio: TargetRatio,
    /// Leading non-system messages kept verbatim (the task).
    pub keep_first_messages: usize,
    /// The task is shortened to this at most; `None`: `min(2000, budget / 4)`.
    pub task_max_tokens: Option<usize>,
    /// The recent tail kept verbatim, in messages.
    pub keep_recent_messages: usize,
    /// Also keep at least this many tail tokens.
    pub keep_recent_tokens: Option<usize>,
    /// Tool results kept intact by micro-compaction.
    pub keep_recent_tool_results: usize,
    /// Older tool-call arguments longer than this are cut to head + tail.
    pub max_tool_arg_chars: usize,
    /// Tools whose calls and results are never touched.
    pub protected_tools: Vec<String>,
    /// Automatic micro-compaction only above this share of the budget.
    pub micro_trigger_ratio: f64,
    /// Skip a clearing that frees less.
    pub clear_at_least_tokens: usize,
    /// Also clear reads a later call superseded.
    pub supersede_reads: bool,
    /// A clearing must free at least this share of the tokens from its first edit to the end.
    pub micro_min_gain_ratio: f64,
    /// The ladder cuts the kept tail's tool output down to the target.
    pub cache_aware_cuts: bool,
    /// Where cleared tool output is written; `None`: not written.
    pub offload_dir: Option<String>,
    /// Every placeholder, cut argument and summary names a recall id of its original text
    /// (the host keeps the originals: a store or `offload_dir`).
    pub recall: bool,
    /// What selective compaction does per item type.
    pub selective_rules: Vec<SelectiveRule>,
    /// The summary's cap.
    pub summary_max_tokens: usize,
    /// Where the summary goes.
    pub summary_role: SummaryRole,
    /// The ledger's user words; `None`: 2000 (`USER_WORDS_TOKENS`), whatever the window.
    pub user_messages_budget_tokens: Option<usize>,
    /// The ledger's details and trail; `None`: `min(1500, budget / 2)`, at least 64.
    pub details_budget_tokens: Option<usize>,
    /// Longer spans are summarised in chunks; `None`: the hard threshold.
    pub summarizer_max_input_tokens: Option<usize>,
    /// Each tool output in the summarizer's transcript is cut to this.
    pub transcript_item_max_chars: usize,
    /// Seconds for the whole compaction's summary (the host enforces it).
    pub summarizer_timeout_s: f64,
    /// What a summarizer failure does.
    pub on_summarizer_error: OnSummarizerError,
    /// Refuse a compaction that saves less.
    pub min_savings_ratio: f64,
    /// The prices `target_ratio = "auto"` weighs, dollars per million tokens: `[input, cached
    /// read, cache write, output]`; `None`: by the conversation's format ([`Config::price_table`]).
    pub prices: Option<[f64; 4]>,
    /// No compaction loops: after a compaction that ended over the soft threshold (or short of
    /// the target with little room under it), the next one waits until the context grew by this
    /// many tokens (or crossed the hard threshold); `None`: the gap between the soft and the hard
    /// threshold ([`Config::retry_growth`]); 0: no hold.
    pub retry_growth_tokens: Option<usize>,
    /// After a summarizer failure, that many calls with a state skip the LLM.
    pub cooldown_calls: usize,
    /// Start the summary from the soft threshold without blocking (hosts that can).
    pub background: bool,
    /// The built-in tokenizer.
    pub tokenizer: TokenizerName,
    /// Tokens counted per message on top of its content.
    pub message_overhead_tokens: usize,
    /// Tokens per image of unknown size.
    pub image_tokens: usize,
    /// The model whose image formula counts images of known size.
    pub image_model: Option<String>,
    /// Repair invalid input; `false`: an error.
    pub repair: bool,
    /// The validity profile; `None`: detected from the format.
    #[serde(serialize_with = "profile_name")]
    pub profile: Option<Profile>,
    /// Allow message text in log records.
    pub log_content: bool,
    /// The summary growth bound as a share of the target; `None` or 0: `summary_max_tokens`.
    pub summary_target_share: Option<f64>,
}

impl Default for Config {
    /// DESIGN's defaults.
    fn default() -> Config {
        Config {
            max_context_tokens: 128_000,
            reserve_tokens: None,
            trigger_ratio: 0.8,
            soft_threshold_tokens: None,
            hard_threshold_tokens: None,
            target_ratio: TargetRatio::Ratio(0.5),
            keep_first_messages: 1,
            task_max_tokens: None,
            keep_recent_messages: 6,
            keep_recent_tokens: None,
            keep_recent_tool_results: 4,
            max_tool_arg_chars: 500,
            protected_tools: Vec::new(),
            micro_trigger_ratio: 0.5,
            clear_at_least_tokens: 2_000,
            supersede_reads: false,
            micro_min_gain_ratio: 0.5,
            cache_aware_cuts: true,
            offload_dir: None,
            recall: false,
            selective_rules: [
                ("tool_results", "placeholder", 10),
                ("thinking", "drop", 20),
                ("images", "placeholder", 20),
                ("assistant_text", "head_tail", 30),
                ("user_text", "never", 50),
            ]
            .into_iter()
            .map(|(item, action, priority)| SelectiveRule {
                item: item.into(),
                action: action.into(),
                priority,
            })
            .collect(),
            summary_max_tokens: 2_000,
            summary_role: SummaryRole::User,
            user_messages_budget_tokens: None,
            details_budget_tokens: None,
            summarizer_max_input_tokens: None,
            transcript_item_max_chars: 2_000,
            summarizer_timeout_s: 120.0,
            on_summarizer_error: OnSummarizerError::Fallback,
            min_savings_ratio: 0.1,
            prices: None,
            retry_growth_tokens: None,
            cooldown_calls: 3,
            background: false,
            tokenizer: TokenizerName::Approx,
            message_overhead_tokens: 4,
            image_tokens: 1_600,
            image_model: None,
            repair: true,
            profile: None,
            log_content: false,
            summary_target_share: Some(0.1),
        }
    }
}

/// The reserve a window gets when `reserve_tokens` is not given: 8000, or a quarter of the window
/// when that is smaller.
pub fn default_reserve(max_context_tokens: usize) -> usize {
    RESERVE_MAX.min(max_context_tokens / 4)
}

impl Config {
    /// A named preset (seed 000): `"development"`, `"production"` or `"large_context"`.
    pub fn preset(name: &str) -> Result<Config, ConfigError> {
        Config::from_raw(&Raw::Map(vec![("preset".into(), Raw::Str(name.into()))]))
    }

    /// A config from a document already read into a [`Raw`] value.
    pub fn from_raw(raw: &Raw) -> Result<Config, ConfigError> {
        validate::from_raw(raw)
    }

    /// A config from a JSON value (a `preset` key starts from that preset).
    pub fn from_json(value: &serde_json::Value) -> Result<Config, ConfigError> {
        Config::from_raw(&Raw::from(value))
    }

    /// Check a config built or changed in code; the first bad field is the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate::from_raw(&self.to_raw()).map(|_| ())
    }

    /// The config as a document (every field; `None` as null).
    pub fn to_raw(&self) -> Raw {
        // Serialising a Config cannot fail: it holds plain values only.
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        Raw::from(&value)
    }

    /// Tokens kept free for the reply: `reserve_tokens`, or [`default_reserve`].
    pub fn reserve(&self) -> usize {
        self.reserve_tokens
            .unwrap_or_else(|| default_reserve(self.max_context_tokens))
    }

    /// Tokens the prompt may use: `max_context_tokens - reserve`.
    pub fn budget(&self) -> usize {
        self.max_context_tokens.saturating_sub(self.reserve())
    }

    /// From here compaction is due.
    pub fn soft_threshold(&self) -> usize {
        self.soft_threshold_tokens
            .unwrap_or_else(|| (self.trigger_ratio * self.budget() as f64) as usize)
    }

    /// From here the conversation must be compacted before sending.
    pub fn hard_threshold(&self) -> usize {
        self.hard_threshold_tokens.unwrap_or_else(|| self.budget())
    }

    /// Where a compaction aims: `target_ratio * budget`, never above the soft threshold (with
    /// `"auto"`: half the budget; each compaction chooses its own, [`auto_target`]).
    pub fn target_tokens(&self) -> usize {
        ((self.target_ratio.ratio() * self.budget() as f64) as usize).min(self.soft_threshold())
    }

    /// The prices `target_ratio = "auto"` weighs for a conversation (`anthropic`: Anthropic
    /// messages): `prices`, or the default table of the format.
    pub fn price_table(&self, anthropic: bool) -> [f64; 4] {
        match self.prices {
            Some(p) => p,
            None if anthropic => ANTHROPIC_PRICES,
            None => OPENAI_PRICES,
        }
    }

    /// The growth before a held compaction is due again below the hard threshold:
    /// `retry_growth_tokens`, or the gap between the soft and the hard threshold.
    pub fn retry_growth(&self) -> usize {
        self.retry_growth_tokens
            .unwrap_or_else(|| self.hard_threshold().saturating_sub(self.soft_threshold()))
    }

    /// The task is shortened to this at most.
    pub fn task_token_limit(&self) -> usize {
        self.task_max_tokens
            .unwrap_or_else(|| 2_000usize.min(self.budget() / 4))
    }

    /// The ledger's user words budget: `user_messages_budget_tokens`, or 2000 whatever the window.
    /// Not scaled down with a small window: a scaled cap evicted the oldest stated facts while the
    /// context was still under the soft threshold (the ladder evicts words only when the kept tail
    /// and the narrative have given what they can), and held a window whose system prompt alone
    /// is over it to fewer words than 0.1 did (docs/canaries.md, "Canary survival in the eval's
    /// replays").
    pub fn user_words_token_limit(&self) -> usize {
        self.user_messages_budget_tokens
            .unwrap_or(USER_WORDS_TOKENS)
    }

    /// The ledger's details and trail budget.
    pub fn details_token_limit(&self) -> usize {
        self.details_budget_tokens
            .unwrap_or_else(|| 64usize.max(1_500usize.min(self.budget() / 2)))
    }

    /// The summary's cap: `summary_max_tokens`, at most `summary_target_share` of the target
    /// (never under 256 tokens).
    pub fn summary_token_limit(&self) -> usize {
        match self.summary_target_share {
            None => self.summary_max_tokens,
            Some(0.0) => self.summary_max_tokens,
            Some(s) => {
                let bound = 256usize.max((self.target_tokens() as f64 * s) as usize);
                self.summary_max_tokens.min(bound)
            }
        }
    }

    /// Automatic micro-compaction only from here: `micro_trigger_ratio * budget`.
    pub fn micro_threshold(&self) -> usize {
        (self.micro_trigger_ratio * self.budget() as f64) as usize
    }

    /// The planner's settings (thresholds worked out).
    pub fn plan_config(&self) -> PlanConfig {
        PlanConfig {
            soft: self.soft_threshold(),
            hard: self.hard_threshold(),
            window: self.max_context_tokens,
            target: self.target_tokens(),
            micro_threshold: self.micro_threshold(),
            keep_first_messages: self.keep_first_messages,
            task_max_tokens: self.task_token_limit(),
            keep_recent_messages: self.keep_recent_messages,
            keep_recent_tokens: self.keep_recent_tokens,
            keep_recent_tool_results: self.keep_recent_tool_results,
            max_tool_arg_chars: self.max_tool_arg_chars,
            protected_tools: self.protected_tools.clone(),
            clear_at_least_tokens: self.clear_at_least_tokens,
            supersede_reads: self.supersede_reads,
            micro_min_gain_ratio: self.micro_min_gain_ratio,
            cache_aware_cuts: self.cache_aware_cuts,
            offload_dir: self.offload_dir.clone(),
            recall: self.recall,
            selective_rules: self
                .selective_rules
                .iter()
                .filter_map(|r| {
                    Some((Item::parse(&r.item)?, Action::parse(&r.action)?, r.priority))
                })
                .collect(),
            summary_max_tokens: self.summary_max_tokens,
            summary_cap: self.summary_token_limit(),
            summary_in_system: self.summary_role != SummaryRole::User,
            user_messages_budget_tokens: self.user_words_token_limit(),
            details_budget_tokens: self.details_token_limit(),
            summarizer_max_input_tokens: self.summarizer_max_input_tokens,
            transcript_item_max_chars: self.transcript_item_max_chars,
            min_savings_ratio: self.min_savings_ratio,
            retry_growth: self.retry_growth(),
            held_until: None,
            due_at: None,
            repair: self.repair,
            profile: self.profile,
            framing: Framing {
                message_overhead_tokens: self.message_overhead_tokens,
                image_tokens: self.image_tokens,
                image_model: validate::image_model(self.image_model.as_deref()).unwrap_or_default(),
            },
        }
    }
}

/// A profile as its name (`None` as null).
fn profile_name<S: serde::Serializer>(p: &Option<Profile>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_some(p.name()),
        None => s.serialize_none(),
    }
}

impl<'de> Deserialize<'de> for Config {
    /// Any self-describing format (JSON, TOML, YAML): the document is read as a [`Raw`] value
    /// and checked by the same rules as Python's `CompactionConfig.from_dict`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Config, D::Error> {
        let raw = Raw::deserialize(d)?;
        Config::from_raw(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;

//! The planner: check → repair → micro → selective → legal cut → summary request, then
//! `apply(summary)` → must-keep check, caps, assembly and the budget ladder.
//!
//! Pure and deterministic: the same conversation, configuration, state and summary give the
//! same output. No Python callable is held: the caller's summarizer runs between `plan` (which
//! returns a [`SummaryRequest`]) and `apply`. Token counts come from a [`Count`] the caller
//! passes (the configured tokenizer).
//!
//! Design note — the ladder. A compaction must end at or under the soft threshold or say
//! `over_budget`; it must never leave an invalid or half-compacted conversation. So each step
//! only runs if the previous one was not enough, in increasing order of what it loses: micro
//! (old tool output becomes placeholders), selective rules (thinking of finished turns, images,
//! long old texts), a summary of the span between the kept head and tail (incremental when an
//! earlier summary exists), then a shorter tail, then the kept head's messages after the task
//! (their facts go into the summary), then fewer of the user's words carried verbatim, then the
//! task shortened to `task_max_tokens` (never removed), then the last block shortened (the
//! arguments of calls that ran, tool output, the assistant's own text: `last_block.rs`), then a
//! shorter summary (the truncation summary), a shorter narrative and none but its continuation
//! floor (the last unresolved error, the next open to-do items), then the ledger's entries in
//! their eviction order, and last that floor (`apply.rs`). Only when even that is above the
//! soft threshold is the result `over_budget`, with the parts that did not fit named
//! (`over_budget.rs`). Each step cuts no more than it must.

mod apply;
mod assemble;
pub mod draft;
mod in_task;
mod last_block;
mod malformed;
pub mod micro;
pub mod output;
mod over_budget;
mod plan;
mod provider_compaction;
pub mod repair;
mod repair_responses;
mod request;
mod shape;
mod shorten;
pub mod superseded;

pub use assemble::Outcome;
pub use draft::{Count, Slot};
pub use output::{
    join_system_text, Change, Origin, OutBlock, OutMsg, RecordEntry, Strategy, SummarySource,
    SystemPrompt,
};
pub use plan::{plan, PlanError, Planned};
pub use request::SummaryRequest;

use crate::tokens::counter::Framing;
use crate::validate::Profile;

pub use crate::summary::SUMMARY_MARKER;

/// Whether a text is a summary message written by a compaction.
pub fn is_summary_text(text: &str) -> bool {
    text.trim_start().starts_with(SUMMARY_MARKER)
}

/// Item types of selective rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    ToolResults,
    Thinking,
    Images,
    AssistantText,
    UserText,
}

impl Item {
    pub fn parse(s: &str) -> Option<Item> {
        Some(match s {
            "tool_results" => Item::ToolResults,
            "thinking" => Item::Thinking,
            "images" => Item::Images,
            "assistant_text" => Item::AssistantText,
            "user_text" => Item::UserText,
            _ => return None,
        })
    }
}

/// Actions of selective rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Placeholder,
    Drop,
    HeadTail,
    Never,
}

impl Action {
    pub fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "placeholder" => Action::Placeholder,
            "drop" => Action::Drop,
            "head_tail" => Action::HeadTail,
            "never" => Action::Never,
            _ => return None,
        })
    }
}

/// What `plan` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Whatever the thresholds call for (`compact()`).
    Auto,
    /// Micro-compaction only, whatever the thresholds (`micro_compact()`).
    Micro,
    /// Ignore the thresholds: the `/compact` command (`compact(force=True)`).
    Force,
}

/// The configuration the planner reads (thresholds already in calibrated tokens).
#[derive(Clone, Debug)]
pub struct PlanConfig {
    pub soft: usize,
    pub hard: usize,
    /// The model's window (`max_context_tokens`), 0 when unknown. A context the ladder cannot
    /// bring within the hard threshold still gives up narrative and ledger entries to stay
    /// within this (invariant 5 is unchanged: it is `over_budget` either way).
    pub window: usize,
    pub target: usize,
    pub micro_threshold: usize,
    pub keep_first_messages: usize,
    /// The task (first user message) is shortened to this at most when it does not fit; never
    /// removed.
    pub task_max_tokens: usize,
    pub keep_recent_messages: usize,
    pub keep_recent_tokens: Option<usize>,
    pub keep_recent_tool_results: usize,
    pub max_tool_arg_chars: usize,
    pub protected_tools: Vec<String>,
    pub clear_at_least_tokens: usize,
    /// Micro-compaction also clears reads a later call superseded (`supersede_reads`).
    pub supersede_reads: bool,
    /// A micro pass must free at least this share of the tokens from its first edit to the end
    /// (what the provider's cache writes again); 0: only `clear_at_least_tokens`.
    pub micro_min_gain_ratio: f64,
    /// The ladder cuts the kept tail's tool output down to the target (not just under the soft
    /// threshold): one prefix break buys room for the next calls (`cache_aware_cuts`).
    pub cache_aware_cuts: bool,
    pub offload_dir: Option<String>,
    /// Placeholders, cut arguments and summaries name a recall id of their original
    /// ([`crate::recall`]); the originals come back in the outcome's `recalls`.
    pub recall: bool,
    pub selective_rules: Vec<(Item, Action, i64)>,
    pub summary_max_tokens: usize,
    /// The summary's cap after the growth bound (`summary_token_limit`): the body of a summary
    /// is capped to it, the request asks for at most it.
    pub summary_cap: usize,
    /// Put the summary in the system prompt (`summary_role="system"`).
    pub summary_in_system: bool,
    /// The ledger's user words (0: the section is off).
    pub user_messages_budget_tokens: usize,
    /// The ledger's preserved details and artifact trail (0: the sections are off).
    pub details_budget_tokens: usize,
    pub summarizer_max_input_tokens: Option<usize>,
    pub transcript_item_max_chars: usize,
    pub min_savings_ratio: f64,
    /// After a compaction that ended over the soft threshold, the growth (calibrated tokens)
    /// before the next one is due below the hard threshold (`retry_growth_tokens`; 0: none).
    pub retry_growth: usize,
    /// The state's hold: below this many (calibrated) tokens and the hard threshold, an
    /// automatic compaction is not due (an earlier one could not get under the soft threshold).
    pub held_until: Option<usize>,
    /// The state's due point (`target_ratio = "auto"`): from this many (calibrated) tokens an
    /// automatic compaction is due even below the soft threshold.
    pub due_at: Option<usize>,
    pub repair: bool,
    pub profile: Option<Profile>,
    pub framing: Framing,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            soft: 96_000,
            hard: 120_000,
            window: 0,
            target: 60_000,
            micro_threshold: 60_000,
            keep_first_messages: 1,
            task_max_tokens: 2_000,
            keep_recent_messages: 6,
            keep_recent_tokens: None,
            keep_recent_tool_results: 4,
            max_tool_arg_chars: 500,
            protected_tools: Vec::new(),
            clear_at_least_tokens: 2_000,
            supersede_reads: false,
            micro_min_gain_ratio: 0.5,
            cache_aware_cuts: true,
            offload_dir: None,
            recall: false,
            selective_rules: vec![
                (Item::ToolResults, Action::Placeholder, 10),
                (Item::Thinking, Action::Drop, 20),
                (Item::Images, Action::Placeholder, 20),
                (Item::AssistantText, Action::HeadTail, 30),
                (Item::UserText, Action::Never, 50),
            ],
            summary_max_tokens: 2_000,
            summary_cap: 2_000,
            summary_in_system: false,
            user_messages_budget_tokens: 2_000,
            details_budget_tokens: 1_500,
            summarizer_max_input_tokens: None,
            transcript_item_max_chars: 2_000,
            min_savings_ratio: 0.1,
            retry_growth: 0,
            held_until: None,
            due_at: None,
            repair: true,
            profile: None,
            framing: Framing::default(),
        }
    }
}

impl PlanConfig {
    /// A configuration for a window of `budget` tokens with the default ratios.
    pub fn for_budget(budget: usize) -> Self {
        PlanConfig {
            soft: budget * 8 / 10,
            hard: budget,
            target: budget / 2,
            micro_threshold: budget / 2,
            task_max_tokens: (budget / 4).min(2_000),
            user_messages_budget_tokens: 2_000,
            details_budget_tokens: (budget / 2).clamp(64, 1_500),
            ..PlanConfig::default()
        }
    }
}

#[cfg(test)]
mod tests;

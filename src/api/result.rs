//! `CompactResult` and what it holds: where each output message came from, the record of what
//! happened to each input message, the strategy.

use serde_json::Value;

/// Where an output message came from, so a host with its own message type maps the result back
/// without reading the JSON: `Kept(i)` is the host's message `i` as it was.
///
/// ```
/// use context_compactor::MessageOrigin;
/// let origins = [MessageOrigin::Kept(0), MessageOrigin::Summary, MessageOrigin::Kept(7)];
/// let kept: Vec<usize> = origins.iter().filter_map(|o| o.kept()).collect();
/// assert_eq!(kept, [0, 7]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageOrigin {
    /// Input message `i`, unchanged (its value was moved into the output, not re-serialised).
    Kept(usize),
    /// A copy of input message `i` with blocks cleared, cut or dropped.
    Edited(usize),
    /// The summary message this compaction wrote.
    Summary,
    /// A message the compactor inserted (a repair, a filler the provider's shape needs).
    Inserted,
}

impl MessageOrigin {
    /// The input index of a kept message.
    ///
    /// ```
    /// assert_eq!(context_compactor::MessageOrigin::Edited(3).kept(), None);
    /// ```
    pub fn kept(self) -> Option<usize> {
        match self {
            MessageOrigin::Kept(i) => Some(i),
            MessageOrigin::Edited(_) | MessageOrigin::Summary | MessageOrigin::Inserted => None,
        }
    }

    /// The input index a kept or edited message comes from.
    ///
    /// ```
    /// assert_eq!(context_compactor::MessageOrigin::Edited(3).source(), Some(3));
    /// ```
    pub fn source(self) -> Option<usize> {
        match self {
            MessageOrigin::Kept(i) | MessageOrigin::Edited(i) => Some(i),
            MessageOrigin::Summary | MessageOrigin::Inserted => None,
        }
    }

    /// `"kept"`, `"edited"`, `"summary"` or `"inserted"` (the Python API's names).
    ///
    /// ```
    /// assert_eq!(context_compactor::MessageOrigin::Summary.as_str(), "summary");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            MessageOrigin::Kept(_) => "kept",
            MessageOrigin::Edited(_) => "edited",
            MessageOrigin::Summary => "summary",
            MessageOrigin::Inserted => "inserted",
        }
    }

    pub(crate) fn of(o: crate::planner::Origin) -> Self {
        match o {
            crate::planner::Origin::Kept(i) => MessageOrigin::Kept(i),
            crate::planner::Origin::Edited(i) => MessageOrigin::Edited(i),
            crate::planner::Origin::Summary => MessageOrigin::Summary,
            crate::planner::Origin::Inserted => MessageOrigin::Inserted,
        }
    }
}

pub use crate::planner::Strategy;

/// What a compaction did to one input message (nothing is lost silently).
///
/// ```
/// use context_compactor::RecordEntry;
/// fn replaced(record: &[RecordEntry]) -> Vec<usize> {
///     record.iter().filter(|r| r.action == "summarized").map(|r| r.index).collect()
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordEntry {
    /// The input message's index.
    pub index: usize,
    /// `summarized`, `cleared`, `args_cut`, `thinking_dropped`, `image_removed`, `text_cut`,
    /// `shortened`, `truncated`, `repaired` or `dropped`.
    pub action: &'static str,
    /// Readable detail (a tool name, sizes).
    pub detail: String,
}

/// The outcome of a compaction: the conversation to send now and what happened.
///
/// Kept messages are the input values themselves, moved (`origins` says which); edited and new
/// ones are new values. With `summary_role = "system"` on Anthropic the summary is in `system`.
///
/// ```
/// use context_compactor::{Compactor, MessageOrigin, Options};
/// use serde_json::json;
///
/// let messages = vec![json!({"role": "user", "content": "hello"})];
/// let result = Compactor::default().compact(messages, &Options::new()).unwrap();
/// assert!(!result.compacted());
/// assert_eq!(result.origins, [MessageOrigin::Kept(0)]);
/// assert_eq!(result.messages[0]["content"], "hello");
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CompactResult {
    /// The conversation to send now.
    pub messages: Vec<Value>,
    /// Where each of `messages` came from, in order.
    pub origins: Vec<MessageOrigin>,
    /// The system prompt to send (the one given, with our summary in it under
    /// `summary_role = "system"`).
    pub system: Option<Value>,
    /// The summary message's text, if a summary was made.
    pub summary: Option<String>,
    /// `"llm"` (the summarizer), `"rule"` (the built-in rule summary) or `None`.
    pub summary_source: Option<&'static str>,
    /// The strongest step applied.
    pub strategy: Strategy,
    /// Tokens before (calibrated with a state).
    pub tokens_before: usize,
    /// Tokens after.
    pub tokens_after: usize,
    /// Input messages.
    pub original_count: usize,
    /// Input messages still present (kept or edited).
    pub retained_count: usize,
    /// Input messages replaced or removed.
    pub compacted_count: usize,
    /// What the `on_before_compact` hook reported with [`Preview::flushed`](crate::Preview::flushed).
    pub flushed_memories: usize,
    /// Why a fallback ran (the summarizer's failure, or the summary replaced to fit).
    pub fallback_reason: Option<String>,
    /// Still above the soft threshold; `over_budget_reason` says what did not fit.
    pub over_budget: bool,
    /// What did not fit, when `over_budget`.
    pub over_budget_reason: Option<String>,
    /// Why nothing (more) was done, when so.
    pub reason: Option<String>,
    /// Repairs made to invalid input, in words.
    pub repairs: Vec<String>,
    /// One entry per replaced or edited input message.
    pub record: Vec<RecordEntry>,
    /// `(phase, tokens after it)` for each step that ran.
    pub phases: Vec<(&'static str, usize)>,
    /// Must-keep facts that did not fit in the summary.
    pub must_keep_missing: Vec<String>,
    /// The must-keep facts of the replaced span.
    pub must_keep: Vec<String>,
    /// The summary was cut to its cap.
    pub summary_truncated: bool,
    /// The conversation's language (`"en"` or `"zh"`).
    pub language: &'static str,
    /// The target the compaction aimed at, as a share of the budget (with `target_ratio =
    /// "auto"`, the one chosen for this conversation now); `None` when no plan was made
    /// (micro-compaction only, a veto).
    pub target_ratio: Option<f64>,
}

impl CompactResult {
    /// Whether a compaction step ran (`strategy != None`).
    ///
    /// ```
    /// assert!(!context_compactor::CompactResult::default().compacted());
    /// ```
    pub fn compacted(&self) -> bool {
        self.strategy != Strategy::None
    }

    /// `tokens_before - tokens_after` (0 if it grew).
    ///
    /// ```
    /// assert_eq!(context_compactor::CompactResult::default().saved_tokens(), 0);
    /// ```
    pub fn saved_tokens(&self) -> usize {
        self.tokens_before.saturating_sub(self.tokens_after)
    }
}

//! How each message of a compacted conversation is built from the input.
//!
//! The planner never builds wire messages itself: it says, for each output message, whether
//! it is an input message unchanged (`Keep`, returned as the *same* object), a copy of an input
//! message with some blocks dropped, reordered or edited (`Rebuild`, a new object that keeps the
//! message's other fields such as `name` or `cache_control`), or a new message (`New`). The
//! Python boundary renders these in the conversation's wire format.

use crate::message::Role;

/// One block of a rebuilt or new message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutBlock {
    /// Block `block` of input message `msg`, unchanged (the same object where the format has
    /// block objects) or with its text replaced by `edit` (a result's content, a call's
    /// arguments, a text block's text; an image becomes a text block).
    Orig {
        msg: usize,
        block: usize,
        edit: Option<String>,
    },
    /// A new text block.
    Text(String),
    /// A new tool result for call `id` (a synthetic "no result was recorded").
    Result {
        id: Option<String>,
        name: Option<String>,
        text: String,
        is_error: bool,
    },
}

/// One message of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutMsg {
    /// Input message `i`, the same object.
    Keep(usize),
    /// A copy of input message `from` whose content (and calls) are `blocks`.
    Rebuild { from: usize, blocks: Vec<OutBlock> },
    /// A new message.
    New { role: Role, blocks: Vec<OutBlock> },
}

impl OutMsg {
    /// The input message this one comes from (for `Keep` and `Rebuild`).
    pub fn source(&self) -> Option<usize> {
        match self {
            OutMsg::Keep(i) | OutMsg::Rebuild { from: i, .. } => Some(*i),
            OutMsg::New { .. } => None,
        }
    }

    pub fn is_keep(&self) -> bool {
        matches!(self, OutMsg::Keep(_))
    }
}

/// What happened to an input message (DESIGN, Invariant 6: nothing is lost silently).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    /// Index of the input message.
    pub index: usize,
    pub action: Change,
    /// Readable detail (tool name, sizes).
    pub detail: String,
}

/// What a compaction did to an input message (a [`RecordEntry`]'s action).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// Replaced by the summary.
    Summarized,
    /// Tool output replaced by a placeholder (micro or selective).
    Cleared,
    /// Long tool-call arguments cut to head + tail.
    ArgsCut,
    /// Thinking of a finished turn dropped (selective).
    ThinkingDropped,
    /// An image replaced by a placeholder (selective).
    ImageRemoved,
    /// Old assistant text cut to head + tail (selective).
    TextCut,
    /// Cut head + tail by the budget ladder to fit the window: the task at `task_max_tokens`,
    /// a tool result of the last block.
    Shortened,
    /// Removed by the budget ladder (a kept-head message after the task, a tail message);
    /// its must-keep facts are carried by the summary.
    Truncated,
    /// Rewritten by the repair pass (invalid input).
    Repaired,
    /// Removed by the repair pass (invalid input).
    Dropped,
}

impl Change {
    /// The name the Python API shows (`RecordEntry.action`).
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Summarized => "summarized",
            Change::Cleared => "cleared",
            Change::ArgsCut => "args_cut",
            Change::ThinkingDropped => "thinking_dropped",
            Change::ImageRemoved => "image_removed",
            Change::TextCut => "text_cut",
            Change::Shortened => "shortened",
            Change::Truncated => "truncated",
            Change::Repaired => "repaired",
            Change::Dropped => "dropped",
        }
    }
}

/// The strongest step a compaction applied, ranked `None < Micro < Selective < Truncation <
/// RuleSummary < Summary` (DESIGN; `phases` and `record` show the rest). Public as
/// `context_compactor::Strategy`.
///
/// ```
/// use context_compactor::Strategy;
/// assert!(Strategy::Summary > Strategy::Micro);
/// assert_eq!(Strategy::RuleSummary.as_str(), "rule_summary");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// Nothing was compacted.
    #[default]
    None,
    /// Old tool output became placeholders; long arguments were cut.
    Micro,
    /// The selective rules ran (thinking of finished turns, images, long old texts).
    Selective,
    /// Messages were dropped or shortened to fit, without a summary.
    Truncation,
    /// The built-in rule summary (no summarizer, a fallback, or cool-down).
    RuleSummary,
    /// The summarizer wrote the summary.
    Summary,
}

impl Strategy {
    /// The Python API's name (`CompactResult.strategy`: `"none"`, `"micro"`, ..., `"summary"`).
    ///
    /// ```
    /// assert_eq!(context_compactor::Strategy::None.as_str(), "none");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Micro => "micro",
            Strategy::Selective => "selective",
            Strategy::Truncation => "truncation",
            Strategy::RuleSummary => "rule_summary",
            Strategy::Summary => "summary",
        }
    }

    /// Raise to `other` if that step is stronger.
    pub fn raise(&mut self, other: Strategy) {
        *self = (*self).max(other);
    }
}

/// Where an output message came from (`CompactResult.origins`): what a `Session` stores
/// instead of guessing from the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Input message `i`, the same object.
    Kept(usize),
    /// A copy of input message `i` with blocks edited, dropped or cut.
    Edited(usize),
    /// The summary message this compaction wrote.
    Summary,
    /// A message the compactor inserted (a repair, a filler for the provider's shape).
    Inserted,
}

impl Origin {
    /// The kind the Python API shows and the input index, if any.
    pub fn parts(self) -> (&'static str, Option<usize>) {
        match self {
            Origin::Kept(i) => ("kept", Some(i)),
            Origin::Edited(i) => ("edited", Some(i)),
            Origin::Summary => ("summary", None),
            Origin::Inserted => ("inserted", None),
        }
    }
}

/// Who wrote a summary (`CompactResult.summary_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummarySource {
    /// The caller's summarizer.
    Llm,
    /// The built-in rule (or truncation) summary.
    Rule,
}

impl SummarySource {
    pub fn as_str(self) -> &'static str {
        match self {
            SummarySource::Llm => "llm",
            SummarySource::Rule => "rule",
        }
    }
}

/// A record entry for a message the ladder removed.
pub(super) fn truncated(index: usize, detail: &str) -> RecordEntry {
    RecordEntry {
        index,
        action: Change::Truncated,
        detail: detail.to_owned(),
    }
}

/// The separate system prompt (Anthropic `system`) as the boundary returns it with a
/// `summary_role="system"` summary added: the planner counts exactly that request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SystemPrompt {
    /// None: the summary becomes the system prompt (a string).
    #[default]
    Absent,
    /// A string: the summary follows it after a blank line, in the same string
    /// ([`join_system_text`]).
    Text(String),
    /// A list of blocks: the summary is one more text block. `empty`: the list has no text.
    Blocks { empty: bool },
}

/// A string system prompt with a summary added (how the boundary returns it).
pub fn join_system_text(system: &str, summary: &str) -> String {
    format!("{system}\n\n{summary}")
}

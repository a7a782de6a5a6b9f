//! The vocabulary of validation, shared by the common rules (`super`) and each format's own
//! checks (`crate::formats::*`): which provider's rules to check ([`Profile`]), the stable rule
//! names ([`rule`]) and one rejection ([`Problem`]). A leaf: it depends on nothing but the
//! message model's `Format`, so a format's module can use it without depending on the
//! validator that calls it.

use crate::message::Format;
use std::fmt;

/// Which provider's rules to check: a format's own (its name), or one of the two profiles that
/// add rules to a format's (`strict`, `responses_stateless`). A new format is a new profile
/// with no change here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// The format's rules (`"openai"`, `"anthropic"`, `"responses"`, `"gemini"`, ...).
    Format(Format),
    /// The format's rules plus strict user/assistant alternation and system messages only
    /// first (some local chat templates need both).
    Strict,
    /// Responses with `store=false`: no item references, reasoning with its encrypted content.
    ResponsesStateless,
}

impl Profile {
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "strict" => Some(Profile::Strict),
            "responses_stateless" => Some(Profile::ResponsesStateless),
            _ => Format::parse(s).map(Profile::Format),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Format(format) => format.name(),
            Profile::Strict => "strict",
            Profile::ResponsesStateless => "responses_stateless",
        }
    }

    pub fn for_format(format: Format) -> Profile {
        Profile::Format(format)
    }

    /// Every profile's name, as `parse` takes them and `_core.PROFILES` lists them: the
    /// formats' (`Format::ALL`), then `strict` and `responses_stateless`.
    pub fn names() -> Vec<&'static str> {
        Format::ALL
            .iter()
            .map(|f| f.name())
            .chain(["strict", "responses_stateless"])
            .collect()
    }
}

/// The rules, by stable name.
pub mod rule {
    /// A role the format does not have (Anthropic: anything but user/assistant).
    pub const INVALID_ROLE: &str = "invalid_role";
    /// Anthropic (and strict): the first message must be from the user.
    pub const FIRST_NOT_USER: &str = "first_not_user";
    /// A tool result whose call appears nowhere before it.
    pub const ORPHAN_TOOL_RESULT: &str = "orphan_tool_result";
    /// A tool result whose call exists but not right before it.
    pub const RESULT_NOT_ADJACENT: &str = "result_not_adjacent";
    /// A call with no result before the conversation goes on (a trailing call may wait).
    pub const MISSING_TOOL_RESULT: &str = "missing_tool_result";
    /// Two calls with one id.
    pub const DUPLICATE_TOOL_CALL_ID: &str = "duplicate_tool_call_id";
    /// Two results for one call.
    pub const DUPLICATE_TOOL_RESULT: &str = "duplicate_tool_result";
    /// A tool call in a message that is not the assistant's.
    pub const MISPLACED_TOOL_CALL: &str = "misplaced_tool_call";
    /// A tool result in an assistant message.
    pub const MISPLACED_TOOL_RESULT: &str = "misplaced_tool_result";
    /// Anthropic: `tool_result` blocks must come before any other block of their message.
    pub const TOOL_RESULT_NOT_FIRST: &str = "tool_result_not_first";
    /// Anthropic: thinking blocks must open the assistant message.
    pub const THINKING_NOT_FIRST: &str = "thinking_not_first";
    /// Anthropic: empty content (allowed only for a final assistant prefill).
    pub const EMPTY_CONTENT: &str = "empty_content";
    /// Strict: user and assistant must alternate.
    pub const NOT_ALTERNATING: &str = "not_alternating";
    /// Strict: system/developer messages only at the start.
    pub const SYSTEM_NOT_FIRST: &str = "system_not_first";
    /// A content block without a field the provider requires: its `type`, a text block's
    /// `text`, a `tool_use`'s `id`/`name`/`input`, a `tool_result`'s `tool_use_id`, ...
    pub const MALFORMED_BLOCK: &str = "malformed_block";
    /// Responses: an output item whose call is not in the input.
    pub const ORPHAN_OUTPUT: &str = "orphan_output";
    /// Responses: a call item with no output before the conversation goes on.
    pub const MISSING_OUTPUT: &str = "missing_output";
    /// Responses: two call items with one `call_id`.
    pub const DUPLICATE_CALL_ID: &str = "duplicate_call_id";
    /// Responses: a reasoning item not followed by the item it belongs to.
    pub const REASONING_WITHOUT_ITEM: &str = "reasoning_without_item";
    /// Responses under `store=false`: an `item_reference`.
    pub const ITEM_REFERENCE_STATELESS: &str = "item_reference_stateless";
    /// Responses under `store=false`: a reasoning item without its encrypted content.
    pub const REASONING_NOT_STORED: &str = "reasoning_not_stored";
    /// Anthropic: a compaction block that is not the first block of the conversation.
    pub const COMPACTION_BLOCK_MISPLACED: &str = "compaction_block_misplaced";
    /// Anthropic: more than one compaction block with content.
    pub const COMPACTION_BLOCK_AMBIGUOUS: &str = "compaction_block_ambiguous";
}

/// One way in which a request would be rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Index of the offending message (`None` for the request as a whole).
    pub index: Option<usize>,
    /// Stable rule name (see [`rule`]).
    pub rule: &'static str,
    /// Readable explanation.
    pub message: String,
}

impl Problem {
    /// A problem of the message at `index`.
    pub fn at(index: usize, rule: &'static str, message: String) -> Problem {
        Problem {
            index: Some(index),
            rule,
            message,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "message {i}: {} ({})", self.message, self.rule),
            None => write!(f, "{} ({})", self.message, self.rule),
        }
    }
}

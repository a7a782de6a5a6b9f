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
    /// `summarized`, `cleared`, `args_cut`, `thinking_dropped`, `image_removed`, `text_cut`,
    /// `truncated` (dropped by the last-resort trim), `repaired`, `dropped` (repair).
    pub action: &'static str,
    /// Readable detail (tool name, sizes).
    pub detail: String,
}

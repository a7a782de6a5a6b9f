//! The wire formats' own rules in the core: one module per format for what only that format
//! has (its pairing, its structure, the validity rules its provider adds). The common reading
//! of a message is `crate::message`; the binding's readers and writers are
//! `python/extract/<format>.rs` and `python/render/<format>.rs`.
//!
//! Adding a format: `docs/formats.md` "Adding a wire format" (and the doc comment on
//! `crate::message::Format`).

pub mod anthropic_compaction;
pub mod gemini;
pub mod responses;
pub mod value;

use crate::message::{Format, Message};
use crate::validate::problem::{Problem, Profile};

/// A format's own check, run after the rules the message-list formats share:
/// `push(index, rule, text)` for each problem.
pub type Check = fn(&[Message<'_>], &mut dyn FnMut(usize, &'static str, String));

/// A format's own rule set, in place of the shared one.
pub type Validate = fn(&[Message<'_>], Profile) -> Vec<Problem>;

/// Which rules a format's messages follow: what `crate::validate` and the planner's repair
/// dispatch on, so that neither names a format.
#[derive(Clone, Copy)]
pub enum Rules {
    /// A message list (roles, content blocks, tool calls and results in messages): the shared
    /// rules and the shared repair, plus the format's own check if it has one.
    MessageList(Option<Check>),
    /// Typed items with a rule set and a repair of their own (Responses:
    /// `crate::planner::repair_responses`).
    Items(Validate),
}

/// The rules `format` follows (the one place that decides it).
pub fn rules(format: Format) -> Rules {
    match format {
        // Anthropic's own forms (thinking order, prefill, compaction blocks) are part of the
        // shared rules, which grew around them.
        Format::OpenAi | Format::Anthropic => Rules::MessageList(None),
        Format::Gemini => Rules::MessageList(Some(gemini::check)),
        Format::Responses => Rules::Items(responses::validate),
    }
}

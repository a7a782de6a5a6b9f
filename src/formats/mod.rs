//! The wire formats' own rules in the core: one module per format for what only that format
//! has (its pairing, its structure, the validity rules its provider adds, and its reader,
//! written once for both APIs over [`source::Source`]: `gemini/read.rs`, `openai/read.rs`). This file decides,
//! per format, the rules it follows ([`rules`]) and how its messages are read
//! ([`read_message`], [`read_system`], [`after_read`], [`misfit`]), so that neither reader
//! (the Rust API's `value/`, the binding's `python/extract/`) names a format. The writers are
//! `value/write*.rs` and `python/render/<format>.rs`. Messages with a role (Chat Completions,
//! Anthropic, a Responses `message` item) are read by `openai/read.rs`, their content (parts
//! and blocks) by `blocks.rs`; Responses items other than messages are still read by each
//! reader's own code (`value/read_responses.rs`, `python/extract/responses.rs`).
//!
//! Adding a format: `docs/formats.md` "Adding a wire format" (and the doc comment on
//! `crate::message::Format`).

pub mod anthropic_compaction;
pub mod blocks;
pub mod gemini;
pub mod loc;
pub mod openai;
pub mod responses;
pub mod source;
pub mod value;

use crate::message::{Format, Message, Piece};
use crate::validate::problem::{Problem, Profile};
use source::{Shapes, Source};

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

/// Read message `index` when a format with a reader of its own (written once, over
/// [`Source`]) recognises it; `None`: the reader's own message code reads it.
pub fn read_message<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    index: usize,
) -> Result<Option<Message<'a>>, S::Error> {
    if gemini::read::is_gemini(src, obj) {
        return gemini::read::message(src, obj, index).map(Some);
    }
    Ok(None)
}

/// Read the separate system prompt of a conversation in `format`.
pub fn read_system<'a, S: Source<'a>>(
    src: &mut S,
    format: Format,
    v: &S::Node,
) -> Result<Vec<Piece<'a>>, S::Error> {
    match format {
        Format::Gemini => gemini::read::system(src, v),
        Format::OpenAi | Format::Anthropic | Format::Responses => blocks::system(src, v),
    }
}

/// What a format does once the whole list is read (Gemini pairs the calls and responses that
/// carry no id).
pub fn after_read(format: Format, msgs: &mut [Message<'_>]) {
    match format {
        Format::Gemini => gemini::pair_ids(msgs),
        Format::OpenAi | Format::Anthropic | Format::Responses => {}
    }
}

/// Why the forced format does not fit the messages read under it (`None`: it fits): Gemini
/// reads `parts` and the others `content`, so a message of the other shape would be read empty
/// and the compaction would return a different conversation (`compact --format gemini` on an
/// OpenAI file did, and grew it). A role the forced format does not have is not a misfit: the
/// repair rewrites it and lists that in `repairs` (a system message inside an Anthropic list
/// becomes a user message). The readers then name the detected format.
pub fn misfit(forced: Format, shapes: Shapes) -> Option<String> {
    let (dropped, why) = match forced {
        Format::Gemini => (
            shapes.other,
            "Gemini contents are read from `parts`, and these messages have `content`".to_owned(),
        ),
        Format::OpenAi | Format::Anthropic | Format::Responses => (
            shapes.gemini,
            format!("these messages are Gemini contents (`parts`), and {forced} reads `content`"),
        ),
    };
    dropped.then_some(why)
}

//! `Options`: what a call takes besides the messages (the Python API's keyword arguments), and
//! reading the messages with them.

use super::error::{Error, FormatMismatch};
use super::state::ConversationState;
use crate::formats::value::{ReadOutcome, Reader};
use crate::message::Conversation;
use crate::tokens::counter::{Framing, Tokenizer};
use crate::Format;
use serde_json::Value;

/// What a call takes besides the messages: the separate system prompt and tool definitions, a
/// forced format, the conversation's state, and for compaction `force`, `instructions` and
/// pinned messages. Built with its methods from [`Options::new`].
///
/// ```
/// use context_compactor::{ConversationState, Format, Options};
/// use serde_json::json;
///
/// let system = json!("You are a careful assistant.");
/// let tools = vec![json!({"name": "read_file", "input_schema": {"type": "object"}})];
/// let state = ConversationState::new();
/// let opts = Options::new()
///     .system(&system)
///     .tools(&tools)
///     .format(Format::Anthropic)
///     .state(&state)
///     .force(true)
///     .instructions("Keep the file names.")
///     .pinned(&[3]);
/// # let _ = opts;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Options<'a> {
    pub(crate) system: Option<&'a Value>,
    pub(crate) tools: &'a [Value],
    pub(crate) format: Option<Format>,
    pub(crate) state: Option<&'a ConversationState>,
    pub(crate) force: bool,
    pub(crate) instructions: Option<&'a str>,
    pub(crate) pinned: &'a [usize],
}

impl<'a> Options<'a> {
    /// No system prompt, no tools, the format detected, no state.
    ///
    /// ```
    /// let _ = context_compactor::Options::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The separate system prompt (Anthropic's `system`: a string or text blocks; Gemini's
    /// `system_instruction`). Counted; with `summary_role = "system"` the summary goes there.
    ///
    /// ```
    /// let system = serde_json::json!([{"type": "text", "text": "Be brief."}]);
    /// let _ = context_compactor::Options::new().system(&system);
    /// ```
    pub fn system(mut self, system: &'a Value) -> Self {
        self.system = Some(system);
        self
    }

    /// The tool definitions (counted).
    ///
    /// ```
    /// let tools = vec![serde_json::json!({"type": "function", "function": {"name": "ls"}})];
    /// let _ = context_compactor::Options::new().tools(&tools);
    /// ```
    pub fn tools(mut self, tools: &'a [Value]) -> Self {
        self.tools = tools;
        self
    }

    /// Read the messages as this format instead of detecting it.
    ///
    /// ```
    /// let _ = context_compactor::Options::new().format(context_compactor::Format::Responses);
    /// ```
    pub fn format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// The conversation's state (counts cached, calibration, cool-down).
    ///
    /// ```
    /// let state = context_compactor::ConversationState::new();
    /// let _ = context_compactor::Options::new().state(&state);
    /// ```
    pub fn state(mut self, state: &'a ConversationState) -> Self {
        self.state = Some(state);
        self
    }

    /// Compact whatever the thresholds say (the `/compact` command).
    ///
    /// ```
    /// let _ = context_compactor::Options::new().force(true);
    /// ```
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// What the summary should focus on (`/compact <instructions>`).
    ///
    /// ```
    /// let _ = context_compactor::Options::new().instructions("the open bugs");
    /// ```
    pub fn instructions(mut self, instructions: &'a str) -> Self {
        self.instructions = Some(instructions);
        self
    }

    /// Indices of messages to keep whatever happens (with their whole tool block).
    ///
    /// ```
    /// let _ = context_compactor::Options::new().pinned(&[0, 5]);
    /// ```
    pub fn pinned(mut self, pinned: &'a [usize]) -> Self {
        self.pinned = pinned;
        self
    }
}

/// Read `messages` (and the options' system prompt and tools) into the core's view.
pub(crate) fn read<'a>(
    messages: &'a [Value],
    opts: &Options<'a>,
    refuse_misfit: bool,
) -> Result<Conversation<'a>, Error> {
    Ok(read_with(Reader::default(), messages, opts, refuse_misfit)?.0)
}

/// [`read`], each message counted with `tok` and `framing` as it is read (on the pool, in
/// blocks, for a long conversation): the view and each message's tokens. `keep`: whether the
/// view keeps the messages (`false` for a count: its messages are then empty).
pub(crate) fn read_counted<'a>(
    messages: &'a [Value],
    opts: &Options<'a>,
    refuse_misfit: bool,
    (tok, framing): (Tokenizer, Framing),
    keep: bool,
) -> Result<(Conversation<'a>, Vec<usize>), Error> {
    let reader = Reader::default().counting(tok, framing, keep);
    read_with(reader, messages, opts, refuse_misfit)
}

fn read_with<'a>(
    reader: Reader,
    messages: &'a [Value],
    opts: &Options<'a>,
    refuse_misfit: bool,
) -> Result<(Conversation<'a>, Vec<usize>), Error> {
    let tools = (!opts.tools.is_empty()).then_some(opts.tools);
    match reader.conversation_counted(messages, opts.format, opts.system, tools, refuse_misfit)? {
        (ReadOutcome::Read(c), counts) => Ok((c, counts)),
        (ReadOutcome::Misfit(forced, m), _) => Err(Error::FormatMismatch(FormatMismatch {
            forced,
            detected: m.detected,
            why: m.why,
        })),
    }
}

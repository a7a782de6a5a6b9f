//! The light view of a conversation that every other part of the core reads.
//!
//! Design note: the Python boundary walks each message in place (dict items or SDK object
//! attributes) and records only what the core needs: the role, the kind of each block, the
//! text that counts towards the prompt (borrowed, see `text.rs`), tool-call and tool-result
//! ids, tool names, and flags. Measured on the corpus this walk costs ≈0.27 µs a message, where
//! converting whole messages with pythonize costs ≈6 µs and `json.dumps` + serde 14–30 µs; and
//! messages that go back unchanged are never copied at all. Both wire formats map onto the same
//! view: an OpenAI `tool` message becomes one `ToolResult` block, `tool_calls[i]` become
//! `ToolCall` blocks after the message's text.

use crate::text::Text;
use std::fmt;

/// Wire format of a message list.
///
/// Adding a format (the checklist is `docs/formats.md`, "Adding a wire format"): its own
/// modules (`formats/<name>/` for its structure, validity rules and reader, the reader written
/// once for both APIs over `formats::source::Source`; the writers `python/render/<name>.rs`
/// and `formats/value/write/<name>.rs`; the shell's `_io_<name>.py`), a variant here, and then
/// every place the compiler lists: no `match` on a `Format` has a catch-all arm (`_`,
/// `Some(_)`, a binding), and the places that dispatch on the format do it with a `match`, so
/// the new variant is a compile error wherever a decision is needed. They are this file
/// (`name`, `parse`, `ALL`, the facts, `FormatHints` and its `detect`), `formats/mod.rs`
/// (`rules`: which rules and repair the format follows; `read_message`, `read_system`,
/// `after_read` and `misfit`: how its messages are read, for both readers),
/// `python/render/mod.rs` and `formats/value/write/mod.rs` (the dispatch to the writers). The
/// Python shell spells the names once, in `_core.pyi` (`_Format`), and reads them at run time
/// from `_core.FORMATS` (`ALL`); `io.py` lists the formats with a request shape of their own.
/// `tests/test_format_route.py` counts these places.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses items (see `crate::formats::responses`).
    Responses,
    /// Gemini `contents` (`google-genai`): roles `user`/`model`, `parts`.
    Gemini,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Responses => "responses",
            Format::Gemini => "gemini",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "openai" => Some(Format::OpenAi),
            "anthropic" => Some(Format::Anthropic),
            "responses" => Some(Format::Responses),
            "gemini" => Some(Format::Gemini),
            _ => None,
        }
    }
}

impl Format {
    /// Tool results are blocks of user messages, the user speaks first and no message may be
    /// empty (Anthropic `tool_result` blocks, Gemini `function_response` parts).
    pub fn results_in_user_messages(self) -> bool {
        match self {
            Format::Anthropic | Format::Gemini => true,
            Format::OpenAi | Format::Responses => false,
        }
    }

    /// Whether the format's message list may hold a message with `role` (Anthropic and Gemini:
    /// only the user's and the assistant's; the system prompt is separate).
    pub fn has_role(self, role: Role) -> bool {
        match self {
            Format::Anthropic | Format::Gemini => matches!(role, Role::User | Role::Assistant),
            Format::OpenAi | Format::Responses => role != Role::Other,
        }
    }

    /// The role of a summary written with `summary_role="system"` (or `"developer"`): Gemini
    /// has no system role in `contents`, so the summary is the user's there; Responses takes a
    /// developer message item.
    pub fn summary_system_role(self) -> Role {
        match self {
            Format::Gemini => Role::User,
            Format::Responses => Role::Developer,
            Format::OpenAi | Format::Anthropic => Role::System,
        }
    }

    /// A function-call turn must come right after a user turn (Gemini's rule; the repair
    /// inserts a user turn where it does not, see `crate::formats::gemini::rule`).
    pub fn calls_follow_user_turn(self) -> bool {
        match self {
            Format::Gemini => true,
            Format::OpenAi | Format::Anthropic | Format::Responses => false,
        }
    }

    /// Every format, in the order `parse` and the Python `_core.FORMATS` list them.
    pub const ALL: [Format; 4] = [
        Format::OpenAi,
        Format::Anthropic,
        Format::Responses,
        Format::Gemini,
    ];
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The text of the synthetic result the repair pass gives a call that never got one. A call
/// with no result is not a failure: readers of tool output (continuation's last unresolved
/// error) skip it. Here, not in the planner, so that every part of the core can name it.
pub const NO_RESULT: &str = "(no result was recorded for this tool call)";

/// Whether a tool result's text is the repair pass's synthetic [`NO_RESULT`].
pub fn is_no_result(text: &str) -> bool {
    text.trim() == NO_RESULT
}

/// A message's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    /// OpenAI `tool` (a tool result).
    Tool,
    /// OpenAI legacy `function` (a result of a legacy `function_call`).
    Function,
    /// Any other string: reported by validation, never an exception.
    Other,
}

impl Role {
    pub fn parse(s: &str) -> Role {
        match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => Role::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
            Role::Other => "other",
        }
    }

    /// System and developer messages: instructions that are never compacted.
    pub fn is_instruction(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// The kind of a content block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// Text (`text`, `input_text`, or a plain string content).
    Text,
    /// OpenAI `refusal` part.
    Refusal,
    /// An image (`image_url`, Anthropic `image`).
    Image,
    /// Audio input (`input_audio`).
    Audio,
    /// A file or document (`file`, Anthropic `document`).
    Document,
    /// A tool call (`tool_calls[i]`, legacy `function_call`, Anthropic `tool_use`).
    ToolCall,
    /// A tool result (OpenAI `tool`/`function` message, Anthropic `tool_result`).
    ToolResult,
    /// Anthropic `thinking`.
    Thinking,
    /// Anthropic `redacted_thinking`.
    RedactedThinking,
    /// Any other block type (server-tool blocks, future types): passed through, counted as text.
    Other,
    /// A Responses `reasoning` item: opaque, kept byte-identical with the item that follows it.
    Reasoning,
    /// A provider's compaction output (a Responses `compaction` item): an earlier summary,
    /// never split, edited or re-summarised.
    Compaction,
}

impl BlockKind {
    pub fn is_thinking(self) -> bool {
        matches!(self, BlockKind::Thinking | BlockKind::RedactedThinking)
    }
}

/// Where a block sits in the wire message, so that an edited copy can be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Origin {
    /// The message's `content` string.
    #[default]
    Content,
    /// `content[k]` (an OpenAI part or an Anthropic block).
    Part(usize),
    /// OpenAI assistant `refusal` field.
    Refusal,
    /// OpenAI `tool_calls[k]`.
    Call(usize),
    /// OpenAI legacy `function_call`.
    FunctionCall,
    /// The whole message (an OpenAI `tool`/`function` result message).
    Whole,
    /// A whole Responses item other than a `message` (a call, an output, reasoning, ...).
    Item,
}

/// A piece of text that counts towards the prompt: borrowed from the caller, or built by the
/// boundary where the wire value is not a string (an Anthropic `tool_use.input` object).
#[derive(Clone, Debug)]
pub enum Piece<'a> {
    Borrowed(Text<'a>),
    Owned(String),
}

impl Piece<'_> {
    pub fn text(&self) -> Text<'_> {
        match self {
            Piece::Borrowed(t) => *t,
            Piece::Owned(s) => Text::Utf8(s),
        }
    }
}

impl<'a> From<&'a str> for Piece<'a> {
    fn from(s: &'a str) -> Self {
        Piece::Borrowed(Text::Utf8(s))
    }
}

/// One content block of a message.
#[derive(Clone, Debug)]
pub struct Block<'a> {
    pub kind: BlockKind,
    /// The block's counted text: the text of a text block; a call's arguments; a result's
    /// text parts; the thinking text; every string inside an unknown block.
    pub texts: Vec<Piece<'a>>,
    /// Tool-call id (`ToolCall`) or the id a result answers (`ToolResult`). `None` for the
    /// legacy OpenAI `function_call` / `function` pair, which is matched by position.
    pub id: Option<String>,
    /// Tool name of a call (or of a legacy `function` result).
    pub name: Option<String>,
    /// Images inside a tool result's content (or 1 for an image block).
    pub images: u32,
    /// The images among `images` whose size was read from their data (in order; the others
    /// count `image_tokens` each, see [`crate::image::images_tokens`]).
    pub image_sizes: Vec<crate::image::SizedImage>,
    /// Anthropic `tool_result.is_error`.
    pub is_error: bool,
    /// Where the block sits in the wire message.
    pub origin: Origin,
    /// A field the provider requires that this block lacks (`"type"`, `"text"`, `"id"`, ...).
    /// Validation reports it (`malformed_block`); the repair pass drops the block, or makes a
    /// type-less block with a `text` a text block. A malformed call or result is read as an
    /// `Other` block, so that nothing pairs with it.
    pub malformed: Option<&'static str>,
    /// The block's wire value must come back byte-identical (a reasoning or compaction item,
    /// an unknown item, an output whose wire shape holds no plain text): never edited or
    /// dropped on its own.
    pub opaque: bool,
    /// The item only resolves from a response the provider stored: an `item_reference`, or a
    /// reasoning item with an `id` and no `encrypted_content` (see `crate::formats::responses`).
    pub needs_store: bool,
    /// Carries an opaque signature that must go back with it unchanged (a Gemini part's
    /// `thought_signature`): never edited or dropped alone.
    pub signed: bool,
}

impl<'a> Block<'a> {
    pub fn new(kind: BlockKind) -> Self {
        Block {
            kind,
            origin: Origin::Content,
            texts: Vec::new(),
            id: None,
            name: None,
            images: u32::from(kind == BlockKind::Image),
            image_sizes: Vec::new(),
            is_error: false,
            malformed: None,
            opaque: false,
            needs_store: false,
            signed: false,
        }
    }

    pub fn text(text: impl Into<Piece<'a>>) -> Self {
        let mut b = Block::new(BlockKind::Text);
        b.texts.push(text.into());
        b
    }

    pub fn tool_call(id: Option<&str>, name: &str, args: impl Into<Piece<'a>>) -> Self {
        let mut b = Block::new(BlockKind::ToolCall);
        b.id = id.map(str::to_owned);
        b.name = Some(name.to_owned());
        b.texts.push(args.into());
        b
    }

    pub fn tool_result(id: Option<&str>, text: impl Into<Piece<'a>>) -> Self {
        let mut b = Block::new(BlockKind::ToolResult);
        b.id = id.map(str::to_owned);
        b.texts.push(text.into());
        b
    }

    pub fn thinking(text: impl Into<Piece<'a>>) -> Self {
        let mut b = Block::new(BlockKind::Thinking);
        b.texts.push(text.into());
        b
    }

    /// Number of code points in the block's counted text.
    pub fn char_len(&self) -> usize {
        self.texts.iter().map(|p| p.text().char_len()).sum()
    }

    /// The block's texts as one UTF-8 string, joined with `sep`.
    pub fn joined_text(&self, sep: &str) -> String {
        self.joined(sep).into_owned()
    }

    /// [`Block::joined_text`], borrowed when the block is one UTF-8 text (most are: the readers
    /// of a summary's span call this for every call and result, so no copy where none is needed);
    /// one text in another layout is transcoded once per [`crate::text::utf8_memo_scope`] (the
    /// continuation, the trail and the rule summary each read every result of the span).
    pub fn joined(&self, sep: &str) -> std::borrow::Cow<'_, str> {
        match self.texts.as_slice() {
            [one] => crate::text::to_utf8_memo(one.text()),
            many => {
                let mut out = String::new();
                for (i, p) in many.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    p.text().push_utf8(&mut out);
                }
                std::borrow::Cow::Owned(out)
            }
        }
    }
}

/// The view of one message.
#[derive(Clone, Debug)]
pub struct Message<'a> {
    pub role: Role,
    /// Shared on clone (the planner copies views of every message); edit with
    /// [`Message::blocks_mut`].
    pub blocks: std::sync::Arc<Vec<Block<'a>>>,
    /// The content was empty (`""`, `[]`) or absent with no calls.
    pub empty: bool,
    /// A content fingerprint (see `crate::state`), 0 when not computed.
    pub fingerprint: u64,
    /// Read as a Responses item: a typed item, or a message with `input_*`/`output_*` parts.
    pub responses: bool,
    /// Read from a Gemini `Content` (`parts`): its hints say Gemini, whatever its blocks.
    pub gemini: bool,
}

impl<'a> Message<'a> {
    pub fn new(role: Role, blocks: Vec<Block<'a>>) -> Self {
        let empty = blocks.is_empty();
        Message {
            role,
            blocks: std::sync::Arc::new(blocks),
            empty,
            fingerprint: 0,
            responses: false,
            gemini: false,
        }
    }

    /// A message whose whole content is one text.
    pub fn text(role: Role, text: &'a str) -> Self {
        Message::new(role, vec![Block::text(text)])
    }

    /// The blocks, for editing (copied first if shared).
    pub fn blocks_mut(&mut self) -> &mut Vec<Block<'a>> {
        std::sync::Arc::make_mut(&mut self.blocks)
    }

    pub fn calls(&self) -> impl Iterator<Item = &Block<'a>> {
        self.blocks.iter().filter(|b| b.kind == BlockKind::ToolCall)
    }

    pub fn results(&self) -> impl Iterator<Item = &Block<'a>> {
        self.blocks
            .iter()
            .filter(|b| b.kind == BlockKind::ToolResult)
    }

    pub fn has_calls(&self) -> bool {
        self.calls().next().is_some()
    }

    pub fn has_results(&self) -> bool {
        self.results().next().is_some()
    }

    /// Whether the message carries anything besides tool results (text, images, documents).
    /// A user message that does is the start of a turn.
    pub fn has_non_result_content(&self) -> bool {
        self.blocks.iter().any(|b| b.kind != BlockKind::ToolResult)
    }

    /// A message made only of tool results: an OpenAI `tool`/`function` message, or an
    /// Anthropic user message whose every block is a `tool_result`.
    pub fn is_result_only(&self) -> bool {
        match self.role {
            Role::Tool | Role::Function => true,
            Role::User => self.has_results() && !self.has_non_result_content(),
            _ => false,
        }
    }

    /// Whether this is the user's own text (starts a turn): a user message with content other
    /// than tool results.
    pub fn is_user_text(&self) -> bool {
        self.role == Role::User && (self.has_non_result_content() || self.blocks.is_empty())
    }

    /// Whether the message starts with a thinking block.
    pub fn starts_with_thinking(&self) -> bool {
        self.blocks.first().is_some_and(|b| b.kind.is_thinking())
    }

    /// Whether some block of `kind` comes after a block of another kind (Anthropic wants tool
    /// results, and thinking, before everything else in their message).
    pub fn kind_after_others(&self, is_kind: impl Fn(BlockKind) -> bool) -> bool {
        let first_other = self.blocks.iter().position(|b| !is_kind(b.kind));
        first_other.is_some_and(|k| self.blocks[k..].iter().any(|b| is_kind(b.kind)))
    }

    pub fn has_thinking(&self) -> bool {
        self.blocks.iter().any(|b| b.kind.is_thinking())
    }

    /// The message's prose: the texts of its text and refusal blocks, joined by newlines (tool
    /// calls and results, thinking and images left out).
    pub fn prose(&self) -> String {
        let mut s = String::new();
        for b in self.blocks.iter() {
            if matches!(b.kind, BlockKind::Text | BlockKind::Refusal) {
                for p in &b.texts {
                    if !s.is_empty() {
                        s.push('\n');
                    }
                    p.text().push_utf8(&mut s);
                }
            }
        }
        s
    }
}

impl<'a> AsRef<Message<'a>> for Message<'a> {
    fn as_ref(&self) -> &Message<'a> {
        self
    }
}

/// A whole request: messages plus the separate system prompt and tool definitions.
#[derive(Clone, Debug)]
pub struct Conversation<'a> {
    pub format: Format,
    pub messages: Vec<Message<'a>>,
    /// The system prompt given separately (Anthropic `system`, or `system=` for OpenAI).
    pub system: Vec<Piece<'a>>,
    /// Tool definitions, each as its JSON text.
    pub tools: Vec<Piece<'a>>,
}

impl<'a> Conversation<'a> {
    pub fn new(format: Format, messages: Vec<Message<'a>>) -> Self {
        Conversation {
            format,
            messages,
            system: Vec::new(),
            tools: Vec::new(),
        }
    }
}

/// What the view of a message list reveals about its format (DESIGN, Formats, Detection).
#[derive(Clone, Copy, Debug, Default)]
pub struct FormatHints {
    /// Saw `tool_use` / `tool_result` / `thinking` / `redacted_thinking` blocks.
    pub anthropic: bool,
    /// Saw a `tool` role, `tool_calls`, `function_call`, or a system/developer role in the list.
    pub openai: bool,
    /// Saw an item whose `type` is a Responses item type, or `input_*`/`output_*` parts.
    pub responses: bool,
    /// Saw a Gemini `Content` (a message with `parts` and no `content`).
    pub gemini: bool,
}

impl FormatHints {
    /// The hints one message's view gives (the same the extractor gathers while reading it).
    pub fn of(m: &Message<'_>) -> Self {
        if m.gemini {
            return FormatHints {
                gemini: true,
                ..FormatHints::default()
            };
        }
        let mut h = FormatHints {
            openai: matches!(
                m.role,
                Role::Tool | Role::Function | Role::System | Role::Developer
            ),
            anthropic: false,
            responses: m.responses,
            gemini: false,
        };
        for b in m.blocks.iter() {
            match (b.kind, b.origin) {
                (_, Origin::Item) | (BlockKind::Reasoning, _) => h.responses = true,
                (BlockKind::Compaction, _) => h.anthropic = true,
                (BlockKind::Thinking | BlockKind::RedactedThinking, _) => h.anthropic = true,
                (BlockKind::ToolCall | BlockKind::ToolResult, Origin::Part(_)) => {
                    h.anthropic = true
                }
                (BlockKind::ToolCall, Origin::Call(_) | Origin::FunctionCall) => h.openai = true,
                _ => {}
            }
        }
        h
    }

    /// As two bits (for caching).
    pub fn bits(self) -> u8 {
        u8::from(self.anthropic)
            | (u8::from(self.openai) << 1)
            | (u8::from(self.responses) << 2)
            | (u8::from(self.gemini) << 3)
    }

    /// Add what `other` saw.
    pub fn merge(&mut self, other: FormatHints) {
        self.anthropic |= other.anthropic;
        self.openai |= other.openai;
        self.responses |= other.responses;
        self.gemini |= other.gemini;
    }

    pub fn from_bits(b: u8) -> Self {
        FormatHints {
            anthropic: b & 1 != 0,
            openai: b & 2 != 0,
            responses: b & 4 != 0,
            gemini: b & 8 != 0,
        }
    }

    /// Responses items win (DESIGN: any item whose `type` is a Responses item type); then
    /// Gemini `contents` (no other format has `parts` messages); then Anthropic-only features;
    /// then OpenAI-only ones; otherwise OpenAI.
    pub fn detect(self) -> Format {
        if self.responses {
            Format::Responses
        } else if self.gemini {
            Format::Gemini
        } else if self.anthropic {
            Format::Anthropic
        } else {
            Format::OpenAi
        }
    }
}

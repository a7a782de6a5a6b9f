//! Walk Python messages in place and build the core's view of them.
//!
//! Design note: messages are read where they are — dict items, or attributes of the `openai`
//! / `anthropic` SDKs' pydantic objects — and only what the core needs is recorded (see
//! `crate::message`). Strings are borrowed in their PEP 393 layout, never converted to UTF-8
//! (CPython would keep that copy inside each non-ASCII string for good). Nothing is copied
//! that goes back unchanged, and nothing is written to the caller's objects.
//!
//! Wrong Python types raise `MessageTypeError` naming the message index and the field path
//! (`content[2].text`, `tool_calls[0].function.arguments`); values the provider would reject
//! but that are well-typed are left for validation to report.
//!
//! Length (just over 600 lines): this file is where the five readers meet — chat messages,
//! Responses items, Gemini contents, LangChain and pydantic-ai objects — so the per-message
//! dispatch and the shared block reader stay together; the next split is `block()` and its
//! helpers into `blocks.rs`.
//!
//! Parts: `loc` (where a value sits, for errors), `access` (dict, mapping or attribute
//! reads), `json` (compact JSON and the strings of any Python value), `pipeline` (reading
//! while counting on the pool), `parts` (untyped blocks, tool-result content, the separate
//! system prompt and tools), `responses` (OpenAI Responses items other than messages); this
//! file reads messages and blocks and sends typed items to `responses`.

mod access;
mod framework;
mod gemini;
mod image;
mod json;
mod langchain;
mod loc;
mod parts;
mod pipeline;
mod pydantic_ai;
mod responses;

use super::text::KeepAlive;
use crate::message::{
    Block, BlockKind, Conversation, Format, FormatHints, Message, Origin, Piece, Role,
};
use crate::text::Text;
use crate::tokens::counter::{Framing, Tokenizer};
use access::Access;
use loc::{type_name, Loc};
use pipeline::PIPELINE_MIN_MESSAGES;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

pub use super::errors::parse_format;
pub use framework::fingerprint_fields;

/// Nesting deeper than this inside one block is refused (it guards against cycles too).
const MAX_DEPTH: usize = 64;

/// The name of a required field, for `Block::malformed`.
fn field_name(field: &Bound<'_, PyString>) -> &'static str {
    [
        "text",
        "refusal",
        "thinking",
        "data",
        "image_url",
        "source",
        "input_audio",
        "file",
    ]
    .into_iter()
    .find(|name| field.to_str().is_ok_and(|f| f == *name))
    .unwrap_or("a required field")
}

/// A malformed call or result pairs with nothing: it is read as an unknown block (counted,
/// reported, dropped by the repair pass).
fn unpaired_if_malformed(mut b: Block<'static>) -> Block<'static> {
    if b.malformed.is_some() {
        b.kind = BlockKind::Other;
    }
    b
}

/// A view plus the strong references that keep its borrowed strings alive.
///
/// Field order matters: `conv` is dropped before `_keep`.
pub struct Extracted {
    conv: Conversation<'static>,
    /// Each message's tokens, when counted while reading (see [`Extractor::counting`]).
    counts: Option<Vec<usize>>,
    /// The messages were LangChain objects (the output goes back as LangChain classes).
    pub langchain: bool,
    /// The messages were pydantic-ai `ModelMessage`s (the output is built by the shell).
    pub pydantic_ai: bool,
    _keep: KeepAlive,
}

impl Extracted {
    /// The messages' token counts, when the extractor counted them (see
    /// [`Extractor::counting`]).
    pub fn counts(&self) -> Option<&[usize]> {
        self.counts.as_deref()
    }

    pub fn conv(&self) -> &Conversation<'_> {
        &self.conv
    }

    /// The view with its internal lifetime, for objects that hold it next to this `Extracted`
    /// (a plan). They must be dropped before it: declare them first in the holding struct.
    pub fn conv_static(&self) -> &Conversation<'static> {
        &self.conv
    }
}

/// Builds views, keeping every borrowed string alive.
pub struct Extractor<'py> {
    py: Python<'py>,
    keep: KeepAlive,
    pub hints: FormatHints,
    /// Compute message fingerprints (for a `ConversationState`'s cache).
    fingerprints: bool,
    /// Tool results being read inside one another.
    result_depth: usize,
    /// Count the messages with this tokenizer while reading them (see [`Extractor::counting`]).
    counting: Option<(Tokenizer, Framing)>,
    /// Read a LangChain message (see `langchain.rs`).
    langchain: bool,
    /// Read a pydantic-ai message (see `pydantic_ai.rs`).
    pydantic_ai: bool,
    /// The format the caller forced (`format=`), which decides how messages are read.
    format: Option<Format>,
}

impl<'py> Extractor<'py> {
    pub fn new(py: Python<'py>) -> Self {
        Extractor {
            py,
            keep: KeepAlive::default(),
            hints: FormatHints::default(),
            fingerprints: false,
            result_depth: 0,
            counting: None,
            langchain: false,
            pydantic_ai: false,
            format: None,
        }
    }

    /// Also count each message with `tok`, overlapping the counting with the reading: reading
    /// needs the GIL and stays on this thread, while blocks of messages already read are
    /// counted on the pool (their texts are kept alive and immutable). A cold count of a long
    /// conversation then costs about its reading plus what is left to count after it, instead
    /// of the sum of both (see [`Extractor::conversation`]).
    pub fn counting(mut self, tok: Tokenizer, framing: Framing) -> Self {
        self.counting = Some((tok, framing));
        self
    }

    /// Also fingerprint each message (see `crate::state`).
    pub fn with_fingerprints(mut self) -> Self {
        self.fingerprints = true;
        self
    }

    /// Borrow a string for the view.
    fn borrow(&mut self, s: &Bound<'py, PyString>) -> PyResult<Text<'static>> {
        self.keep.text(s)
    }

    fn text(&mut self, v: &Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Text<'static>> {
        match v.cast::<PyString>() {
            Ok(s) => self.borrow(s),
            Err(_) => Err(loc.err(self.py, &format!("expected str, got {}", type_name(v)))),
        }
    }

    fn opt_str(
        &mut self,
        acc: &Access<'_, 'py>,
        key: &Bound<'py, PyString>,
        loc: &Loc<'_>,
    ) -> PyResult<Option<String>> {
        match acc.get(key, loc)? {
            None => Ok(None),
            Some(v) => {
                let t = self.text(&v, &loc.child(&key.to_string_lossy()))?;
                Ok(Some(t.to_utf8().into_owned()))
            }
        }
    }

    /// Read one message and the format hints it alone gives.
    pub fn message_with_hints(
        &mut self,
        obj: &Bound<'py, PyAny>,
        index: usize,
    ) -> PyResult<(Message<'static>, FormatHints)> {
        let saved = std::mem::take(&mut self.hints);
        let m = self.message(obj, index);
        let mine = std::mem::replace(&mut self.hints, saved);
        self.hints.merge(mine);
        Ok((m?, mine))
    }

    /// The items of the message list.
    pub fn items(&self, messages: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.sequence(messages, &Loc::root(None, "messages"))
    }

    /// Read the separate system prompt and tool definitions into a conversation without
    /// messages (for counting them).
    pub fn extras(
        self,
        format: Format,
        system: Option<&Bound<'py, PyAny>>,
        tools: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Extracted> {
        self.finish(Conversation::new(format, Vec::new()), system, tools, None)
    }

    /// Add the separate system prompt and tool definitions to `conv` and keep what it borrows.
    fn finish(
        mut self,
        mut conv: Conversation<'static>,
        system: Option<&Bound<'py, PyAny>>,
        tools: Option<&Bound<'py, PyAny>>,
        counts: Option<Vec<usize>>,
    ) -> PyResult<Extracted> {
        if let Some(s) = system.filter(|s| !s.is_none()) {
            conv.system = if conv.format == Format::Gemini {
                self.gemini_system(s)?
            } else {
                self.system(s)?
            };
        }
        if let Some(t) = tools.filter(|t| !t.is_none()) {
            conv.tools = self.tools(t)?;
        }
        Ok(Extracted {
            conv,
            counts,
            langchain: self.langchain,
            pydantic_ai: self.pydantic_ai,
            _keep: self.keep,
        })
    }

    /// Read one message.
    pub fn message(&mut self, obj: &Bound<'py, PyAny>, index: usize) -> PyResult<Message<'static>> {
        let py = self.py;
        let loc = Loc::root(Some(index), "");
        let acc = Access::of(obj, &Loc::root(Some(index), "message"))?;
        let object = matches!(acc, Access::Attrs(_));
        if object {
            if let Some(m) = self.framework_message(obj, index, true)? {
                return Ok(m);
            }
        }
        if self.is_gemini(obj, &acc) {
            return self.gemini_message(obj, &acc, index);
        }
        // A typed item other than `message` is a Responses item (DESIGN, detection). A `type`
        // that cannot be read or is not a str is left to the message reader (which names `role`).
        if let Ok(Some(t)) = acc.get(intern!(py, "type"), &loc) {
            if let Ok(t) = t.cast::<PyString>() {
                let ty = self.borrow(t)?.to_utf8();
                if ty != "message" {
                    // A framework object of a type not seen yet (LangChain's `type` is "human",
                    // "ai", ...): the framework reader first, then a Responses item.
                    if object {
                        if let Some(m) = self.framework_message(obj, index, false)? {
                            return Ok(m);
                        }
                    }
                    return self.responses_item(obj, &acc, &ty, index).map_err(|e| {
                        let note = format!("(format \"responses\": a {ty} item)");
                        super::errors::with_note(py, e, &note)
                    });
                }
            }
        }
        // A message with `input_*`/`output_*` parts is a Responses message item.
        let saw_responses = std::mem::take(&mut self.hints.responses);
        let m = self.chat_message(obj, &acc, index);
        let mine = std::mem::replace(&mut self.hints.responses, saw_responses);
        self.hints.responses |= mine;
        let mut m = m?;
        m.responses = mine;
        Ok(m)
    }

    /// Read a message with a role (Chat Completions, Anthropic, a Responses `message` item).
    fn chat_message(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        index: usize,
    ) -> PyResult<Message<'static>> {
        let py = self.py;
        let loc = Loc::root(Some(index), "");
        let object = matches!(acc, Access::Attrs(_));
        let role = match acc.get(intern!(py, "role"), &loc)? {
            Some(r) => {
                let t = self.text(&r, &loc.child("role"))?;
                Role::parse(&t.to_utf8())
            }
            None => {
                // Framework objects without a role (LangChain's `type`, pydantic-ai's `kind`).
                if object {
                    if let Some(m) = self.framework_message(obj, index, false)? {
                        return Ok(m);
                    }
                }
                return Err(loc.child("role").err(py, "missing role"));
            }
        };
        if matches!(
            role,
            Role::Tool | Role::Function | Role::System | Role::Developer
        ) {
            self.hints.openai = true;
        }
        let mut blocks = Vec::new();
        let content = acc.get(intern!(py, "content"), &loc)?;
        let mut empty = match &content {
            None => true,
            Some(c) => c.len().is_ok_and(|n| n == 0),
        };

        match role {
            Role::Tool | Role::Function => {
                let id = if role == Role::Tool {
                    self.opt_str(acc, intern!(py, "tool_call_id"), &loc)?
                } else {
                    None
                };
                let mut b = Block::new(BlockKind::ToolResult);
                b.origin = Origin::Whole;
                b.id = id;
                if role == Role::Function {
                    b.name = self.opt_str(acc, intern!(py, "name"), &loc)?;
                }
                if let Some(c) = &content {
                    self.result_content(c, &mut b, &loc.child("content"))?;
                }
                blocks.push(b);
            }
            _ => {
                if let Some(c) = &content {
                    self.content(c, &mut blocks, &loc.child("content"))?;
                }
            }
        }

        if role == Role::Assistant {
            if let Some(r) = acc.get(intern!(py, "refusal"), &loc)? {
                let t = self.text(&r, &loc.child("refusal"))?;
                let mut b = Block::new(BlockKind::Refusal);
                b.origin = Origin::Refusal;
                b.texts.push(Piece::Borrowed(t));
                blocks.push(b);
                empty = false;
            }
        }
        // Calls are read on every role so that validation can report misplaced ones.
        if let Some(calls) = acc.get(intern!(py, "tool_calls"), &loc)? {
            let loc = loc.child("tool_calls");
            let items = self.sequence(&calls, &loc)?;
            if !items.is_empty() {
                self.hints.openai = true;
                empty = false;
            }
            for (k, call) in items.iter().enumerate() {
                let mut b = self.tool_call(call, &loc.item(k))?;
                b.origin = Origin::Call(k);
                blocks.push(b);
            }
        }
        if let Some(fc) = acc.get(intern!(py, "function_call"), &loc)? {
            self.hints.openai = true;
            empty = false;
            let loc = loc.child("function_call");
            let facc = Access::of(&fc, &loc)?;
            let name = self.opt_str(&facc, intern!(py, "name"), &loc)?;
            let mut b = Block::new(BlockKind::ToolCall);
            b.origin = Origin::FunctionCall;
            b.name = name;
            if let Some(a) = facc.get(intern!(py, "arguments"), &loc)? {
                let t = self.text(&a, &loc.child("arguments"))?;
                b.texts.push(Piece::Borrowed(t));
            }
            blocks.push(b);
        }
        let mut m = Message::new(role, blocks);
        m.empty = empty && m.blocks.iter().all(|b| b.kind != BlockKind::ToolCall);
        if self.fingerprints {
            m.fingerprint = super::fingerprint::fingerprint(obj);
        }
        Ok(m)
    }

    fn sequence(&self, v: &Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if let Ok(l) = v.cast::<PyList>() {
            return Ok(l.iter().collect());
        }
        if let Ok(t) = v.cast::<PyTuple>() {
            return Ok(t.iter().collect());
        }
        Err(loc.err(self.py, &format!("expected a list, got {}", type_name(v))))
    }

    /// An OpenAI `tool_calls[k]` entry.
    fn tool_call(&mut self, call: &Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Block<'static>> {
        let py = self.py;
        let acc = Access::of(call, loc)?;
        let mut b = Block::new(BlockKind::ToolCall);
        b.id = self.opt_str(&acc, intern!(py, "id"), loc)?;
        // `function` calls carry `arguments`; `custom` tool calls carry `input`.
        let (fkey, akey) = match acc.get(intern!(py, "function"), loc)? {
            Some(f) => (Some(("function", f)), intern!(py, "arguments")),
            None => (
                acc.get(intern!(py, "custom"), loc)?.map(|c| ("custom", c)),
                intern!(py, "input"),
            ),
        };
        let Some((fname, f)) = fkey else {
            return Err(loc.child("function").err(py, "missing function"));
        };
        let floc = loc.child(fname);
        let facc = Access::of(&f, &floc)?;
        b.name = self.opt_str(&facc, intern!(py, "name"), &floc)?;
        if let Some(a) = facc.get(akey, &floc)? {
            let t = self.text(&a, &floc.child(&akey.to_string_lossy()))?;
            b.texts.push(Piece::Borrowed(t));
        }
        Ok(b)
    }

    /// Message content: a string, or a list of parts/blocks.
    fn content(
        &mut self,
        c: &Bound<'py, PyAny>,
        blocks: &mut Vec<Block<'static>>,
        loc: &Loc<'_>,
    ) -> PyResult<()> {
        if let Ok(s) = c.cast::<PyString>() {
            let t = self.borrow(s)?;
            blocks.push(Block::text(Piece::Borrowed(t)));
            return Ok(());
        }
        if !(c.is_instance_of::<PyList>() || c.is_instance_of::<PyTuple>()) {
            return Err(loc.err(
                self.py,
                &format!(
                    "expected str, None or a list of parts, got {}",
                    type_name(c)
                ),
            ));
        }
        for (k, part) in self.sequence(c, loc)?.iter().enumerate() {
            let mut b = self.block(part, &loc.item(k))?;
            b.origin = Origin::Part(k);
            blocks.push(b);
        }
        Ok(())
    }

    /// One content part (OpenAI) or block (Anthropic).
    fn block(&mut self, part: &Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Block<'static>> {
        let py = self.py;
        let acc = Access::of(part, loc)?;
        // Read in place (kept alive like every borrowed text): no copy of the type name.
        let ty = match acc.get(intern!(py, "type"), loc)? {
            Some(t) => self.text(&t, &loc.child("type"))?.to_utf8(),
            None => return self.untyped_block(part, &acc, loc),
        };
        // A block without the field its type requires is marked (see `Block::malformed`).
        let text_field = |this: &mut Self, field: &Bound<'py, PyString>, kind: BlockKind| {
            let mut b = Block::new(kind);
            match acc.get(field, loc)? {
                Some(v) => {
                    let t = this.text(&v, &loc.child(&field.to_string_lossy()))?;
                    b.texts.push(Piece::Borrowed(t));
                }
                None => b.malformed = Some(field_name(field)),
            }
            Ok::<_, PyErr>(b)
        };
        let requires = |mut b: Block<'static>, field: &Bound<'py, PyString>| {
            if b.malformed.is_none() && acc.get(field, loc)?.is_none() {
                b.malformed = Some(field_name(field));
            }
            Ok::<_, PyErr>(b)
        };
        Ok(match &*ty {
            "text" => text_field(self, intern!(py, "text"), BlockKind::Text)?,
            "input_text" | "output_text" => {
                self.hints.responses = true;
                text_field(self, intern!(py, "text"), BlockKind::Text)?
            }
            "refusal" => text_field(self, intern!(py, "refusal"), BlockKind::Refusal)?,
            "image_url" => requires(self.image_block(&acc, &ty, loc), intern!(py, "image_url"))?,
            "image" => requires(self.image_block(&acc, &ty, loc), intern!(py, "source"))?,
            "input_image" => {
                self.hints.responses = true;
                self.image_block(&acc, &ty, loc)
            }
            "input_audio" => {
                let mut b = Block::new(BlockKind::Audio);
                b.images = 1;
                requires(b, intern!(py, "input_audio"))?
            }
            "file" | "document" | "input_file" => {
                if &*ty == "input_file" {
                    self.hints.responses = true;
                }
                let mut b = Block::new(BlockKind::Document);
                self.strings(part, &mut b.texts, loc, 0)?;
                if b.texts.iter().all(|t| t.text().char_len() < 64) {
                    // A binary or referenced document: its size is not known here.
                    b.texts.clear();
                    b.images = 1;
                }
                requires(
                    b,
                    match &*ty {
                        "file" => intern!(py, "file"),
                        "input_file" => intern!(py, "type"),
                        _ => intern!(py, "source"),
                    },
                )?
            }
            "thinking" => {
                self.hints.anthropic = true;
                text_field(self, intern!(py, "thinking"), BlockKind::Thinking)?
            }
            "compaction" => {
                // Anthropic's compaction block: an earlier summary by the provider (see
                // `crate::compaction`); its readable `content` may be absent.
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::Compaction);
                if let Some(c) = acc.get(intern!(py, "content"), loc)? {
                    b.texts
                        .push(Piece::Borrowed(self.text(&c, &loc.child("content"))?));
                }
                b.opaque = true;
                b
            }
            "redacted_thinking" => {
                self.hints.anthropic = true;
                text_field(self, intern!(py, "data"), BlockKind::RedactedThinking)?
            }
            "tool_use" => {
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::ToolCall);
                b.id = self.opt_str(&acc, intern!(py, "id"), loc)?;
                b.name = self.opt_str(&acc, intern!(py, "name"), loc)?;
                if let Some(input) = acc.get(intern!(py, "input"), loc)? {
                    let mut json = String::new();
                    self.json(&input, &mut json, &loc.child("input"), 0)?;
                    b.texts.push(Piece::Owned(json));
                } else {
                    b.texts.push(Piece::Owned("{}".to_owned()));
                    b.malformed = Some("input");
                }
                if b.name.is_none() {
                    b.malformed = Some("name");
                }
                if b.id.is_none() {
                    b.malformed = Some("id");
                }
                unpaired_if_malformed(b)
            }
            "tool_result" => {
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::ToolResult);
                b.id = self.opt_str(&acc, intern!(py, "tool_use_id"), loc)?;
                if let Some(e) = acc.get(intern!(py, "is_error"), loc)? {
                    b.is_error = e.is_truthy()?;
                }
                if let Some(c) = acc.get(intern!(py, "content"), loc)? {
                    self.result_content(&c, &mut b, &loc.child("content"))?;
                }
                if b.id.is_none() {
                    b.malformed = Some("tool_use_id");
                }
                unpaired_if_malformed(b)
            }
            _ => {
                // Server-tool blocks and types we do not know: passed through, counted as text.
                let mut b = Block::new(BlockKind::Other);
                self.strings(part, &mut b.texts, loc, 0)?;
                b
            }
        })
    }

    /// Read a whole request.
    pub fn conversation(
        mut self,
        messages: &Bound<'py, PyAny>,
        format: Option<Format>,
        system: Option<&Bound<'py, PyAny>>,
        tools: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Extracted> {
        let root = Loc::root(None, "messages");
        self.format = format;
        let items = self.sequence(messages, &root)?;
        let pool = crate::parallel::pool().filter(|_| items.len() >= PIPELINE_MIN_MESSAGES);
        let (msgs, counts) = match (self.counting, pool) {
            (Some((tok, framing)), Some(pool)) if !self.fingerprints => {
                let (msgs, counts) = self.messages_counted(&items, tok, framing, pool)?;
                (msgs, Some(counts))
            }
            _ => {
                let mut msgs = Vec::with_capacity(items.len());
                for (i, m) in items.iter().enumerate() {
                    msgs.push(self.message(m, i)?);
                }
                (msgs, None)
            }
        };
        let format = format.unwrap_or_else(|| self.hints.detect());
        let mut msgs = msgs;
        if format == Format::Gemini {
            crate::gemini::pair_ids(&mut msgs);
        }
        self.finish(Conversation::new(format, msgs), system, tools, counts)
    }
}

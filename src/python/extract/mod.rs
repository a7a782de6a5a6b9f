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
//! Parts: `loc` (where a value sits, for errors), `access` (dict, mapping or attribute
//! reads), `json` (compact JSON and the strings of any Python value), `pipeline` (reading
//! while counting on the pool), `responses` (OpenAI Responses items other than messages),
//! `source` (this reader as the core's `Source`, for the readers written once for both APIs:
//! Gemini's is `crate::formats::gemini::read`, messages with a role
//! `crate::formats::openai::read`, their content, the system prompt and the tool definitions
//! `crate::formats::blocks`), and
//! the framework readers (`framework`, `langchain`, `pydantic_ai`); this file holds the
//! extractor and the per-message dispatch between the readers.

mod access;
mod framework;
mod json;
mod langchain;
mod loc;
mod pipeline;
mod pydantic_ai;
mod responses;
mod source;

use super::text::KeepAlive;
use crate::formats::source::Shapes;
use crate::message::{Conversation, Format, FormatHints, Message};
use crate::text::Text;
use crate::tokens::counter::{Framing, Tokenizer};
use access::Access;
use loc::{type_name, Loc, LocErr};
use pipeline::PIPELINE_MIN_MESSAGES;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

pub use super::errors::parse_format;
pub use framework::fingerprint_fields;

/// Nesting deeper than this inside one block is refused (it guards against cycles too).
const MAX_DEPTH: usize = 64;

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
    /// Under a forced format: whether messages had a Gemini `Content`'s shape, or another.
    shapes: Shapes,
    /// Refuse a forced format that does not fit the messages ([`Extractor::misfit`]).
    refuse_misfit: bool,
    /// Keys interned for the generic readers (`source.rs`).
    keys: Vec<(&'static str, Py<PyString>)>,
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
            shapes: Shapes::default(),
            refuse_misfit: false,
            keys: Vec::new(),
        }
    }

    /// Refuse a forced `format=` that does not fit the messages (compaction: its reader would
    /// drop their content, and the result would be a different conversation); see
    /// [`Extractor::misfit`].
    pub fn refusing_misfit(mut self) -> Self {
        self.refuse_misfit = true;
        self
    }

    /// Why the forced `format` does not fit the messages read ([`crate::formats::misfit`]),
    /// with the format they are read as without `format=` (read again, on this error path
    /// only).
    fn misfit(
        &self,
        forced: Format,
        messages: &Bound<'py, PyAny>,
    ) -> PyResult<Option<(Format, String)>> {
        let Some(why) = crate::formats::misfit(forced, self.shapes) else {
            return Ok(None);
        };
        let detected = Extractor::new(self.py)
            .conversation(messages, None, None, None)
            .map(|e| e.conv.format)
            .unwrap_or(forced);
        Ok((detected != forced).then_some((detected, why)))
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
            conv.system = crate::formats::read_system(&mut self, conv.format, s)?;
        }
        if let Some(t) = tools.filter(|t| !t.is_none()) {
            let items = self.sequence(t, &Loc::root(None, "tools"))?;
            conv.tools = crate::formats::blocks::tools(&mut self, &items)?;
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
        // An object of a framework type already recognised goes straight to its reader, before
        // `Access::of` asks whether it is a `Mapping` (an `isinstance` against an ABC).
        if !obj.is_instance_of::<PyDict>() {
            if let Some(m) = self.framework_message(obj, index, true)? {
                return Ok(m);
            }
        }
        let acc = Access::of(obj, &Loc::root(Some(index), "message"))?;
        let object = matches!(acc, Access::Attrs(_));
        let pobj = source::PyObj::new(obj, &acc);
        if let Some(mut m) = crate::formats::read_message(self, &pobj, index)? {
            if self.fingerprints {
                m.fingerprint = super::fingerprint::fingerprint(obj);
            }
            return Ok(m);
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
        // A message with a role (Chat Completions, Anthropic, a Responses `message` item).
        crate::formats::openai::read::message(self, &pobj, index)
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
        if let Some(forced) = format.filter(|_| self.refuse_misfit) {
            if let Some((detected, why)) = self.misfit(forced, messages)? {
                return Err(super::errors::format_mismatch_error(
                    self.py, forced, detected, &why,
                ));
            }
        }
        let format = format.unwrap_or_else(|| self.hints.detect());
        let mut msgs = msgs;
        crate::formats::after_read(format, &mut msgs);
        self.finish(Conversation::new(format, msgs), system, tools, counts)
    }
}

//! Read messages given as `serde_json::Value`s into the core's view (the Rust API's reader; the
//! Python binding's is `python/extract/`, which this one mirrors field for field so that both
//! APIs see the same conversation: the parity test compares them on the corpus).
//!
//! Strings are borrowed from the values, never copied; nothing is written to them. A value of
//! the wrong JSON type is a [`ReadError`] naming the message index and the field path; values
//! the provider would reject but that are well-typed are left for validation to report.
//! Messages with a role are read by `crate::formats::openai::read`, their content by
//! `crate::formats::blocks`, Responses items by `crate::formats::responses::read` and Gemini
//! contents by `crate::formats::gemini::read`, written once for both readers over
//! [`Source`](crate::formats::source::Source) (`source.rs`).

use crate::formats::loc::{Loc, ReadError};
use crate::formats::source::Shapes;
use crate::json::py_float_repr;
use crate::message::{Conversation, Format, FormatHints, Message, Piece};
use crate::text::Text;
use crate::tokens::counter::{message_tokens, Framing, Tokenizer};
use rayon::prelude::*;
use serde_json::{Map, Value};

/// Nesting deeper than this inside one block is refused.
pub(super) const MAX_DEPTH: usize = 64;

/// Messages per block read (and counted) on the pool: large enough that handing a block over
/// (~1 µs) is lost in reading it, small enough that the blocks spread over the threads.
const BLOCK: usize = 128;
/// From this many messages, reading goes to the pool in blocks.
const PARALLEL_MIN_MESSAGES: usize = 4 * BLOCK;

type Res<T> = Result<T, ReadError>;
/// A block read on the pool: its messages (none when not kept), their counts, and what its
/// reader saw.
type Block<'a> = (Vec<Message<'a>>, Vec<usize>, FormatHints, Shapes);

/// The Python name of a JSON value's type (the errors read as the Python API's).
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// `obj[key]`, `None` when absent or `null` (as the Python reader treats `None`).
pub(super) fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    entry(obj, key).filter(|v| !v.is_null())
}

/// Objects up to this many keys are searched in order rather than hashed.
const SCAN_KEYS: usize = 8;

/// `obj.get(key)`: a message or block has a handful of keys, and comparing them in order (the
/// lengths first) is several times cheaper than hashing the key (SipHash, the map's) and then
/// comparing it; reading a conversation looks up a few keys per message and block.
pub(super) fn entry<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if obj.len() <= SCAN_KEYS {
        obj.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        obj.get(key)
    }
}

/// Python's truthiness of a JSON value.
pub(super) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Builds views of JSON messages.
#[derive(Default)]
pub struct Reader {
    pub(super) hints: FormatHints,
    /// Tool results being read inside one another.
    pub(super) result_depth: usize,
    /// The format the caller forced.
    pub(super) format: Option<Format>,
    pub(super) shapes: Shapes,
    /// Count each message as it is read ([`Reader::counting`]).
    counting: Option<(Tokenizer, Framing)>,
    /// Drop each message once counted.
    drop_messages: bool,
}

/// Why a forced format does not fit the messages: the format they are detected as, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misfit {
    /// The format the messages are read as without forcing one.
    pub detected: Format,
    /// What the forced format's reader would drop.
    pub why: String,
}

/// A conversation read from JSON, or why it could not be.
pub enum ReadOutcome<'a> {
    /// The view.
    Read(Conversation<'a>),
    /// The forced format does not fit the messages.
    Misfit(Format, Misfit),
}

impl Reader {
    pub(super) fn object<'a>(&self, v: &'a Value, loc: &Loc<'_>) -> Res<&'a Map<String, Value>> {
        match v {
            Value::Object(o) => Ok(o),
            other => Err(loc.error(format!(
                "expected a mapping or an SDK object, got {}",
                type_name(other)
            ))),
        }
    }

    /// Read a whole request: the messages (format detected unless `format` is given), the
    /// separate system prompt and the tool definitions. `refuse_misfit`: a forced format that
    /// does not fit the messages is refused ([`ReadOutcome::Misfit`]).
    pub fn conversation<'a>(
        self,
        messages: &'a [Value],
        format: Option<Format>,
        system: Option<&'a Value>,
        tools: Option<&'a [Value]>,
        refuse_misfit: bool,
    ) -> Res<ReadOutcome<'a>> {
        Ok(self
            .conversation_counted(messages, format, system, tools, refuse_misfit)?
            .0)
    }

    /// Count each message with `tok` and `framing` as it is read
    /// ([`conversation_counted`](Self::conversation_counted)). `keep`: whether the view keeps
    /// the messages (`false`: each is dropped as soon as it is counted, where it was read, and
    /// the view holds only the system prompt and the tools: for a count).
    pub fn counting(mut self, tok: Tokenizer, framing: Framing, keep: bool) -> Self {
        self.counting = Some((tok, framing));
        self.drop_messages = !keep;
        self
    }

    /// [`conversation`](Self::conversation), and each message's tokens when the reader is
    /// [`counting`](Self::counting) (empty otherwise).
    pub fn conversation_counted<'a>(
        mut self,
        messages: &'a [Value],
        format: Option<Format>,
        system: Option<&'a Value>,
        tools: Option<&'a [Value]>,
        refuse_misfit: bool,
    ) -> Res<(ReadOutcome<'a>, Vec<usize>)> {
        self.format = format;
        let (msgs, counts) = self.messages(messages, self.counting, !self.drop_messages)?;
        Ok((
            self.finish(messages, msgs, system, tools, refuse_misfit)?,
            counts,
        ))
    }

    /// Read (and count) every message: on this thread for a short conversation, else in blocks
    /// of [`BLOCK`] messages on the pool, each read by a reader of its own and counted right
    /// after (the Python binding cannot read on other threads: it reads under the GIL and counts
    /// on the pool, `python/extract/pipeline.rs`). The readers' hints and shapes only ever
    /// accumulate, so merging the blocks' is reading them in order; the error is the first
    /// message's in order, as reading in order would stop at.
    fn messages<'a>(
        &mut self,
        messages: &'a [Value],
        counting: Option<(Tokenizer, Framing)>,
        keep: bool,
    ) -> Res<(Vec<Message<'a>>, Vec<usize>)> {
        let pool = crate::parallel::pool().filter(|_| messages.len() >= PARALLEL_MIN_MESSAGES);
        let Some(pool) = pool else {
            let mut msgs = Vec::with_capacity(messages.len());
            for (i, m) in messages.iter().enumerate() {
                msgs.push(self.message(m, i)?);
            }
            let counts = match counting {
                Some((t, f)) => msgs.iter().map(|m| message_tokens(t, m, f)).collect(),
                None => Vec::new(),
            };
            if !keep {
                msgs.clear();
            }
            return Ok((msgs, counts));
        };
        let format = self.format;
        let blocks: Vec<Res<Block<'a>>> = pool.install(|| {
            messages
                .par_chunks(BLOCK)
                .enumerate()
                .map(|(k, part)| {
                    let mut r = Reader {
                        format,
                        ..Reader::default()
                    };
                    let mut msgs = Vec::with_capacity(part.len());
                    for (j, m) in part.iter().enumerate() {
                        msgs.push(r.message(m, k * BLOCK + j)?);
                    }
                    let counts = match counting {
                        Some((t, f)) => msgs.iter().map(|m| message_tokens(t, m, f)).collect(),
                        None => Vec::new(),
                    };
                    if !keep {
                        msgs = Vec::new();
                    }
                    Ok((msgs, counts, r.hints, r.shapes))
                })
                .collect()
        });
        let mut msgs = Vec::with_capacity(if keep { messages.len() } else { 0 });
        let mut counts = Vec::with_capacity(messages.len());
        for block in blocks {
            let (m, c, hints, shapes) = block?;
            msgs.extend(m);
            counts.extend(c);
            self.hints.merge(hints);
            self.shapes.gemini |= shapes.gemini;
            self.shapes.other |= shapes.other;
        }
        Ok((msgs, counts))
    }

    /// Read and count only the messages at `indices` (those a state's cache does not know), on
    /// the pool in blocks when there are many, each dropped once counted: their counts, their
    /// [`FormatHints::of`] bits (for the cache), and the hints their reading gave.
    pub fn count_some(
        messages: &[Value],
        indices: &[usize],
        format: Option<Format>,
        (tok, framing): (Tokenizer, Framing),
    ) -> Res<(Vec<usize>, Vec<u8>, FormatHints)> {
        let block = |part: &[usize]| -> Res<(Vec<usize>, Vec<u8>, FormatHints)> {
            let mut r = Reader {
                format,
                ..Reader::default()
            };
            let (mut counts, mut bits) = (Vec::with_capacity(part.len()), Vec::new());
            for &i in part {
                let m = r.message(&messages[i], i)?;
                counts.push(message_tokens(tok, &m, framing));
                bits.push(FormatHints::of(&m).bits());
            }
            Ok((counts, bits, r.hints))
        };
        let pool = crate::parallel::pool().filter(|_| indices.len() >= PARALLEL_MIN_MESSAGES);
        let Some(pool) = pool else {
            return block(indices);
        };
        let blocks: Vec<_> = pool.install(|| indices.par_chunks(BLOCK).map(block).collect());
        let (mut counts, mut bits) = (Vec::with_capacity(indices.len()), Vec::new());
        let mut hints = FormatHints::default();
        for b in blocks {
            let (c, h, seen) = b?;
            counts.extend(c);
            bits.extend(h);
            hints.merge(seen);
        }
        Ok((counts, bits, hints))
    }

    /// The view of messages read: the forced format's fit, the format, the system prompt and the
    /// tools.
    fn finish<'a>(
        mut self,
        messages: &'a [Value],
        mut msgs: Vec<Message<'a>>,
        system: Option<&'a Value>,
        tools: Option<&'a [Value]>,
        refuse_misfit: bool,
    ) -> Res<ReadOutcome<'a>> {
        let format = self.format;
        if let Some(forced) = format.filter(|_| refuse_misfit) {
            if let Some(m) = self.misfit(forced, messages) {
                return Ok(ReadOutcome::Misfit(forced, m));
            }
        }
        let format = format.unwrap_or_else(|| self.hints.detect());
        crate::formats::after_read(format, &mut msgs);
        let mut conv = Conversation::new(format, msgs);
        if let Some(s) = system.filter(|s| !s.is_null()) {
            conv.system = crate::formats::read_system(&mut self, format, &s)?;
        }
        if let Some(t) = tools {
            let items: Vec<&Value> = t.iter().collect();
            conv.tools = crate::formats::blocks::tools(&mut self, &items)?;
        }
        Ok(ReadOutcome::Read(conv))
    }

    /// Why the forced format does not fit the messages ([`crate::formats::misfit`]), with the
    /// format they are read as without forcing one (read again, on this error path only).
    fn misfit(&self, forced: Format, messages: &[Value]) -> Option<Misfit> {
        let why = crate::formats::misfit(forced, self.shapes)?;
        let detected = match Reader::default().conversation(messages, None, None, None, false) {
            Ok(ReadOutcome::Read(c)) => c.format,
            Ok(ReadOutcome::Misfit(..)) | Err(_) => forced,
        };
        (detected != forced).then_some(Misfit { detected, why })
    }

    /// Read one message.
    pub fn message<'a>(&mut self, v: &'a Value, index: usize) -> Res<Message<'a>> {
        let obj = self.object(v, &Loc::root(Some(index), "message"))?;
        // A Gemini `Content`, a typed Responses item, or a message with a role.
        crate::formats::read_message(self, &obj, index)
    }

    /// Every string value inside `v` but the values of `type` keys (blocks of unknown type).
    pub(super) fn strings<'a>(
        &self,
        v: &'a Value,
        out: &mut Vec<Piece<'a>>,
        loc: &Loc<'_>,
        depth: usize,
    ) -> Res<()> {
        if depth > MAX_DEPTH {
            return Err(loc.error("nested too deeply (or cyclic)"));
        }
        match v {
            Value::String(s) => out.push(Piece::Borrowed(Text::Utf8(s))),
            Value::Object(o) => {
                for (k, item) in o {
                    if k == "type" {
                        continue;
                    }
                    self.strings(item, out, &loc.child(k), depth + 1)?;
                }
            }
            Value::Array(a) => {
                for (k, item) in a.iter().enumerate() {
                    self.strings(item, out, &loc.item(k), depth + 1)?;
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
        Ok(())
    }

    /// Compact JSON of a value (an Anthropic `tool_use.input`, a tool definition), written as
    /// the Python reader writes it (numbers as Python's `repr`), for counting.
    pub(super) fn json(&self, v: &Value, out: &mut String, loc: &Loc<'_>, depth: usize) -> Res<()> {
        if depth > MAX_DEPTH {
            return Err(loc.error("nested too deeply (or cyclic)"));
        }
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => push_number(n, out),
            Value::String(s) => crate::json::push_json_string(Text::Utf8(s), out),
            Value::Object(o) => {
                out.push('{');
                for (k, (key, item)) in o.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    crate::json::push_json_string(Text::Utf8(key), out);
                    out.push(':');
                    self.json(item, out, &loc.child(key), depth + 1)?;
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (k, item) in a.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    self.json(item, out, &loc.item(k), depth + 1)?;
                }
                out.push(']');
            }
        }
        Ok(())
    }
}

/// A JSON number as Python's `repr` writes the value `json.loads` makes of it: integers as they
/// are, floats in the shortest form that reads back (`1.0`, `1e-05`, `1e+16`).
pub(super) fn push_number(n: &serde_json::Number, out: &mut String) {
    if n.is_i64() || n.is_u64() {
        out.push_str(&n.to_string());
        return;
    }
    let Some(f) = n.as_f64() else {
        out.push_str(&n.to_string());
        return;
    };
    out.push_str(&py_float_repr(f));
}

#[cfg(test)]
mod tests {
    use crate::json::py_float_repr;

    #[test]
    fn floats_as_python_writes_them() {
        for (f, want) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789.0, "123456789.0"),
            (1e15, "1000000000000000.0"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(py_float_repr(f), want, "{f}");
        }
    }
}

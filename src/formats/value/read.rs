//! Read messages given as `serde_json::Value`s into the core's view (the Rust API's reader; the
//! Python binding's is `python/extract/`, which this one mirrors field for field so that both
//! APIs see the same conversation: the parity test compares them on the corpus).
//!
//! Strings are borrowed from the values, never copied; nothing is written to them. A value of
//! the wrong JSON type is a [`ReadError`] naming the message index and the field path; values
//! the provider would reject but that are well-typed are left for validation to report.
//! Responses items are read in `read_responses.rs`; messages with a role by
//! `crate::formats::openai::read`, their content by `crate::formats::blocks` and Gemini contents
//! by `crate::formats::gemini::read`, written once for both readers over
//! [`Source`](crate::formats::source::Source) (`source.rs`).

use crate::formats::loc::{Loc, ReadError};
use crate::formats::source::Shapes;
use crate::json::py_float_repr;
use crate::message::{Conversation, Format, FormatHints, Message, Piece};
use crate::text::Text;
use serde_json::{Map, Value};

/// Nesting deeper than this inside one block is refused.
pub(super) const MAX_DEPTH: usize = 64;

type Res<T> = Result<T, ReadError>;

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
    obj.get(key).filter(|v| !v.is_null())
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
    pub(super) fn text<'a>(&self, v: &'a Value, loc: &Loc<'_>) -> Res<Text<'a>> {
        match v {
            Value::String(s) => Ok(Text::Utf8(s)),
            other => Err(loc.error(format!("expected str, got {}", type_name(other)))),
        }
    }

    pub(super) fn opt_str(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        loc: &Loc<'_>,
    ) -> Res<Option<String>> {
        match get(obj, key) {
            None => Ok(None),
            Some(v) => Ok(Some(self.text(v, &loc.child(key))?.to_utf8().into_owned())),
        }
    }

    pub(super) fn object<'a>(&self, v: &'a Value, loc: &Loc<'_>) -> Res<&'a Map<String, Value>> {
        match v {
            Value::Object(o) => Ok(o),
            other => Err(loc.error(format!(
                "expected a mapping or an SDK object, got {}",
                type_name(other)
            ))),
        }
    }

    pub(super) fn sequence<'a>(&self, v: &'a Value, loc: &Loc<'_>) -> Res<&'a [Value]> {
        match v {
            Value::Array(a) => Ok(a),
            other => Err(loc.error(format!("expected a list, got {}", type_name(other)))),
        }
    }

    /// Read a whole request: the messages (format detected unless `format` is given), the
    /// separate system prompt and the tool definitions. `refuse_misfit`: a forced format that
    /// does not fit the messages is refused ([`ReadOutcome::Misfit`]).
    pub fn conversation<'a>(
        mut self,
        messages: &'a [Value],
        format: Option<Format>,
        system: Option<&'a Value>,
        tools: Option<&'a [Value]>,
        refuse_misfit: bool,
    ) -> Res<ReadOutcome<'a>> {
        self.format = format;
        let mut msgs = Vec::with_capacity(messages.len());
        for (i, m) in messages.iter().enumerate() {
            msgs.push(self.message(m, i)?);
        }
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
        if let Some(m) = crate::formats::read_message(self, &obj, index)? {
            return Ok(m);
        }
        if let Some(Value::String(ty)) = get(obj, "type") {
            if ty != "message" {
                return self.responses_item(obj, ty, index).map_err(|mut e| {
                    e.reason = format!("{} (format \"responses\": a {ty} item)", e.reason);
                    e
                });
            }
        }
        // A message with a role (Chat Completions, Anthropic, a Responses `message` item).
        crate::formats::openai::read::message(self, &obj, index)
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

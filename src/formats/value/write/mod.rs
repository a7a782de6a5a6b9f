//! Write the output messages of a compaction as `serde_json::Value`s in the conversation's wire
//! format (the Rust API's writer; the Python binding's is `python/render/`, which this mirrors:
//! the parity test compares both on the corpus).
//!
//! `Keep` messages are not written here: the caller moves the input value itself into the
//! output. `Rebuild` copies the input message and replaces only its content and calls (its
//! other fields, `name`, `cache_control`, stay); `New` messages are built. Chat Completions and
//! Anthropic messages are written here, Responses items in `responses.rs`, Gemini
//! contents in `gemini.rs`. Writing never fails: a block the view names but the value
//! lacks (impossible for a view read from these values) is written as an empty text.

mod gemini;
mod responses;

use crate::message::{BlockKind, Conversation, Format, Origin, Role};
use crate::planner::{OutBlock, OutMsg};
use serde_json::{Map, Value};

/// The input messages and the view read from them.
pub struct Writer<'s, 'a> {
    pub(super) messages: &'s [Value],
    pub(super) conv: &'s Conversation<'a>,
}

/// `obj[key]` when `obj` is an object and the value is not `null`.
pub(super) fn field<'v>(obj: &'v Value, key: &str) -> Option<&'v Value> {
    obj.as_object()?.get(key).filter(|v| !v.is_null())
}

/// A copy of an object value (an empty object for anything else).
pub(super) fn as_map(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Cut JSON arguments as an object (Anthropic `input`): the parsed text, or
/// `{"_truncated": text}` when the cut left it unparsable.
pub(super) fn args_object(text: &str, wrap: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            let mut m = Map::new();
            m.insert(wrap.to_owned(), Value::String(text.to_owned()));
            Value::Object(m)
        }
    }
}

fn text_block(text: &str) -> Value {
    let mut d = Map::new();
    d.insert("type".into(), "text".into());
    d.insert("text".into(), text.into());
    Value::Object(d)
}

/// A rendered block, by where it goes in the message.
enum BlockOut {
    ContentString(Value),
    Part(Value),
    Call(Value),
    Refusal(Option<Value>),
    FunctionCall(Option<Value>),
}

impl<'s, 'a> Writer<'s, 'a> {
    /// A writer for the output of a compaction of `messages`, read as `conv`.
    pub fn new(messages: &'s [Value], conv: &'s Conversation<'a>) -> Self {
        Writer { messages, conv }
    }

    fn msg(&self, i: usize) -> &'s Value {
        static NULL: Value = Value::Null;
        self.messages.get(i).unwrap_or(&NULL)
    }

    /// Build one output message (`None` for `Keep`: the caller moves the input value).
    pub fn render(&self, out: &OutMsg) -> Option<Value> {
        match self.conv.format {
            Format::Gemini => return self.render_gemini(out),
            Format::Responses => match out {
                OutMsg::Rebuild { from, blocks }
                    if self
                        .conv
                        .messages
                        .get(*from)
                        .is_some_and(crate::formats::responses::is_item) =>
                {
                    return Some(self.rebuild_item(*from, blocks));
                }
                OutMsg::New { role, blocks } => return Some(self.new_item(*role, blocks)),
                _ => {}
            },
            Format::OpenAi | Format::Anthropic => {}
        }
        match out {
            OutMsg::Keep(_) => None,
            OutMsg::Rebuild { from, blocks } => Some(self.rebuild(*from, blocks)),
            OutMsg::New { role, blocks } => Some(self.new_message(*role, blocks)),
        }
    }

    /// The wire value of block `k` of message `msg`, or its edited copy.
    fn block(&self, msg: usize, k: usize, edit: Option<&str>) -> BlockOut {
        let Some(view) = self.conv.messages.get(msg).and_then(|m| m.blocks.get(k)) else {
            return BlockOut::Part(text_block(edit.unwrap_or_default()));
        };
        let m = self.msg(msg);
        let content = || {
            field(m, "content")
                .cloned()
                .unwrap_or_else(|| Value::String(String::new()))
        };
        match view.origin {
            Origin::Content => match edit {
                None => BlockOut::ContentString(content()),
                Some(t) => BlockOut::ContentString(t.into()),
            },
            Origin::Part(p) => {
                let obj = field(m, "content")
                    .and_then(|c| c.get(p))
                    .cloned()
                    .unwrap_or(Value::Null);
                match edit {
                    None => BlockOut::Part(obj),
                    Some(t) => BlockOut::Part(self.edited_part(&obj, view.kind, t, msg)),
                }
            }
            Origin::Refusal => BlockOut::Refusal(field(m, "refusal").cloned()),
            Origin::Call(c) => {
                let call = field(m, "tool_calls")
                    .and_then(|l| l.get(c))
                    .cloned()
                    .unwrap_or(Value::Null);
                match edit {
                    None => BlockOut::Call(call),
                    Some(args) => {
                        let mut d = as_map(&call);
                        let (fkey, akey) = if d.contains_key("function") {
                            ("function", "arguments")
                        } else {
                            ("custom", "input")
                        };
                        if let Some(f) = d.get(fkey).filter(|f| !f.is_null()) {
                            let mut f = as_map(f);
                            f.insert(akey.to_owned(), args.into());
                            d.insert(fkey.to_owned(), Value::Object(f));
                        }
                        BlockOut::Call(Value::Object(d))
                    }
                }
            }
            Origin::FunctionCall => {
                let fc = field(m, "function_call").cloned();
                match (fc, edit) {
                    (Some(fc), Some(args)) => {
                        let mut d = as_map(&fc);
                        d.insert("arguments".into(), args.into());
                        BlockOut::FunctionCall(Some(Value::Object(d)))
                    }
                    (fc, _) => BlockOut::FunctionCall(fc),
                }
            }
            Origin::Whole | Origin::Item => match edit {
                None => BlockOut::ContentString(content()),
                Some(t) => BlockOut::ContentString(t.into()),
            },
        }
    }

    /// A copy of a content part/block with its text replaced.
    fn edited_part(&self, obj: &Value, kind: BlockKind, text: &str, msg: usize) -> Value {
        match kind {
            BlockKind::Text | BlockKind::Refusal if !obj.is_string() => {
                let mut d = as_map(obj);
                let key = if kind == BlockKind::Refusal {
                    "refusal"
                } else {
                    "text"
                };
                d.insert(key.into(), text.into());
                Value::Object(d)
            }
            BlockKind::ToolResult => {
                let mut d = as_map(obj);
                d.insert("content".into(), text.into());
                Value::Object(d)
            }
            BlockKind::ToolCall => {
                let mut d = as_map(obj);
                d.insert("input".into(), args_object(text, "_truncated"));
                Value::Object(d)
            }
            _ => self.new_text(msg, text),
        }
    }

    /// A new text part in message `msg`.
    fn new_text(&self, msg: usize, text: &str) -> Value {
        match self.conv.format {
            Format::Responses => {
                let role = self.conv.messages.get(msg).map_or(Role::User, |m| m.role);
                text_part(role, text)
            }
            Format::OpenAi | Format::Anthropic | Format::Gemini => text_block(text),
        }
    }

    fn rebuild(&self, from: usize, blocks: &[OutBlock]) -> Value {
        let mut base = as_map(self.msg(from));
        let role = self.conv.messages.get(from).map_or(Role::User, |m| m.role);
        let format = self.conv.format;
        let rendered: Vec<BlockOut> = blocks.iter().map(|b| self.out_block(b, from)).collect();
        if format == Format::OpenAi && matches!(role, Role::Tool | Role::Function) {
            let content = rendered.into_iter().find_map(|b| match b {
                BlockOut::ContentString(s) => Some(s),
                _ => None,
            });
            base.insert("content".into(), content.unwrap_or_else(|| "".into()));
            return Value::Object(base);
        }
        let mut string_content: Option<Value> = None;
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        let mut refusal = None;
        let mut function_call = None;
        for b in rendered {
            match b {
                BlockOut::ContentString(s) => string_content = Some(s),
                BlockOut::Part(p) => parts.push(p),
                BlockOut::Call(c) => calls.push(c),
                BlockOut::Refusal(r) => refusal = r,
                BlockOut::FunctionCall(f) => function_call = f,
            }
        }
        let content = match (string_content, parts.is_empty()) {
            (Some(s), true) => s,
            (Some(s), false) => {
                let mut l = vec![self.new_text(from, s.as_str().unwrap_or_default())];
                l.extend(parts);
                Value::Array(l)
            }
            (None, true) => {
                if format == Format::OpenAi && (!calls.is_empty() || function_call.is_some()) {
                    Value::Null
                } else if format == Format::OpenAi {
                    "".into()
                } else {
                    Value::Array(Vec::new())
                }
            }
            (None, false) => Value::Array(parts),
        };
        base.insert("content".into(), content);
        if format == Format::OpenAi {
            if !calls.is_empty() {
                base.insert("tool_calls".into(), Value::Array(calls));
            } else {
                base.shift_remove("tool_calls");
            }
            match refusal {
                Some(r) => {
                    base.insert("refusal".into(), r);
                }
                None => {
                    base.shift_remove("refusal");
                }
            }
            if let Some(f) = function_call {
                base.insert("function_call".into(), f);
            }
        }
        Value::Object(base)
    }

    fn out_block(&self, b: &OutBlock, from: usize) -> BlockOut {
        match b {
            OutBlock::Orig { msg, block, edit } => self.block(*msg, *block, edit.as_deref()),
            OutBlock::Text(t) => BlockOut::Part(self.new_text(from, t)),
            OutBlock::Result {
                id, text, is_error, ..
            } => {
                let mut d = Map::new();
                d.insert("type".into(), "tool_result".into());
                d.insert(
                    "tool_use_id".into(),
                    id.as_deref().map_or(Value::Null, Value::from),
                );
                d.insert("content".into(), text.as_str().into());
                if *is_error {
                    d.insert("is_error".into(), true.into());
                }
                BlockOut::Part(Value::Object(d))
            }
        }
    }

    fn new_message(&self, role: Role, blocks: &[OutBlock]) -> Value {
        let mut d = Map::new();
        d.insert("role".into(), role.name().into());
        if self.conv.format == Format::OpenAi {
            if let [OutBlock::Result { id, name, text, .. }] = blocks {
                if role == Role::Function {
                    d.insert("name".into(), name.as_deref().unwrap_or("").into());
                } else {
                    d.insert(
                        "tool_call_id".into(),
                        id.as_deref().map_or(Value::Null, Value::from),
                    );
                }
                d.insert("content".into(), text.as_str().into());
                return Value::Object(d);
            }
        }
        if let [OutBlock::Text(t)] = blocks {
            d.insert("content".into(), t.as_str().into());
            return Value::Object(d);
        }
        let mut parts = Vec::new();
        for b in blocks {
            match self.out_block(b, 0) {
                BlockOut::Part(p) | BlockOut::Call(p) => parts.push(p),
                BlockOut::ContentString(s) => {
                    parts.push(text_block(s.as_str().unwrap_or_default()))
                }
                BlockOut::Refusal(_) | BlockOut::FunctionCall(_) => {}
            }
        }
        d.insert("content".into(), Value::Array(parts));
        Value::Object(d)
    }
}

/// A new Responses text part for a message of `role`.
pub(super) fn text_part(role: Role, text: &str) -> Value {
    let mut d = Map::new();
    if role == Role::Assistant {
        d.insert("type".into(), "output_text".into());
        d.insert("text".into(), text.into());
        d.insert("annotations".into(), Value::Array(Vec::new()));
    } else {
        d.insert("type".into(), "input_text".into());
        d.insert("text".into(), text.into());
    }
    Value::Object(d)
}

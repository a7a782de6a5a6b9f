//! The Gemini writer (see `python/render/gemini.rs`, which this mirrors): a rebuilt `Content`
//! keeps every field and gets a new `parts` list whose untouched parts are copies of the input's;
//! an edited part has only its text, `args` or `response` replaced (its `thought_signature`
//! goes back as it came); new contents are built. Synthetic ids are never written.

use super::{args_object, as_map, field, Writer};
use crate::formats::gemini::{gemini_role, is_synthetic};
use crate::message::BlockKind;
use crate::planner::{OutBlock, OutMsg};
use serde_json::{Map, Value};

/// The key an object uses for a field (its camelCase twin when that is the one present).
fn key_of(d: &Map<String, Value>, snake: &'static str, camel: &'static str) -> &'static str {
    if !d.contains_key(snake) && d.contains_key(camel) {
        camel
    } else {
        snake
    }
}

fn get2<'v>(obj: &'v Value, snake: &str, camel: &str) -> Option<&'v Value> {
    field(obj, snake).or_else(|| field(obj, camel))
}

impl Writer<'_, '_> {
    pub(super) fn render_gemini(&self, out: &OutMsg) -> Option<Value> {
        match out {
            OutMsg::Keep(_) => None,
            OutMsg::Rebuild { from, blocks } => {
                let mut d = self.messages.get(*from).map(as_map).unwrap_or_default();
                d.insert("parts".into(), self.gemini_parts(blocks));
                Some(Value::Object(d))
            }
            OutMsg::New { role, blocks } => {
                let mut d = Map::new();
                d.insert("role".into(), gemini_role(*role).into());
                d.insert("parts".into(), self.gemini_parts(blocks));
                Some(Value::Object(d))
            }
        }
    }

    fn gemini_parts(&self, blocks: &[OutBlock]) -> Value {
        Value::Array(blocks.iter().map(|b| self.gemini_block(b)).collect())
    }

    fn gemini_block(&self, b: &OutBlock) -> Value {
        match b {
            OutBlock::Text(t) => {
                let mut d = Map::new();
                d.insert("text".into(), t.as_str().into());
                Value::Object(d)
            }
            OutBlock::Result {
                id,
                name,
                text,
                is_error,
            } => {
                let mut r = Map::new();
                if let Some(id) = id.as_deref().filter(|id| !is_synthetic(id)) {
                    r.insert("id".into(), id.into());
                }
                r.insert("name".into(), name.as_deref().unwrap_or("").into());
                let mut resp = Map::new();
                resp.insert(
                    if *is_error { "error" } else { "output" }.into(),
                    text.as_str().into(),
                );
                r.insert("response".into(), Value::Object(resp));
                let mut d = Map::new();
                d.insert("function_response".into(), Value::Object(r));
                Value::Object(d)
            }
            OutBlock::Orig { msg, block, edit } => {
                let part = self
                    .messages
                    .get(*msg)
                    .and_then(|m| field(m, "parts"))
                    .and_then(|p| p.get(*block))
                    .cloned()
                    .unwrap_or(Value::Null);
                match edit {
                    None => part,
                    Some(t) => {
                        let kind = self
                            .conv
                            .messages
                            .get(*msg)
                            .and_then(|m| m.blocks.get(*block))
                            .map_or(BlockKind::Text, |b| b.kind);
                        edited(&part, kind, t)
                    }
                }
            }
        }
    }
}

/// A copy of `part` with its text, `args` or `response` replaced by `text`.
fn edited(part: &Value, kind: BlockKind, text: &str) -> Value {
    let (snake, camel, inner, value) = match kind {
        BlockKind::Text | BlockKind::Thinking => ("text", "text", None, Value::from(text)),
        BlockKind::ToolCall => (
            "function_call",
            "functionCall",
            Some("args"),
            args_object(text, "_truncated"),
        ),
        BlockKind::ToolResult => {
            let mut d = Map::new();
            d.insert("output".into(), text.into());
            (
                "function_response",
                "functionResponse",
                Some("response"),
                Value::Object(d),
            )
        }
        _ => {
            let mut d = Map::new();
            d.insert("text".into(), text.into());
            return Value::Object(d);
        }
    };
    let value = match inner {
        None => value,
        Some(key) => {
            let mut obj = get2(part, snake, camel).map(as_map).unwrap_or_default();
            obj.insert(key.into(), value);
            Value::Object(obj)
        }
    };
    let mut d = as_map(part);
    let key = key_of(&d, snake, camel);
    d.insert(key.into(), value);
    Value::Object(d)
}

//! The Responses writer (see `python/render/responses.rs`, which this mirrors): a new text part,
//! an edited call or output item, a synthetic output, a new `message` item.

use super::{as_map, field, text_part, Writer};
use crate::message::{BlockKind, Role};
use crate::planner::OutBlock;
use serde_json::{Map, Value};

impl Writer<'_, '_> {
    /// The wire `type` of the call item with `call_id` in the input, if any.
    fn call_type(&self, call_id: &str) -> Option<&str> {
        let i = self.conv.messages.iter().position(|m| {
            crate::formats::responses::is_call_item(m)
                && m.calls().any(|c| c.id.as_deref() == Some(call_id))
        })?;
        field(self.messages.get(i)?, "type")?.as_str()
    }

    /// A rebuilt typed item (a call with cut arguments, an output cleared to a placeholder).
    pub(super) fn rebuild_item(&self, from: usize, blocks: &[OutBlock]) -> Value {
        let Some(base_value) = self.messages.get(from) else {
            return Value::Object(Map::new());
        };
        let mut base = as_map(base_value);
        let kind = self.conv.messages[from].blocks.first().map(|b| b.kind);
        for b in blocks {
            if let OutBlock::Orig {
                edit: Some(text), ..
            } = b
            {
                let key = match kind {
                    Some(BlockKind::ToolCall) => {
                        if base.contains_key("arguments") {
                            "arguments"
                        } else {
                            "input"
                        }
                    }
                    _ => "output",
                };
                base.insert(key.into(), text.as_str().into());
            }
        }
        Value::Object(base)
    }

    /// A new item: a synthetic output, or a `message` item.
    pub(super) fn new_item(&self, role: Role, blocks: &[OutBlock]) -> Value {
        let mut d = Map::new();
        if let [OutBlock::Result { id, text, .. }] = blocks {
            let id = id.as_deref().unwrap_or_default();
            let ty = match self.call_type(id) {
                Some("custom_tool_call") => "custom_tool_call_output",
                _ => "function_call_output",
            };
            d.insert("type".into(), ty.into());
            d.insert("call_id".into(), id.into());
            d.insert("output".into(), text.as_str().into());
            return Value::Object(d);
        }
        let role = match role {
            Role::System | Role::Developer | Role::Assistant => role,
            _ => Role::User,
        };
        d.insert("type".into(), "message".into());
        d.insert("role".into(), role.name().into());
        let mut parts = Vec::new();
        for b in blocks {
            match b {
                OutBlock::Text(t) => parts.push(text_part(role, t)),
                OutBlock::Orig { msg, block, edit } => {
                    let Some(v) = self
                        .conv
                        .messages
                        .get(*msg)
                        .and_then(|m| m.blocks.get(*block))
                    else {
                        continue;
                    };
                    match (edit, v.kind) {
                        (Some(t), _) => parts.push(text_part(role, t)),
                        (None, BlockKind::Text) => {
                            let t: String = v.texts.iter().map(|p| p.text().to_utf8()).collect();
                            parts.push(text_part(role, &t));
                        }
                        _ => {}
                    }
                }
                OutBlock::Result { text, .. } => parts.push(text_part(role, text)),
            }
        }
        d.insert("content".into(), Value::Array(parts));
        Value::Object(d)
    }
}

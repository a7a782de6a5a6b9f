//! The Responses writer: the items a compaction creates or edits, in the shapes the SDK's
//! `ResponseInputParam` accepts (kept items are returned as the input objects, see `render`).
//!
//! - the summary (and any new message) is a `message` item with `input_text` parts, role
//!   `user` (or `developer` with `summary_role="developer"`); a new assistant text is an
//!   `output_text` part;
//! - an edited call keeps every field of the item and replaces `arguments` (`input` for a
//!   custom tool call); an edited output replaces `output` with the text (a cleared result);
//! - a synthetic output for a call that never got one is a `function_call_output` (a
//!   `custom_tool_call_output` for a custom tool call) with that `call_id`.
//!
//! Opaque items (reasoning, compaction, unknown types, outputs without a plain text) are never
//! edited by the planner (`Block::opaque`), so they only ever come back as themselves.

use super::{as_dict, Source};
use crate::message::{BlockKind, Role};
use crate::planner::OutBlock;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// A new text part for a message of `role`.
pub fn text_part<'py>(py: Python<'py>, role: Role, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if role == Role::Assistant {
        d.set_item("type", "output_text")?;
        d.set_item("text", text)?;
        d.set_item("annotations", PyList::empty(py))?;
    } else {
        d.set_item("type", "input_text")?;
        d.set_item("text", text)?;
    }
    Ok(d)
}

impl<'py> Source<'_, 'py> {
    /// The wire `type` of the call item with `call_id` in the input, if any.
    fn call_type(&self, call_id: &str) -> Option<String> {
        let i = self.conv.messages.iter().position(|m| {
            crate::formats::responses::is_call_item(m)
                && m.calls().any(|c| c.id.as_deref() == Some(call_id))
        })?;
        let obj = self.messages[i].bind(self.py);
        let ty = match obj.cast::<PyDict>() {
            Ok(d) => d.get_item("type").ok().flatten(),
            Err(_) => obj.getattr(intern!(self.py, "type")).ok(),
        }?;
        ty.extract::<String>().ok()
    }

    /// A rebuilt typed item (a call with cut arguments, an output cleared to a placeholder).
    pub(super) fn rebuild_item(
        &self,
        from: usize,
        blocks: &[OutBlock],
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let base = as_dict(&self.messages[from].bind(py).clone())?;
        let view = &self.conv.messages[from].blocks[0];
        for b in blocks {
            if let OutBlock::Orig {
                edit: Some(text), ..
            } = b
            {
                let key = match view.kind {
                    BlockKind::ToolCall => {
                        if base.contains(intern!(py, "arguments"))? {
                            "arguments"
                        } else {
                            "input"
                        }
                    }
                    _ => "output",
                };
                base.set_item(key, PyString::new(py, text))?;
            }
        }
        Ok(base.into_any())
    }

    /// A new item: a synthetic output, or a `message` item.
    pub(super) fn new_item(&self, role: Role, blocks: &[OutBlock]) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let d = PyDict::new(py);
        if let [OutBlock::Result { id, text, .. }] = blocks {
            let id = id.as_deref().unwrap_or_default();
            let ty = match self.call_type(id).as_deref() {
                Some("custom_tool_call") => "custom_tool_call_output",
                _ => "function_call_output",
            };
            d.set_item("type", ty)?;
            d.set_item("call_id", id)?;
            d.set_item("output", text)?;
            return Ok(d.into_any());
        }
        let role = match role {
            Role::System | Role::Developer | Role::Assistant => role,
            _ => Role::User,
        };
        d.set_item("type", "message")?;
        d.set_item("role", role.name())?;
        let parts = PyList::empty(py);
        for b in blocks {
            match b {
                OutBlock::Text(t) => parts.append(text_part(py, role, t)?)?,
                OutBlock::Orig { msg, block, edit } => {
                    let v = &self.conv.messages[*msg].blocks[*block];
                    match (edit, v.kind) {
                        (Some(t), _) => parts.append(text_part(py, role, t)?)?,
                        (None, BlockKind::Text) => {
                            let t: String = v.texts.iter().map(|p| p.text().to_utf8()).collect();
                            parts.append(text_part(py, role, &t)?)?
                        }
                        _ => {}
                    }
                }
                OutBlock::Result { text, .. } => parts.append(text_part(py, role, text)?)?,
            }
        }
        d.set_item("content", parts)?;
        Ok(d.into_any())
    }
}

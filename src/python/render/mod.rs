//! Build the output messages of a compaction in the conversation's wire format.
//!
//! `Keep` returns the input object itself. `Rebuild` copies the input message (a dict copy, or
//! the SDK object's `model_dump(exclude_none=True)`) and replaces only its content and calls;
//! untouched blocks inside it are the same block objects. `New` messages are plain dicts.
//!
//! One writer per wire format, mirroring `extract/`: this module writes Chat Completions and
//! Anthropic messages, `gemini.rs` Gemini `contents`, `responses.rs` Responses items.

mod gemini;
mod responses;

use crate::message::{BlockKind, Conversation, Format, Origin, Role};
use crate::planner::{OutBlock, OutMsg};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// The input messages and the view they were read into.
pub struct Source<'s, 'py> {
    pub py: Python<'py>,
    pub messages: &'s [Py<PyAny>],
    pub conv: &'s Conversation<'static>,
}

/// A plain dict copy of a message or block object.
pub(super) fn as_dict<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let py = obj.py();
    if let Ok(d) = obj.cast::<PyDict>() {
        return d.copy();
    }
    if let Ok(dump) = obj.getattr(intern!(py, "model_dump")) {
        let kwargs = PyDict::new(py);
        kwargs.set_item("exclude_none", true)?;
        let d = dump.call((), Some(&kwargs))?;
        return Ok(d.cast_into::<PyDict>()?);
    }
    // Any other mapping.
    let d = PyDict::new(py);
    d.update(obj.cast::<pyo3::types::PyMapping>()?)?;
    Ok(d)
}

/// `obj[key]` for dicts and mappings, `obj.key` for objects; `None` when absent.
fn field<'py>(
    obj: &Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let v = if let Ok(d) = obj.cast::<PyDict>() {
        d.get_item(key)?
    } else if obj.hasattr(intern!(obj.py(), "model_dump"))? {
        obj.getattr_opt(key)?
    } else {
        match obj.get_item(key) {
            Ok(v) => Some(v),
            Err(_) => obj.getattr_opt(key)?,
        }
    };
    Ok(v.filter(|v| !v.is_none()))
}

/// Cut JSON arguments as an object (Anthropic `input`, LangChain `args`): the parsed text, or
/// `{"_truncated": text}` when the cut left it unparsable.
fn args_object<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let json = py.import("json")?;
    Ok(match json.call_method1("loads", (text,)) {
        Ok(v) if v.is_instance_of::<PyDict>() => v,
        _ => {
            let w = PyDict::new(py);
            w.set_item("_truncated", text)?;
            w.into_any()
        }
    })
}

fn item<'py>(seq: &Bound<'py, PyAny>, k: usize) -> PyResult<Bound<'py, PyAny>> {
    seq.get_item(k)
}

fn text_block<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("type", "text")?;
    d.set_item("text", text)?;
    Ok(d)
}

impl<'s, 'py> Source<'s, 'py> {
    fn msg(&self, i: usize) -> Bound<'py, PyAny> {
        self.messages[i].bind(self.py).clone()
    }

    /// Build one output message.
    pub fn render(&self, out: &OutMsg) -> PyResult<Bound<'py, PyAny>> {
        // Each format's writer; Chat Completions and Anthropic messages are written below
        // (Responses `message` items too: they are chat messages).
        match self.conv.format {
            Format::Gemini => return gemini::GeminiWriter::new(self)?.render(out),
            Format::Responses => match out {
                OutMsg::Rebuild { from, blocks }
                    if crate::formats::responses::is_item(&self.conv.messages[*from]) =>
                {
                    return self.rebuild_item(*from, blocks);
                }
                OutMsg::New { role, blocks } => return self.new_item(*role, blocks),
                _ => {}
            },
            Format::OpenAi | Format::Anthropic => {}
        }
        match out {
            OutMsg::Keep(i) => Ok(self.msg(*i)),
            OutMsg::Rebuild { from, blocks } => self.rebuild(*from, blocks),
            OutMsg::New { role, blocks } => self.new_message(*role, blocks),
        }
    }

    /// The wire object of block `k` of message `i` (a content part, a tool call, ...), or its
    /// edited copy.
    fn block(&self, msg: usize, k: usize, edit: Option<&str>) -> PyResult<BlockOut<'py>> {
        let py = self.py;
        let view = &self.conv.messages[msg].blocks[k];
        let m = self.msg(msg);
        let content = || -> PyResult<Bound<'py, PyAny>> {
            field(&m, intern!(py, "content"))?
                .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("content"))
        };
        Ok(match view.origin {
            Origin::Content => match edit {
                None => BlockOut::ContentString(content()?),
                Some(t) => BlockOut::ContentString(PyString::new(py, t).into_any()),
            },
            Origin::Part(p) => {
                let obj = item(&content()?, p)?;
                match edit {
                    None => BlockOut::Part(obj),
                    Some(t) => {
                        BlockOut::Part(self.edited_part(&obj, view.kind, t, msg)?.into_any())
                    }
                }
            }
            Origin::Refusal => BlockOut::Refusal(field(&m, intern!(py, "refusal"))?),
            Origin::Call(c) => {
                let call = item(
                    &field(&m, intern!(py, "tool_calls"))?
                        .unwrap_or_else(|| PyList::empty(py).into_any()),
                    c,
                )?;
                match edit {
                    None => BlockOut::Call(call),
                    Some(args) if field(&call, intern!(py, "args"))?.is_some() => {
                        // A LangChain `tool_calls[k]`: `args` is a dict.
                        let d = as_dict(&call)?;
                        d.set_item("args", args_object(py, args)?)?;
                        BlockOut::Call(d.into_any())
                    }
                    Some(args) => {
                        let d = as_dict(&call)?;
                        let (fkey, akey) = if d.contains(intern!(py, "function"))? {
                            ("function", "arguments")
                        } else {
                            ("custom", "input")
                        };
                        if let Some(f) = d.get_item(fkey)? {
                            let f = as_dict(&f)?;
                            f.set_item(akey, args)?;
                            d.set_item(fkey, f)?;
                        }
                        BlockOut::Call(d.into_any())
                    }
                }
            }
            Origin::FunctionCall => {
                let fc = field(&m, intern!(py, "function_call"))?;
                match (fc, edit) {
                    (Some(fc), Some(args)) => {
                        let d = as_dict(&fc)?;
                        d.set_item("arguments", args)?;
                        BlockOut::FunctionCall(Some(d.into_any()))
                    }
                    (fc, _) => BlockOut::FunctionCall(fc),
                }
            }
            Origin::Whole | Origin::Item => match edit {
                None => BlockOut::ContentString(
                    content().unwrap_or_else(|_| PyString::new(py, "").into_any()),
                ),
                Some(t) => BlockOut::ContentString(PyString::new(py, t).into_any()),
            },
        })
    }

    /// A copy of a content part/block with its text replaced.
    fn edited_part(
        &self,
        obj: &Bound<'py, PyAny>,
        kind: BlockKind,
        text: &str,
        msg: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let py = self.py;
        match kind {
            BlockKind::Text | BlockKind::Refusal if !obj.is_instance_of::<PyString>() => {
                let d = as_dict(obj)?;
                let key = if kind == BlockKind::Refusal {
                    "refusal"
                } else {
                    "text"
                };
                d.set_item(key, text)?;
                Ok(d)
            }
            BlockKind::ToolResult => {
                let d = as_dict(obj)?;
                d.set_item("content", text)?;
                Ok(d)
            }
            BlockKind::ToolCall => {
                // Anthropic tool_use: `input` must stay an object.
                let d = as_dict(obj)?;
                d.set_item("input", args_object(py, text)?)?;
                Ok(d)
            }
            _ => self.new_text(msg, text),
        }
    }

    /// A new text part in message `msg` (Responses: `input_text`, or `output_text` for the
    /// assistant).
    fn new_text(&self, msg: usize, text: &str) -> PyResult<Bound<'py, PyDict>> {
        match self.conv.format {
            Format::Responses => responses::text_part(self.py, self.conv.messages[msg].role, text),
            Format::OpenAi | Format::Anthropic | Format::Gemini => text_block(self.py, text),
        }
    }

    fn rebuild(&self, from: usize, blocks: &[OutBlock]) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let base = as_dict(&self.msg(from))?;
        let role = self.conv.messages[from].role;
        let format = self.conv.format;
        let rendered = blocks
            .iter()
            .map(|b| self.out_block(b, from))
            .collect::<PyResult<Vec<_>>>()?;
        if format == Format::OpenAi && matches!(role, Role::Tool | Role::Function) {
            let content = rendered.into_iter().find_map(|b| match b {
                BlockOut::ContentString(s) => Some(s),
                _ => None,
            });
            base.set_item(
                "content",
                content.unwrap_or_else(|| PyString::new(py, "").into_any()),
            )?;
            return Ok(base.into_any());
        }
        let mut string_content: Option<Bound<'py, PyAny>> = None;
        let parts = PyList::empty(py);
        let calls = PyList::empty(py);
        let mut refusal = None;
        let mut function_call = None;
        for b in rendered {
            match b {
                BlockOut::ContentString(s) => string_content = Some(s),
                BlockOut::Part(p) => parts.append(p)?,
                BlockOut::Call(c) => calls.append(c)?,
                BlockOut::Refusal(r) => refusal = r,
                BlockOut::FunctionCall(f) => function_call = f,
            }
        }
        let content: Bound<'py, PyAny> = match (string_content, parts.len()) {
            (Some(s), 0) => s,
            (Some(s), _) => {
                // A string content plus new blocks: become a list.
                let l = PyList::empty(py);
                l.append(self.new_text(from, &s.extract::<String>()?)?)?;
                for p in parts.iter() {
                    l.append(p)?;
                }
                l.into_any()
            }
            (None, 0) => {
                if format == Format::OpenAi && (calls.len() > 0 || function_call.is_some()) {
                    py.None().into_bound(py)
                } else if format == Format::OpenAi {
                    PyString::new(py, "").into_any()
                } else {
                    PyList::empty(py).into_any()
                }
            }
            (None, _) => parts.into_any(),
        };
        base.set_item("content", content)?;
        if format == Format::OpenAi {
            if calls.len() > 0 {
                base.set_item("tool_calls", calls)?;
            } else if base.contains("tool_calls")? {
                base.del_item("tool_calls")?;
            }
            match refusal {
                Some(r) => base.set_item("refusal", r)?,
                None => {
                    if base.contains("refusal")? {
                        base.del_item("refusal")?;
                    }
                }
            }
            if let Some(f) = function_call {
                base.set_item("function_call", f)?;
            }
        }
        Ok(base.into_any())
    }

    fn out_block(&self, b: &OutBlock, from: usize) -> PyResult<BlockOut<'py>> {
        let py = self.py;
        Ok(match b {
            OutBlock::Orig { msg, block, edit } => self.block(*msg, *block, edit.as_deref())?,
            OutBlock::Text(t) => BlockOut::Part(self.new_text(from, t)?.into_any()),
            OutBlock::Result {
                id, text, is_error, ..
            } => {
                let d = PyDict::new(py);
                d.set_item("type", "tool_result")?;
                d.set_item("tool_use_id", id.as_deref())?;
                d.set_item("content", text)?;
                if *is_error {
                    d.set_item("is_error", true)?;
                }
                BlockOut::Part(d.into_any())
            }
        })
    }

    fn new_message(&self, role: Role, blocks: &[OutBlock]) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let d = PyDict::new(py);
        d.set_item("role", role.name())?;
        if self.conv.format == Format::OpenAi {
            if let [OutBlock::Result { id, name, text, .. }] = blocks {
                if role == Role::Function {
                    d.set_item("name", name.as_deref().unwrap_or(""))?;
                } else {
                    d.set_item("tool_call_id", id.as_deref())?;
                }
                d.set_item("content", text)?;
                return Ok(d.into_any());
            }
        }
        if let [OutBlock::Text(t)] = blocks {
            d.set_item("content", t)?;
            return Ok(d.into_any());
        }
        let parts = PyList::empty(py);
        for b in blocks {
            match self.out_block(b, 0)? {
                BlockOut::Part(p) | BlockOut::Call(p) => parts.append(p)?,
                BlockOut::ContentString(s) => {
                    parts.append(text_block(py, &s.extract::<String>()?)?)?
                }
                BlockOut::Refusal(_) | BlockOut::FunctionCall(_) => {}
            }
        }
        d.set_item("content", parts)?;
        Ok(d.into_any())
    }
}

/// A rendered block, by where it goes in the message.
enum BlockOut<'py> {
    ContentString(Bound<'py, PyAny>),
    Part(Bound<'py, PyAny>),
    Call(Bound<'py, PyAny>),
    Refusal(Option<Bound<'py, PyAny>>),
    FunctionCall(Option<Bound<'py, PyAny>>),
}

//! Build the output `contents` of a compaction of Gemini `contents`, in the input's own types.
//!
//! `Keep` returns the input `Content` itself. `Rebuild` copies it (a dict copy, or the SDK
//! object's `model_copy`) with a new `parts` list whose untouched parts are the same part
//! objects; an edited part is a copy with only its text, `args` or `response` replaced, so its
//! `thought_signature` and every other field go back as they came (signed parts are never
//! edited: see `crate::message::Block::signed`). `New` contents (the summary, a synthetic
//! response, a merged responses turn) are dicts when the input's contents are dicts, and
//! `types.Content` / `types.Part` objects (from the input's own module) when they are not.
//! Synthetic ids (`crate::formats::gemini::SYNTHETIC_ID_PREFIX`) are never written.

use super::Source;
use crate::formats::gemini::{gemini_role, is_synthetic};
use crate::message::BlockKind;
use crate::planner::{OutBlock, OutMsg};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// Where new parts and contents come from: dicts, or the SDK module's classes.
enum Make<'py> {
    Dicts,
    Types {
        content: Bound<'py, PyAny>,
        part: Bound<'py, PyAny>,
    },
}

impl<'py> Make<'py> {
    /// `parts` with every dict part made a `types.Part` (in `Types` mode).
    fn as_parts_with(&self, parts: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = parts.py();
        let out = PyList::empty(py);
        for p in parts.try_iter()? {
            let p = p?;
            match self {
                Make::Types { part, .. } if p.is_instance_of::<PyDict>() => {
                    out.append(part.call_method1(intern!(py, "model_validate"), (p,))?)?
                }
                _ => out.append(p)?,
            }
        }
        Ok(out)
    }
}

/// The writer for one compaction's output.
pub struct GeminiWriter<'a, 's, 'py> {
    src: &'a Source<'s, 'py>,
    make: Make<'py>,
}

fn get<'py>(
    obj: &Bound<'py, PyAny>,
    snake: &str,
    camel: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        let v = match d.get_item(snake)? {
            Some(v) => Some(v),
            None => d.get_item(camel)?,
        };
        return Ok(v.filter(|v| !v.is_none()));
    }
    if !obj.hasattr(intern!(obj.py(), "model_dump"))? {
        if let Ok(v) = obj.get_item(snake) {
            return Ok(Some(v).filter(|v| !v.is_none()));
        }
        if let Ok(v) = obj.get_item(camel) {
            return Ok(Some(v).filter(|v| !v.is_none()));
        }
    }
    Ok(obj.getattr_opt(snake)?.filter(|v| !v.is_none()))
}

/// The key a dict uses for a field (its camelCase twin when that is the one present).
fn dict_key(d: &Bound<'_, PyDict>, snake: &'static str, camel: &'static str) -> &'static str {
    if !d.contains(snake).unwrap_or(false) && d.contains(camel).unwrap_or(false) {
        camel
    } else {
        snake
    }
}

/// A JSON object from an edited text (`args`, `response`), else `{wrap: text}`.
fn json_object<'py>(py: Python<'py>, text: &str, wrap: &str) -> PyResult<Bound<'py, PyAny>> {
    let json = py.import("json")?;
    match json.call_method1("loads", (text,)) {
        Ok(v) if v.is_instance_of::<PyDict>() => Ok(v),
        _ => {
            let w = PyDict::new(py);
            w.set_item(wrap, text)?;
            Ok(w.into_any())
        }
    }
}

impl<'a, 's, 'py> GeminiWriter<'a, 's, 'py> {
    pub fn new(src: &'a Source<'s, 'py>) -> PyResult<Self> {
        let py = src.py;
        let first = src.messages.first().map(|m| m.bind(py));
        let make = match first {
            Some(m) if !m.is_instance_of::<PyDict>() && m.hasattr(intern!(py, "model_copy"))? => {
                Self::types_of(m)?
            }
            _ => Make::Dicts,
        };
        Ok(GeminiWriter { src, make })
    }

    pub fn render(&self, out: &OutMsg) -> PyResult<Bound<'py, PyAny>> {
        match out {
            OutMsg::Keep(i) => Ok(self.src.messages[*i].bind(self.src.py).clone()),
            OutMsg::Rebuild { from, blocks } => {
                let py = self.src.py;
                let m = self.src.messages[*from].bind(py);
                let parts = self.parts(blocks)?;
                if let Ok(d) = m.cast::<PyDict>() {
                    let d = d.copy()?;
                    d.set_item("parts", parts)?;
                    return Ok(d.into_any());
                }
                let update = PyDict::new(py);
                let parts = match &self.make {
                    Make::Types { .. } => self.as_parts(&parts)?,
                    // A `types.Content` in a list that starts with a dict: its own module's parts.
                    Make::Dicts => Self::types_of(m)?.as_parts_with(&parts)?,
                };
                update.set_item("parts", parts)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("update", update)?;
                m.call_method(intern!(py, "model_copy"), (), Some(&kwargs))
            }
            OutMsg::New { role, blocks } => {
                let py = self.src.py;
                let d = PyDict::new(py);
                d.set_item("role", gemini_role(*role))?;
                d.set_item("parts", self.parts(blocks)?)?;
                match &self.make {
                    Make::Dicts => Ok(d.into_any()),
                    Make::Types { content, .. } => {
                        let parts = self.as_parts(&d.get_item("parts")?.expect("set above"))?;
                        d.set_item("parts", parts)?;
                        content.call((), Some(&d))
                    }
                }
            }
        }
    }

    /// The SDK classes of the module `m`'s type comes from.
    fn types_of(m: &Bound<'py, PyAny>) -> PyResult<Make<'py>> {
        let module = m.py().import(m.get_type().module()?)?;
        Ok(Make::Types {
            content: module.getattr("Content")?,
            part: module.getattr("Part")?,
        })
    }

    /// In `Types` mode, every new dict part made a `types.Part`.
    fn as_parts(&self, parts: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        self.make.as_parts_with(parts)
    }

    fn parts(&self, blocks: &[OutBlock]) -> PyResult<Bound<'py, PyList>> {
        let py = self.src.py;
        let out = PyList::empty(py);
        for b in blocks {
            out.append(self.block(b)?)?;
        }
        Ok(out)
    }

    fn block(&self, b: &OutBlock) -> PyResult<Bound<'py, PyAny>> {
        let py = self.src.py;
        match b {
            OutBlock::Text(t) => {
                let d = PyDict::new(py);
                d.set_item("text", t)?;
                Ok(d.into_any())
            }
            OutBlock::Result {
                id,
                name,
                text,
                is_error,
            } => {
                let r = PyDict::new(py);
                if let Some(id) = id.as_deref().filter(|id| !is_synthetic(id)) {
                    r.set_item("id", id)?;
                }
                r.set_item("name", name.as_deref().unwrap_or(""))?;
                let resp = PyDict::new(py);
                resp.set_item(if *is_error { "error" } else { "output" }, text)?;
                r.set_item("response", resp)?;
                let d = PyDict::new(py);
                d.set_item("function_response", r)?;
                Ok(d.into_any())
            }
            OutBlock::Orig { msg, block, edit } => {
                let m = self.src.messages[*msg].bind(py);
                let parts = get(m, "parts", "parts")?
                    .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("parts"))?;
                let part = parts.get_item(*block)?;
                match edit {
                    None => Ok(part),
                    Some(t) => {
                        self.edited(&part, self.src.conv.messages[*msg].blocks[*block].kind, t)
                    }
                }
            }
        }
    }

    /// A copy of `part` with its text, `args` or `response` replaced by `text`.
    fn edited(
        &self,
        part: &Bound<'py, PyAny>,
        kind: BlockKind,
        text: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.src.py;
        let (snake, camel, inner, value) = match kind {
            BlockKind::Text | BlockKind::Thinking => {
                ("text", "text", None, PyString::new(py, text).into_any())
            }
            BlockKind::ToolCall => (
                "function_call",
                "functionCall",
                Some("args"),
                json_object(py, text, "_truncated")?,
            ),
            // Always `{"output": text}`: the reader counts exactly that text, as the planner did.
            BlockKind::ToolResult => {
                let d = PyDict::new(py);
                d.set_item("output", text)?;
                (
                    "function_response",
                    "functionResponse",
                    Some("response"),
                    d.into_any(),
                )
            }
            // An image or another part replaced by a placeholder: a text part.
            _ => {
                let d = PyDict::new(py);
                d.set_item("text", text)?;
                return Ok(d.into_any());
            }
        };
        let value = match inner {
            None => value,
            Some(key) => {
                let obj = get(part, snake, camel)?
                    .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(snake))?;
                copy_with(&obj, key, value)?
            }
        };
        match part.cast::<PyDict>() {
            Ok(d) => {
                let d = d.copy()?;
                d.set_item(dict_key(&d, snake, camel), value)?;
                Ok(d.into_any())
            }
            Err(_) => copy_with(part, snake, value),
        }
    }
}

/// A copy of a dict or SDK object with `key` set to `value`.
fn copy_with<'py>(
    obj: &Bound<'py, PyAny>,
    key: &str,
    value: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    if let Ok(d) = obj.cast::<PyDict>() {
        let d = d.copy()?;
        d.set_item(key, value)?;
        return Ok(d.into_any());
    }
    let update = PyDict::new(py);
    update.set_item(key, value)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("update", update)?;
    obj.call_method(intern!(py, "model_copy"), (), Some(&kwargs))
}

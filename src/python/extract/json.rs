//! Walking Python values: compact JSON of a value (an Anthropic `tool_use.input`, a tool
//! definition) and every string inside one (a block of unknown type), for counting.

use super::loc::{type_name, Loc, LocErr};
use super::{Extractor, MAX_DEPTH};
use crate::message::Piece;
use crate::text::Text;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

impl<'py> Extractor<'py> {
    /// Every string value inside `v` (for blocks of unknown type).
    pub(super) fn strings(
        &mut self,
        v: &Bound<'py, PyAny>,
        out: &mut Vec<Piece<'static>>,
        loc: &Loc<'_>,
        depth: usize,
    ) -> PyResult<()> {
        if depth > MAX_DEPTH {
            return Err(loc.err(self.py, "nested too deeply (or cyclic)"));
        }
        if let Ok(s) = v.cast::<PyString>() {
            out.push(Piece::Borrowed(self.borrow(s)?));
        } else if let Ok(d) = v.cast::<PyDict>() {
            for (k, item) in d.iter() {
                let key = k
                    .str()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if key == "type" {
                    continue;
                }
                self.strings(&item, out, &loc.child(&key), depth + 1)?;
            }
        } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            for (k, item) in self.sequence(v, loc)?.iter().enumerate() {
                self.strings(item, out, &loc.item(k), depth + 1)?;
            }
        } else if let Ok(dump) = v.getattr(intern!(self.py, "model_dump")) {
            // An SDK block object of a type we do not know.
            let d = dump.call0()?;
            self.strings(&d, out, loc, depth + 1)?;
        }
        Ok(())
    }

    /// Compact JSON of a Python value (an Anthropic `tool_use.input`, a tool definition), for
    /// counting. Non-finite floats are written as JavaScript does (`NaN`, `Infinity`).
    pub fn json(
        &mut self,
        v: &Bound<'py, PyAny>,
        out: &mut String,
        loc: &Loc<'_>,
        depth: usize,
    ) -> PyResult<()> {
        if depth > MAX_DEPTH {
            return Err(loc.err(self.py, "nested too deeply (or cyclic)"));
        }
        if v.is_none() {
            out.push_str("null");
        } else if let Ok(s) = v.cast::<PyString>() {
            // SAFETY: `v` is alive for this call and the text is consumed before returning.
            let t = unsafe { super::super::text::borrow_text(s)? };
            json_string(t, out);
        } else if v.is_instance_of::<PyBool>() {
            out.push_str(if v.is_truthy()? { "true" } else { "false" });
        } else if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() {
            let r = v.repr().map_err(|e| {
                let err = loc.err(self.py, "a number that cannot be written as JSON");
                err.set_cause(self.py, Some(e));
                err
            })?;
            let r = r.to_string_lossy();
            out.push_str(match &*r {
                "nan" => "NaN",
                "inf" => "Infinity",
                "-inf" => "-Infinity",
                other => other,
            });
        } else if let Ok(d) = v.cast::<PyDict>() {
            out.push('{');
            for (k, (key, item)) in d.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                let Ok(ks) = key.cast::<PyString>() else {
                    return Err(loc.err(
                        self.py,
                        &format!("object keys must be str, got {}", type_name(&key)),
                    ));
                };
                // SAFETY: as above.
                let kt = unsafe { super::super::text::borrow_text(ks)? };
                json_string(kt, out);
                out.push(':');
                let child = loc.child_text(kt);
                self.json(&item, out, &child, depth + 1)?;
            }
            out.push('}');
        } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            out.push('[');
            for (k, item) in self.sequence(v, loc)?.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                self.json(item, out, &loc.item(k), depth + 1)?;
            }
            out.push(']');
        } else if let Ok(dump) = v.getattr(intern!(self.py, "model_dump")) {
            let d = dump.call0()?;
            self.json(&d, out, loc, depth + 1)?;
        } else {
            return Err(loc.err(
                self.py,
                &format!("{} is not JSON-serializable", type_name(v)),
            ));
        }
        Ok(())
    }
}

/// Append `t` as a JSON string literal (the crate's one writer: a cut of these arguments is
/// counted as this writes it).
fn json_string(t: Text<'_>, out: &mut String) {
    crate::json::push_json_string(t, out);
}

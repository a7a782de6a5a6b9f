//! The binding's reader as a [`Source`]: Python objects (dicts, other mappings, SDK objects
//! read by attribute), for the readers written once for both APIs (`formats/gemini/read.rs`,
//! `formats/openai/read.rs`, `formats/blocks.rs`).

use super::access::Access;
use super::loc::{type_name, Loc, LocErr};
use super::Extractor;
use crate::formats::source::{Shapes, Source};
use crate::image::ImageSize;
use crate::message::{Format, FormatHints, Message, Piece};
use crate::text::Text;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// An object with fields, as the generic readers hold it: the object and how its fields are
/// read (the `isinstance` against `Mapping` is asked once, by [`Access::of`]).
pub struct PyObj<'py> {
    obj: Bound<'py, PyAny>,
    how: How,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Dict,
    Mapping,
    Attrs,
}

impl<'py> PyObj<'py> {
    pub(super) fn new(obj: &Bound<'py, PyAny>, acc: &Access<'_, 'py>) -> Self {
        let how = match acc {
            Access::Dict(_) => How::Dict,
            Access::Mapping(_) => How::Mapping,
            Access::Attrs(_) => How::Attrs,
        };
        PyObj {
            obj: obj.clone(),
            how,
        }
    }

    fn access(&self) -> Access<'_, 'py> {
        match (self.how, self.obj.cast::<PyDict>()) {
            (How::Dict, Ok(d)) => Access::Dict(d),
            (How::Mapping, _) => Access::Mapping(&self.obj),
            (How::Dict | How::Attrs, _) => Access::Attrs(&self.obj),
        }
    }
}

impl<'py> Extractor<'py> {
    /// The place of `key`, as an interned Python string, in the extractor's keys (made once per
    /// extractor). The readers ask with string literals: the address is compared first, so
    /// that a lookup is a few integer comparisons on the hot path, not a string comparison.
    fn key(&mut self, key: &'static str) -> usize {
        if let Some(i) = self.keys.iter().position(|(s, _)| std::ptr::eq(*s, key)) {
            return i;
        }
        let k = match self.keys.iter().find(|(s, _)| *s == key) {
            Some((_, k)) => k.clone_ref(self.py),
            None => PyString::intern(self.py, key).unbind(),
        };
        // A literal at another address (another crate's copy): remembered under it too.
        self.keys.push((key, k));
        self.keys.len() - 1
    }
}

impl<'py> Source<'static> for Extractor<'py> {
    type Node = Bound<'py, PyAny>;
    type Obj = PyObj<'py>;
    type Error = PyErr;

    fn error(&self, loc: &Loc<'_>, what: &str) -> PyErr {
        loc.err(self.py, what)
    }

    fn type_name(&self, v: &Self::Node) -> String {
        type_name(v)
    }

    fn hints(&mut self) -> &mut FormatHints {
        &mut self.hints
    }

    fn forced(&mut self) -> (Option<Format>, &mut Shapes) {
        (self.format, &mut self.shapes)
    }

    fn object(&mut self, v: &Self::Node, loc: &Loc<'_>) -> PyResult<PyObj<'py>> {
        let acc = Access::of(v, loc)?;
        Ok(PyObj::new(v, &acc))
    }

    fn field(
        &mut self,
        obj: &PyObj<'py>,
        key: &'static str,
        loc: &Loc<'_>,
    ) -> PyResult<Option<Self::Node>> {
        let i = self.key(key);
        obj.access().get(self.keys[i].1.bind(self.py), loc)
    }

    fn has_key(&mut self, obj: &PyObj<'py>, key: &'static str) -> Option<bool> {
        let i = self.key(key);
        let k = self.keys[i].1.bind(self.py);
        match obj.access() {
            Access::Dict(d) => d.contains(k).ok(),
            Access::Mapping(m) => m.contains(k).ok(),
            Access::Attrs(_) => None,
        }
    }

    fn sdk_type_is(&self, obj: &PyObj<'py>, module: &str, name: &str) -> Option<bool> {
        if obj.how != How::Attrs {
            return None;
        }
        let t = obj.obj.get_type();
        Some(
            t.name().is_ok_and(|n| n == name)
                && t.module()
                    .is_ok_and(|m| m.to_string_lossy().starts_with(module)),
        )
    }

    fn by_key(&self, obj: &PyObj<'py>) -> bool {
        obj.how != How::Attrs
    }

    fn dict_empty(&self, obj: &PyObj<'py>) -> Option<bool> {
        match obj.access() {
            Access::Dict(d) => Some(d.is_empty()),
            Access::Mapping(_) | Access::Attrs(_) => None,
        }
    }

    fn str(&mut self, v: &Self::Node) -> PyResult<Option<Text<'static>>> {
        match v.cast::<PyString>() {
            Ok(s) => Ok(Some(self.borrow(s)?)),
            Err(_) => Ok(None),
        }
    }

    fn list(&mut self, v: &Self::Node) -> Option<Vec<Self::Node>> {
        if let Ok(l) = v.cast::<PyList>() {
            return Some(l.iter().collect());
        }
        if let Ok(t) = v.cast::<PyTuple>() {
            return Some(t.iter().collect());
        }
        None
    }

    fn only_item(&mut self, v: &Self::Node, keys: &[&str]) -> Option<Self::Node> {
        let d = v.cast::<PyDict>().ok().filter(|d| d.len() == 1)?;
        let (k, item) = d.iter().next()?;
        let k = k.cast::<PyString>().ok()?;
        k.to_str().is_ok_and(|k| keys.contains(&k)).then_some(item)
    }

    fn truthy(&mut self, v: &Self::Node) -> PyResult<bool> {
        v.is_truthy()
    }

    fn display(&mut self, v: &Self::Node) -> PyResult<String> {
        Ok(v.str()?.to_string_lossy().into_owned())
    }

    fn plain(&mut self, v: Self::Node) -> PyResult<Self::Node> {
        let py = self.py;
        match v.getattr_opt(intern!(py, "model_dump"))? {
            Some(dump) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("exclude_none", true)?;
                kwargs.set_item("mode", "json")?;
                dump.call((), Some(&kwargs))
            }
            None => Ok(v),
        }
    }

    fn json(&mut self, v: &Self::Node, out: &mut String, loc: &Loc<'_>) -> PyResult<()> {
        Extractor::json(self, v, out, loc, 0)
    }

    fn result_depth(&mut self) -> &mut usize {
        &mut self.result_depth
    }

    fn data_url_size(&mut self, v: &Self::Node) -> Option<ImageSize> {
        crate::python::image::url_size(v)
    }

    fn base64_size(&mut self, v: &Self::Node) -> Option<ImageSize> {
        crate::python::image::base64_size(v)
    }

    fn len_is_zero(&mut self, v: &Self::Node) -> bool {
        v.len().is_ok_and(|n| n == 0)
    }

    fn roleless(&mut self, obj: &PyObj<'py>, index: usize) -> PyResult<Option<Message<'static>>> {
        if obj.how != How::Attrs {
            return Ok(None);
        }
        self.framework_message(&obj.obj, index, false)
    }

    fn read_done(&mut self, obj: &PyObj<'py>, m: &mut Message<'static>) {
        if self.fingerprints {
            m.fingerprint = super::super::fingerprint::fingerprint(&obj.obj);
        }
    }

    fn strings(
        &mut self,
        v: &Self::Node,
        out: &mut Vec<Piece<'static>>,
        loc: &Loc<'_>,
    ) -> PyResult<()> {
        Extractor::strings(self, v, out, loc, 0)
    }
}

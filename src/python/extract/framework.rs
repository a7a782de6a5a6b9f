//! Framework message objects (LangChain, pydantic-ai): found by their type, read through their
//! instance `__dict__`.
//!
//! Design note: both frameworks' messages lack a `role`, and looking one up on a LangChain
//! message (a pydantic model) runs pydantic's Python `__getattr__`, which builds and raises an
//! `AttributeError`: ~7 µs a miss, more than reading the rest of the message. So a type is
//! recognised once (the first of its objects is read by the framework readers after the `role`
//! miss) and remembered; its later objects go straight to their reader. Their fields are read
//! from the instance `__dict__` (pydantic models and dataclasses keep their fields there), with
//! dict lookups instead of attribute lookups (a missing field is a cheap dict miss).
//! Measured on 10k corpus messages (`benches/bench_adapters.py`, process CPU time on a shared
//! machine): a cold `check()` of LangChain messages went from 3.2x the same conversation as
//! dicts to 1.4-1.8x (what is left is mostly writing each call's `args` dict as JSON to count
//! it, where the dict copy holds the JSON string already); a warm one from 5.8x to 1.3-1.8x
//! once fingerprints read only the fields below.

use super::access::Access;
use super::Extractor;
use crate::message::{Message, Role};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyType};
use std::sync::Mutex;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Framework {
    /// A LangChain message class, with the role its objects have (their fields differ).
    LangChain(Role),
    PydanticAi,
    /// A part of a pydantic-ai message (registered for [`fingerprint_fields`]).
    PydanticAiPart,
}

/// The fields of a framework object that its reader reads: a fingerprint of them stands for the
/// object (see `fingerprint.rs`; the rest — ids, timestamps, usage, provider metadata — never
/// changes a count, and walking it cost 3-8x a dict message's fingerprint).
const LANGCHAIN_AI_FIELDS: &[&str] = &["type", "content", "tool_calls", "invalid_tool_calls"];
const LANGCHAIN_TOOL_FIELDS: &[&str] = &["type", "content", "tool_call_id", "status"];
const LANGCHAIN_FUNCTION_FIELDS: &[&str] = &["type", "content", "name"];
const LANGCHAIN_FIELDS: &[&str] = &["type", "content"];
const PYDANTIC_AI_FIELDS: &[&str] = &["kind", "parts"];
const PYDANTIC_AI_PART_FIELDS: &[&str] = &[
    "part_kind",
    "content",
    "args",
    "tool_call_id",
    "tool_name",
    "outcome",
];

static LANGCHAIN_AI_KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static LANGCHAIN_TOOL_KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static LANGCHAIN_FUNCTION_KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static LANGCHAIN_KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static PYDANTIC_AI_KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static PYDANTIC_AI_PART_KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();

/// The fields to fingerprint of an object of type `ty` (its address), as interned strings, when
/// it is a framework type already read.
pub fn fingerprint_fields(py: Python<'_>, ty: usize) -> Option<&'static [Py<PyString>]> {
    let fw = known_at(ty)?;
    let (cell, names) = match fw {
        Framework::LangChain(Role::Assistant) => (&LANGCHAIN_AI_KEYS, LANGCHAIN_AI_FIELDS),
        Framework::LangChain(Role::Tool) => (&LANGCHAIN_TOOL_KEYS, LANGCHAIN_TOOL_FIELDS),
        Framework::LangChain(Role::Function) => {
            (&LANGCHAIN_FUNCTION_KEYS, LANGCHAIN_FUNCTION_FIELDS)
        }
        Framework::LangChain(_) => (&LANGCHAIN_KEYS, LANGCHAIN_FIELDS),
        Framework::PydanticAi => (&PYDANTIC_AI_KEYS, PYDANTIC_AI_FIELDS),
        Framework::PydanticAiPart => (&PYDANTIC_AI_PART_KEYS, PYDANTIC_AI_PART_FIELDS),
    };
    let keys = cell.get_or_init(py, || {
        names
            .iter()
            .map(|n| PyString::intern(py, n).unbind())
            .collect()
    });
    Some(keys.as_slice())
}

/// Remember a pydantic-ai part's type (read from its instance dict).
pub(super) fn remember_part(part: &Bound<'_, PyAny>) {
    remember(&part.get_type(), Framework::PydanticAiPart);
}

/// Types seen to be a framework's messages (each held, so its address is never reused).
static KNOWN: Mutex<Vec<(usize, Framework, Py<PyType>)>> = Mutex::new(Vec::new());
/// More types than any program has message classes: stop remembering (reading still works).
const MAX_KNOWN: usize = 256;

fn known(ty: &Bound<'_, PyType>) -> Option<Framework> {
    known_at(ty.as_ptr() as usize)
}

/// The framework of the type at address `key`: the last types asked about on this thread are
/// answered without the lock (a conversation asks once per message, for a few types).
fn known_at(key: usize) -> Option<Framework> {
    thread_local! {
        static LAST: std::cell::Cell<[(usize, Option<Framework>); 4]> =
            const { std::cell::Cell::new([(0, None); 4]) };
    }
    let last = LAST.with(|l| l.get());
    if let Some((_, f)) = last.iter().find(|(k, f)| *k == key && f.is_some()) {
        return *f;
    }
    let f = {
        let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        known.iter().find(|(k, ..)| *k == key).map(|(_, f, _)| *f)
    };
    // Only known types are cached: a type recognised later is then found under the lock (the
    // registry holds each type, so its address is never reused).
    if f.is_some() {
        LAST.with(|l| l.set([(key, f), last[0], last[1], last[2]]));
    }
    f
}

fn remember(ty: &Bound<'_, PyType>, fw: Framework) {
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let key = ty.as_ptr() as usize;
    if known.len() < MAX_KNOWN && !known.iter().any(|(k, ..)| *k == key) {
        known.push((key, fw, ty.clone().unbind()));
    }
}

/// An object's instance `__dict__`, when it has one.
pub(super) fn instance_dict<'py>(obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyDict>> {
    let py = obj.py();
    if obj.is_instance_of::<PyDict>() {
        return None;
    }
    // SAFETY: `obj` is alive and the GIL is held; the result is a new reference or NULL with an
    // exception set (an object without an instance dict), which is cleared.
    let d = unsafe { pyo3::ffi::PyObject_GenericGetDict(obj.as_ptr(), std::ptr::null_mut()) };
    if d.is_null() {
        // SAFETY: as above.
        unsafe { pyo3::ffi::PyErr_Clear() };
        return None;
    }
    // SAFETY: a new, non-null reference.
    let d = unsafe { Bound::from_owned_ptr(py, d) };
    d.cast_into::<PyDict>().ok()
}

impl<'py> Extractor<'py> {
    /// `obj` read as a framework's message; `None` when it is not one. With `known_only`, only
    /// objects of a type already recognised are tried (the fast path before a `role` lookup).
    pub(super) fn framework_message(
        &mut self,
        obj: &Bound<'py, PyAny>,
        index: usize,
        known_only: bool,
    ) -> PyResult<Option<Message<'static>>> {
        let ty = obj.get_type();
        let fw = known(&ty);
        if fw.is_none() && known_only {
            return Ok(None);
        }
        let Some(dict) = instance_dict(obj) else {
            return Ok(None);
        };
        let acc = Access::Dict(&dict);
        match fw {
            Some(Framework::LangChain(_)) => self.langchain_message(obj, &acc, index),
            Some(Framework::PydanticAi) => self.pydantic_ai_message(obj, &acc, index),
            Some(Framework::PydanticAiPart) => Ok(None),
            None => {
                if let Some(m) = self.langchain_message(obj, &acc, index)? {
                    remember(&ty, Framework::LangChain(m.role));
                    return Ok(Some(m));
                }
                let m = self.pydantic_ai_message(obj, &acc, index)?;
                if m.is_some() {
                    remember(&ty, Framework::PydanticAi);
                }
                Ok(m)
            }
        }
    }
}

//! Content fingerprints of Python messages, computed without building a view.
//!
//! Design note: `check(state=...)` after one appended message must not cost as much as counting
//! the whole list again. Building the core's view of a message (0.3–1.2 µs: field lookups, block
//! vectors, kept-alive string references) is most of a warm check's time (perf: allocation ~30%,
//! borrowing ~10%, dict lookups ~14%), so a cache hit must be decided before any of that. This
//! walks the message as plain data — dict keys and values, list items, and for each string its
//! CPython hash (computed once per string object, then cached inside it) and length — and mixes
//! them into 64 bits, allocating nothing. Everything the extractor reads is inside that walk, so
//! any edit that could change the count changes the fingerprint; a different key order or an
//! extra field only costs a cache miss. SDK objects are walked through their `__dict__`
//! (pydantic keeps field values there). Anything else (or nesting deeper than 64) has no
//! fingerprint, and the message is simply counted each time.

use crate::state::mix;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

const MAX_DEPTH: usize = 64;

fn walk(v: &Bound<'_, PyAny>, depth: usize, fp: &mut u64) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    if let Ok(s) = v.cast::<PyString>() {
        let h = s.hash().ok()? as u64;
        *fp = mix(mix(*fp, 1), h ^ ((s.len().ok()? as u64) << 1));
    } else if let Ok(d) = v.cast::<PyDict>() {
        *fp = mix(*fp, 2 ^ ((d.len() as u64) << 8));
        for (k, item) in d.iter() {
            walk(&k, depth + 1, fp)?;
            walk(&item, depth + 1, fp)?;
        }
    } else if let Ok(l) = v.cast::<PyList>() {
        *fp = mix(*fp, 3 ^ ((l.len() as u64) << 8));
        for item in l.iter() {
            walk(&item, depth + 1, fp)?;
        }
    } else if let Ok(t) = v.cast::<PyTuple>() {
        *fp = mix(*fp, 4 ^ ((t.len() as u64) << 8));
        for item in t.iter() {
            walk(&item, depth + 1, fp)?;
        }
    } else if v.is_none() {
        *fp = mix(*fp, 5);
    } else if v.is_instance_of::<PyBool>() {
        *fp = mix(*fp, 6 ^ (u64::from(v.is_truthy().ok()?) << 8));
    } else if v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyFloat>()
        || v.is_instance_of::<PyBytes>()
    {
        *fp = mix(mix(*fp, 7), v.hash().ok()? as u64);
    } else {
        // An SDK object: its type and its fields.
        let dict = v.getattr(pyo3::intern!(v.py(), "__dict__")).ok()?;
        let dict = dict.cast::<PyDict>().ok()?;
        *fp = mix(mix(*fp, 8), v.get_type().as_ptr() as u64);
        walk(dict.as_any(), depth + 1, fp)?;
        if let Ok(Some(extra)) = v.getattr_opt(pyo3::intern!(v.py(), "__pydantic_extra__")) {
            if !extra.is_none() {
                walk(&extra, depth + 1, fp)?;
            }
        }
    }
    Some(())
}

/// The fingerprint of a message object, or 0 when it has none (see the module note).
pub fn fingerprint(obj: &Bound<'_, PyAny>) -> u64 {
    let mut fp = 0x5EED;
    match walk(obj, 0, &mut fp) {
        // 0 means "no fingerprint".
        Some(()) => fp.max(1),
        None => 0,
    }
}

//! Content fingerprints of Python messages, computed without building a view.
//!
//! Design note: `check(state=...)` after one appended message must not cost as much as counting
//! the whole list again. Building the core's view of a message (0.3–1.2 µs: field lookups, block
//! vectors, kept-alive string references) is most of a warm check's time (perf: allocation ~30%,
//! borrowing ~10%, dict lookups ~14%), so a cache hit must be decided before any of that. This
//! walks the message as plain data — dict keys and values, list items, and for each string its
//! CPython hash (computed once per string object, then cached inside it) and length — and mixes
//! them into 64 bits through the C API, allocating nothing. Only exact `str`/`int`/`float`/`bytes`
//! are hashed (their hash runs no Python code; a subclass means no fingerprint), and every item
//! is held by a strong reference while it is walked, so Python code run by an SDK object's
//! attribute access cannot free what we are reading. Everything the extractor reads is inside that walk,
//! so any edit that could change the count changes the fingerprint; a different key order or an
//! extra field only costs a cache miss. SDK objects are walked through their `__dict__` (pydantic
//! keeps field values there). Anything else (or nesting deeper than 64) has no fingerprint, and
//! the message is simply counted each time. Measured: 10k corpus messages in ~1.5–2 ms warm
//! (see [`fingerprints_borrowed`] for the memory-latency work behind that).

use crate::fingerprint::mix;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

const MAX_DEPTH: usize = 64;

thread_local! {
    /// Set when a walk read an SDK object's attributes (Python code may have run).
    static RAN_PYTHON: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Walk a borrowed object. `None` when it has no cheap fingerprint.
///
/// # Safety
/// `v` must be a valid borrowed reference and the GIL held.
unsafe fn walk(py: Python<'_>, v: *mut ffi::PyObject, depth: usize, fp: &mut u64) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    unsafe {
        if ffi::PyUnicode_CheckExact(v) != 0 {
            // The cached hash and the length, read in place (one cache line; no calls, so the
            // loads of neighbouring strings overlap). A string not hashed yet is hashed once.
            let a = v.cast::<ffi::PyASCIIObject>();
            let mut h = (*a).hash;
            if h == -1 {
                h = ffi::PyObject_Hash(v);
                if h == -1 {
                    ffi::PyErr_Clear();
                    return None;
                }
            }
            let len = (*a).length as u64;
            *fp = mix(mix(*fp, 1), (h as u64) ^ (len << 1));
        } else if ffi::PyDict_Check(v) != 0 {
            let n = ffi::PyDict_Size(v);
            *fp = mix(*fp, 2 ^ ((n as u64) << 8));
            // Not a message (`fingerprints_borrowed` prefetched its values already), nor a dict
            // of one or two entries (a Gemini part, a call's `function`), whose values are read
            // at once anyway: there the prefetching pass cost more calls than it saved.
            if n > 2 && depth > 0 {
                prefetch_values(v);
            }
            let mut pos: ffi::Py_ssize_t = 0;
            let mut key: *mut ffi::PyObject = std::ptr::null_mut();
            let mut value: *mut ffi::PyObject = std::ptr::null_mut();
            while ffi::PyDict_Next(v, &mut pos, &mut key, &mut value) != 0 {
                item(py, key, depth, fp)?;
                item(py, value, depth, fp)?;
            }
        } else if ffi::PyList_Check(v) != 0 {
            let n = ffi::PyList_Size(v);
            *fp = mix(*fp, 3 ^ ((n as u64) << 8));
            for i in 0..n {
                prefetch(ffi::PyList_GetItem(v, i));
            }
            for i in 0..n {
                // The list may not change while we hold the GIL and run no Python code; re-read
                // the size anyway so a `__hash__` that shrinks it cannot make us read past it.
                if i >= ffi::PyList_Size(v) {
                    return None;
                }
                item(py, ffi::PyList_GetItem(v, i), depth, fp)?;
            }
        } else if ffi::PyTuple_Check(v) != 0 {
            let n = ffi::PyTuple_Size(v);
            *fp = mix(*fp, 4 ^ ((n as u64) << 8));
            for i in 0..n {
                item(py, ffi::PyTuple_GetItem(v, i), depth, fp)?;
            }
        } else if v == ffi::Py_None() {
            *fp = mix(*fp, 5);
        } else if ffi::PyBool_Check(v) != 0 {
            *fp = mix(*fp, 6 ^ (u64::from(v == ffi::Py_True()) << 8));
        } else if ffi::PyLong_CheckExact(v) != 0
            || ffi::PyFloat_CheckExact(v) != 0
            || ffi::PyBytes_CheckExact(v) != 0
        {
            let h = ffi::PyObject_Hash(v);
            if h == -1 {
                ffi::PyErr_Clear();
                return None;
            }
            *fp = mix(mix(*fp, 7), h as u64);
        } else if ffi::PyUnicode_Check(v) != 0
            || ffi::PyLong_Check(v) != 0
            || ffi::PyFloat_Check(v) != 0
        {
            // A subclass: its `__hash__` could run Python code.
            return None;
        } else if let Some(fields) =
            super::extract::fingerprint_fields(py, ffi::Py_TYPE(v) as usize)
        {
            // A framework message or part (LangChain, pydantic-ai): only the fields its reader
            // reads, from the instance dict (C calls only: the fast path stays valid).
            let dict = ffi::PyObject_GenericGetDict(v, std::ptr::null_mut());
            if dict.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            *fp = mix(mix(*fp, 9), ffi::Py_TYPE(v) as u64);
            let mut r = Some(());
            for key in fields {
                // A borrowed value of the dict held here; `item` holds it while it is walked.
                let value = ffi::PyDict_GetItemWithError(dict, key.as_ptr());
                if value.is_null() {
                    if !ffi::PyErr_Occurred().is_null() {
                        ffi::PyErr_Clear();
                        r = None;
                        break;
                    }
                    *fp = mix(*fp, 10);
                } else if item(py, value, depth, fp).is_none() {
                    r = None;
                    break;
                }
            }
            ffi::Py_DECREF(dict);
            r?;
        } else if Bound::from_borrowed_ptr(py, v).is_exact_instance_of::<pyo3::types::PyDateTime>()
        {
            // A timestamp (pydantic-ai's messages and parts carry one): never read by the
            // extractor, so it cannot change a count; its value is left out.
            *fp = mix(*fp, 9);
        } else {
            // An SDK object: its type and its fields.
            RAN_PYTHON.with(|r| r.set(true));
            let obj = Bound::from_borrowed_ptr(py, v);
            let dict = obj.getattr(pyo3::intern!(py, "__dict__")).ok()?;
            let dict = dict.cast::<PyDict>().ok()?;
            *fp = mix(mix(*fp, 8), ffi::Py_TYPE(v) as u64);
            walk(py, dict.as_ptr(), depth + 1, fp)?;
            if let Ok(Some(extra)) = obj.getattr_opt(pyo3::intern!(py, "__pydantic_extra__")) {
                if !extra.is_none() {
                    walk(py, extra.as_ptr(), depth + 1, fp)?;
                }
            }
        }
    }
    Some(())
}

/// Walk a borrowed item of a container. Values whose walk runs no Python code (exact `str`,
/// `int`, `float`, `bytes`, `None`, `bool`) are read as they are; anything else is held by a
/// strong reference while it is walked (see [`held`]).
///
/// # Safety
/// As [`walk`].
#[inline(always)]
unsafe fn item(py: Python<'_>, v: *mut ffi::PyObject, depth: usize, fp: &mut u64) -> Option<()> {
    if v.is_null() {
        return None;
    }
    unsafe {
        let leaf = ffi::PyUnicode_CheckExact(v) != 0
            || v == ffi::Py_None()
            || ffi::PyBool_Check(v) != 0
            || ffi::PyLong_CheckExact(v) != 0
            || ffi::PyFloat_CheckExact(v) != 0
            || ffi::PyBytes_CheckExact(v) != 0;
        if leaf {
            walk(py, v, depth + 1, fp)
        } else {
            held(py, v, depth, fp)
        }
    }
}

/// Walk a borrowed item while holding a strong reference to it.
///
/// # Safety
/// As [`walk`].
unsafe fn held(py: Python<'_>, v: *mut ffi::PyObject, depth: usize, fp: &mut u64) -> Option<()> {
    if v.is_null() {
        return None;
    }
    unsafe {
        ffi::Py_INCREF(v);
        let r = walk(py, v, depth + 1, fp);
        ffi::Py_DECREF(v);
        r
    }
}

/// Ask the CPU to load the cache line at `p` (a hint: never faults, whatever `p` is).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Prefetch the values of a dict, so that the walk's first reads of them (their types,
/// hashes, lengths) overlap instead of waiting for memory one after another.
///
/// # Safety
/// `d` must be a live dict and the GIL held.
#[inline(always)]
unsafe fn prefetch_values(d: *mut ffi::PyObject) {
    let mut pos: ffi::Py_ssize_t = 0;
    let mut key: *mut ffi::PyObject = std::ptr::null_mut();
    let mut value: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: reading a live dict's entries runs no Python code.
    while unsafe { ffi::PyDict_Next(d, &mut pos, &mut key, &mut value) } != 0 {
        prefetch(value);
    }
}

/// Call `f` on the first items of every list value of dict `d` (a hint only: `f` prefetches).
///
/// # Safety
/// `d` must be a live dict and the GIL held; `f` must run no Python code.
#[inline(always)]
unsafe fn prefetch_list_values(d: *mut ffi::PyObject, f: impl Fn(*mut ffi::PyObject)) {
    let mut pos: ffi::Py_ssize_t = 0;
    let mut key: *mut ffi::PyObject = std::ptr::null_mut();
    let mut value: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: reading a live dict's entries and a live list's items runs no Python code.
    unsafe {
        while ffi::PyDict_Next(d, &mut pos, &mut key, &mut value) != 0 {
            if ffi::PyList_CheckExact(value) == 0 {
                continue;
            }
            for k in 0..ffi::PyList_Size(value).min(8) {
                let item = ffi::PyList_GetItem(value, k);
                if !item.is_null() {
                    f(item);
                }
            }
        }
    }
}

/// The fingerprints of the messages of a list or tuple (see [`fingerprint`]), and each
/// message's address, or `None` when the walk read an SDK object's attributes (Python code may
/// have run: the caller falls back to holding every message, [`fingerprint`] on each).
///
/// A warm `check()` of a long conversation is bound by memory latency: each message's objects
/// sit in their own cache lines. So no strong reference is kept per message (taking one and
/// dropping it at the end touched every message a second time, long after it left the cache:
/// a quarter of the time at 100k messages): each message is held only while it is walked. And
/// the memory of the messages a few places ahead is requested early, in three stages (the
/// message object, then its dict's key table, then its values), so several loads are in
/// flight. Measured on the benchmark's 10k/100k-message conversations: a warm check took
/// 3.9/30.6 ms before these three changes (with string hashes read in place), 1.5–2/23.5 ms after.
///
/// # Safety
/// The addresses stay valid only while no Python code runs and the GIL is held: the caller
/// must use them (taking strong references to what it keeps) before anything else runs.
pub unsafe fn fingerprints_borrowed(
    seq: &Bound<'_, PyAny>,
) -> Option<(Vec<u64>, Vec<*mut ffi::PyObject>)> {
    const AHEAD: usize = 4;
    let py = seq.py();
    let s = seq.as_ptr();
    // SAFETY (whole body): `seq` is a live list or tuple and the GIL is held; items are read
    // by index after re-reading the length, and each is held while walked.
    unsafe {
        let list = ffi::PyList_Check(s) != 0;
        if !list && ffi::PyTuple_Check(s) == 0 {
            return None;
        }
        let len = || if list { ffi::PyList_Size(s) } else { ffi::PyTuple_Size(s) } as usize;
        let at = |i: usize| {
            if i >= len() {
                std::ptr::null_mut()
            } else if list {
                ffi::PyList_GetItem(s, i as ffi::Py_ssize_t)
            } else {
                ffi::PyTuple_GetItem(s, i as ffi::Py_ssize_t)
            }
        };
        let dict_at = |i: usize| {
            let p = at(i);
            (!p.is_null() && ffi::PyDict_CheckExact(p) != 0).then_some(p)
        };
        RAN_PYTHON.with(|r| r.set(false));
        let n = len();
        let mut fps = Vec::with_capacity(n);
        let mut ptrs = Vec::with_capacity(n);
        for i in 0..n {
            let p = at(3 * AHEAD + i);
            if !p.is_null() {
                prefetch(p);
            }
            if let Some(d) = dict_at(i + 2 * AHEAD) {
                // CPython's dict layout: only a pointer is read, to prefetch what it points to.
                let keys = (*d.cast::<ffi::PyDictObject>()).ma_keys;
                for line in 0..4 {
                    prefetch(keys.cast::<u8>().wrapping_add(64 * line));
                }
            }
            if let Some(d) = dict_at(i + AHEAD) {
                prefetch_values(d);
            }
            // Two levels deeper for messages made of lists of dicts (a Gemini content's `parts`,
            // whose calls nest further: `function_call.args`): each level otherwise waits for
            // memory in turn while it is walked.
            if let Some(d) = dict_at(i + AHEAD / 2) {
                prefetch_list_values(d, |item| prefetch(item));
            }
            if let Some(d) = dict_at(i + 1) {
                prefetch_list_values(d, |item| {
                    if ffi::PyDict_CheckExact(item) != 0 {
                        prefetch_values(item);
                    }
                });
            }
            let m = at(i);
            if m.is_null() {
                return None;
            }
            ffi::Py_INCREF(m);
            let fp = fingerprint_ptr(py, m);
            ffi::Py_DECREF(m);
            if RAN_PYTHON.with(|r| r.get()) {
                return None;
            }
            fps.push(fp);
            ptrs.push(m);
        }
        // A shorter list now means something changed it: take the safe path.
        (len() == n).then_some((fps, ptrs))
    }
}

/// The fingerprint of a message object, or 0 when it has none (see the module note).
pub fn fingerprint(obj: &Bound<'_, PyAny>) -> u64 {
    // SAFETY: `obj` is a live reference held by the caller, and the GIL is held (`Bound`).
    unsafe { fingerprint_ptr(obj.py(), obj.as_ptr()) }
}

/// [`fingerprint`] of a borrowed object.
///
/// # Safety
/// As [`walk`].
unsafe fn fingerprint_ptr(py: Python<'_>, v: *mut ffi::PyObject) -> u64 {
    let mut fp = 0x5EED;
    // SAFETY: the caller's guarantee.
    match unsafe { walk(py, v, 0, &mut fp) } {
        // 0 means "no fingerprint".
        Some(()) => fp.max(1),
        None => 0,
    }
}

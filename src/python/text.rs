//! Borrowing Python strings without copying them (see the design note in `crate::text`).

use crate::text::Text;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyStringData};

/// The text of a Python string in its own PEP 393 layout.
///
/// # Safety
/// The returned slice borrows the string's buffer: the caller must keep `s` alive (hold a
/// strong reference) for as long as the `Text` is used. Python strings are immutable, so the
/// buffer does not change while the object lives, with or without the GIL.
pub unsafe fn borrow_text<'a>(s: &Bound<'_, PyString>) -> PyResult<Text<'a>> {
    // SAFETY: CPython (not the limited API); the caller keeps the object alive.
    let data = unsafe { s.data()? };
    Ok(match data {
        PyStringData::Ucs1(b) => {
            // SAFETY: `s` is a live str; an ASCII-flagged compact string's bytes are ASCII.
            let ascii = unsafe { ffi::PyUnicode_IS_ASCII(s.as_ptr()) } != 0;
            let b: &'a [u8] = unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) };
            if ascii {
                // SAFETY: ASCII is valid UTF-8.
                Text::Utf8(unsafe { std::str::from_utf8_unchecked(b) })
            } else {
                Text::Latin1(b)
            }
        }
        PyStringData::Ucs2(w) => {
            Text::Ucs2(unsafe { std::slice::from_raw_parts(w.as_ptr(), w.len()) })
        }
        PyStringData::Ucs4(w) => {
            Text::Ucs4(unsafe { std::slice::from_raw_parts(w.as_ptr(), w.len()) })
        }
    })
}

/// Strings borrowed by a view, kept alive (one strong reference each) while the view is used,
/// so a concurrent thread that edits a message cannot free a buffer the core is reading.
/// They are owned references (`Py`), so a plan can hold them across calls.
#[derive(Default)]
pub struct KeepAlive {
    strings: Vec<Py<PyString>>,
}

impl KeepAlive {
    /// Borrow `s` for as long as this `KeepAlive` lives.
    pub fn text(&mut self, s: &Bound<'_, PyString>) -> PyResult<Text<'static>> {
        // SAFETY: the strong reference pushed below outlives every use of the returned text:
        // views holding `'static` texts never outlive the `KeepAlive` they were built with
        // (see `Extracted`, which drops the view first).
        let t = unsafe { borrow_text(s)? };
        self.strings.push(s.clone().unbind());
        Ok(t)
    }
}

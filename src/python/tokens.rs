//! `estimate_tokens`, `count_tokens`, `count_tokens_many`.

use super::errors::config_error;
use super::text::borrow_text;
use crate::tokens::estimate::estimate;
use crate::tokens::exact::{self, Encoding};
use pyo3::prelude::*;
use pyo3::types::PyString;

pub fn parse_encoding(py: Python<'_>, name: &str) -> PyResult<Encoding> {
    Encoding::parse(name).ok_or_else(|| {
        config_error(
            py,
            "encoding",
            &format!("unknown encoding {name:?}; expected \"o200k_base\" or \"cl100k_base\""),
        )
    })
}

/// Estimated tokens of `text` (fast, errs high). Reads the string in place.
#[pyfunction]
pub fn estimate_tokens(text: &Bound<'_, PyString>) -> PyResult<usize> {
    // SAFETY: `text` is alive for the whole call.
    let t = unsafe { borrow_text(text)? };
    Ok(if t.char_len() > 1 << 20 {
        text.py().detach(|| estimate(t))
    } else {
        estimate(t)
    })
}

/// Exact tokens of `text` in `encoding` (tiktoken's `encode_ordinary`).
#[pyfunction]
#[pyo3(signature = (text, encoding="o200k_base"))]
pub fn count_tokens(py: Python<'_>, text: &Bound<'_, PyString>, encoding: &str) -> PyResult<usize> {
    let enc = parse_encoding(py, encoding)?;
    // SAFETY: `text` is alive for the whole call; the UTF-8 form is a temporary.
    let t = unsafe { borrow_text(text)? };
    Ok(py.detach(|| exact::count(enc, &t.to_utf8())))
}

/// Exact tokens of each text, counted in parallel with the GIL released.
#[pyfunction]
#[pyo3(signature = (texts, encoding="o200k_base"))]
pub fn count_tokens_many(
    py: Python<'_>,
    texts: Vec<Bound<'_, PyString>>,
    encoding: &str,
) -> PyResult<Vec<usize>> {
    let enc = parse_encoding(py, encoding)?;
    let mut borrowed = Vec::with_capacity(texts.len());
    for t in &texts {
        // SAFETY: `texts` holds a strong reference to each string until we return.
        borrowed.push(unsafe { borrow_text(t)? });
    }
    Ok(py.detach(|| {
        let utf8: Vec<_> = borrowed.iter().map(|t| t.to_utf8()).collect();
        let refs: Vec<&str> = utf8.iter().map(|s| &**s).collect();
        exact::count_many(enc, &refs)
    }))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(estimate_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens_many, m)?)?;
    Ok(())
}

//! The Python boundary: the only code that knows Python. Every entry point extracts a view
//! of its arguments while attached, runs the core with the GIL released, and builds Python
//! objects after (tiktoken's shape).

mod errors;
mod extract;
mod fingerprint;
mod plan;
mod render;
mod state;
mod text;
mod tokens;
mod validate;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    validate::register(m)?;
    tokens::register(m)?;
    state::register(m)?;
    plan::register(m)?;
    m.add_function(wrap_pyfunction!(looks_like_error, m)?)?;
    Ok(())
}

/// Whether a summarizer's reply (without `<summary>` tags) reads like an error, a traceback or a
/// refusal rather than a summary (English and Chinese).
#[pyfunction]
fn looks_like_error(reply: &str) -> bool {
    crate::summary::text::looks_like_error(reply)
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

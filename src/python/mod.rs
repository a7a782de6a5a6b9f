//! The Python boundary: the only code that knows Python. Every entry point extracts a view
//! of its arguments while attached, runs the core with the GIL released, and builds Python
//! objects after (tiktoken's shape).

mod auto_target;
mod batch;
mod config;
mod counter;
mod describe;
mod driver;
mod errors;
mod extract;
mod fingerprint;
mod image;
mod inspect;
mod plan;
mod problem;
mod render;
mod state;
mod text;
mod tokens;
mod validate;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The one copy Python sees (the package re-exports it; tests import it).
    m.add("SUMMARY_MARKER", crate::planner::SUMMARY_MARKER)?;
    m.add("LEDGER_SENTINEL", crate::summary::ledger::SENTINEL)?;
    // The formats' names, for the shell's checks (`io.py`, the CLI's `--format`).
    let formats: Vec<&str> = crate::message::Format::ALL
        .iter()
        .map(|f| f.name())
        .collect();
    m.add("FORMATS", pyo3::types::PyTuple::new(m.py(), formats)?)?;
    // The profiles' names (the formats', `strict`, `responses_stateless`), for `config.py`.
    let profiles = crate::validate::Profile::names();
    m.add("PROFILES", pyo3::types::PyTuple::new(m.py(), profiles)?)?;
    validate::register(m)?;
    auto_target::register(m)?;
    config::register(m)?;
    driver::register(m)?;
    tokens::register(m)?;
    state::register(m)?;
    plan::register(m)?;
    image::register(m)?;
    batch::register(m)?;
    inspect::register(m)?;
    m.add_function(wrap_pyfunction!(looks_like_error, m)?)?;
    Ok(())
}

/// Whether a summarizer's reply (without `<summary>` tags) reads like an error, a traceback or a
/// refusal rather than a summary (English and Chinese).
#[pyfunction]
fn looks_like_error(reply: &str) -> bool {
    crate::summary::reply::looks_like_error(reply)
}

/// The extension's allocator (the core's views, plans and outputs; Python objects still come
/// from Python's). The views hold many small vectors and strings that live for one call: with
/// glibc malloc, allocating and freeing them was ~30% of `check()` (perf: `_int_free`,
/// `malloc_consolidate`, page faults of trimmed arenas). mimalloc made a cold 10k-message
/// `check()` 1.6x and `micro_compact()` 1.4x faster. Only the cdylib sets it (`cargo test`
/// of the core keeps the system allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

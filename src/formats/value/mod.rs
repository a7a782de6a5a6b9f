//! Messages as `serde_json::Value`s: the Rust API's reader (JSON → the core's view) and writer
//! (the planner's output → JSON), a writer per wire format as in the Python binding (`write/`
//! mirrors `python/render/` field for field). The readers of Chat Completions, Anthropic and
//! Responses mirror `python/extract/`; Gemini's is written once for both
//! (`crate::formats::gemini::read`, over `source.rs`).

mod read;
mod read_responses;
mod source;
mod write;

pub use super::loc::ReadError;
pub use read::{Misfit, ReadOutcome, Reader};
pub use write::Writer;

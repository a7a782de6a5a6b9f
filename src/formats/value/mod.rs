//! Messages as `serde_json::Value`s: the Rust API's reader (JSON → the core's view) and writer
//! (the planner's output → JSON), one file per wire format as in the Python binding
//! (`python/extract/`, `python/render/`), which these mirror field for field.

mod loc;
mod read;
mod read_blocks;
mod read_gemini;
mod read_responses;
mod write;
mod write_gemini;
mod write_responses;

pub use loc::ReadError;
pub use read::{Misfit, ReadOutcome, Reader};
pub use write::Writer;

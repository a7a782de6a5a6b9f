//! The wire formats' own rules in the core: one module per format for what only that format
//! has (its pairing, its structure, the validity rules its provider adds). The common reading
//! of a message is `crate::message`; the binding's readers and writers are
//! `python/extract/<format>.rs` and `python/render/<format>.rs`.
//!
//! Adding a format: `docs/formats.md` "Adding a wire format" (and the doc comment on
//! `crate::message::Format`).

pub mod anthropic_compaction;
pub mod gemini;
pub mod responses;
pub mod value;

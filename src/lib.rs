#![doc = include_str!("../README-rust.md")]
#![deny(missing_docs)]

// The core's modules: public for the Python binding, the benches and the tests, hidden from the
// documented API (whose items are re-exported below).
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod cut;
#[doc(hidden)]
pub mod driver;
#[doc(hidden)]
pub mod fingerprint;
#[doc(hidden)]
pub mod formats;
#[doc(hidden)]
pub mod image;
#[doc(hidden)]
pub mod inspect;
#[doc(hidden)]
pub mod json;
#[doc(hidden)]
pub mod message;
#[doc(hidden)]
pub mod parallel;
#[doc(hidden)]
pub mod planner;
#[doc(hidden)]
pub mod recall;
#[doc(hidden)]
pub mod state;
#[doc(hidden)]
pub mod structure;
#[doc(hidden)]
pub mod summary;
#[doc(hidden)]
pub mod text;
#[doc(hidden)]
pub mod tokens;
#[doc(hidden)]
pub mod validate;

mod api;

pub use api::{
    count_tokens, estimate_tokens, validate, AutoTarget, Check, CompactResult, Compactor, Config,
    ConfigError, ConversationState, Encoding, Error, FailureKind, FormatMismatch,
    InvalidConversation, MessageError, MessageOrigin, Options, Plan, Preview, Problem, Provider,
    RecordEntry, Reply, Strategy, SummarizerError, SummarizerFailure, SummaryRequest, Urgency,
};
pub use message::Format;

/// The Rust blocks of the guide's page `docs/rust.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/rust.md")]
pub struct GuidePage;

#[cfg(test)]
mod testing;

#[cfg(feature = "python")]
mod python;

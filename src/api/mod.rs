//! The Rust API (re-exported at the crate root): messages in as `serde_json::Value`s in every
//! format the Python API reads, a [`Compactor`] that checks and compacts them, and the summarizer
//! as a closure. One core under both APIs: the planner, the budget ladder and the formats' rules
//! are the ones the Python package runs.

mod compactor;
mod driver;
mod error;
mod hooks;
mod items;
mod observe;
mod options;
mod plan;
mod problem;
mod reply;
mod result;
mod settings;
mod state;
mod system;
mod tokens;
mod validate;

pub use crate::config::auto_target::AutoTarget;
pub use crate::config::Config;
pub use compactor::{Check, Compactor, Urgency};
pub use error::{
    ConfigError, Error, FailureKind, FormatMismatch, InvalidConversation, MessageError,
    SummarizerError, SummarizerFailure,
};
pub use hooks::Preview;
pub use items::Provider;
pub use options::Options;
pub use plan::{Plan, SummaryRequest};
pub use problem::Problem;
pub use reply::Reply;
pub use result::{CompactResult, MessageOrigin, RecordEntry, Strategy};
pub use state::ConversationState;
pub use tokens::{count_tokens, estimate_tokens, Encoding};
pub use validate::validate;

impl serde::Serialize for crate::Format {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for crate::Format {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        crate::Format::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown format {name:?}; expected \"openai\", \"anthropic\", \"responses\" or \"gemini\""
            ))
        })
    }
}

#[cfg(test)]
mod auto_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod hold_tests;
#[cfg(test)]
mod read_tests;

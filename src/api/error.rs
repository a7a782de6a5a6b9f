//! The Rust API's errors: one enum, a variant per thing a caller can act on, each with a small
//! struct whose fields say where (the message index and field, the configuration field).

use crate::Format;

/// Why a call of the Rust API failed.
///
/// Provider-invalid but well-typed input is never an error (it is repaired, or reported by
/// [`validate`](crate::validate)); an error is a value of the wrong JSON type, a configuration
/// that cannot work, or a summarizer failure the configuration says to raise.
///
/// ```
/// use context_compactor::{Compactor, Error, Options};
/// use serde_json::json;
///
/// let err = Compactor::default()
///     .check(&[json!({"role": "user", "content": 42})], &Options::new())
///     .unwrap_err();
/// let Error::Message(e) = &err else { panic!("{err}") };
/// assert_eq!((e.index(), e.field()), (Some(0), "content"));
/// assert_eq!(err.to_string(), r#"message 0, field "content": expected str, None or a list of parts, got int"#);
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A message (or the system prompt, or a tool) has a value of the wrong JSON type.
    #[error(transparent)]
    Message(#[from] MessageError),
    /// A forced [`Format`] does not fit the messages (its reader would drop their content).
    #[error(transparent)]
    FormatMismatch(#[from] FormatMismatch),
    /// The conversation is invalid for the provider and the configuration says not to repair.
    #[error(transparent)]
    Invalid(#[from] InvalidConversation),
    /// A configuration value cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The summarizer failed and the configuration says to raise (a permanent failure under
    /// the default policy).
    #[error(transparent)]
    Summarizer(#[from] SummarizerError),
}

/// A value of the wrong JSON type: where it is and what was expected.
///
/// ```
/// use context_compactor::{Compactor, Error, Options};
/// use serde_json::json;
///
/// let messages = [json!({"role": "user", "content": [{"type": "text", "text": 1}]})];
/// match Compactor::default().check(&messages, &Options::new()) {
///     Err(Error::Message(e)) => assert_eq!(e.field(), "content[0].text"),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{inner}")]
pub struct MessageError {
    inner: crate::formats::value::ReadError,
}

impl MessageError {
    /// The index of the message (`None` for the system prompt, the tools or the list).
    pub fn index(&self) -> Option<usize> {
        self.inner.index
    }

    /// The field path inside the message (`content[2].text`, `tool_calls[0].function`).
    pub fn field(&self) -> &str {
        &self.inner.field
    }

    /// What is wrong with it (`expected str, got int`).
    pub fn reason(&self) -> &str {
        &self.inner.reason
    }
}

impl From<crate::formats::value::ReadError> for MessageError {
    fn from(inner: crate::formats::value::ReadError) -> Self {
        MessageError { inner }
    }
}

impl From<crate::formats::value::ReadError> for Error {
    fn from(e: crate::formats::value::ReadError) -> Self {
        Error::Message(e.into())
    }
}

/// A forced format that does not fit the messages.
///
/// ```
/// use context_compactor::{Compactor, Error, Format, Options};
/// use serde_json::json;
///
/// let gemini = vec![json!({"role": "user", "parts": [{"text": "hi"}]})];
/// let err = Compactor::default()
///     .compact(gemini, &Options::new().format(Format::OpenAi))
///     .unwrap_err();
/// let Error::FormatMismatch(e) = err else { panic!() };
/// assert_eq!((e.forced(), e.detected()), (Format::OpenAi, Format::Gemini));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("format={:?} does not fit these messages, detected as {:?}: {why}", forced.name(), detected.name())]
pub struct FormatMismatch {
    pub(crate) forced: Format,
    pub(crate) detected: Format,
    pub(crate) why: String,
}

impl FormatMismatch {
    /// The format that was forced.
    pub fn forced(&self) -> Format {
        self.forced
    }

    /// The format the messages are read as without forcing one.
    pub fn detected(&self) -> Format {
        self.detected
    }
}

/// The conversation is invalid for the provider and `repair` is off.
///
/// ```
/// use context_compactor::{InvalidConversation, Problem};
/// fn first(e: &InvalidConversation) -> Option<&Problem> {
///     e.problems().first()
/// }
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[error("{text}")]
pub struct InvalidConversation {
    pub(crate) text: String,
    pub(crate) problems: Vec<super::problem::Problem>,
}

impl InvalidConversation {
    /// What is invalid, one [`Problem`](crate::Problem) per rule broken.
    pub fn problems(&self) -> &[super::problem::Problem] {
        &self.problems
    }
}

/// A configuration value that cannot work: the field and why.
///
/// ```
/// use context_compactor::ConfigError;
/// fn field_of(e: &ConfigError) -> &str {
///     e.field()
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    pub(crate) field: String,
    pub(crate) reason: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The configuration field (`max_context_tokens`), or the argument (`pinned`).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Why the value cannot work.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Whether a summarizer failure may pass with a fallback: a transient one (a timeout, a rate
/// limit, a 5xx, a dropped connection) falls back to the rule summary; a permanent one (bad
/// credentials, a model that does not exist, a bad request) is raised under the default policy,
/// since falling back on every compaction would hide it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// Worth retrying later: the rule summary is used now and a cool-down starts.
    Transient,
    /// Will fail again: raised as [`Error::Summarizer`] (unless the policy falls back on all).
    Permanent,
}

impl FailureKind {
    /// `"transient"` or `"permanent"`.
    ///
    /// ```
    /// assert_eq!(context_compactor::FailureKind::Transient.as_str(), "transient");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Transient => "transient",
            FailureKind::Permanent => "permanent",
        }
    }
}

/// What a summarizer closure returns when it cannot give a summary.
///
/// ```
/// use context_compactor::{FailureKind, SummarizerFailure};
/// let f = SummarizerFailure::transient("HTTP 529: overloaded");
/// assert_eq!(f.kind(), FailureKind::Transient);
/// let g = SummarizerFailure::permanent("HTTP 401: bad key");
/// assert_eq!(g.to_string(), "permanent: HTTP 401: bad key");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", kind.as_str())]
pub struct SummarizerFailure {
    kind: FailureKind,
    reason: String,
}

impl SummarizerFailure {
    /// A failure worth retrying later (timeout, 429, 5xx/529, connection).
    pub fn transient(reason: impl Into<String>) -> Self {
        SummarizerFailure {
            kind: FailureKind::Transient,
            reason: reason.into(),
        }
    }

    /// A failure that will happen again (auth, permission, not found, bad request).
    pub fn permanent(reason: impl Into<String>) -> Self {
        SummarizerFailure {
            kind: FailureKind::Permanent,
            reason: reason.into(),
        }
    }

    /// Transient or permanent.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The text given (`fallback_reason` of the result when it falls back).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// The summarizer failed and no fallback was allowed: the failure as the closure gave it.
///
/// ```
/// use context_compactor::{SummarizerError, FailureKind};
/// fn kind(e: &SummarizerError) -> FailureKind {
///     e.failure().kind()
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the summarizer failed ({failure})")]
pub struct SummarizerError {
    pub(crate) failure: SummarizerFailure,
}

impl SummarizerError {
    /// The failure the summarizer returned.
    pub fn failure(&self) -> &SummarizerFailure {
        &self.failure
    }
}

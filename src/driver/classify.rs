//! Failure classes: which summarizer failures are worth a fallback (transient) and which mean
//! the call can never work (permanent), and which replies are not summaries.

use crate::summary::reply::looks_like_error;

/// How a summarizer failure is classed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// It may work on a later call: rate limits, 5xx, overload, connection errors, an empty or
    /// error-like reply.
    Transient,
    /// It cannot work until something is changed: auth, permission, not found, bad request, a
    /// bug in the summarizer's own code.
    Permanent,
    /// Neither is known (treated as transient by `"fallback"`).
    Unknown,
    /// No reply within `summarizer_timeout_s` (the host's clock): transient.
    Timeout,
}

impl FailureKind {
    /// The class's name in messages: `"transient"` (also for a timeout), `"permanent"` or
    /// `"unknown"`.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Transient | FailureKind::Timeout => "transient",
            FailureKind::Permanent => "permanent",
            FailureKind::Unknown => "unknown",
        }
    }

    /// The class of a name given by a host (`"transient"`, `"permanent"`, `"unknown"`,
    /// `"timeout"`).
    pub fn parse(name: &str) -> Option<FailureKind> {
        Some(match name {
            "transient" => FailureKind::Transient,
            "permanent" => FailureKind::Permanent,
            "unknown" => FailureKind::Unknown,
            "timeout" => FailureKind::Timeout,
            _ => return None,
        })
    }
}

/// Error class names of the provider SDKs (OpenAI, Anthropic, httpx, LiteLLM) that mean a
/// transient failure.
pub const TRANSIENT_NAMES: [&str; 12] = [
    "ProviderCompactionError", // a native strategy's provider refused: the local summary runs
    "RateLimitError",
    "APITimeoutError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "OverloadedError",
    "TimeoutException",
    "ConnectTimeout",
    "ReadTimeout",
    "ConnectError",
    "RemoteProtocolError",
];

/// Error class names that mean a permanent failure.
pub const PERMANENT_NAMES: [&str; 9] = [
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "BadRequestError",
    "UnprocessableEntityError",
    "PaymentRequiredError",
    "PreconditionFailedError",
    "RequestHeaderFieldsTooLargeError",
    "CredentialsError",
];

/// HTTP statuses of a transient failure (any other 5xx too).
pub const TRANSIENT_STATUS: [i64; 9] = [408, 409, 425, 429, 500, 502, 503, 504, 529];
/// HTTP statuses of a permanent failure.
pub const PERMANENT_STATUS: [i64; 11] = [400, 401, 402, 403, 404, 405, 412, 413, 422, 431, 501];

/// The class of a failure from what the host knows of it, in this order: a timeout, connection
/// error or bad reply (`transient_type`) is transient; then the error's class names (its own
/// and its bases': permanent names first); then a programming error of the summarizer's own
/// code (`programming`: permanent, falling back would hide it); then an HTTP `status`.
pub fn classify(
    transient_type: bool,
    class_names: &[&str],
    programming: bool,
    status: Option<i64>,
) -> FailureKind {
    if transient_type {
        return FailureKind::Transient;
    }
    if class_names.iter().any(|n| PERMANENT_NAMES.contains(n)) {
        return FailureKind::Permanent;
    }
    if class_names.iter().any(|n| TRANSIENT_NAMES.contains(n)) {
        return FailureKind::Transient;
    }
    if programming {
        return FailureKind::Permanent;
    }
    match status {
        Some(s) if PERMANENT_STATUS.contains(&s) => FailureKind::Permanent,
        Some(s) if TRANSIENT_STATUS.contains(&s) || s >= 500 => FailureKind::Transient,
        _ => FailureKind::Unknown,
    }
}

/// Python's `str.isspace` (Unicode White_Space plus the information separators U+001C..U+001F).
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Why a reply's text cannot be a summary (`None`: it can): empty, or (without `<summary>`
/// tags) an error, a traceback or a refusal.
pub fn reply_problem(text: &str) -> Option<&'static str> {
    if text.chars().all(is_space) {
        return Some("the summarizer returned empty text");
    }
    if !text.contains("<summary") && looks_like_error(text) {
        return Some("the reply looks like an error or a refusal, not a summary");
    }
    None
}

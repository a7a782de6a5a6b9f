//! `validate`: what a provider would reject in a request, as [`Problem`]s.

use super::error::Error;
use super::options::{read, Options};
use super::problem::Problem;
use crate::validate::Profile;
use serde_json::Value;

/// What the provider of the messages' format would reject: unpaired tool calls and results,
/// misplaced thinking, a first message of the wrong role, empty messages, ... Provider-invalid
/// but well-typed input is a problem, never an error; an error is a value of the wrong JSON type.
///
/// ```
/// use context_compactor::{validate, Options};
/// use serde_json::json;
///
/// let ok = [json!({"role": "user", "content": "hi"}), json!({"role": "assistant", "content": "hello"})];
/// assert!(validate(&ok, &Options::new()).unwrap().is_empty());
/// ```
pub fn validate(messages: &[Value], opts: &Options<'_>) -> Result<Vec<Problem>, Error> {
    let conv = read(messages, opts, false)?;
    let profile = Profile::for_format(conv.format);
    Ok(
        crate::validate::validate(&conv.messages, conv.format, profile)
            .into_iter()
            .map(Problem::of)
            .collect(),
    )
}

//! `Problem`: one thing a provider would reject in a request.

/// One thing a provider would reject: the message (`None` for the request as a whole), a
/// stable rule name and a readable explanation.
///
/// ```
/// use context_compactor::{validate, Options};
/// use serde_json::json;
///
/// let messages = [json!({"role": "tool", "tool_call_id": "call_1", "content": "42"})];
/// let problems = validate(&messages, &Options::new()).unwrap();
/// assert_eq!(problems[0].index, Some(0));
/// assert_eq!(problems[0].rule, "orphan_tool_result");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// The offending message's index (`None` for the request as a whole).
    pub index: Option<usize>,
    /// The rule's stable name (`orphan_tool_result`, `missing_tool_result`, ...).
    pub rule: &'static str,
    /// What is wrong, in words.
    pub message: String,
}

impl Problem {
    pub(crate) fn of(p: crate::validate::Problem) -> Self {
        Problem {
            index: p.index,
            rule: p.rule,
            message: p.message,
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "message {i}: {} ({})", self.message, self.rule),
            None => write!(f, "{} ({})", self.message, self.rule),
        }
    }
}

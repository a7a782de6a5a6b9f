//! [`Reply`]: what a summarizer gives back (the text, truncation, usage, a provider's items).

use super::items::Provider;
use serde_json::Value;

/// A summarizer's reply: the text (the part inside `<summary>` tags is used when there is one),
/// whether the model stopped at its token limit, the provider's usage to keep with the result,
/// and a provider's own compaction items ([`items`](Self::items)) that replace the span as
/// they are.
///
/// ```
/// use context_compactor::Reply;
/// let reply = Reply::from("<summary>We fixed the parser.</summary>").truncated(true);
/// assert!(reply.is_truncated());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    pub(crate) text: String,
    pub(crate) truncated: bool,
    pub(crate) usage: Option<Value>,
    pub(crate) items: Option<(Provider, Vec<Value>)>,
}

impl Reply {
    /// A reply of `text`.
    ///
    /// ```
    /// assert_eq!(context_compactor::Reply::new("done").text(), "done");
    /// ```
    pub fn new(text: impl Into<String>) -> Self {
        Reply {
            text: text.into(),
            truncated: false,
            usage: None,
            items: None,
        }
    }

    /// Mark it cut at the model's token limit (`finish_reason == "length"`).
    ///
    /// ```
    /// assert!(context_compactor::Reply::new("..").truncated(true).is_truncated());
    /// ```
    pub fn truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }

    /// Keep the provider's usage object with the result ([`Compactor::compact_with`](crate::Compactor::compact_with)
    /// collects them).
    ///
    /// ```
    /// let r = context_compactor::Reply::new("s").usage(serde_json::json!({"input_tokens": 900}));
    /// assert_eq!(r.usage_value().unwrap()["input_tokens"], 900);
    /// ```
    pub fn usage(mut self, usage: Value) -> Self {
        self.usage = Some(usage);
        self
    }

    /// A provider's compaction output that replaces the summarised span as it is (a native
    /// strategy, as Python's `SummaryResponse(items=..., summary_source=...)`): OpenAI's
    /// `responses.compact` output (its user messages and one `compaction` item) go where the
    /// summary would have been; Anthropic's assistant message holding the `compaction` block
    /// opens the conversation, the task re-sent after it unless the block's readable content
    /// holds it. The ledger follows the items in a user message of ours, with the must-keep
    /// facts they do not show. The text, if any, is the result's `summary`. Items that do not
    /// make a valid request fall back to the rule summary with `fallback_reason` set (and the
    /// cool-down started, under [`compact_with`](crate::Compactor::compact_with)).
    ///
    /// ```
    /// use context_compactor::{Compactor, Options, Provider, Reply};
    /// use serde_json::json;
    ///
    /// let mut messages = vec![json!({"type": "message", "role": "user", "content": "Port src/parser.py to Rust."})];
    /// for i in 0..40 {
    ///     messages.push(json!({"type": "message", "role": "assistant", "content": format!("step {i}: {}", "work ".repeat(60))}));
    ///     messages.push(json!({"type": "message", "role": "user", "content": "go on"}));
    /// }
    /// let compacted = json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA..."});
    /// let input = messages.clone();
    /// let result = Compactor::default()
    ///     .compact_with(messages, &Options::new().force(true), |request| {
    ///         // Send the span to `responses.compact` here; its `output` comes back.
    ///         let span: Vec<_> = request.span.iter().map(|&i| input[i].clone()).collect();
    ///         assert!(!span.is_empty() && !request.span.contains(&0), "the task is kept");
    ///         Ok::<_, context_compactor::SummarizerFailure>(Reply::new("").items(Provider::OpenAi, vec![compacted.clone()]))
    ///     })
    ///     .unwrap();
    /// assert_eq!(result.summary_source, Some("provider:openai"));
    /// assert!(result.messages.iter().any(|m| m["type"] == "compaction"));
    /// assert_eq!(result.messages[0]["content"], "Port src/parser.py to Rust.");
    /// assert!(result.fallback_reason.is_none());
    /// ```
    pub fn items(mut self, provider: Provider, items: Vec<Value>) -> Self {
        self.items = Some((provider, items));
        self
    }

    /// The provider and the items given with [`items`](Self::items).
    ///
    /// ```
    /// use context_compactor::{Provider, Reply};
    /// let r = Reply::new("").items(Provider::Anthropic, vec![]);
    /// assert_eq!(r.provider_items().unwrap().0, Provider::Anthropic);
    /// ```
    pub fn provider_items(&self) -> Option<(Provider, &[Value])> {
        self.items.as_ref().map(|(p, v)| (*p, v.as_slice()))
    }

    /// The text.
    ///
    /// ```
    /// assert_eq!(context_compactor::Reply::from("x").text(), "x");
    /// ```
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it was cut at the model's token limit.
    ///
    /// ```
    /// assert!(!context_compactor::Reply::from("x").is_truncated());
    /// ```
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// The usage given with [`usage`](Self::usage).
    ///
    /// ```
    /// assert!(context_compactor::Reply::from("x").usage_value().is_none());
    /// ```
    pub fn usage_value(&self) -> Option<&Value> {
        self.usage.as_ref()
    }
}

impl From<String> for Reply {
    fn from(text: String) -> Self {
        Reply::new(text)
    }
}

impl From<&str> for Reply {
    fn from(text: &str) -> Self {
        Reply::new(text)
    }
}

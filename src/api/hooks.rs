//! `Preview`: what the `on_before_compact` hook sees and may do.

use super::plan::{Plan, SummaryRequest};
use super::result::CompactResult;
use serde_json::Value;

/// What a compaction is about to do, given to the [`on_before_compact`](crate::Compactor::on_before_compact)
/// hook, which may [`veto`](Preview::veto) it, give the summary itself
/// ([`use_summary`](Preview::use_summary)), or report memories it flushed to a store from the
/// messages about to be replaced ([`flushed`](Preview::flushed), returned as
/// `CompactResult::flushed_memories`).
///
/// ```
/// use context_compactor::{Compactor, Options};
/// use serde_json::json;
///
/// let compactor = Compactor::default().on_before_compact(|p| p.veto("not now"));
/// let messages: Vec<_> = (0..40)
///     .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "words ".repeat(50)}))
///     .collect();
/// let result = compactor.compact(messages, &Options::new().force(true)).unwrap();
/// assert!(!result.compacted());
/// assert_eq!(result.reason.as_deref(), Some("not now"));
/// ```
pub struct Preview<'p> {
    pub(crate) plan: &'p Plan,
    pub(crate) request: Option<&'p SummaryRequest>,
    pub(crate) veto: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) flushed: usize,
}

impl<'p> Preview<'p> {
    /// The input messages (as given).
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| assert!(!p.messages().is_empty()));
    /// ```
    pub fn messages(&self) -> &'p [Value] {
        self.plan.messages()
    }

    /// Tokens now.
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| assert!(p.tokens_before() > 0));
    /// ```
    pub fn tokens_before(&self) -> usize {
        self.plan.tokens_before()
    }

    /// The summary request that would be sent (`None` when only micro/selective steps run, or
    /// the rule summary is used).
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| { let _ = p.request(); });
    /// ```
    pub fn request(&self) -> Option<&'p SummaryRequest> {
        self.request
    }

    /// The input indices of the messages the summary would replace, ascending.
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| { let _ = p.replaced(); });
    /// ```
    pub fn replaced(&self) -> Vec<usize> {
        self.plan.replaced()
    }

    /// The messages the summary would replace (for a memory store to extract from first).
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| {
    ///     let n = p.replaced_messages().filter(|m| m["role"] == "user").count();
    ///     p.flushed(n);
    /// });
    /// ```
    pub fn replaced_messages(&self) -> impl Iterator<Item = &'p Value> + 'p {
        let messages = self.plan.messages();
        self.plan
            .replaced()
            .into_iter()
            .filter_map(move |i| messages.get(i))
    }

    /// Cancel the compaction: the result is the messages unchanged, `reason` set.
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| p.veto("the user is typing"));
    /// ```
    pub fn veto(&mut self, reason: impl Into<String>) {
        self.veto = Some(reason.into());
    }

    /// Use this text as the summary instead of calling the summarizer.
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| p.use_summary("<summary>...</summary>"));
    /// ```
    pub fn use_summary(&mut self, text: impl Into<String>) {
        self.summary = Some(text.into());
    }

    /// Report that `n` memories were flushed to a store before the compaction.
    ///
    /// ```
    /// # use context_compactor::Compactor;
    /// let _ = Compactor::default().on_before_compact(|p| p.flushed(2));
    /// ```
    pub fn flushed(&mut self, n: usize) {
        self.flushed = n;
    }
}

pub(crate) type BeforeHook = dyn Fn(&mut Preview<'_>) + Send + Sync;
pub(crate) type AfterHook = dyn Fn(&CompactResult) + Send + Sync;

//! `Plan`: a compaction waiting for its summary (bring your own LLM call), and what goes in and
//! out of the summarizer: [`SummaryRequest`] (and [`Reply`], in `reply.rs`).
//!
//! Design note — ownership. A plan owns the messages it was given and the core's view of them,
//! which borrows their strings (the view is what the planner reads; copying every string of a
//! long conversation into it would double its memory). The view is declared before the
//! messages, so it is dropped first, and the messages are never changed while it lives: `apply`
//! takes the plan by value, finishes with the view, drops it, and only then moves the kept
//! messages out into the result.

use super::items;
use super::reply::Reply;
use super::result::{CompactResult, MessageOrigin, RecordEntry};
use super::settings::Settings;
use super::state::ConversationState;
use super::system;
use crate::config::auto_target::{due_at, AutoTarget};
use crate::formats::value::Writer;
use crate::message::Conversation;
use crate::planner::{self, Planned};
use crate::summary::language::Language;
use crate::text::Text;
use serde_json::Value;
use std::sync::Arc;

/// What to summarise: a ready prompt (`system_prompt` + `user_prompt`, or [`messages`](Self::messages)
/// for an OpenAI-style call) and its parts.
///
/// ```
/// use context_compactor::{Compactor, Options};
/// use serde_json::json;
///
/// let mut messages = vec![json!({"role": "user", "content": "Fix the bug in src/app.py"})];
/// for i in 0..40 {
///     messages.push(json!({"role": "assistant", "content": format!("step {i}: {}", "work ".repeat(50))}));
///     messages.push(json!({"role": "user", "content": "go on"}));
/// }
/// let plan = Compactor::default().plan(messages, &Options::new().force(true)).unwrap();
/// let request = plan.request().expect("a summary is due");
/// assert!(request.user_prompt.contains("src/app.py"));
/// assert_eq!(request.messages()[0]["role"], "system");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SummaryRequest {
    /// The system prompt of the summary call.
    pub system_prompt: String,
    /// The user prompt: the transcript to summarise and what to keep.
    pub user_prompt: String,
    /// The earlier summary's narrative, when this one updates it.
    pub previous_summary: Option<String>,
    /// The ledger the library carries after the summary (read-only context).
    pub ledger: Option<String>,
    /// What the summary should focus on (`Options::instructions`).
    pub instructions: Option<String>,
    /// The most tokens the summary may have.
    pub max_tokens: usize,
    /// Facts (paths, URLs, error names) the summary must keep.
    pub must_keep: Vec<String>,
    /// The conversation's language, `"en"` or `"zh"`.
    pub language: &'static str,
    /// Messages the summary replaces.
    pub replaced_count: usize,
    /// This chunk (0-based) of a long span summarised in chunks.
    pub chunk: usize,
    /// The number of chunks.
    pub chunks: usize,
    /// The input indices of the messages the summary replaces, in order, our earlier summary
    /// message left out (the library carries its ledger itself): what to send a provider's own
    /// compaction, whose output comes back as [`Reply::items`](crate::Reply::items). Set in the
    /// first chunk's request (empty in later chunks).
    pub span: Vec<usize>,
}

impl SummaryRequest {
    /// The request as OpenAI-style messages: `[{"role": "system", ...}, {"role": "user", ...}]`.
    ///
    /// ```
    /// # use context_compactor::{Compactor, Options};
    /// # let messages: Vec<serde_json::Value> = (0..30).map(|i| serde_json::json!({"role": if i % 2 == 0 {"user"} else {"assistant"}, "content": "text ".repeat(40)})).collect();
    /// # let plan = Compactor::default().plan(messages, &Options::new().force(true)).unwrap();
    /// let request = plan.request().unwrap();
    /// assert_eq!(request.messages()[1]["content"], request.user_prompt.as_str());
    /// ```
    pub fn messages(&self) -> Vec<Value> {
        vec![
            serde_json::json!({"role": "system", "content": self.system_prompt}),
            serde_json::json!({"role": "user", "content": self.user_prompt}),
        ]
    }

    fn of(r: planner::SummaryRequest) -> Self {
        SummaryRequest {
            system_prompt: r.system_prompt,
            user_prompt: r.user_prompt,
            previous_summary: r.previous_summary,
            ledger: r.ledger,
            instructions: r.instructions,
            max_tokens: r.max_tokens,
            must_keep: r.must_keep,
            language: language_code(r.language),
            replaced_count: r.replaced_count,
            chunk: r.chunk,
            chunks: r.chunks,
            span: Vec::new(),
        }
    }
}

pub(crate) fn language_code(l: Language) -> &'static str {
    match l {
        Language::En => "en",
        Language::Zh => "zh",
    }
}

/// A compaction waiting for its summary: [`request`](Plan::request) is what to summarise
/// (`None` when no summary is needed), [`apply`](Plan::apply) finishes. Pure: nothing happens
/// until `apply`, and the same plan and reply give the same result.
///
/// A long span is summarised in chunks: while [`chunks_left`](Plan::chunks_left) is above 0,
/// give each reply to [`advance`](Plan::advance) and summarise the next request.
///
/// ```
/// use context_compactor::{Compactor, Options};
/// use serde_json::json;
///
/// let messages: Vec<_> = (0..60)
///     .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("{i} {}", "words ".repeat(60))}))
///     .collect();
/// let mut plan = Compactor::default().plan(messages, &Options::new().force(true)).unwrap();
/// while plan.chunks_left() > 0 {
///     let _request = plan.request().unwrap();
///     plan = plan.advance("<summary>so far: ...</summary>");
/// }
/// let reply = plan.request().map(|_| "<summary>We discussed sixty things.</summary>".into());
/// let result = plan.apply(reply).unwrap();
/// assert_eq!(result.summary_source, Some("llm"));
/// assert!(result.tokens_after < result.tokens_before);
/// ```
pub struct Plan {
    // Field order: `planned` and `conv` borrow the strings of `messages` and are dropped first
    // (see the design note). The strings' heap buffers do not move when the plan does.
    planned: Planned<'static>,
    conv: Box<Conversation<'static>>,
    messages: Vec<Value>,
    system: Option<Value>,
    state: Option<ConversationState>,
    settings: Arc<Settings>,
    usages: Vec<Value>,
    target_ratio: Option<f64>,
    /// What `target_ratio = "auto"` chose (its due point is set in the state after the
    /// compaction).
    auto: Option<AutoTarget>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("messages", &self.messages.len())
            .field("tokens_before", &self.planned.tokens_before)
            .field("reason", &self.planned.reason)
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// Build a plan from its parts.
    ///
    /// # Safety
    /// `planned` and `conv` must borrow only the string contents of `messages` (as the reader
    /// builds them), which the plan never changes while they live.
    pub(crate) unsafe fn from_parts(
        planned: Planned<'_>,
        conv: Conversation<'_>,
        messages: Vec<Value>,
        system: Option<Value>,
        state: Option<ConversationState>,
        settings: Arc<Settings>,
    ) -> Plan {
        // SAFETY: the caller's contract above; the lifetimes only are changed.
        let planned = unsafe { std::mem::transmute::<Planned<'_>, Planned<'static>>(planned) };
        let conv = unsafe { std::mem::transmute::<Conversation<'_>, Conversation<'static>>(conv) };
        Plan {
            planned,
            conv: Box::new(conv),
            messages,
            system,
            state,
            settings,
            usages: Vec::new(),
            target_ratio: None,
            auto: None,
        }
    }

    /// The plan with the target it aims at (reported in the result) and, with `target_ratio =
    /// "auto"`, what the chooser chose.
    pub(crate) fn aiming_at(mut self, target_ratio: Option<f64>, auto: Option<AutoTarget>) -> Plan {
        self.target_ratio = target_ratio;
        self.auto = auto;
        self
    }

    fn count(&self) -> impl Fn(Text<'_>) -> usize {
        let t = self.settings.tokenizer;
        move |x: Text<'_>| t.count(x)
    }

    /// The summary request for the current chunk, or `None` when no summary is needed (or the
    /// cool-down skips the summarizer: `apply(None)` then uses the rule summary).
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert!(plan.request().is_none());
    /// ```
    pub fn request(&self) -> Option<SummaryRequest> {
        let count = self.count();
        let mut r = self.planned.request(&count).map(SummaryRequest::of)?;
        if r.chunk == 0 {
            // What the rule summary replaces (the ladder may take more than the planned span):
            // the slot a provider's items go in, as Python's `span_of`.
            let rule = self.planned.apply(None, false, &count);
            let mut span: Vec<usize> = (rule.record.iter())
                .filter(|e| e.action.as_str() == "summarized")
                .map(|e| e.index)
                .filter(|&i| self.messages.get(i).is_some_and(|m| !items::ours(m)))
                .collect();
            span.sort_unstable();
            span.dedup();
            r.span = span;
        }
        Some(r)
    }

    /// Chunks left after the current one.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert_eq!(plan.chunks_left(), 0);
    /// ```
    pub fn chunks_left(&self) -> usize {
        self.planned.remaining_chunks(&self.count())
    }

    /// Why nothing (more) is planned, if so.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert!(plan.reason().is_some());
    /// ```
    pub fn reason(&self) -> Option<&str> {
        self.planned.reason.as_deref()
    }

    /// Tokens of the conversation now (calibrated with a state).
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert!(plan.tokens_before() > 0);
    /// ```
    pub fn tokens_before(&self) -> usize {
        self.planned.tokens_before
    }

    /// The input indices of the messages the summary replaces (empty when none).
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert!(plan.replaced().is_empty());
    /// ```
    pub fn replaced(&self) -> Vec<usize> {
        self.planned.span_sources()
    }

    /// The input messages (as given).
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert_eq!(plan.messages()[0]["content"], "hi");
    /// ```
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// The plan for the next chunk, given the reply for this one.
    ///
    /// ```
    /// # use context_compactor::{Compactor, Options};
    /// # let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// let plan = plan.advance("<summary>the first half</summary>");
    /// # let _ = plan;
    /// ```
    pub fn advance(mut self, reply: impl Into<Reply>) -> Plan {
        let reply = reply.into();
        self.planned = self.planned.advance(&reply.text);
        self.usages.extend(reply.usage);
        self
    }

    /// Finish: `Some(reply)` for the summarizer's reply to the (last) request, `None` for the
    /// built-in rule summary. Must-keep facts missing from the summary are appended, the
    /// summary is capped, and the budget ladder runs.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let plan = Compactor::default().plan(vec![serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// let result = plan.apply(None).unwrap();
    /// assert_eq!(result.messages.len(), 1);
    /// ```
    ///
    /// A reply with a provider's [`items`](Reply::items) puts them in place of the summary; if
    /// they do not make a valid request, the result is the rule summary's with
    /// `fallback_reason` set.
    pub fn apply(self, reply: Option<Reply>) -> Result<CompactResult, super::Error> {
        match reply {
            Some(r) if r.items.is_some() => Ok(match self.place_items(r, 0)? {
                Ok(placed) => placed,
                Err((mut rule, why)) => {
                    rule.fallback_reason = Some(why);
                    rule
                }
            }),
            reply => self.finish(reply, None, 0),
        }
    }

    /// The plan applied with the rule summary, then a reply's provider items put in place of the
    /// summary message: `Ok(placed)`, or `Err((the rule result, why not))`, why in the words of
    /// Python's `fallback_reason` (`"BadReply: ..."`).
    #[allow(clippy::type_complexity)]
    pub(crate) fn place_items(
        self,
        reply: Reply,
        flushed: usize,
    ) -> Result<Result<CompactResult, (CompactResult, String)>, super::Error> {
        let tokenizer = self.settings.tokenizer;
        let rule = self.finish(None, None, flushed)?;
        let Some((provider, items)) = reply.items.as_ref() else {
            return Ok(Ok(rule));
        };
        Ok(
            match items::place(
                rule.clone(),
                *provider,
                &reply.text,
                items,
                reply.truncated,
                tokenizer,
            ) {
                Ok(placed) => Ok(placed),
                Err(why) => Err((rule, describe_bad_reply(&why))),
            },
        )
    }

    /// The strategy `apply(None)` would report (without consuming the plan).
    pub(crate) fn dry_strategy(&self) -> planner::Strategy {
        self.planned.apply(None, false, &self.count()).strategy
    }

    /// The messages and system prompt as given (the view dropped first).
    pub(crate) fn into_messages(self) -> (Vec<Value>, Option<Value>) {
        let Plan {
            planned,
            conv,
            messages,
            system,
            ..
        } = self;
        drop(planned);
        drop(conv);
        (messages, system)
    }

    pub(crate) fn finish(
        self,
        reply: Option<Reply>,
        fallback_reason: Option<String>,
        flushed: usize,
    ) -> Result<CompactResult, super::Error> {
        let Plan {
            planned,
            conv,
            mut messages,
            system,
            state,
            settings,
            mut usages,
            target_ratio,
            auto,
        } = self;
        let (text, truncated) = match &reply {
            Some(r) => (Some(r.text.as_str()), r.truncated),
            None => (None, false),
        };
        if let Some(u) = reply.as_ref().and_then(|r| r.usage.clone()) {
            usages.push(u);
        }
        let t = settings.tokenizer;
        let count = move |x: Text<'_>| t.count(x);
        let outcome = planned.apply(text, truncated, &count);
        let (due, plan_cfg) = (planned.is_due(), planned.config().clone());
        let (tokens_after, over_budget) = (outcome.tokens_after, outcome.over_budget);
        for o in &outcome.offloads {
            write_offload(&o.path, &o.text)?;
        }
        // New and edited messages are built from the input values while they are all there.
        let writer = Writer::new(&messages, &conv);
        let mut rendered: Vec<Option<Value>> = outcome
            .slots
            .iter()
            .map(|s| writer.render(&s.out))
            .collect();
        let made = outcome.summary.is_some() && outcome.strategy != planner::Strategy::None;
        let system_out = match &system {
            Some(s) if made => Some(system::with_summary(s, outcome.system_summary.as_deref())),
            Some(s) => Some(s.clone()),
            None => outcome.system_summary.clone().map(Value::String),
        }
        .filter(|s| !s.is_null());
        let removed: Vec<u64> = if state.is_some() && outcome.strategy != planner::Strategy::None {
            let mut present = vec![false; messages.len()];
            for s in &outcome.slots {
                if let (Some(i), true) = (s.source(), s.out.is_keep()) {
                    if let Some(p) = present.get_mut(i) {
                        *p = true;
                    }
                }
            }
            messages
                .iter()
                .zip(&present)
                .filter(|(_, &p)| !p)
                .map(|(m, _)| super::state::fingerprint(m))
                .collect()
        } else {
            Vec::new()
        };
        let keeps: Vec<Option<usize>> = outcome
            .slots
            .iter()
            .map(|s| match s.out {
                planner::OutMsg::Keep(i) => Some(i),
                _ => None,
            })
            .collect();
        let mut result = CompactResult {
            messages: Vec::with_capacity(outcome.slots.len()),
            origins: outcome
                .origins
                .iter()
                .map(|&o| MessageOrigin::of(o))
                .collect(),
            system: system_out,
            summary: outcome.summary.clone(),
            summary_source: outcome.summary_source.map(planner::SummarySource::as_str),
            strategy: outcome.strategy,
            tokens_before: outcome.tokens_before,
            tokens_after: outcome.tokens_after,
            original_count: outcome.original_count,
            retained_count: outcome.retained_count,
            compacted_count: outcome.compacted_count,
            flushed_memories: flushed,
            fallback_reason: fallback_reason.or_else(|| outcome.fallback_reason.clone()),
            over_budget: outcome.over_budget,
            over_budget_reason: outcome.over_budget_reason.clone(),
            reason: outcome.reason.clone(),
            repairs: outcome.repairs.clone(),
            record: outcome
                .record
                .iter()
                .map(|r| RecordEntry {
                    index: r.index,
                    action: r.action.as_str(),
                    detail: r.detail.clone(),
                })
                .collect(),
            phases: outcome.phases.clone(),
            must_keep_missing: outcome.must_keep_missing.clone(),
            must_keep: planned.facts.clone(),
            summary_truncated: outcome.summary_truncated,
            language: language_code(planned.language),
            target_ratio,
        };
        let summary = outcome.summary.clone();
        let strategy = outcome.strategy;
        // The view is done with: drop it before the messages it borrows are moved out.
        drop(outcome);
        drop(planned);
        drop(conv);
        for (slot, keep) in rendered.iter_mut().zip(keeps) {
            let v = match keep {
                // A message is kept at most once; a second use (never made) gets a copy.
                Some(i) => match messages.get_mut(i) {
                    Some(m) if !m.is_null() => std::mem::take(m),
                    _ => Value::Null,
                },
                None => slot.take().unwrap_or(Value::Null),
            };
            result.messages.push(v);
        }
        if let Some(st) = &state {
            let mut g = st.lock();
            if strategy != planner::Strategy::None {
                g.note_compaction(removed, summary);
            }
            // A compaction that was due and still ends over the soft threshold, or short of the
            // target with less room under the soft threshold than `retry_growth_tokens`, holds
            // the next one back until the context grew by that much (as the Python API does).
            if due {
                let stuck = over_budget
                    || (tokens_after > plan_cfg.target
                        && tokens_after.saturating_add(plan_cfg.retry_growth) > plan_cfg.soft);
                g.note_outcome(stuck, tokens_after, plan_cfg.retry_growth);
            }
            // `target_ratio = "auto"`: after a compaction that changed the context and got under
            // the soft threshold, the next one is due from `due_at` (Python's `_set_due`).
            if let Some(a) = auto {
                if strategy != planner::Strategy::None && !over_budget && g.hold_until.is_none() {
                    let soft = settings.config.soft_threshold();
                    g.due_at = due_at(tokens_after, soft, a.fixed, a.growth, a.prices);
                }
            }
        }
        let _ = usages;
        Ok(result)
    }
}

/// Python's `describe(BadReply(why))`: the class name, then the text on one line, cut at 160
/// characters.
fn describe_bad_reply(why: &str) -> String {
    let text = why.trim().replace('\n', " ");
    let text = if text.chars().count() > 160 {
        text.chars().take(157).collect::<String>() + "..."
    } else {
        text
    };
    format!("BadReply: {text}")
}

/// Write offloaded tool output: atomically (a temporary file, then a rename), once per content.
fn write_offload(path: &str, text: &str) -> Result<(), super::Error> {
    let p = std::path::Path::new(path);
    if p.exists() {
        return Ok(());
    }
    let r = (|| -> std::io::Result<()> {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, text.as_bytes())?;
        std::fs::rename(&tmp, p)
    })();
    r.map_err(|e| {
        super::error::ConfigError::new("offload_dir", format!("could not write {path}: {e}")).into()
    })
}

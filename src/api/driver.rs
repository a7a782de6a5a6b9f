//! `compact`, `compact_with` and `compact_with_async`: the steps between planning and applying
//! (the hook, the summarizer calls chunk by chunk, the fallback on a failure and the cool-down)
//! as one small state machine ([`Run`]) that both the sync and the async entry point drive, so
//! the async one needs no runtime: it awaits the caller's futures and nothing else.

use super::compactor::Compactor;
use super::error::{Error, FailureKind, SummarizerError, SummarizerFailure};
use super::hooks::Preview;
use super::plan::{Plan, Reply, SummaryRequest};
use super::result::{CompactResult, MessageOrigin};
use super::settings::ErrorPolicy;
use super::state::ConversationState;
use super::Options;
use serde_json::Value;
use std::future::Future;

/// The next thing a compaction needs (one lives at a time: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Step {
    /// Call the summarizer with this request and `feed` the outcome.
    Summarize(SummaryRequest),
    /// Finished.
    Done(Result<CompactResult, Error>),
}

/// One compaction in progress.
struct Run<'c> {
    compactor: &'c Compactor,
    plan: Option<Plan>,
    state: Option<ConversationState>,
    flushed: usize,
}

/// Why a reply cannot be used as a summary (as the Python shell's `check_reply`).
fn bad_reply(reply: &Reply) -> Option<SummarizerFailure> {
    let text = reply.text();
    if text.trim().is_empty() {
        return Some(SummarizerFailure::transient(
            "BadReply: the summarizer returned empty text",
        ));
    }
    if !text.contains("<summary") && crate::summary::reply::looks_like_error(text) {
        return Some(SummarizerFailure::transient(
            "BadReply: the reply looks like an error or a refusal, not a summary",
        ));
    }
    None
}

impl<'c> Run<'c> {
    fn start(
        compactor: &'c Compactor,
        messages: Vec<Value>,
        opts: &Options<'_>,
        summarizer: bool,
    ) -> (Self, Step) {
        let mut run = Run {
            compactor,
            plan: None,
            state: opts.state.cloned(),
            flushed: 0,
        };
        let plan = match compactor.plan(messages, opts) {
            Ok(p) => p,
            Err(e) => return (run, Step::Done(Err(e))),
        };
        let wants_request = summarizer || compactor.before.is_some();
        let request = if wants_request { plan.request() } else { None };
        let Some(hook) = compactor.before.as_ref() else {
            return match (request, summarizer) {
                (Some(r), true) => {
                    run.plan = Some(plan);
                    (run, Step::Summarize(r))
                }
                _ => {
                    let step = run.done(plan.apply(None));
                    (run, step)
                }
            };
        };
        if request.is_none() && !plan.would_compact() {
            let step = run.done(plan.apply(None));
            return (run, step);
        }
        let mut preview = Preview {
            plan: &plan,
            request: request.as_ref(),
            veto: None,
            summary: None,
            flushed: 0,
        };
        hook(&mut preview);
        let Preview {
            veto,
            summary,
            flushed,
            ..
        } = preview;
        run.flushed = flushed;
        if let Some(reason) = veto {
            return (run, Step::Done(Ok(plan.unchanged(reason))));
        }
        let step = match (request, summary) {
            (None, _) => run.done(plan.finish(None, None, flushed)),
            (Some(_), Some(text)) => run.done(plan.finish(Some(Reply::new(text)), None, flushed)),
            (Some(r), None) if summarizer => {
                run.plan = Some(plan);
                Step::Summarize(r)
            }
            (Some(_), None) => run.done(plan.finish(None, None, flushed)),
        };
        (run, step)
    }

    /// The summarizer's outcome for the last request.
    fn feed(&mut self, outcome: Result<Reply, SummarizerFailure>) -> Step {
        let Some(plan) = self.plan.take() else {
            return Step::Done(Err(super::error::ConfigError::new(
                "summarizer",
                "no request pending",
            )
            .into()));
        };
        let outcome = outcome.and_then(|r| match bad_reply(&r) {
            Some(f) => Err(f),
            None => Ok(r),
        });
        match outcome {
            Ok(reply) => {
                if plan.chunks_left() == 0 {
                    return self.done(plan.finish(Some(reply), None, self.flushed));
                }
                let next = plan.advance(reply);
                match next.request() {
                    Some(r) => {
                        self.plan = Some(next);
                        Step::Summarize(r)
                    }
                    None => self.done(next.finish(None, None, self.flushed)),
                }
            }
            Err(failure) => {
                let settings = &self.compactor.settings;
                let raise = match settings.on_error {
                    ErrorPolicy::Raise => true,
                    ErrorPolicy::Fallback => failure.kind() == FailureKind::Permanent,
                    ErrorPolicy::FallbackAll => false,
                };
                if raise {
                    return Step::Done(Err(Error::Summarizer(SummarizerError { failure })));
                }
                if let (Some(st), n @ 1..) = (&self.state, settings.cooldown_calls) {
                    st.lock().cooldown_remaining = n;
                }
                let reason = failure.to_string();
                let reason = match reason.char_indices().nth(160) {
                    Some((at, _)) => format!("{}...", &reason[..at]),
                    None => reason,
                };
                // A failure at a later chunk keeps the chunks summarised before it.
                self.done(plan.finish(None, Some(reason), self.flushed))
            }
        }
    }

    fn done(&self, result: Result<CompactResult, Error>) -> Step {
        if let (Ok(r), Some(hook)) = (&result, &self.compactor.after) {
            if r.compacted() {
                hook(r);
            }
        }
        Step::Done(result)
    }
}

impl Plan {
    /// Whether applying the rule summary would change anything (for the hook's sake).
    fn would_compact(&self) -> bool {
        self.dry_strategy() != crate::planner::Strategy::None
    }

    /// The result of a vetoed compaction: the messages as given.
    fn unchanged(self, reason: String) -> CompactResult {
        let tokens = self.tokens_before();
        let (messages, system) = self.into_messages();
        let n = messages.len();
        CompactResult {
            origins: (0..n).map(MessageOrigin::Kept).collect(),
            messages,
            system,
            tokens_before: tokens,
            tokens_after: tokens,
            original_count: n,
            retained_count: n,
            reason: Some(reason),
            language: "en",
            ..CompactResult::default()
        }
    }
}

impl Compactor {
    /// Compact if due (or always with [`Options::force`]) with the built-in rule summary (no
    /// LLM). The ladder: micro → selective rules → a summary of the span between the kept head
    /// and tail → fewer tail messages → truncation; `over_budget` if still above the soft
    /// threshold.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options, Strategy};
    /// use serde_json::json;
    ///
    /// let mut messages = vec![json!({"role": "user", "content": "Port the parser to Rust."})];
    /// for i in 0..50 {
    ///     messages.push(json!({"role": "assistant", "content": format!("Step {i}: {}", "done ".repeat(60))}));
    ///     messages.push(json!({"role": "user", "content": "next"}));
    /// }
    /// let compactor = Compactor::with_window(4_000);
    /// let result = compactor.compact(messages, &Options::new()).unwrap();
    /// assert_eq!(result.strategy, Strategy::RuleSummary);
    /// assert!(result.tokens_after <= 2_400);
    /// assert_eq!(result.messages[0]["content"], "Port the parser to Rust.");
    /// ```
    pub fn compact(
        &self,
        messages: Vec<Value>,
        opts: &Options<'_>,
    ) -> Result<CompactResult, Error> {
        match Run::start(self, messages, opts, false) {
            (_, Step::Done(r)) => r,
            (mut run, Step::Summarize(_)) => {
                match run.feed(Err(SummarizerFailure::permanent("no summarizer"))) {
                    Step::Done(r) => r,
                    Step::Summarize(_) => {
                        Err(super::error::ConfigError::new("summarizer", "none given").into())
                    }
                }
            }
        }
    }

    /// [`compact`](Self::compact) with your summarizer: a closure from the request to the reply
    /// (a `String`, a `&str` or a [`Reply`]) or a [`SummarizerFailure`]. A transient failure (and
    /// an empty or error-like reply) falls back to the rule summary, with `fallback_reason` set
    /// and a cool-down started in the state; a permanent one is [`Error::Summarizer`]. A long
    /// span is summarised in chunks: the closure is called once per chunk.
    ///
    /// The closure owns the timeout: give up when you must and return a transient failure.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options, SummarizerFailure};
    /// use serde_json::json;
    ///
    /// let messages: Vec<_> = (0..200)
    ///     .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("{i}: {}", "talk ".repeat(40))}))
    ///     .collect();
    /// let compactor = Compactor::with_window(8_000);
    /// let result = compactor
    ///     .compact_with(messages, &Options::new(), |request| {
    ///         // Call your LLM with request.messages() here.
    ///         Ok::<_, SummarizerFailure>(format!("<summary>{} messages about talking.</summary>", request.replaced_count))
    ///     })
    ///     .unwrap();
    /// assert_eq!(result.summary_source, Some("llm"));
    /// assert!(result.summary.unwrap().contains("about talking"));
    /// ```
    pub fn compact_with<F, R>(
        &self,
        messages: Vec<Value>,
        opts: &Options<'_>,
        mut summarize: F,
    ) -> Result<CompactResult, Error>
    where
        F: FnMut(&SummaryRequest) -> Result<R, SummarizerFailure>,
        R: Into<Reply>,
    {
        let (mut run, mut step) = Run::start(self, messages, opts, true);
        loop {
            match step {
                Step::Done(r) => return r,
                Step::Summarize(request) => step = run.feed(summarize(&request).map(Into::into)),
            }
        }
    }

    /// [`compact_with`](Self::compact_with) for async code: the closure returns a future. The
    /// core has no runtime dependency: it awaits your futures and nothing else, so the timeout
    /// is yours (wrap the call in your runtime's timeout and map the elapsed error to a
    /// transient failure). Hooks run synchronously.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options, SummarizerFailure};
    /// use serde_json::json;
    /// use std::time::Duration;
    ///
    /// # async fn call_llm(_: Vec<serde_json::Value>) -> Result<String, String> { Ok("<summary>ok</summary>".into()) }
    /// # async fn timeout<F: std::future::Future>(_: Duration, f: F) -> Result<F::Output, ()> { Ok(f.await) }
    /// async fn compact(messages: Vec<serde_json::Value>) -> context_compactor::CompactResult {
    ///     Compactor::default()
    ///         .compact_with_async(messages, &Options::new().force(true), |request| async move {
    ///             // With tokio: tokio::time::timeout(Duration::from_secs(120), call_llm(...)).await
    ///             match timeout(Duration::from_secs(120), call_llm(request.messages())).await {
    ///                 Ok(Ok(text)) => Ok(text),
    ///                 Ok(Err(e)) => Err(SummarizerFailure::transient(e)),
    ///                 Err(_) => Err(SummarizerFailure::transient("no reply within 120 s")),
    ///             }
    ///         })
    ///         .await
    ///         .unwrap()
    /// }
    /// # let messages: Vec<_> = (0..40).map(|i| json!({"role": if i % 2 == 0 {"user"} else {"assistant"}, "content": "x ".repeat(90)})).collect();
    /// # let result = futures_lite_block_on(compact(messages));
    /// # assert_eq!(result.summary_source, Some("llm"));
    /// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::task::{Context, Poll, Wake, Waker};
    /// #     struct Noop;
    /// #     impl Wake for Noop { fn wake(self: std::sync::Arc<Self>) {} }
    /// #     let waker = Waker::from(std::sync::Arc::new(Noop));
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = Context::from_waker(&waker);
    /// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// ```
    pub async fn compact_with_async<F, Fut, R>(
        &self,
        messages: Vec<Value>,
        opts: &Options<'_>,
        mut summarize: F,
    ) -> Result<CompactResult, Error>
    where
        F: FnMut(SummaryRequest) -> Fut,
        Fut: Future<Output = Result<R, SummarizerFailure>>,
        R: Into<Reply>,
    {
        let (mut run, mut step) = Run::start(self, messages, opts, true);
        loop {
            match step {
                Step::Done(r) => return r,
                Step::Summarize(request) => {
                    step = run.feed(summarize(request).await.map(Into::into))
                }
            }
        }
    }
}

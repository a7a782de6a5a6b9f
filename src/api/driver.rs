//! `compact`, `compact_with` and `compact_with_async`: the core's driver (`crate::driver`: the
//! fallback ladder, the failure policy, the cool-down, the chunk loop, the hooks and the veto,
//! shared with the Python shell) performed on a [`Plan`]. [`Run`] does every step but the
//! summarizer call, which it hands back ([`Next::Summarize`]), so the sync and the async entry
//! points are two small loops and the async one needs no runtime: it awaits the caller's futures
//! and nothing else.

use super::compactor::Compactor;
use super::error::{ConfigError, Error, FailureKind, SummarizerError, SummarizerFailure};
use super::hooks::Preview;
use super::plan::{Plan, SummaryRequest};
use super::reply::Reply;
use super::result::{CompactResult, MessageOrigin};
use super::state::ConversationState;
use super::Options;
use crate::driver::{self, Driver, Failure, HookOutcome, OrderError, Setup, Step};
use serde_json::Value;
use std::future::Future;

/// What a run needs next.
#[allow(clippy::large_enum_variant)] // one lives at a time
enum Next {
    /// The summarizer's reply to this request ([`Run::feed`]).
    Summarize(SummaryRequest),
    /// Finished.
    Done(Result<CompactResult, Error>),
}

/// One compaction in progress.
struct Run<'c> {
    compactor: &'c Compactor,
    driver: Driver,
    /// The plan (advanced by each chunk's summary), until it is applied.
    plan: Option<Plan>,
    /// The first request, asked before the driver started (the hook's preview shows it), until
    /// it is sent; `had_request`: there was one.
    request: Option<SummaryRequest>,
    had_request: bool,
    /// The result, once applied.
    result: Option<CompactResult>,
    /// The plan was found to compact before the hooks ran (no request): its result is made
    /// after them (`dry`: the plan is kept for the veto), or was made already.
    early: bool,
    dry: bool,
    state: Option<ConversationState>,
    flushed: usize,
    /// The summarizer's last reply and failure (their usage, their kind).
    reply: Option<Reply>,
    /// The rule result a provider's items could not be placed over (the fallback's result).
    rule: Option<CompactResult>,
    failure: Option<SummarizerFailure>,
}

fn order(e: OrderError) -> Error {
    ConfigError::new("driver", e).into()
}

fn core_kind(k: FailureKind) -> driver::FailureKind {
    match k {
        FailureKind::Transient => driver::FailureKind::Transient,
        FailureKind::Permanent => driver::FailureKind::Permanent,
        FailureKind::Timeout => driver::FailureKind::Timeout,
    }
}

impl<'c> Run<'c> {
    fn start(
        compactor: &'c Compactor,
        messages: Vec<Value>,
        opts: &Options<'_>,
        summarizer: bool,
    ) -> (Self, Next) {
        let settings = &compactor.settings;
        let setup = Setup {
            has_request: false,
            summarizer,
            before_hook: compactor.before.is_some(),
            after_hook: compactor.after.is_some(),
            has_state: opts.state.is_some(),
        };
        let mut run = Run {
            compactor,
            driver: Driver::with_policy(settings.on_error, settings.cooldown_calls, setup),
            plan: None,
            request: None,
            had_request: false,
            result: None,
            early: false,
            dry: false,
            state: opts.state.cloned(),
            flushed: 0,
            reply: None,
            rule: None,
            failure: None,
        };
        let plan = match compactor.plan_for(messages, opts, summarizer) {
            Ok(p) => p,
            Err(e) => return (run, Next::Done(Err(e))),
        };
        // The request (and the transcript behind it) only when someone reads it.
        if summarizer || compactor.before.is_some() {
            run.request = plan.request();
            run.had_request = run.request.is_some();
        }
        run.driver = Driver::with_policy(
            settings.on_error,
            settings.cooldown_calls,
            Setup {
                has_request: run.request.is_some(),
                ..setup
            },
        );
        run.plan = Some(plan);
        let step = run.driver.resume();
        let next = run.drive(step);
        (run, next)
    }

    fn take_plan(&mut self) -> Result<Plan, Error> {
        self.plan
            .take()
            .ok_or_else(|| ConfigError::new("driver", "no plan left to apply").into())
    }

    /// Apply the plan; the driver is told whether it compacted.
    fn apply(
        &mut self,
        reply: Option<Reply>,
        fallback: Option<String>,
    ) -> Result<Result<Step, OrderError>, Error> {
        let result = match (self.plan.is_none(), self.rule.take()) {
            // Items that could not be placed: the rule result they were tried over.
            (true, Some(mut rule)) => {
                rule.fallback_reason = fallback.or(rule.fallback_reason);
                rule
            }
            _ => self.take_plan()?.finish(reply, fallback, self.flushed)?,
        };
        let compacted = result.compacted();
        self.result = Some(result);
        Ok(self.driver.applied(compacted))
    }

    /// Perform the driver's steps until it needs a summary or is done.
    fn drive(&mut self, mut step: Result<Step, OrderError>) -> Next {
        loop {
            let s = match step {
                Ok(s) => s,
                Err(e) => return Next::Done(Err(order(e))),
            };
            step = match self.perform(s) {
                Ok(Ok(next)) => return next,
                Ok(Err(step)) => step,
                Err(e) => return Next::Done(Err(e)),
            };
        }
    }

    /// One step: `Ok(Ok(next))` to return, `Ok(Err(step))` to go on with.
    #[allow(clippy::type_complexity)]
    fn perform(&mut self, step: Step) -> Result<Result<Next, Result<Step, OrderError>>, Error> {
        Ok(Err(match step {
            Step::Apply {
                summary,
                truncated,
                fallback,
            } => {
                if !self.had_request && self.result.is_none() && !self.early {
                    // No request: the result comes first, the hooks only if it compacted. With a
                    // hook that may veto, the plan is kept (a dry run) until it has spoken.
                    if self.compactor.before.is_some() {
                        let plan = self
                            .plan
                            .as_ref()
                            .ok_or_else(|| ConfigError::new("driver", "no plan"))?;
                        self.early = plan.would_compact();
                        self.dry = true;
                        self.driver.applied(self.early)
                    } else {
                        let r = self.apply(None, None)?;
                        self.early = self.result.as_ref().is_some_and(CompactResult::compacted);
                        r
                    }
                } else if let Some(fb) = fallback {
                    if let (Some(st), n @ 1..) = (&self.state, fb.cooldown_calls) {
                        st.lock().cooldown_remaining = u32::try_from(n).unwrap_or(u32::MAX);
                    }
                    self.apply(None, Some(fb.reason))?
                } else {
                    let reply = match (self.reply.take(), summary) {
                        (Some(r), Some(text)) if r.text() == text => Some(r.truncated(truncated)),
                        (_, Some(text)) => Some(Reply::new(text).truncated(truncated)),
                        (_, None) => None,
                    };
                    self.apply(reply, None)?
                }
            }
            Step::BeforeHook => {
                let (Some(hook), Some(plan)) = (self.compactor.before.clone(), self.plan.as_ref())
                else {
                    return Err(ConfigError::new("driver", "no hook or plan").into());
                };
                let mut preview = Preview {
                    plan,
                    request: self.request.as_ref(),
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
                self.flushed = flushed;
                self.driver.hook_done(HookOutcome { veto, summary })
            }
            Step::Summarize { .. } => {
                let request = match self.request.take() {
                    Some(r) => Some(r),
                    None => self.plan.as_ref().and_then(Plan::request),
                };
                match request {
                    Some(r) => return Ok(Ok(Next::Summarize(r))),
                    None => self.driver.fail(Failure {
                        kind: driver::FailureKind::Transient,
                        reason: "no summary request for this chunk".into(),
                    }),
                }
            }
            Step::Advance { text } => {
                let plan = self.take_plan()?;
                let reply = self.reply.take().unwrap_or_else(|| Reply::new(text));
                self.plan = Some(plan.advance(reply));
                self.driver.resume()
            }
            Step::AfterHook => {
                self.finish_early()?;
                if let (Some(hook), Some(r)) = (self.compactor.after.as_ref(), self.result.as_ref())
                {
                    hook(r);
                }
                self.driver.resume()
            }
            Step::Unchanged { reason } => {
                let plan = self.take_plan()?;
                return Ok(Ok(Next::Done(Ok(plan.unchanged(reason)))));
            }
            Step::Raise { kind, message } => {
                let failure = self.failure.take().unwrap_or_else(|| match kind {
                    driver::FailureKind::Permanent => SummarizerFailure::permanent(message),
                    driver::FailureKind::Timeout => SummarizerFailure::timeout(message),
                    driver::FailureKind::Transient | driver::FailureKind::Unknown => {
                        SummarizerFailure::transient(message)
                    }
                });
                return Ok(Ok(Next::Done(Err(Error::Summarizer(SummarizerError {
                    failure,
                })))));
            }
            Step::Done => {
                self.finish_early()?;
                if self.result.is_none() {
                    // A dry run that did not compact: the plan's own (unchanged) result.
                    self.result = Some(self.take_plan()?.finish(None, None, self.flushed)?);
                }
                let result = self
                    .result
                    .take()
                    .ok_or_else(|| ConfigError::new("driver", "no result"))?;
                return Ok(Ok(Next::Done(Ok(result))));
            }
        }))
    }

    /// The result of a plan that compacts without a request, after the hooks spoke.
    fn finish_early(&mut self) -> Result<(), Error> {
        if !self.early {
            return Ok(());
        }
        self.early = false;
        if self.dry {
            self.dry = false;
            self.result = Some(self.take_plan()?.finish(None, None, self.flushed)?);
        } else if let Some(r) = self.result.as_mut() {
            r.flushed_memories = self.flushed;
        }
        Ok(())
    }

    /// The summarizer's outcome for the last request.
    fn feed(&mut self, outcome: Result<Reply, SummarizerFailure>) -> Next {
        let step = match outcome {
            Ok(reply) if reply.provider_items().is_some() => {
                // A native strategy: the provider's items replace the whole span at once.
                let plan = match self.take_plan() {
                    Ok(p) => p,
                    Err(e) => return Next::Done(Err(e)),
                };
                match plan.place_items(reply, self.flushed) {
                    Err(e) => return Next::Done(Err(e)),
                    Ok(Ok(placed)) => {
                        self.result = Some(placed);
                        self.driver.items_placed()
                    }
                    Ok(Err((rule, why))) => {
                        self.rule = Some(rule);
                        self.failure = Some(SummarizerFailure::transient(why.clone()));
                        self.driver.fail(Failure {
                            kind: driver::FailureKind::Transient,
                            reason: why,
                        })
                    }
                }
            }
            Ok(reply) => {
                let left = self.plan.as_ref().map_or(0, Plan::chunks_left);
                let step = self.driver.reply(reply.text(), reply.is_truncated(), left);
                self.reply = Some(reply);
                step
            }
            Err(failure) => {
                let f = Failure {
                    kind: core_kind(failure.kind()),
                    reason: failure.reason().to_owned(),
                };
                self.failure = Some(failure);
                self.driver.fail(f)
            }
        };
        self.drive(step)
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
            (_, Next::Done(r)) => r,
            (mut run, Next::Summarize(_)) => {
                match run.feed(Err(SummarizerFailure::permanent("no summarizer"))) {
                    Next::Done(r) => r,
                    Next::Summarize(_) => Err(ConfigError::new("summarizer", "none given").into()),
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
                Next::Done(r) => return r,
                Next::Summarize(request) => step = run.feed(summarize(&request).map(Into::into)),
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
                Next::Done(r) => return r,
                Next::Summarize(request) => {
                    step = run.feed(summarize(request).await.map(Into::into))
                }
            }
        }
    }
}

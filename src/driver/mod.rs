//! The compaction driver: the steps between a plan and its result, as a sans-IO state machine.
//!
//! A compaction that needs a summary asks the host's summarizer (an LLM call) once per chunk,
//! may call the host's hooks (`on_before_compact`, which can veto or supply the summary, and
//! `on_compacted`), and falls back to the rule summary when the summarizer fails in a way the
//! policy (`on_summarizer_error`) allows. This module decides all of that and performs none of
//! it: the host (Python's `ContextCompactor`, or a Rust caller) holds the plan, the callables,
//! the clock and the runtime; the [`Driver`] says what to do next ([`Step`]) and is told what
//! happened ([`Driver::reply`], [`Driver::fail`], [`Driver::hook_done`], [`Driver::applied`]).
//! The host owns timeouts: a summarizer that did not answer in time is a
//! [`FailureKind::Timeout`] failure.
//!
//! Design note, the ladder's failure rules:
//! - A failure at chunk k keeps chunks 1..k-1: the host's plan has been advanced by each chunk's
//!   summary, and the fallback applies the rule summary to that plan (the rest only).
//! - `"fallback"` falls back from transient and unknown failures (timeouts, 429, 5xx,
//!   connection errors, an empty or error-like reply) and raises on permanent ones (auth,
//!   permission, not found, bad request: falling back on every call would hide them);
//!   `"fallback_all"` falls back from every failure; `"raise"` from none.
//! - A fallback starts the cool-down (`cooldown_calls`) when the host keeps a conversation
//!   state: that many later compactions skip the LLM (the planner reads the state).

mod classify;
#[cfg(test)]
mod tests;

pub use classify::{classify, reply_problem, FailureKind};

use crate::config::{Config, OnSummarizerError};
use std::fmt;

/// A summarizer call that gave no usable summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// How the failure is classed (it decides between fallback and error).
    pub kind: FailureKind,
    /// What happened, for `fallback_reason` and the error (`"ErrorClass: short text"`).
    pub reason: String,
}

/// The fallback a failure led to (carried by [`Step::Apply`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The failure's class.
    pub kind: FailureKind,
    /// The failure's description: the result's `fallback_reason`.
    pub reason: String,
    /// Start the cool-down for that many calls (0: none; only with a conversation state).
    pub cooldown_calls: usize,
}

/// What the host has: it decides which steps the driver asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// The plan has a summary request (a span to summarise).
    pub has_request: bool,
    /// A summarizer is configured (else the rule summary).
    pub summarizer: bool,
    /// An `on_before_compact` hook is configured.
    pub before_hook: bool,
    /// An `on_compacted` hook is configured.
    pub after_hook: bool,
    /// The call has a conversation state (a fallback starts its cool-down).
    pub has_state: bool,
}

/// What the `on_before_compact` hook decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookOutcome {
    /// Vetoed, with the reason: the conversation is returned unchanged.
    pub veto: Option<String>,
    /// The hook supplied the summary text itself: no summarizer call.
    pub summary: Option<String>,
}

/// What the host does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Apply the current plan with `summary` (`None`: the rule summary), `truncated` (the
    /// summarizer's reply hit its token limit), then call [`Driver::applied`]. `fallback`: a
    /// failure led here (set `fallback_reason`; start the cool-down it names).
    Apply {
        /// The summary text; `None`: the rule summary.
        summary: Option<String>,
        /// The reply was cut at the summarizer's token limit.
        truncated: bool,
        /// The failure this fallback follows.
        fallback: Option<Fallback>,
    },
    /// Call `on_before_compact` with the preview, then [`Driver::hook_done`].
    BeforeHook,
    /// Ask the summarizer for the current plan's request (chunk `chunk`, counted from 0), then
    /// [`Driver::reply`] or [`Driver::fail`] (or [`Driver::items_placed`] when the reply is a
    /// provider's own compaction items, placed by the host).
    Summarize {
        /// The chunk asked for (0 first).
        chunk: usize,
    },
    /// Advance the plan with this chunk's summary text, then [`Driver::resume`].
    Advance {
        /// The summary of the chunks so far.
        text: String,
    },
    /// Call `on_compacted` with the result, then [`Driver::resume`].
    AfterHook,
    /// Return the conversation unchanged (`strategy="none"`), with this reason.
    Unchanged {
        /// Why (the veto's reason).
        reason: String,
    },
    /// Fail with this message: a summarizer failure the policy does not fall back from.
    Raise {
        /// The failure's class.
        kind: FailureKind,
        /// The error's message.
        message: String,
    },
    /// The result is final: return it.
    Done,
}

/// A call the driver did not expect in its current state (a host bug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderError {
    /// The call made.
    pub call: &'static str,
    /// The step the driver was waiting on.
    pub waiting: &'static str,
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "driver: {} called while waiting for {}",
            self.call, self.waiting
        )
    }
}

impl std::error::Error for OrderError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Start,
    /// Waiting for `applied` of the plan applied before any hook (no request).
    AppliedEarly,
    /// Waiting for `hook_done`.
    Hook,
    /// Waiting for `reply`/`fail`/`items_placed`.
    Summary,
    /// Waiting for `resume` after an `Advance`.
    Advanced,
    /// Waiting for `applied` of the final apply.
    Applied,
    /// Waiting for `resume` after `AfterHook`.
    After,
    Finished,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Start => "the start",
            Phase::AppliedEarly | Phase::Applied => "applied()",
            Phase::Hook => "hook_done()",
            Phase::Summary => "reply() or fail()",
            Phase::Advanced | Phase::After => "resume()",
            Phase::Finished => "nothing (finished)",
        }
    }
}

/// The compaction's steps for one plan (see the module's documentation).
#[derive(Clone, Debug)]
pub struct Driver {
    policy: OnSummarizerError,
    cooldown_calls: usize,
    setup: Setup,
    phase: Phase,
    /// A result exists already (applied before the hook: no request).
    early: bool,
    /// Chunks summarised so far.
    chunk: usize,
    /// The apply awaited is of the summarizer's reply (a failure there still falls back).
    applying_reply: bool,
}

impl Driver {
    /// A driver for one compaction with `config`'s failure policy and cool-down.
    pub fn new(config: &Config, setup: Setup) -> Driver {
        Driver::with_policy(config.on_summarizer_error, config.cooldown_calls, setup)
    }

    /// A driver with an explicit policy and cool-down length.
    pub fn with_policy(policy: OnSummarizerError, cooldown_calls: usize, setup: Setup) -> Driver {
        Driver {
            policy,
            cooldown_calls,
            setup,
            phase: Phase::Start,
            early: false,
            chunk: 0,
            applying_reply: false,
        }
    }

    /// Chunks summarised so far (the chunks a fallback keeps).
    pub fn chunks_done(&self) -> usize {
        self.chunk
    }

    fn order(&self, call: &'static str) -> OrderError {
        OrderError {
            call,
            waiting: self.phase.name(),
        }
    }

    /// The next step where no answer is due: at the start, after [`Step::Advance`] and after
    /// [`Step::AfterHook`].
    pub fn resume(&mut self) -> Result<Step, OrderError> {
        match self.phase {
            Phase::Start => {
                if !self.setup.has_request {
                    self.phase = Phase::AppliedEarly;
                    return Ok(Step::Apply {
                        summary: None,
                        truncated: false,
                        fallback: None,
                    });
                }
                Ok(self.before_hook_or_summary())
            }
            Phase::Advanced => {
                self.phase = Phase::Summary;
                Ok(Step::Summarize { chunk: self.chunk })
            }
            Phase::After => {
                self.phase = Phase::Finished;
                Ok(Step::Done)
            }
            _ => Err(self.order("resume()")),
        }
    }

    fn before_hook_or_summary(&mut self) -> Step {
        if self.setup.before_hook {
            self.phase = Phase::Hook;
            return Step::BeforeHook;
        }
        self.after_hook_decision(HookOutcome::default())
    }

    /// The plan was applied; `compacted`: the result changed the conversation.
    pub fn applied(&mut self, compacted: bool) -> Result<Step, OrderError> {
        match self.phase {
            Phase::AppliedEarly => {
                if !compacted {
                    self.phase = Phase::Finished;
                    return Ok(Step::Done);
                }
                self.early = true;
                Ok(self.before_hook_or_summary())
            }
            Phase::Applied => Ok(self.finish()),
            _ => Err(self.order("applied()")),
        }
    }

    fn finish(&mut self) -> Step {
        if self.setup.after_hook {
            self.phase = Phase::After;
            Step::AfterHook
        } else {
            self.phase = Phase::Finished;
            Step::Done
        }
    }

    /// What the `on_before_compact` hook decided.
    pub fn hook_done(&mut self, outcome: HookOutcome) -> Result<Step, OrderError> {
        if self.phase != Phase::Hook {
            return Err(self.order("hook_done()"));
        }
        Ok(self.after_hook_decision(outcome))
    }

    fn after_hook_decision(&mut self, outcome: HookOutcome) -> Step {
        if let Some(reason) = outcome.veto {
            self.phase = Phase::Finished;
            return Step::Unchanged { reason };
        }
        if self.early {
            // The result exists (no request): only the hooks' part is left.
            return self.finish();
        }
        if let Some(text) = outcome.summary {
            self.phase = Phase::Applied;
            return Step::Apply {
                summary: Some(text),
                truncated: false,
                fallback: None,
            };
        }
        if !self.setup.summarizer {
            self.phase = Phase::Applied;
            return Step::Apply {
                summary: None,
                truncated: false,
                fallback: None,
            };
        }
        self.phase = Phase::Summary;
        Step::Summarize { chunk: self.chunk }
    }

    /// The summarizer's reply for the current chunk: its text, whether it was cut at its token
    /// limit, and the chunks left after this one. An empty or error-like text is a transient
    /// failure ([`reply_problem`]).
    pub fn reply(
        &mut self,
        text: &str,
        truncated: bool,
        remaining_chunks: usize,
    ) -> Result<Step, OrderError> {
        if self.phase != Phase::Summary {
            return Err(self.order("reply()"));
        }
        if let Some(problem) = reply_problem(text) {
            return self.fail(Failure {
                kind: FailureKind::Transient,
                reason: format!("BadReply: {problem}"),
            });
        }
        self.chunk += 1;
        if remaining_chunks == 0 {
            self.phase = Phase::Applied;
            self.applying_reply = true;
            return Ok(Step::Apply {
                summary: Some(text.to_owned()),
                truncated,
                fallback: None,
            });
        }
        self.phase = Phase::Advanced;
        Ok(Step::Advance {
            text: text.to_owned(),
        })
    }

    /// The reply was the provider's own compaction items, placed by the host over the whole
    /// span (the result is built).
    pub fn items_placed(&mut self) -> Result<Step, OrderError> {
        if self.phase != Phase::Summary {
            return Err(self.order("items_placed()"));
        }
        self.chunk += 1;
        Ok(self.finish())
    }

    /// The summarizer failed for the current chunk; or the step after its reply did (advancing
    /// the plan with it, or applying it): the host's plan is the one before that step.
    pub fn fail(&mut self, failure: Failure) -> Result<Step, OrderError> {
        let after_reply =
            self.phase == Phase::Advanced || (self.phase == Phase::Applied && self.applying_reply);
        if self.phase != Phase::Summary && !after_reply {
            return Err(self.order("fail()"));
        }
        if after_reply {
            // The reply was counted; the failure undoes it.
            self.chunk -= 1;
        }
        self.applying_reply = false;
        if !falls_back(self.policy, failure.kind) {
            self.phase = Phase::Finished;
            return Ok(Step::Raise {
                kind: failure.kind,
                message: format!(
                    "the summarizer failed ({}): {}",
                    failure.kind.name(),
                    failure.reason
                ),
            });
        }
        self.phase = Phase::Applied;
        Ok(Step::Apply {
            summary: None,
            truncated: false,
            fallback: Some(Fallback {
                kind: failure.kind,
                reason: failure.reason,
                cooldown_calls: if self.setup.has_state {
                    self.cooldown_calls
                } else {
                    0
                },
            }),
        })
    }
}

/// Whether `policy` falls back to the rule summary from a failure of `kind` (else: an error).
pub fn falls_back(policy: OnSummarizerError, kind: FailureKind) -> bool {
    match policy {
        OnSummarizerError::Raise => false,
        OnSummarizerError::FallbackAll => true,
        OnSummarizerError::Fallback => kind != FailureKind::Permanent,
    }
}

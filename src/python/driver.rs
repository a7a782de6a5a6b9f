//! The compaction driver ([`crate::driver`]) for Python's `ContextCompactor`: the shell performs
//! the steps (hooks, summarizer calls with their timeouts, the plan's `advance`/`apply`) and the
//! core decides them; a Session's background jobs take the same steps (`_driver.steps`). Also
//! the failure classes and the reply check that `_summarize` applies to a summarizer's answer.

use super::config::config_of;
use crate::driver::{self, Driver as CoreDriver, Failure, FailureKind, HookOutcome, Setup, Step};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::sync::Mutex;

/// One step the shell performs next.
#[pyclass(module = "context_compactor._core", frozen, get_all)]
pub struct DriverStep {
    /// ``"apply"``, ``"before_hook"``, ``"summarize"``, ``"advance"``, ``"after_hook"``,
    /// ``"unchanged"``, ``"raise"`` or ``"done"``.
    kind: &'static str,
    /// ``apply``: the summary (``None``: the rule summary); ``advance``: the chunk's summary;
    /// ``unchanged``: the veto's reason; ``raise``: the error's message.
    text: Option<String>,
    /// ``apply``: the reply hit its token limit.
    truncated: bool,
    /// ``summarize``: the chunk asked for (0 first).
    chunk: usize,
    /// ``apply`` after a failure, and ``raise``: the failure's class.
    failure_kind: Option<&'static str>,
    /// ``apply`` after a failure: its description (``fallback_reason``).
    fallback_reason: Option<String>,
    /// ``apply`` after a failure: start the cool-down for that many calls (0: none).
    cooldown_calls: usize,
}

fn step_of(step: Step) -> DriverStep {
    let mut s = DriverStep {
        kind: "done",
        text: None,
        truncated: false,
        chunk: 0,
        failure_kind: None,
        fallback_reason: None,
        cooldown_calls: 0,
    };
    match step {
        Step::Apply {
            summary,
            truncated,
            fallback,
        } => {
            s.kind = "apply";
            s.text = summary;
            s.truncated = truncated;
            if let Some(f) = fallback {
                s.failure_kind = Some(f.kind.name());
                s.fallback_reason = Some(f.reason);
                s.cooldown_calls = f.cooldown_calls;
            }
        }
        Step::BeforeHook => s.kind = "before_hook",
        Step::Summarize { chunk } => {
            s.kind = "summarize";
            s.chunk = chunk;
        }
        Step::Advance { text } => {
            s.kind = "advance";
            s.text = Some(text);
        }
        Step::AfterHook => s.kind = "after_hook",
        Step::Unchanged { reason } => {
            s.kind = "unchanged";
            s.text = Some(reason);
        }
        Step::Raise { kind, message } => {
            s.kind = "raise";
            s.failure_kind = Some(kind.name());
            s.text = Some(message);
        }
        Step::Done => {}
    }
    s
}

/// The steps of one compaction (see ``ContextCompactor._steps``).
#[pyclass(module = "context_compactor._core", frozen)]
pub struct Driver {
    inner: Mutex<CoreDriver>,
}

type Answer = Result<Step, driver::OrderError>;

impl Driver {
    fn call(&self, f: impl FnOnce(&mut CoreDriver) -> Answer) -> PyResult<DriverStep> {
        let mut d = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("driver: poisoned"))?;
        f(&mut d)
            .map(step_of)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}

#[pymethods]
impl Driver {
    #[new]
    #[pyo3(signature = (config, *, has_request, summarizer, before_hook, after_hook, has_state))]
    fn new(
        config: &Bound<'_, PyAny>,
        has_request: bool,
        summarizer: bool,
        before_hook: bool,
        after_hook: bool,
        has_state: bool,
    ) -> PyResult<Driver> {
        let config = config_of(config)?;
        let setup = Setup {
            has_request,
            summarizer,
            before_hook,
            after_hook,
            has_state,
        };
        Ok(Driver {
            inner: Mutex::new(CoreDriver::new(&config, setup)),
        })
    }

    /// The next step where no answer is due (the start, after ``advance`` and ``after_hook``).
    fn resume(&self) -> PyResult<DriverStep> {
        self.call(CoreDriver::resume)
    }

    /// The plan was applied; ``compacted``: the result changed the conversation.
    fn applied(&self, compacted: bool) -> PyResult<DriverStep> {
        self.call(|d| d.applied(compacted))
    }

    /// What ``on_before_compact`` decided: a veto's reason, or a summary it supplied.
    #[pyo3(signature = (*, veto, summary))]
    fn hook_done(&self, veto: Option<String>, summary: Option<String>) -> PyResult<DriverStep> {
        self.call(|d| d.hook_done(HookOutcome { veto, summary }))
    }

    /// The summarizer's reply text for the current chunk.
    fn reply(&self, text: &str, truncated: bool, remaining_chunks: usize) -> PyResult<DriverStep> {
        self.call(|d| d.reply(text, truncated, remaining_chunks))
    }

    /// The reply was a provider's compaction items, placed over the span.
    fn items_placed(&self) -> PyResult<DriverStep> {
        self.call(CoreDriver::items_placed)
    }

    /// The summarizer (or the step after its reply) failed: ``kind`` is ``"transient"``,
    /// ``"permanent"``, ``"unknown"`` or ``"timeout"``.
    fn fail(&self, kind: &str, reason: String) -> PyResult<DriverStep> {
        let kind = FailureKind::parse(kind).unwrap_or(FailureKind::Unknown);
        self.call(|d| d.fail(Failure { kind, reason }))
    }

    /// Chunks summarised so far.
    #[getter]
    fn chunks_done(&self) -> PyResult<usize> {
        Ok(self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("driver: poisoned"))?
            .chunks_done())
    }
}

/// The class of a summarizer failure: ``"transient"``, ``"permanent"`` or ``"unknown"``.
/// ``transient_type``: a timeout, connection error or bad reply; ``class_names``: the error's
/// class and its bases; ``programming``: an error of the summarizer's own code; ``status``: an
/// HTTP status it carries.
#[pyfunction]
#[pyo3(signature = (*, transient_type, class_names, programming, status))]
fn classify_failure(
    transient_type: bool,
    class_names: Vec<String>,
    programming: bool,
    status: Option<i64>,
) -> &'static str {
    let names: Vec<&str> = class_names.iter().map(String::as_str).collect();
    driver::classify(transient_type, &names, programming, status).name()
}

/// Why a reply's text cannot be a summary (empty, or an error or refusal without
/// ``<summary>`` tags); ``None`` when it can.
#[pyfunction]
fn reply_problem(text: &str) -> Option<&'static str> {
    driver::reply_problem(text)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Driver>()?;
    m.add_class::<DriverStep>()?;
    m.add_function(wrap_pyfunction!(classify_failure, m)?)?;
    m.add_function(wrap_pyfunction!(reply_problem, m)?)?;
    Ok(())
}

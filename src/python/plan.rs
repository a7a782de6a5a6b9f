//! `plan()` and the `Plan` object: the planner behind `ContextCompactor.plan/compact`.
//!
//! The caller's summarizer never enters Rust: `plan()` returns a `Plan` whose `request()` is
//! what to summarise; `apply(text)` finishes. A Python counter (a callable tokenizer) is passed
//! to each call that counts, never stored.
//!
//! Over 600 lines (about 640): the one boundary of the planner, `plan()`'s arguments read and
//! checked into a `PlanConfig` and the `Plan` object's methods; the readers and writers it calls
//! are `extract/` and `render/`.

use super::counter::Counter;
use super::errors::{config_error, plan_error};
use super::extract::{parse_format, Extracted, Extractor};
use super::render::Source;
use super::state::ConversationState;
use crate::planner::{self, Mode, PlanConfig, Planned, SystemPrompt};
use crate::summary::language::Language;
use crate::text::Text;
use crate::tokens::counter::Tokenizer;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::cell::RefCell;
use std::sync::Arc;

/// Read a `CompactionConfig` (checked by the core's rules; thresholds worked out there).
pub(super) fn plan_config(cfg: &Bound<'_, PyAny>) -> PyResult<PlanConfig> {
    Ok(super::config::config_of(cfg)?.plan_config())
}

/// Run `f` with a `Count` for `counter`: the built-in tokenizer with the GIL released, or the
/// Python callable (errors kept and raised after).
pub(super) fn with_counter<R: Send>(
    py: Python<'_>,
    counter: &Counter<'_>,
    f: impl FnOnce(&dyn planner::Count) -> R + Send,
) -> PyResult<R> {
    match counter {
        Counter::Builtin(t) => {
            let t: Tokenizer = *t;
            Ok(py.detach(|| f(&move |x: Text<'_>| t.count(x))))
        }
        Counter::Callable(c) => {
            let err: RefCell<Option<PyErr>> = RefCell::new(None);
            let count = |x: Text<'_>| -> usize {
                if err.borrow().is_some() {
                    return 0;
                }
                let r = c
                    .call1((x.to_utf8().as_ref(),))
                    .and_then(|n| n.extract::<usize>())
                    .map_err(|e| {
                        let bad =
                            config_error(py, "tokenizer", "the callable must return an int >= 0");
                        bad.set_cause(py, Some(e));
                        bad
                    });
                r.unwrap_or_else(|e| {
                    *err.borrow_mut() = Some(e);
                    0
                })
            };
            // Not Send: runs attached, which a Python counter needs anyway.
            let r = f(&count);
            match err.into_inner() {
                Some(e) => Err(e),
                None => Ok(r),
            }
        }
    }
}

/// The tokenizer a plan method counts with (the compactor's; the estimate when not given).
fn counter_of<'py>(tokenizer: Option<&Bound<'py, PyAny>>) -> PyResult<Counter<'py>> {
    match tokenizer {
        None => Ok(Counter::Builtin(Tokenizer::Approx)),
        Some(t) => Counter::parse(t),
    }
}

pub(super) struct Inner {
    // Declared before `ex`: it borrows the strings `ex` keeps alive.
    pub(super) planned: Planned<'static>,
    pub(super) ex: Arc<Extracted>,
    pub(super) messages: Arc<Vec<Py<PyAny>>>,
    pub(super) system: Option<Py<PyAny>>,
    pub(super) state: Option<Py<ConversationState>>,
}

/// A compaction waiting for its summary (see `CompactionPlan` in the Python shell).
#[pyclass(frozen, module = "context_compactor._core")]
pub struct Plan {
    pub(super) inner: Arc<Inner>,
}

fn language_code(l: Language) -> &'static str {
    match l {
        Language::En => "en",
        Language::Zh => "zh",
    }
}

#[pymethods]
impl Plan {
    /// The summary request for the current chunk as a dict, or `None`.
    #[pyo3(signature = (tokenizer=None))]
    fn request<'py>(
        &self,
        py: Python<'py>,
        tokenizer: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let counter = counter_of(tokenizer)?;
        let planned = &self.inner.planned;
        let Some(r) = with_counter(py, &counter, |c| planned.request(c))? else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("system_prompt", r.system_prompt)?;
        d.set_item("user_prompt", r.user_prompt)?;
        d.set_item("previous_summary", r.previous_summary)?;
        d.set_item("ledger", r.ledger)?;
        d.set_item("instructions", r.instructions)?;
        d.set_item("max_tokens", r.max_tokens)?;
        d.set_item("must_keep", r.must_keep)?;
        d.set_item("language", language_code(r.language))?;
        d.set_item("replaced_count", r.replaced_count)?;
        d.set_item("chunk", r.chunk)?;
        d.set_item("chunks", r.chunks)?;
        Ok(Some(d))
    }

    /// Chunks left after the current one.
    #[pyo3(signature = (tokenizer=None))]
    fn remaining_chunks(
        &self,
        py: Python<'_>,
        tokenizer: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let counter = counter_of(tokenizer)?;
        let planned = &self.inner.planned;
        with_counter(py, &counter, |c| planned.remaining_chunks(c))
    }

    /// Why nothing (more) is planned, if so.
    #[getter]
    fn reason(&self) -> Option<String> {
        self.inner.planned.reason.clone()
    }

    /// Tokens before compaction (calibrated).
    #[getter]
    fn tokens_before(&self) -> usize {
        self.inner.planned.tokens_before
    }

    /// The plan for the next chunk, `text` being the summary of the chunks so far.
    fn advance(&self, py: Python<'_>, text: &str) -> Plan {
        let planned = self.inner.planned.advance(text);
        Plan {
            inner: Arc::new(Inner {
                planned,
                ex: self.inner.ex.clone(),
                messages: self.inner.messages.clone(),
                system: self.inner.system.as_ref().map(|s| s.clone_ref(py)),
                state: self.inner.state.as_ref().map(|s| s.clone_ref(py)),
            }),
        }
    }

    /// Finish with `summary` (`None`: the built-in rule summary). Returns the result's fields.
    #[pyo3(signature = (summary, truncated=false, tokenizer=None))]
    fn apply<'py>(
        &self,
        py: Python<'py>,
        summary: Option<&str>,
        truncated: bool,
        tokenizer: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let counter = counter_of(tokenizer)?;
        let planned = &self.inner.planned;
        let summary = summary.map(str::to_owned);
        let outcome = with_counter(py, &counter, |c| {
            planned.apply(summary.as_deref(), truncated, c)
        })?;
        outcome_dict(py, &self.inner, &outcome)
    }
}

/// The result's fields of a finished plan (offloads written, messages rendered, the state
/// told): `Plan.apply` and the batch's `apply_many` share it.
pub(super) fn outcome_dict<'py>(
    py: Python<'py>,
    inner: &Inner,
    outcome: &planner::Outcome<'_>,
) -> PyResult<Bound<'py, PyDict>> {
    {
        let planned = &inner.planned;
        let conv = inner.ex.conv_static();
        // Offloaded tool output is written before the placeholders that name it are returned.
        for o in &outcome.offloads {
            write_offload(py, &o.path, &o.text)?;
        }
        let src = Source {
            py,
            messages: &inner.messages,
            conv,
        };
        let msgs = PyList::empty(py);
        if inner.ex.pydantic_ai {
            // pydantic-ai: the shell builds new and edited messages as its dataclasses.
            for s in &outcome.slots {
                msgs.append(super::describe::describe(
                    py,
                    &inner.messages,
                    conv,
                    &s.out,
                )?)?;
            }
        } else {
            for s in &outcome.slots {
                msgs.append(src.render(&s.out)?)?;
            }
        }
        let d = PyDict::new(py);
        // Framework input: the shell turns new and edited messages into the framework's
        // classes (`plan.py`, by this tag; the binding names no Python module).
        if inner.ex.pydantic_ai {
            d.set_item("framework", "pydantic_ai")?;
            d.set_item("originals", PyList::new(py, inner.messages.iter())?)?;
        } else if inner.ex.langchain {
            d.set_item("framework", "langchain")?;
        }
        d.set_item("messages", msgs)?;
        let system = inner.system.as_ref().map(|s| s.bind(py).clone());
        let made = outcome.summary.is_some() && outcome.strategy != planner::Strategy::None;
        let system = match system {
            Some(s) if made => Some(system_with(py, &s, outcome.system_summary.as_deref())?),
            Some(s) => Some(s),
            None => outcome
                .system_summary
                .as_ref()
                .map(|t| pyo3::types::PyString::new(py, t).into_any()),
        };
        let system = system.filter(|s| !s.is_none());
        d.set_item("system", system)?;
        d.set_item("summary", outcome.summary.clone())?;
        d.set_item(
            "summary_source",
            outcome.summary_source.map(planner::SummarySource::as_str),
        )?;
        d.set_item("fallback_reason", outcome.fallback_reason.clone())?;
        let origins = PyList::empty(py);
        for o in &outcome.origins {
            origins.append(o.parts())?;
        }
        d.set_item("origins", origins)?;
        d.set_item("summary_truncated", outcome.summary_truncated)?;
        d.set_item("strategy", outcome.strategy.as_str())?;
        d.set_item("tokens_before", outcome.tokens_before)?;
        d.set_item("tokens_after", outcome.tokens_after)?;
        d.set_item("over_budget", outcome.over_budget)?;
        d.set_item("over_budget_reason", outcome.over_budget_reason.clone())?;
        d.set_item("reason", outcome.reason.clone())?;
        d.set_item("original_count", outcome.original_count)?;
        d.set_item("retained_count", outcome.retained_count)?;
        d.set_item("compacted_count", outcome.compacted_count)?;
        d.set_item("repairs", outcome.repairs.clone())?;
        d.set_item("must_keep_missing", outcome.must_keep_missing.clone())?;
        let recalls = PyDict::new(py);
        for r in &outcome.recalls {
            recalls.set_item(&r.id, &r.text)?;
        }
        d.set_item("recalls", recalls)?;
        let record = PyList::empty(py);
        for r in &outcome.record {
            let e = PyDict::new(py);
            e.set_item("index", r.index)?;
            e.set_item("action", r.action.as_str())?;
            e.set_item("detail", &r.detail)?;
            record.append(e)?;
        }
        d.set_item("record", record)?;
        d.set_item("phases", outcome.phases.clone())?;
        d.set_item("language", language_code(planned.language))?;
        d.set_item("must_keep", planned.facts.clone())?;
        // The state learns that the replaced messages are gone (stale usage) and the summary.
        if let Some(state) = &inner.state {
            if outcome.strategy != planner::Strategy::None {
                let mut present = vec![false; conv.messages.len()];
                for s in &outcome.slots {
                    if let Some(i) = s.source() {
                        if s.out.is_keep() {
                            present[i] = true;
                        }
                    }
                }
                let removed: Vec<u64> = conv
                    .messages
                    .iter()
                    .zip(&present)
                    .filter(|(_, &p)| !p)
                    .map(|(m, _)| m.fingerprint)
                    .collect();
                let summary = outcome.summary.clone();
                let st = state.get();
                py.detach(|| st.lock().note_compaction(removed, summary));
            }
            // A compaction that was due and still ends over the soft threshold, or that could
            // not reach the target and left less room under the soft threshold than
            // `retry_growth_tokens`, holds the next one back until the context grew by that
            // much: another compaction sooner would end the same way (a compaction loop, a
            // prefix break at every call). One that reaches the target or leaves room lifts it.
            if planned.is_due() {
                let cfg = planned.config();
                let growth = cfg.retry_growth;
                let after = outcome.tokens_after;
                let stuck = outcome.over_budget
                    || (after > cfg.target && after.saturating_add(growth) > cfg.soft);
                state.get().lock().note_outcome(stuck, after, growth);
            }
        }
        Ok(d)
    }
}

/// `raw` tokens scaled by the calibration `ratio` (rounded up, as the planner does).
fn calibrated_total(raw: usize, ratio: f64) -> usize {
    if ratio == 1.0 {
        raw
    } else {
        (raw as f64 * ratio).ceil() as usize
    }
}

/// Write offloaded tool output: atomically (temporary file, then rename), once per content.
fn write_offload(py: Python<'_>, path: &str, text: &str) -> PyResult<()> {
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
        let err = config_error(py, "offload_dir", &format!("could not write {path}: {e}"));
        err.set_cause(
            py,
            Some(pyo3::exceptions::PyOSError::new_err(e.to_string())),
        );
        err
    })
}

/// `"auto"`, `"micro"` or `"force"`.
pub(super) fn parse_mode(py: Python<'_>, mode: &str) -> PyResult<Mode> {
    match mode {
        "auto" => Ok(Mode::Auto),
        "micro" => Ok(Mode::Micro),
        "force" => Ok(Mode::Force),
        other => Err(config_error(py, "mode", &format!("unknown mode {other:?}"))),
    }
}

/// Plan a compaction.
#[pyfunction]
#[pyo3(signature = (messages, *, config, system=None, tools=None, format=None, pinned=None, mode="auto", instructions=None, state=None))]
#[allow(clippy::too_many_arguments)]
pub fn plan(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    config: &Bound<'_, PyAny>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    format: Option<&str>,
    pinned: Option<Vec<bool>>,
    mode: &str,
    instructions: Option<String>,
    state: Option<Bound<'_, ConversationState>>,
) -> PyResult<Plan> {
    let mut cfg = plan_config(config)?;
    let mode = parse_mode(py, mode)?;
    let counter = Counter::parse(&config.getattr(intern!(py, "tokenizer"))?)?;
    let format = parse_format(py, format)?;
    let mut ex = Extractor::new(py).refusing_misfit();
    if state.is_some() {
        ex = ex.with_fingerprints();
    } else if let Counter::Builtin(t) = counter {
        ex = ex.counting(t, cfg.framing);
    }
    let ex = Arc::new(ex.conversation(messages, format, system, tools)?);
    let conv = ex.conv_static();
    let n = conv.messages.len();
    let pinned = pinned.unwrap_or_else(|| vec![false; n]);
    if pinned.len() != n {
        return Err(config_error(py, "pinned", "one flag per message expected"));
    }
    let st = state.as_ref().map(|s| s.get());
    let tokens = match ex.counts() {
        Some(c) => c.to_vec(),
        None => counter.count_messages(py, &conv.messages, cfg.framing, st)?,
    };
    let (sys, tls) = counter.count_extras(py, conv, cfg.framing)?;
    let (ratio, cooldown) = match st {
        Some(s) => {
            let mut g = s.lock();
            g.record_total(tokens.iter().sum::<usize>() + sys + tls, sys + tls);
            let ratio = if g.observations() > 0 { g.ratio() } else { 1.0 };
            let cooldown = mode != Mode::Micro && g.cooldown_remaining > 0;
            if cooldown {
                g.cooldown_remaining -= 1;
            }
            let now = calibrated_total(tokens.iter().sum::<usize>() + sys + tls, ratio);
            g.note_size(now);
            cfg.held_until = g.hold_until;
            cfg.due_at = g.due_at;
            (ratio, cooldown)
        }
        None => (1.0, false),
    };
    let planned = with_counter(py, &counter, |c| {
        planner::plan(
            conv,
            &tokens,
            sys + tls,
            &pinned,
            &cfg,
            mode,
            cooldown,
            ratio,
            instructions,
            c,
        )
    })?;
    let mut planned = match planned {
        Ok(p) => p,
        Err(e) => return Err(plan_error(py, e)),
    };
    let system = system.filter(|s| !s.is_none());
    planned.set_system_prompt(system_prompt(system, conv), sys);
    if let Some((text, block)) = system.and_then(system_summary_of) {
        let tokens = if block.is_some() {
            with_counter(py, &counter, |c| c.count(Text::Utf8(&text)))?
        } else {
            0
        };
        planned.set_system_summary(&text, tokens);
    }
    let items = items_of(messages)?;
    Ok(Plan {
        inner: Arc::new(Inner {
            planned,
            ex,
            messages: Arc::new(items),
            system: system.map(|s| s.clone().unbind()),
            state: state.map(|s| s.unbind()),
        }),
    })
}

/// How `apply` will return the system prompt with a summary in it (counted as returned): the
/// client's part of it (our earlier summary left out).
pub(super) fn system_prompt(
    system: Option<&Bound<'_, PyAny>>,
    conv: &crate::message::Conversation<'_>,
) -> SystemPrompt {
    match system {
        None => SystemPrompt::Absent,
        Some(s) => match s.extract::<String>() {
            Ok(text) => match split_system_text(&text) {
                Some(("", _)) => SystemPrompt::Absent,
                Some((client, _)) => SystemPrompt::Text(client.to_owned()),
                None => SystemPrompt::Text(text),
            },
            Err(_) => SystemPrompt::Blocks {
                empty: conv.system.is_empty(),
            },
        },
    }
}

/// A system string holding our summary: (the client's part, ours). Ours starts at the marker,
/// at the start of the string or after the blank line `join_system_text` put before it.
fn split_system_text(text: &str) -> Option<(&str, &str)> {
    let marker = planner::SUMMARY_MARKER;
    if text.trim_start().starts_with(marker) {
        return Some(("", text.trim_start()));
    }
    let at = text.rfind(&format!("\n\n{marker}"))?;
    Some((&text[..at], &text[at + 2..]))
}

/// The text of a system block, if it is a text block.
fn block_text(b: &Bound<'_, PyAny>) -> Option<String> {
    let get = |k: &str| -> Option<Bound<'_, PyAny>> {
        match b.cast::<PyDict>() {
            Ok(d) => d.get_item(k).ok().flatten(),
            Err(_) => b.getattr(k).ok(),
        }
    };
    let kind: String = get("type")?.extract().ok()?;
    if kind != "text" {
        return None;
    }
    get("text")?.extract().ok()
}

/// Our earlier summary in a system prompt: its text and, for a block list, the block's index.
pub(super) fn system_summary_of(system: &Bound<'_, PyAny>) -> Option<(String, Option<usize>)> {
    if let Ok(text) = system.extract::<String>() {
        return split_system_text(&text).map(|(_, ours)| (ours.to_owned(), None));
    }
    let blocks: Vec<Bound<'_, PyAny>> = system.try_iter().ok()?.filter_map(Result::ok).collect();
    blocks.iter().enumerate().rev().find_map(|(i, b)| {
        block_text(b)
            .filter(|t| planner::is_summary_text(t))
            .map(|t| (t, Some(i)))
    })
}

/// The system prompt returned with `summary` (None: the summary is a message) in place of our
/// earlier one: the client's own text and blocks unchanged (the same block objects, with their
/// `cache_control`), ours replaced where it was, or added at the end.
fn system_with<'py>(
    py: Python<'py>,
    system: &Bound<'py, PyAny>,
    summary: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(st) = system.extract::<String>() {
        let client = split_system_text(&st).map_or(st.as_str(), |(c, _)| c);
        let text = match summary {
            Some(t) if client.is_empty() => t.to_owned(),
            Some(t) => planner::join_system_text(client, t),
            None if client.len() == st.len() => return Ok(system.clone()),
            None => client.to_owned(),
        };
        return Ok(pyo3::types::PyString::new(py, &text).into_any());
    }
    let ours = system_summary_of(system).and_then(|(_, i)| i);
    if ours.is_none() && summary.is_none() {
        return Ok(system.clone());
    }
    let l = PyList::empty(py);
    let mut placed = false;
    for (i, b) in system.try_iter()?.enumerate() {
        let b = b?;
        if Some(i) != ours {
            l.append(b)?;
            continue;
        }
        if let Some(text) = summary {
            // Our block again, with any other keys the client gave it (a `cache_control`).
            let blk = match b.cast::<PyDict>() {
                Ok(d) => d.copy()?,
                Err(_) => {
                    let d = PyDict::new(py);
                    d.set_item("type", "text")?;
                    d
                }
            };
            blk.set_item("text", text)?;
            l.append(blk)?;
            placed = true;
        }
    }
    if let (Some(text), false) = (summary, placed) {
        let blk = PyDict::new(py);
        blk.set_item("type", "text")?;
        blk.set_item("text", text)?;
        l.append(blk)?;
    }
    Ok(l.into_any())
}

/// The messages as strong references (the plan returns kept ones as the same objects).
pub(super) fn items_of(messages: &Bound<'_, PyAny>) -> PyResult<Vec<Py<PyAny>>> {
    if let Ok(l) = messages.cast::<PyList>() {
        Ok(l.iter().map(|m| m.unbind()).collect())
    } else {
        messages
            .try_iter()?
            .map(|m| m.map(|m| m.unbind()))
            .collect::<PyResult<_>>()
    }
}

/// Content fingerprints of messages (0 for one without a cheap fingerprint): `compact()` takes
/// them before a summarizer or hook runs and again after, to tell whether a message it holds
/// was changed in place meanwhile.
#[pyfunction]
pub fn message_fingerprints(messages: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    messages
        .try_iter()?
        .map(|m| m.map(|m| super::fingerprint::fingerprint(&m)))
        .collect()
}

/// Add a `ConversationState` cool-down of `calls` calls (after a summarizer failure).
#[pyfunction]
pub fn start_cooldown(state: &Bound<'_, ConversationState>, calls: u32) {
    state.get().lock().cooldown_remaining = calls;
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(start_cooldown, m)?)?;
    m.add_function(wrap_pyfunction!(message_fingerprints, m)?)?;
    Ok(())
}

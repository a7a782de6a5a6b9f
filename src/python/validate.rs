//! `validate_messages`, `analyze_conversation` and `detect_format` (the `Problem` class is the
//! leaf `problem.rs`, which `errors.rs` uses too).
//!
//! With `max_tokens`, `validate_messages` also counts the request (messages, system prompt,
//! tools) with the same code as `measure` (`TokenCounter.count_messages`): a request over the
//! window is one a provider rejects, reported as `over_window`. It is a problem of the request
//! as a whole, so its `index` is `None` (the `Problem` class always allowed it) and it comes
//! after the per-message problems.

use super::counter::Counter;
use super::errors::config_error;
use super::extract::{parse_format, Extractor};
use super::problem::Problem;
use super::tokens::read_counted;
use crate::structure::{analyze, Span};
use crate::tokens::counter::{Framing, Tokenizer};
use crate::validate::{validate, Profile};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

fn parse_profile(py: Python<'_>, profile: Option<&str>) -> PyResult<Option<Profile>> {
    profile
        .map(|p| {
            Profile::parse(p).ok_or_else(|| {
                super::errors::config_error(
                    py,
                    "profile",
                    &format!(
                        "unknown profile {p:?}; expected one of {}",
                        Profile::names()
                            .iter()
                            .map(|n| format!("{n:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
        })
        .transpose()
}

/// `max_tokens` as a token count, or a `ConfigError` naming it.
fn parse_max_tokens(v: &Bound<'_, PyAny>) -> PyResult<usize> {
    let py = v.py();
    let bad = || config_error(py, "max_tokens", &format!("expected an int >= 0, got {v}"));
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(bad());
    }
    v.extract::<usize>().map_err(|_| bad())
}

#[pyfunction]
#[pyo3(signature = (messages, *, format=None, system=None, tools=None, profile=None, max_tokens=None, tokenizer=None))]
#[allow(clippy::too_many_arguments)]
pub fn validate_messages(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<&str>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    profile: Option<&str>,
    max_tokens: Option<&Bound<'_, PyAny>>,
    tokenizer: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Problem>> {
    let format = parse_format(py, format)?;
    let profile = parse_profile(py, profile)?;
    let counter = tokenizer.map(Counter::parse).transpose()?;
    let limit = max_tokens.map(parse_max_tokens).transpose()?;
    let (ex, total) = match limit {
        Some(_) => {
            let counter = counter.unwrap_or(Counter::Builtin(Tokenizer::Approx));
            let (ex, per, sys, tls) = read_counted(
                py,
                &counter,
                messages,
                format,
                system,
                tools,
                Framing::default(),
            )?;
            let total = per.iter().sum::<usize>() + sys + tls;
            (ex, total)
        }
        None => (
            Extractor::new(py).conversation(messages, format, system, tools)?,
            0,
        ),
    };
    let conv = ex.conv();
    let profile = profile.unwrap_or(Profile::for_format(conv.format));
    let problems = py.detach(|| validate(&conv.messages, conv.format, profile));
    let mut out: Vec<Problem> = problems.into_iter().map(Problem::from_core).collect();
    if let Some(limit) = limit.filter(|&b| total > b) {
        out.push(Problem::of_request(
            "over_window",
            format!(
                "the request is {total} tokens, over the window of {limit} (max_tokens) by {}",
                total - limit
            ),
        ));
    }
    Ok(out)
}

/// The shape of a conversation: tool blocks, thinking loops, turns and legal cut points.
#[pyclass(frozen, module = "context_compactor._core")]
pub struct ConversationStructure {
    #[pyo3(get)]
    format: &'static str,
    #[pyo3(get)]
    tool_blocks: Vec<(usize, usize)>,
    #[pyo3(get)]
    pending_calls: usize,
    #[pyo3(get)]
    thinking_loops: Vec<(usize, usize)>,
    #[pyo3(get)]
    turns: Vec<(usize, usize)>,
    #[pyo3(get)]
    cut_points: Vec<usize>,
}

#[pymethods]
impl ConversationStructure {
    fn __repr__(&self) -> String {
        format!(
            "ConversationStructure(format={:?}, tool_blocks={}, thinking_loops={}, turns={}, cut_points={}, pending_calls={})",
            self.format,
            self.tool_blocks.len(),
            self.thinking_loops.len(),
            self.turns.len(),
            self.cut_points.len(),
            self.pending_calls
        )
    }
}

fn pairs(spans: impl Iterator<Item = Span>) -> Vec<(usize, usize)> {
    spans.map(|s| (s.start, s.end)).collect()
}

#[pyfunction]
#[pyo3(signature = (messages, *, format=None))]
pub fn analyze_conversation(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<&str>,
) -> PyResult<ConversationStructure> {
    let format = parse_format(py, format)?;
    let ex = Extractor::new(py).conversation(messages, format, None, None)?;
    let conv = ex.conv();
    let s = py.detach(|| analyze(&conv.messages));
    Ok(ConversationStructure {
        format: conv.format.name(),
        pending_calls: s.tool_blocks.last().map_or(0, |b| b.pending),
        tool_blocks: pairs(s.tool_blocks.iter().map(|b| b.span)),
        thinking_loops: pairs(s.thinking_loops.into_iter()),
        turns: pairs(s.turns.into_iter()),
        cut_points: s.cut_points,
    })
}

#[pyfunction]
#[pyo3(signature = (messages, *, system=None, tools=None))]
pub fn detect_format(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
) -> PyResult<&'static str> {
    let ex = Extractor::new(py).conversation(messages, None, system, tools)?;
    Ok(ex.conv().format.name())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Problem>()?;
    m.add_class::<ConversationStructure>()?;
    m.add_function(wrap_pyfunction!(validate_messages, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_conversation, m)?)?;
    m.add_function(wrap_pyfunction!(detect_format, m)?)?;
    Ok(())
}

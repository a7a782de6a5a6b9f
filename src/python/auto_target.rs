//! `target_ratio="auto"` for the Python shell: the core's chooser (`crate::config::auto_target`,
//! the one copy both APIs run) on a conversation read from Python objects.

use super::counter::Counter;
use super::extract::{parse_format, Extractor};
use super::plan::with_counter;
use super::state::ConversationState;
use crate::config::auto_target::{self as core, AutoTarget};
use crate::message::Format;
use crate::text::Text;
use pyo3::intern;
use pyo3::prelude::*;

/// `(ratio, tokens, floor, growth, cost_per_call, fixed, prices)`, as Python reads it.
type Chosen = (f64, usize, usize, Option<f64>, Option<f64>, usize, [f64; 4]);

/// What ``target_ratio="auto"`` chooses for these messages now: ``(ratio, tokens, floor, growth,
/// cost_per_call, fixed, prices)`` (``growth`` and ``cost_per_call`` are ``None`` with the fallback ratio).
#[pyfunction]
#[pyo3(signature = (messages, *, config, system=None, tools=None, format=None, state=None, llm=false))]
#[allow(clippy::too_many_arguments)]
pub fn auto_target(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    config: &Bound<'_, PyAny>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    format: Option<&str>,
    state: Option<Bound<'_, ConversationState>>,
    llm: bool,
) -> PyResult<Chosen> {
    let cfg = super::config::config_of(config)?;
    let framing = cfg.plan_config().framing;
    let counter = Counter::parse(&config.getattr(intern!(py, "tokenizer"))?)?;
    let format = parse_format(py, format)?;
    let mut ex = Extractor::new(py);
    if state.is_some() {
        ex = ex.with_fingerprints();
    }
    let ex = ex.conversation(messages, format, system, tools)?;
    let conv = ex.conv_static();
    let st = state.as_ref().map(|s| s.get());
    let per = counter.count_messages(py, &conv.messages, framing, st)?;
    let (sys, tls) = counter.count_extras(py, conv, framing)?;
    let (scale, growth) = match st {
        Some(s) => {
            let g = s.lock();
            let scale = if g.observations() > 0 { g.ratio() } else { 1.0 };
            (scale, g.growth_per_call())
        }
        None => (1.0, None),
    };
    let anthropic = conv.format == Format::Anthropic;
    let a: AutoTarget = with_counter(py, &counter, |c| {
        core::auto_target(
            &cfg,
            &conv.messages,
            &per,
            sys + tls,
            scale,
            growth,
            anthropic,
            llm,
            &|x: Text<'_>| c.count(x),
        )
    })?;
    Ok((
        a.ratio,
        a.tokens,
        a.floor,
        a.growth,
        a.cost_per_call,
        a.fixed,
        a.prices,
    ))
}

/// The predicted billed input per model call (dollars) over one compaction cycle that starts at
/// ``target`` tokens; ``prices``: input, cached read, cache write, output per million tokens.
#[pyfunction]
#[pyo3(signature = (target, *, soft, fixed, growth, prices, llm, summary_tokens))]
pub fn cycle_cost(
    target: usize,
    soft: usize,
    fixed: usize,
    growth: f64,
    prices: [f64; 4],
    llm: bool,
    summary_tokens: usize,
) -> f64 {
    core::cycle_cost(target, soft, fixed, growth, prices, llm, summary_tokens)
}

/// The context size from which the compaction after one that left ``tokens_after`` tokens is due
/// under ``target_ratio="auto"``; ``None``: the soft threshold.
#[pyfunction]
#[pyo3(signature = (tokens_after, *, soft, fixed, growth, prices))]
pub fn due_at(
    tokens_after: usize,
    soft: usize,
    fixed: usize,
    growth: Option<f64>,
    prices: [f64; 4],
) -> Option<usize> {
    core::due_at(tokens_after, soft, fixed, growth, prices)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("AUTO_MIN", core::AUTO_MIN)?;
    m.add("AUTO_MAX", core::AUTO_MAX)?;
    m.add("AUTO_FALLBACK", crate::config::AUTO_FALLBACK)?;
    m.add_function(wrap_pyfunction!(auto_target, m)?)?;
    m.add_function(wrap_pyfunction!(cycle_cost, m)?)?;
    m.add_function(wrap_pyfunction!(due_at, m)?)?;
    Ok(())
}

//! `plan_many` / `apply_many`: many conversations in one call (`ContextCompactor.compact_many`
//! and `check_many` in the Python shell).
//!
//! tiktoken's shape, for a list: every conversation is read while attached (reading Python
//! objects needs the GIL), then all of them are counted and planned (or finished) in one
//! `py.detach` on the library's pool, and the Python objects are built after. A conversation
//! that cannot be read or planned gives its exception in its place; the others go on.
//!
//! Design note (when the pool pays): a batch goes to the pool from 2 conversations and
//! [`BATCH_MIN_BYTES`] of text. Measured on this machine (2 cores, the shared corpus, approx
//! tokenizer): planning one corpus conversation takes 0.05-3 ms, the hand-off to the pool ~10 µs
//! a task, so the pool wins from a few conversations of a few kB; below 64 kB in total a
//! batch is done in well under a millisecond either way and stays on the calling thread.

use super::counter::Counter;
use super::errors::plan_error;
use super::extract::{parse_format, Extracted, Extractor};
use super::plan::{
    items_of, outcome_dict, parse_mode, plan_config, system_prompt, system_summary_of, Inner, Plan,
};
use crate::message::Message;
use crate::planner::{self, PlanError, Planned};
use crate::text::Text;
use crate::tokens::counter::{message_tokens, system_tokens, tools_tokens, Tokenizer};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;
use rayon::prelude::*;
use std::sync::Arc;

/// Text (bytes) of a batch from which it goes to the pool.
pub const BATCH_MIN_BYTES: usize = 64 * 1024;

fn text_bytes(messages: &[Message<'_>]) -> usize {
    messages
        .iter()
        .flat_map(|m| m.blocks.iter())
        .flat_map(|b| b.texts.iter())
        .map(|p| match p.text() {
            Text::Utf8(s) => s.len(),
            Text::Latin1(b) => b.len(),
            Text::Ucs2(w) => w.len() * 2,
            Text::Ucs4(w) => w.len() * 4,
        })
        .sum()
}

/// `items.iter().map(f)` in input order, on the pool when the batch is worth it.
fn map_batch<T: Sync, R: Send>(
    items: &[T],
    weight: usize,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    if items.len() > 1 && weight >= BATCH_MIN_BYTES {
        if let Some(pool) = crate::parallel::pool() {
            return pool.install(|| items.par_iter().with_min_len(1).map(&f).collect());
        }
    }
    items.iter().map(f).collect()
}

/// One batch item as Python passes it: `(messages, system, tools, format)`.
type Item<'py> = (
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    Option<String>,
);

/// One conversation as read while attached.
struct Read {
    ex: Arc<Extracted>,
    items: Vec<Py<PyAny>>,
    system: Option<Py<PyAny>>,
    prompt: planner::SystemPrompt,
    /// Our earlier summary in the system prompt (its text, whether it is a block of its own).
    ours: Option<(String, bool)>,
}

fn read_one(py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<Read> {
    let (messages, system, tools, format): Item<'_> = item.extract()?;
    let format = parse_format(py, format.as_deref())?;
    let system = system.filter(|s| !s.is_none());
    let tools = tools.filter(|t| !t.is_none());
    let ex = Extractor::new(py).refusing_misfit().conversation(
        &messages,
        format,
        system.as_ref(),
        tools.as_ref(),
    )?;
    let prompt = system_prompt(system.as_ref(), ex.conv_static());
    let ours = system
        .as_ref()
        .and_then(system_summary_of)
        .map(|(t, b)| (t, b.is_some()));
    Ok(Read {
        ours,
        items: items_of(&messages)?,
        ex: Arc::new(ex),
        system: system.map(|s| s.unbind()),
        prompt,
    })
}

/// Read every conversation (attached): each its view or the exception reading it raised.
fn read_all(py: Python<'_>, conversations: &Bound<'_, PyAny>) -> PyResult<Vec<PyResult<Read>>> {
    Ok(conversations
        .try_iter()?
        .map(|item| item.and_then(|item| read_one(py, &item)))
        .collect())
}

/// Plan every conversation of `conversations` (each a tuple `(messages, system, tools,
/// format)`) with a built-in tokenizer. Returns, in input order, a `Plan` or the exception
/// that conversation raised.
#[pyfunction]
#[pyo3(signature = (conversations, *, config, mode="auto", instructions=None))]
pub fn plan_many(
    py: Python<'_>,
    conversations: &Bound<'_, PyAny>,
    config: &Bound<'_, PyAny>,
    mode: &str,
    instructions: Option<String>,
) -> PyResult<Vec<Py<PyAny>>> {
    let cfg = plan_config(config)?;
    let mode = parse_mode(py, mode)?;
    let tok: Tokenizer = match Counter::parse(&config.getattr(intern!(py, "tokenizer"))?)? {
        Counter::Builtin(t) => t,
        Counter::Callable(_) => {
            return Err(super::errors::config_error(
                py,
                "tokenizer",
                "plan_many needs a built-in tokenizer (a callable one runs attached: plan each conversation)",
            ))
        }
    };
    let reads = read_all(py, conversations)?;
    let ok: Vec<&Read> = reads.iter().filter_map(|r| r.as_ref().ok()).collect();
    let weight = ok
        .iter()
        .map(|r| text_bytes(&r.ex.conv_static().messages))
        .sum();
    let framing = cfg.framing;
    let planned: Vec<Result<Planned<'static>, PlanError>> = py.detach(|| {
        map_batch(&ok, weight, |r| {
            let conv = r.ex.conv_static();
            let tokens: Vec<usize> = conv
                .messages
                .iter()
                .map(|m| message_tokens(tok, m, framing))
                .collect();
            let sys = system_tokens(tok, &conv.system, framing);
            let extra = sys + tools_tokens(tok, &conv.tools);
            let pinned = vec![false; conv.messages.len()];
            let count = move |x: Text<'_>| tok.count(x);
            planner::plan(
                conv,
                &tokens,
                extra,
                &pinned,
                &cfg,
                mode,
                false,
                1.0,
                instructions.clone(),
                &count,
            )
            .map(|mut p| {
                p.set_system_prompt(r.prompt.clone(), sys);
                if let Some((text, block)) = &r.ours {
                    let tokens = if *block { count(Text::Utf8(text)) } else { 0 };
                    p.set_system_summary(text, tokens);
                }
                p
            })
        })
    });
    let mut planned = planned.into_iter();
    let mut out = Vec::with_capacity(reads.len());
    for r in reads {
        let value: PyResult<Py<PyAny>> = match r {
            Err(e) => Ok(e.into_value(py).into_any()),
            Ok(read) => match planned.next().expect("one plan per conversation read") {
                Err(e) => Ok(plan_error(py, e).into_value(py).into_any()),
                Ok(p) => Ok(Py::new(
                    py,
                    Plan {
                        inner: Arc::new(Inner {
                            planned: p,
                            ex: read.ex,
                            messages: Arc::new(read.items),
                            system: read.system,
                            state: None,
                        }),
                    },
                )?
                .into_any()),
            },
        };
        out.push(value?);
    }
    Ok(out)
}

/// Finish many plans with the built-in rule summary (`summaries[i]` `None`) or the given text:
/// the result dicts of `Plan.apply`, in input order, or the exception of that plan.
#[pyfunction]
#[pyo3(signature = (plans, summaries, *, tokenizer))]
pub fn apply_many<'py>(
    py: Python<'py>,
    plans: Vec<Bound<'py, Plan>>,
    summaries: Vec<Option<String>>,
    tokenizer: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    if plans.len() != summaries.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "one summary (or None) per plan expected",
        ));
    }
    let Counter::Builtin(tok) = Counter::parse(tokenizer)? else {
        return Err(super::errors::config_error(
            py,
            "tokenizer",
            "apply_many needs a built-in tokenizer",
        ));
    };
    let inners: Vec<(Arc<Inner>, Option<String>)> = plans
        .iter()
        .map(|p| p.get().inner.clone())
        .zip(summaries)
        .collect();
    let weight: usize = inners
        .iter()
        .map(|(i, _)| text_bytes(&i.ex.conv_static().messages))
        .sum();
    let outcomes = py.detach(|| {
        map_batch(&inners, weight, |(inner, summary)| {
            let count = move |x: Text<'_>| tok.count(x);
            inner.planned.apply(summary.as_deref(), false, &count)
        })
    });
    let out = PyList::empty(py);
    for ((inner, _), outcome) in inners.iter().zip(&outcomes) {
        match outcome_dict(py, inner, outcome) {
            Ok(d) => out.append(d)?,
            Err(e) => out.append(e.into_value(py))?,
        }
    }
    Ok(out)
}

/// Count every conversation of `conversations` (tuples as for `plan_many`): per conversation,
/// `(total tokens, message count, format)` or the exception it raised, in input order.
#[pyfunction]
#[pyo3(signature = (conversations, *, tokenizer, message_overhead_tokens=4, image_tokens=1600, image_model=None))]
pub fn measure_many(
    py: Python<'_>,
    conversations: &Bound<'_, PyAny>,
    tokenizer: &Bound<'_, PyAny>,
    message_overhead_tokens: usize,
    image_tokens: usize,
    image_model: Option<&str>,
) -> PyResult<Vec<Py<PyAny>>> {
    let Counter::Builtin(tok) = Counter::parse(tokenizer)? else {
        return Err(super::errors::config_error(
            py,
            "tokenizer",
            "measure_many needs a built-in tokenizer",
        ));
    };
    let framing = crate::tokens::counter::Framing {
        message_overhead_tokens,
        image_tokens,
        image_model: super::image::parse_image_model(py, image_model)?,
    };
    let reads = read_all(py, conversations)?;
    let ok: Vec<&Read> = reads.iter().filter_map(|r| r.as_ref().ok()).collect();
    let weight = ok
        .iter()
        .map(|r| text_bytes(&r.ex.conv_static().messages))
        .sum();
    let totals: Vec<(usize, usize, &'static str)> = py.detach(|| {
        map_batch(&ok, weight, |r| {
            let conv = r.ex.conv_static();
            let total = conv
                .messages
                .iter()
                .map(|m| message_tokens(tok, m, framing))
                .sum::<usize>()
                + system_tokens(tok, &conv.system, framing)
                + tools_tokens(tok, &conv.tools);
            (total, conv.messages.len(), conv.format.name())
        })
    });
    let mut totals = totals.into_iter();
    reads
        .into_iter()
        .map(|r| match r {
            Err(e) => Ok(e.into_value(py).into_any()),
            Ok(_) => {
                let t = totals.next().expect("one count per conversation read");
                Ok(t.into_pyobject(py)?.into_any().unbind())
            }
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan_many, m)?)?;
    m.add_function(wrap_pyfunction!(apply_many, m)?)?;
    m.add_function(wrap_pyfunction!(measure_many, m)?)?;
    Ok(())
}

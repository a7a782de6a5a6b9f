//! `ConversationState`: what a conversation remembers between calls (the core's
//! [`crate::state::State`] behind a lock), and `observe_usage`'s reading of a provider's usage
//! report. Counting through the state's cache is [`super::counter::Counter::count_messages`].

use super::errors::message_type_error;
use super::extract::{parse_format, Extractor};
use crate::state::{CounterKey, Ignored, State, Usage};
use crate::tokens::counter::{system_tokens, tools_tokens, Framing, Tokenizer};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};
use std::sync::{Mutex, MutexGuard};

/// What one conversation remembers between calls: cached per-message counts, the calibration
/// learned from the provider's reported usage, the cool-down after a summarizer failure, and
/// the last summary. Pass it as ``state=`` to ``check``/``plan``/``compact``. Thread-safe.
#[pyclass(frozen, module = "context_compactor._core")]
pub struct ConversationState {
    inner: Mutex<State>,
}

impl ConversationState {
    /// Lock the state. Never held while calling Python or while waiting for the GIL: callers
    /// lock, copy or update, and unlock (a thread holding the GIL may be waiting to lock).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the cache inconsistent in a way that
        // matters (worst case a missing entry), so recover from poisoning.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Read a provider usage report: an int, or an OpenAI/Anthropic usage object or dict.
fn parse_usage(usage: &Bound<'_, PyAny>) -> PyResult<Usage> {
    let py = usage.py();
    let bad = |what: &str| message_type_error(py, None, "usage", what);
    if usage.is_instance_of::<PyBool>() {
        return Err(bad("expected an int or a usage object, got bool"));
    }
    if usage.is_instance_of::<PyInt>() {
        let n: i64 = usage.extract()?;
        return usize::try_from(n)
            .map(|prompt_tokens| Usage { prompt_tokens })
            .map_err(|_| bad("must be >= 0"));
    }
    let get = |name: &Bound<'_, PyString>| -> PyResult<Option<usize>> {
        let v = if let Ok(d) = usage.cast::<PyDict>() {
            d.get_item(name)?
        } else {
            usage.getattr_opt(name)?
        };
        match v {
            Some(v) if !v.is_none() => {
                if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
                    return Err(bad(&format!("{} must be an int", name.to_string_lossy())));
                }
                let n: i64 = v.extract()?;
                usize::try_from(n)
                    .map(Some)
                    .map_err(|_| bad("token counts must be >= 0"))
            }
            _ => Ok(None),
        }
    };
    // OpenAI Chat Completions: prompt_tokens (cached tokens are a subset of it).
    if let Some(p) = get(intern!(py, "prompt_tokens"))? {
        return Ok(Usage { prompt_tokens: p });
    }
    // Anthropic: input_tokens excludes the cache reads and writes, which are prompt too.
    // (OpenAI Responses' input_tokens already includes its cached tokens and has no such fields.)
    if let Some(input) = get(intern!(py, "input_tokens"))? {
        let read = get(intern!(py, "cache_read_input_tokens"))?.unwrap_or(0);
        let created = get(intern!(py, "cache_creation_input_tokens"))?.unwrap_or(0);
        return Ok(Usage {
            prompt_tokens: input + read + created,
        });
    }
    Err(bad(
        "expected an int, or a usage with prompt_tokens (OpenAI) or input_tokens (Anthropic)",
    ))
}

#[pymethods]
impl ConversationState {
    #[new]
    fn new() -> Self {
        ConversationState {
            inner: Mutex::new(State::default()),
        }
    }

    /// Learn the ratio of the provider's real prompt size to our count.
    ///
    /// ``usage`` is an int or an SDK usage object / dict (OpenAI ``prompt_tokens``; Anthropic
    /// ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``). Pass the
    /// ``messages`` (and ``system``/``tools``) the usage was measured on; without them the last
    /// ``check()`` on this state is used. Returns whether the report was learned from (stale
    /// reports, measured before the latest compaction, and tiny prompts are ignored).
    #[pyo3(signature = (usage, *, messages=None, system=None, tools=None, format=None))]
    fn observe_usage(
        &self,
        py: Python<'_>,
        usage: &Bound<'_, PyAny>,
        messages: Option<&Bound<'_, PyAny>>,
        system: Option<&Bound<'_, PyAny>>,
        tools: Option<&Bound<'_, PyAny>>,
        format: Option<&str>,
    ) -> PyResult<bool> {
        let usage = parse_usage(usage)?;
        let counted = match messages {
            None => None,
            Some(msgs) => {
                let format = parse_format(py, format)?;
                let ex = Extractor::new(py)
                    .with_fingerprints()
                    .conversation(msgs, format, system, tools)?;
                let conv = ex.conv();
                let (key, framing) = {
                    let st = self.lock();
                    st.counter_key()
                        .unwrap_or((CounterKey::Builtin(Tokenizer::Approx), Framing::default()))
                };
                let fps: Vec<u64> = conv.messages.iter().map(|m| m.fingerprint).collect();
                let raw = match key {
                    CounterKey::Builtin(t) => {
                        let per = py.detach(|| self.lock().measure(t, framing, &conv.messages));
                        per.iter().sum::<usize>()
                            + system_tokens(t, &conv.system, framing)
                            + tools_tokens(t, &conv.tools)
                    }
                    CounterKey::External(_) => {
                        // A Python counter cannot run here: use the counts cached by the last check.
                        let cached = self.lock().lookup(key, framing, &fps);
                        if cached.iter().any(Option::is_none) {
                            return Ok(false);
                        }
                        cached.into_iter().flatten().map(|(n, _)| n).sum::<usize>()
                            + self.lock().last_extras()
                    }
                };
                Some((raw, fps))
            }
        };
        let mut st = self.lock();
        let r = st.observe(
            usage,
            counted.as_ref().map(|(raw, fps)| (*raw, fps.as_slice())),
        );
        Ok(match r {
            Ok(_) => true,
            Err(Ignored::Stale | Ignored::NoMeasurement | Ignored::TooSmall) => false,
        })
    }

    /// The learned ratio of real to counted tokens (1.0 until usage is observed).
    #[getter]
    fn calibration(&self) -> f64 {
        self.lock().ratio()
    }

    /// Usage reports learned from.
    #[getter]
    fn observations(&self) -> u32 {
        self.lock().observations()
    }

    /// Per-message counts held in the cache.
    #[getter]
    fn cached_messages(&self) -> usize {
        self.lock().cached()
    }

    /// Messages the last count had to count (the rest came from the cache).
    #[getter]
    fn last_counted(&self) -> usize {
        self.lock().last_counted
    }

    /// Compactions applied with this state.
    #[getter]
    fn compactions(&self) -> u64 {
        self.lock().compactions()
    }

    /// Calls left that only micro-compact, after a summarizer failure.
    #[getter]
    fn cooldown_remaining(&self) -> u32 {
        self.lock().cooldown_remaining
    }

    /// The summary of the latest compaction with this state.
    #[getter]
    fn last_summary(&self) -> Option<String> {
        self.lock().last_summary.clone()
    }

    /// After a compaction that could not get under the soft threshold (``over_budget``): the
    /// context size (tokens) below which no compaction is due again, unless the hard threshold
    /// is crossed; ``None`` when nothing is held.
    #[getter]
    fn hold_until(&self) -> Option<usize> {
        self.lock().hold_until
    }

    /// With ``target_ratio="auto"``: the context size (tokens, calibrated) from which the next
    /// compaction is due below the soft threshold, chosen when the last one ended; ``None``: the
    /// soft threshold. A compaction that was due clears it.
    #[getter]
    fn due_at(&self) -> Option<usize> {
        self.lock().due_at
    }

    /// Set (or clear, with ``None``) :attr:`due_at`: ``target_ratio="auto"`` does it after each
    /// compaction.
    #[pyo3(signature = (tokens))]
    fn set_due_at(&self, tokens: Option<usize>) {
        self.lock().due_at = tokens;
    }

    /// The context's mean growth per model call (tokens) over the last checks since the latest
    /// compaction; ``None`` before two.
    #[getter]
    fn growth_per_call(&self) -> Option<f64> {
        self.lock().growth_per_call()
    }

    /// Note the context's size (tokens, calibrated) at a model call: ``check()`` and ``plan()``
    /// with this state do it; the growth per call is read from these.
    fn note_context(&self, tokens: usize) {
        self.lock().note_size(tokens);
    }

    /// Forget everything (cache, calibration, cool-down, last summary).
    fn reset(&self) {
        self.lock().reset();
    }

    fn __repr__(&self) -> String {
        let s = self.lock();
        format!(
            "ConversationState(cached_messages={}, calibration={:.3}, observations={}, compactions={}, cooldown_remaining={}, hold_until={:?}, due_at={:?})",
            s.cached(),
            s.ratio(),
            s.observations(),
            s.compactions(),
            s.cooldown_remaining,
            s.hold_until,
            s.due_at
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConversationState>()?;
    Ok(())
}

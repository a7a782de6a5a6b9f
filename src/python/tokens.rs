//! `estimate_tokens`, `count_tokens`, `count_tokens_many`, `measure`, `MessageCounts`.

use super::counter::{parse_framing, Counter};
use super::errors::{config_error, message_type_error};
use super::extract::{parse_format, Extracted, Extractor};
use super::fingerprint::{fingerprint, fingerprints_borrowed};
use super::state::ConversationState;
use super::text::borrow_text;
use crate::message::{Format, FormatHints};
use crate::tokens::counter::Framing;
use crate::tokens::estimate::estimate;
use crate::tokens::exact::{self, Encoding};
use pyo3::prelude::*;
use pyo3::types::PyString;

pub fn parse_encoding(py: Python<'_>, name: &str) -> PyResult<Encoding> {
    Encoding::parse(name).ok_or_else(|| {
        config_error(
            py,
            "encoding",
            &format!("unknown encoding {name:?}; expected \"o200k_base\" or \"cl100k_base\""),
        )
    })
}

/// `text` as a `str`, or `MessageTypeError` (field `text`) naming the type it has: the
/// package's error for a wrong Python type, not pyo3's bare `TypeError`.
fn text_arg<'a, 'py>(text: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyString>> {
    text.cast::<PyString>().map_err(|_| {
        let what = format!(
            "expected a str, got {}",
            text.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        );
        message_type_error(text.py(), None, "text", &what)
    })
}

/// Estimated tokens of `text` (fast, errs high). Reads the string in place.
#[pyfunction]
pub fn estimate_tokens(text: &Bound<'_, PyAny>) -> PyResult<usize> {
    let text = text_arg(text)?;
    // SAFETY: `text` is alive for the whole call.
    let t = unsafe { borrow_text(text)? };
    Ok(if t.char_len() > 1 << 20 {
        text.py().detach(|| estimate(t))
    } else {
        estimate(t)
    })
}

/// Exact tokens of `text` in `encoding` (tiktoken's `encode_ordinary`).
#[pyfunction]
#[pyo3(signature = (text, encoding="o200k_base"))]
pub fn count_tokens(py: Python<'_>, text: &Bound<'_, PyAny>, encoding: &str) -> PyResult<usize> {
    let text = text_arg(text)?;
    let enc = parse_encoding(py, encoding)?;
    // SAFETY: `text` is alive for the whole call; the UTF-8 form is a temporary.
    let t = unsafe { borrow_text(text)? };
    Ok(py.detach(|| exact::count(enc, &t.to_utf8())))
}

/// Exact tokens of each text, counted in parallel with the GIL released.
#[pyfunction]
#[pyo3(signature = (texts, encoding="o200k_base"))]
pub fn count_tokens_many(
    py: Python<'_>,
    texts: Vec<Bound<'_, PyString>>,
    encoding: &str,
) -> PyResult<Vec<usize>> {
    let enc = parse_encoding(py, encoding)?;
    let mut borrowed = Vec::with_capacity(texts.len());
    for t in &texts {
        // SAFETY: `texts` holds a strong reference to each string until we return.
        borrowed.push(unsafe { borrow_text(t)? });
    }
    Ok(py.detach(|| {
        let utf8: Vec<_> = borrowed.iter().map(|t| t.to_utf8()).collect();
        let refs: Vec<&str> = utf8.iter().map(|s| &**s).collect();
        exact::count_many(enc, &refs)
    }))
}

/// Token counts of a request, part by part.
#[pyclass(frozen, module = "context_compactor._core")]
pub struct MessageCounts {
    /// Tokens of each message, in order.
    #[pyo3(get)]
    messages: Vec<usize>,
    /// Tokens of the separate system prompt.
    #[pyo3(get)]
    system: usize,
    /// Tokens of the tool definitions.
    #[pyo3(get)]
    tools: usize,
    /// The detected (or given) format.
    #[pyo3(get)]
    format: &'static str,
    /// The total scaled by the state's calibration (the total itself without a state).
    #[pyo3(get)]
    calibrated_total: usize,
    /// Messages actually counted (the others came from the state's cache).
    #[pyo3(get)]
    counted: usize,
}

#[pymethods]
impl MessageCounts {
    /// Number of messages (without building the `messages` list).
    #[getter]
    fn message_count(&self) -> usize {
        self.messages.len()
    }

    #[new]
    #[pyo3(signature = (messages, system=0, tools=0, format="openai"))]
    fn new(
        py: Python<'_>,
        messages: Vec<usize>,
        system: usize,
        tools: usize,
        format: &str,
    ) -> PyResult<Self> {
        let format = parse_format(py, Some(format))?.map_or("openai", |f| f.name());
        let total = messages.iter().sum::<usize>() + system + tools;
        Ok(MessageCounts {
            counted: messages.len(),
            messages,
            system,
            tools,
            format,
            calibrated_total: total,
        })
    }

    /// Everything together.
    #[getter]
    fn total(&self) -> usize {
        self.messages.iter().sum::<usize>() + self.system + self.tools
    }

    fn __repr__(&self) -> String {
        format!(
            "MessageCounts(total={}, messages={}, system={}, tools={}, format={:?})",
            self.total(),
            self.messages.len(),
            self.system,
            self.tools,
            self.format
        )
    }
}

/// Count a request: each message, the system prompt and the tools, with a built-in tokenizer
/// or a callable, through a `ConversationState`'s cache and calibration when given.
#[pyfunction]
#[pyo3(signature = (messages, *, format=None, system=None, tools=None, tokenizer=None, message_overhead_tokens=4, image_tokens=1600, image_model=None, state=None))]
#[allow(clippy::too_many_arguments)]
pub fn measure(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<&str>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    tokenizer: Option<&Bound<'_, PyAny>>,
    message_overhead_tokens: usize,
    image_tokens: usize,
    image_model: Option<&str>,
    state: Option<&ConversationState>,
) -> PyResult<MessageCounts> {
    let counter = Counter::parse_or_approx(tokenizer)?;
    let format = parse_format(py, format)?;
    let framing = parse_framing(py, message_overhead_tokens, image_tokens, image_model)?;
    let (per, sys, tls, format) = match state {
        Some(st) => measure_cached(py, &counter, messages, format, system, tools, framing, st)?,
        None => {
            let (ex, per, sys, tls) =
                read_counted(py, &counter, messages, format, system, tools, framing)?;
            (per, sys, tls, ex.conv().format)
        }
    };
    let total = per.iter().sum::<usize>() + sys + tls;
    let (calibrated, counted) = match state {
        Some(s) => {
            let mut st = s.lock();
            st.record_total(total, sys + tls);
            (st.calibrate(total), st.last_counted)
        }
        None => (total, per.len()),
    };
    Ok(MessageCounts {
        messages: per,
        system: sys,
        tools: tls,
        format: format.name(),
        calibrated_total: calibrated,
        counted,
    })
}

/// Read a request and count it without a state: each message (counted while it is read, with a
/// built-in tokenizer), the separate system prompt and the tool definitions. The one cold count:
/// `measure` (so `TokenCounter.count_messages`) and `validate_messages(max_tokens=...)` share it.
pub fn read_counted<'py>(
    py: Python<'py>,
    counter: &Counter<'py>,
    messages: &Bound<'py, PyAny>,
    format: Option<Format>,
    system: Option<&Bound<'py, PyAny>>,
    tools: Option<&Bound<'py, PyAny>>,
    framing: Framing,
) -> PyResult<(Extracted, Vec<usize>, usize, usize)> {
    let mut ex = Extractor::new(py);
    if let Counter::Builtin(t) = counter {
        ex = ex.counting(*t, framing);
    }
    let ex = ex.conversation(messages, format, system, tools)?;
    let per = match ex.counts() {
        Some(c) => c.to_vec(),
        None => counter.count_messages(py, &ex.conv().messages, framing, None)?,
    };
    let (sys, tls) = counter.count_extras(py, ex.conv(), framing)?;
    Ok((ex, per, sys, tls))
}

/// The warm path of `check(state=...)`: fingerprint every message without reading it into a
/// view (see `fingerprint.rs`), and read and count only the messages the cache does not know.
#[allow(clippy::too_many_arguments)]
fn measure_cached(
    py: Python<'_>,
    counter: &Counter<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<Format>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    framing: Framing,
    st: &ConversationState,
) -> PyResult<(Vec<usize>, usize, usize, Format)> {
    let mut ex = Extractor::new(py);
    let key = counter.key();
    // SAFETY: the addresses are used right below, with the GIL held and no Python code run
    // in between (the lookup is pure Rust and the state's lock is never held while waiting
    // for the GIL; reading a plain dict message runs no Python code), each taken as a strong
    // reference before use.
    let (fps, items, cached) = match unsafe { fingerprints_borrowed(messages) } {
        Some((fps, ptrs)) => {
            let cached = st.lock().lookup(key, framing, &fps);
            let items: Vec<Option<Bound<'_, PyAny>>> = ptrs
                .iter()
                .zip(&cached)
                // SAFETY: as above.
                .map(|(&p, c)| {
                    c.is_none()
                        .then(|| unsafe { Bound::from_borrowed_ptr(py, p) })
                })
                .collect();
            (fps, items, cached)
        }
        None => {
            let items = ex.items(messages)?;
            let fps: Vec<u64> = items.iter().map(fingerprint).collect();
            let cached = py.detach(|| st.lock().lookup(key, framing, &fps));
            (fps, items.into_iter().map(Some).collect(), cached)
        }
    };
    let mut hints = FormatHints::default();
    let mut missing = Vec::new();
    let mut views = Vec::new();
    for (i, c) in cached.iter().enumerate() {
        match c {
            Some((_, bits)) => {
                hints.merge(FormatHints::from_bits(*bits));
            }
            None => {
                let item = items[i].as_ref().expect("held for every message to count");
                let (m, h) = ex.message_with_hints(item, i)?;
                hints.merge(h);
                missing.push(i);
                views.push(m);
            }
        }
    }
    let fresh = counter.count_messages(py, &views, framing, None)?;
    let stored: Vec<(u64, usize, u8)> = missing
        .iter()
        .zip(&fresh)
        .zip(&views)
        .map(|((&i, &n), v)| (fps[i], n, FormatHints::of(v).bits()))
        .collect();
    let n = items.len();
    py.detach(|| st.lock().store(key, framing, &stored, n));
    drop(views);
    let mut per: Vec<usize> = cached.iter().map(|c| c.map_or(0, |(n, _)| n)).collect();
    for (&i, n) in missing.iter().zip(fresh) {
        per[i] = n;
    }
    let format = format.unwrap_or_else(|| hints.detect());
    let extras = Extractor::new(py).extras(format, system, tools)?;
    let (sys, tls) = counter.count_extras(py, extras.conv(), framing)?;
    Ok((per, sys, tls, format))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MessageCounts>()?;
    m.add_function(wrap_pyfunction!(measure, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens_many, m)?)?;
    Ok(())
}

//! `estimate_tokens`, `count_tokens`, `count_tokens_many`.

use super::errors::config_error;
use super::extract::{parse_format, Extractor};
use super::text::borrow_text;
use crate::tokens::counter::{
    count_conversation, message_parts, Framing, Tokenizer, TOOL_DEF_OVERHEAD_TOKENS,
};
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

/// Estimated tokens of `text` (fast, errs high). Reads the string in place.
#[pyfunction]
pub fn estimate_tokens(text: &Bound<'_, PyString>) -> PyResult<usize> {
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
pub fn count_tokens(py: Python<'_>, text: &Bound<'_, PyString>, encoding: &str) -> PyResult<usize> {
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
}

#[pymethods]
impl MessageCounts {
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
        Ok(MessageCounts {
            messages,
            system,
            tools,
            format,
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

pub fn parse_tokenizer(py: Python<'_>, name: &str) -> PyResult<Tokenizer> {
    Tokenizer::parse(name).ok_or_else(|| {
        config_error(
            py,
            "tokenizer",
            &format!("unknown tokenizer {name:?}; expected \"approx\", \"o200k_base\", \"cl100k_base\" or a callable"),
        )
    })
}

/// Count a request with a built-in tokenizer.
#[pyfunction]
#[pyo3(signature = (messages, *, format=None, system=None, tools=None, tokenizer="approx", message_overhead_tokens=4, image_tokens=1600))]
#[allow(clippy::too_many_arguments)]
pub fn count_messages(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<&str>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    tokenizer: &str,
    message_overhead_tokens: usize,
    image_tokens: usize,
) -> PyResult<MessageCounts> {
    let tok = parse_tokenizer(py, tokenizer)?;
    let format = parse_format(py, format)?;
    let ex = Extractor::new(py).conversation(messages, format, system, tools)?;
    let conv = ex.conv();
    let framing = Framing {
        message_overhead_tokens,
        image_tokens,
    };
    let c = py.detach(|| count_conversation(tok, conv, framing));
    Ok(MessageCounts {
        messages: c.messages,
        system: c.system,
        tools: c.tools,
        format: conv.format.name(),
    })
}

/// For a Python counter: each message's fixed tokens and the texts the counter must count
/// (`[(fixed, [text, ...]), ...]`), then the system's and the tools' in the same shape.
#[pyfunction]
#[pyo3(signature = (messages, *, format=None, system=None, tools=None, message_overhead_tokens=4, image_tokens=1600))]
#[allow(clippy::type_complexity)]
pub fn message_texts(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<&str>,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    message_overhead_tokens: usize,
    image_tokens: usize,
) -> PyResult<(
    Vec<(usize, Vec<String>)>,
    (usize, Vec<String>),
    (usize, Vec<String>),
    &'static str,
)> {
    let format = parse_format(py, format)?;
    let ex = Extractor::new(py).conversation(messages, format, system, tools)?;
    let conv = ex.conv();
    let framing = Framing {
        message_overhead_tokens,
        image_tokens,
    };
    let msgs = conv
        .messages
        .iter()
        .map(|m| {
            let (fixed, texts, names) = message_parts(m, framing);
            let mut out: Vec<String> = texts
                .iter()
                .map(|p| p.text().to_utf8().into_owned())
                .collect();
            out.extend(names.iter().map(|n| (*n).to_owned()));
            (fixed, out)
        })
        .collect();
    let sys_fixed = if conv.system.is_empty() {
        0
    } else {
        message_overhead_tokens
    };
    let sys = (
        sys_fixed,
        conv.system
            .iter()
            .map(|p| p.text().to_utf8().into_owned())
            .collect(),
    );
    let tls = (
        conv.tools.len() * TOOL_DEF_OVERHEAD_TOKENS,
        conv.tools
            .iter()
            .map(|p| p.text().to_utf8().into_owned())
            .collect(),
    );
    Ok((msgs, sys, tls, conv.format.name()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MessageCounts>()?;
    m.add_function(wrap_pyfunction!(count_messages, m)?)?;
    m.add_function(wrap_pyfunction!(message_texts, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens_many, m)?)?;
    Ok(())
}

//! `inspect_messages`, `MessageInfo`, `BlockInfo`: the per-message, per-block figures of
//! `crate::inspect` for Python (what `context-compactor stats` prints), read by the same
//! readers as every other entry point, so every format and framework object is covered.

use super::counter::{parse_framing, Counter};
use super::extract::{parse_format, Extractor};
use crate::inspect::{self, inspect_with, kind_name};
use pyo3::prelude::*;
use std::convert::Infallible;

/// One block of a message (see `inspect_messages`).
#[pyclass(frozen, module = "context_compactor._core")]
pub struct BlockInfo {
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    tokens: usize,
    #[pyo3(get)]
    name: Option<String>,
    #[pyo3(get)]
    id: Option<String>,
    #[pyo3(get)]
    is_error: bool,
}

#[pymethods]
impl BlockInfo {
    fn __repr__(&self) -> String {
        format!(
            "BlockInfo(kind={:?}, tokens={}, name={:?})",
            self.kind, self.tokens, self.name
        )
    }
}

/// One message (see `inspect_messages`).
#[pyclass(frozen, module = "context_compactor._core")]
pub struct MessageInfo {
    #[pyo3(get)]
    role: &'static str,
    #[pyo3(get)]
    tokens: usize,
    #[pyo3(get)]
    blocks: Vec<Py<BlockInfo>>,
    #[pyo3(get)]
    preview: String,
}

#[pymethods]
impl MessageInfo {
    fn __repr__(&self) -> String {
        format!(
            "MessageInfo(role={:?}, tokens={}, blocks={}, preview={:?})",
            self.role,
            self.tokens,
            self.blocks.len(),
            self.preview
        )
    }
}

#[pyfunction]
#[pyo3(signature = (messages, *, format=None, tokenizer=None, message_overhead_tokens=4, image_tokens=1600, image_model=None, preview_chars=60))]
#[allow(clippy::too_many_arguments)]
pub fn inspect_messages(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    format: Option<&str>,
    tokenizer: Option<&Bound<'_, PyAny>>,
    message_overhead_tokens: usize,
    image_tokens: usize,
    image_model: Option<&str>,
    preview_chars: usize,
) -> PyResult<Vec<MessageInfo>> {
    let counter = Counter::parse_or_approx(tokenizer)?;
    let format = parse_format(py, format)?;
    let framing = parse_framing(py, message_overhead_tokens, image_tokens, image_model)?;
    let ex = Extractor::new(py).conversation(messages, format, None, None)?;
    let msgs = &ex.conv().messages;
    let infos = match &counter {
        Counter::Builtin(t) => {
            let t = *t;
            let counted = py.detach(|| {
                inspect_with(msgs, framing, preview_chars, |x| {
                    Ok::<_, Infallible>(t.count(x))
                })
            });
            match counted {
                Ok(v) => v,
                Err(never) => match never {},
            }
        }
        Counter::Callable(_) => {
            inspect_with(msgs, framing, preview_chars, |x| counter.call(&x.to_utf8()))?
        }
    };
    infos.into_iter().map(|m| to_py(py, m)).collect()
}

fn to_py(py: Python<'_>, m: inspect::MessageInfo) -> PyResult<MessageInfo> {
    let blocks = m
        .blocks
        .into_iter()
        .map(|b| {
            Py::new(
                py,
                BlockInfo {
                    kind: kind_name(b.kind),
                    tokens: b.tokens,
                    name: b.name,
                    id: b.id,
                    is_error: b.is_error,
                },
            )
        })
        .collect::<PyResult<_>>()?;
    Ok(MessageInfo {
        role: m.role.name(),
        tokens: m.tokens,
        blocks,
        preview: m.preview,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BlockInfo>()?;
    m.add_class::<MessageInfo>()?;
    m.add_function(wrap_pyfunction!(inspect_messages, m)?)?;
    Ok(())
}

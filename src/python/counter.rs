//! The counter of a measurement ([`Counter`]): a built-in tokenizer or the caller's callable
//! `str -> int`, parsed from a `tokenizer=` argument; it counts messages (through a
//! `ConversationState`'s cache when given), the system prompt and the tool definitions.
//! `tokens.rs` (`measure`), `plan.rs` and `validate.rs` use it; it uses only `state.rs`'s
//! `ConversationState` (one way: the state file knows nothing of counters).

use super::errors::config_error;
use super::state::ConversationState;
use crate::message::{Conversation, FormatHints, Message};
use crate::state::CounterKey;
use crate::tokens::counter::{
    message_count_with, message_tokens, system_tokens, tools_tokens, Framing, Tokenizer,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

/// A built-in tokenizer by name.
fn parse_tokenizer(py: Python<'_>, name: &str) -> PyResult<Tokenizer> {
    Tokenizer::parse(name).ok_or_else(|| {
        config_error(
            py,
            "tokenizer",
            &format!("unknown tokenizer {name:?}; expected \"approx\", \"o200k_base\", \"cl100k_base\" or a callable"),
        )
    })
}

/// Bytes of text of the given messages (in their own layouts), to size parallel work.
fn text_bytes(idx: &[usize], messages: &[Message<'_>]) -> usize {
    idx.iter()
        .flat_map(|&i| messages[i].blocks.iter())
        .flat_map(|b| b.texts.iter())
        .map(|p| match p.text() {
            crate::text::Text::Utf8(s) => s.len(),
            crate::text::Text::Latin1(b) => b.len(),
            crate::text::Text::Ucs2(w) => w.len() * 2,
            crate::text::Text::Ucs4(w) => w.len() * 4,
        })
        .sum()
}

/// The counter of a measurement: a built-in tokenizer or the caller's callable.
pub enum Counter<'py> {
    Builtin(Tokenizer),
    Callable(Bound<'py, PyAny>),
}

impl<'py> Counter<'py> {
    pub fn parse(tokenizer: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = tokenizer.py();
        if let Ok(name) = tokenizer.cast::<PyString>() {
            return Ok(Counter::Builtin(parse_tokenizer(
                py,
                &name.to_string_lossy(),
            )?));
        }
        if tokenizer.is_callable() {
            return Ok(Counter::Callable(tokenizer.clone()));
        }
        Err(config_error(
            py,
            "tokenizer",
            "expected \"approx\", \"o200k_base\", \"cl100k_base\" or a callable str -> int",
        ))
    }

    /// The counter of an optional `tokenizer=` argument: the estimate when it is `None`.
    pub fn parse_or_approx(tokenizer: Option<&Bound<'py, PyAny>>) -> PyResult<Self> {
        tokenizer.map_or(Ok(Counter::Builtin(Tokenizer::Approx)), Counter::parse)
    }

    pub fn key(&self) -> CounterKey {
        match self {
            Counter::Builtin(t) => CounterKey::Builtin(*t),
            Counter::Callable(c) => CounterKey::External(c.as_ptr() as u64),
        }
    }

    pub(super) fn call(&self, text: &str) -> PyResult<usize> {
        let Counter::Callable(c) = self else {
            unreachable!("only callables are called")
        };
        let py = c.py();
        let n = c.call1((PyString::new(py, text),))?;
        if n.is_instance_of::<PyBool>() || !n.is_instance_of::<PyInt>() {
            return Err(config_error(
                py,
                "tokenizer",
                &format!("the callable returned {}, expected an int >= 0", n.repr()?),
            ));
        }
        let v: i64 = n.extract()?;
        usize::try_from(v)
            .map_err(|_| config_error(py, "tokenizer", "the callable returned a negative count"))
    }

    fn count_message(&self, m: &Message<'_>, framing: Framing) -> PyResult<usize> {
        message_count_with(m, framing, |t| self.call(&t.to_utf8()))
    }

    /// Tokens of the separate system prompt and of the tool definitions.
    pub fn count_extras(
        &self,
        py: Python<'_>,
        conv: &Conversation<'_>,
        framing: Framing,
    ) -> PyResult<(usize, usize)> {
        match self {
            Counter::Builtin(t) => {
                let t = *t;
                Ok(py.detach(|| {
                    (
                        system_tokens(t, &conv.system, framing),
                        tools_tokens(t, &conv.tools),
                    )
                }))
            }
            Counter::Callable(_) => {
                let mut sys = if conv.system.is_empty() {
                    0
                } else {
                    framing.message_overhead_tokens
                };
                for p in &conv.system {
                    sys += self.call(&p.text().to_utf8())?;
                }
                let mut tools = 0;
                for p in &conv.tools {
                    tools += crate::tokens::counter::TOOL_DEF_OVERHEAD_TOKENS
                        + self.call(&p.text().to_utf8())?;
                }
                Ok((sys, tools))
            }
        }
    }

    /// Count each message, through the state's cache when there is one.
    pub fn count_messages(
        &self,
        py: Python<'_>,
        messages: &[Message<'_>],
        framing: Framing,
        state: Option<&ConversationState>,
    ) -> PyResult<Vec<usize>> {
        let key = self.key();
        let fps: Vec<u64> = messages.iter().map(|m| m.fingerprint).collect();
        let cached = match state {
            Some(s) => py.detach(|| s.lock().lookup(key, framing, &fps)),
            None => vec![None; messages.len()],
        };
        let missing: Vec<usize> = (0..messages.len())
            .filter(|&i| cached[i].is_none())
            .collect();
        let fresh: Vec<usize> = match self {
            Counter::Builtin(t) => {
                let t = *t;
                py.detach(|| {
                    // Messages are counted on the pool when there is enough text to pay for it.
                    let weight = text_bytes(&missing, messages);
                    crate::parallel::map(&missing, weight, |&i| {
                        message_tokens(t, &messages[i], framing)
                    })
                })
            }
            Counter::Callable(_) => missing
                .iter()
                .map(|&i| self.count_message(&messages[i], framing))
                .collect::<PyResult<_>>()?,
        };
        if let Some(s) = state {
            let stored: Vec<(u64, usize, u8)> = missing
                .iter()
                .zip(&fresh)
                .map(|(&i, &n)| (fps[i], n, FormatHints::of(&messages[i]).bits()))
                .collect();
            py.detach(|| s.lock().store(key, framing, &stored, messages.len()));
        }
        let mut out: Vec<usize> = cached
            .into_iter()
            .map(|c| c.map_or(0, |(n, _)| n))
            .collect();
        for (&i, n) in missing.iter().zip(fresh) {
            out[i] = n;
        }
        Ok(out)
    }
}

/// The framing of the `message_overhead_tokens=`, `image_tokens=` and `image_model=` arguments.
pub fn parse_framing(
    py: Python<'_>,
    message_overhead_tokens: usize,
    image_tokens: usize,
    image_model: Option<&str>,
) -> PyResult<Framing> {
    Ok(Framing {
        message_overhead_tokens,
        image_tokens,
        image_model: super::image::parse_image_model(py, image_model)?,
    })
}

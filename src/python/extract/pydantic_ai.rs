//! pydantic-ai `ModelMessage` objects (`ModelRequest` / `ModelResponse`), read by attribute.
//!
//! Design note: a `ModelMessage` is one message of the view whatever its parts, so that indexes,
//! records and kept objects stay the caller's: a `ModelRequest` is a user message, a
//! `ModelResponse` an assistant message, and each part one block (its origin is its index in
//! `parts`). This is the shape of Anthropic Messages — tool returns are blocks of the next
//! user-side message, tool calls blocks of the assistant's — so the conversation is read as
//! `anthropic` and held to its rules (results first in the message right after their call).
//! Parts: `system-prompt` (an `Other` block: counted, never shortened or summarised as text; the
//! Python shell pins the requests that hold one), `user-prompt` (text, or a list of text and
//! media: one block, its media counted as images), `tool-return` / legacy `retry-prompt` with a
//! tool (a result; failed, denied and retried outcomes are errors), `retry-feedback` and a
//! tool-less `retry-prompt` (text), `text`, `thinking` (with its signature: a thinking block),
//! `tool-call` (`args` a JSON string or a dict), `compaction` (a provider's summary: an `Other`
//! block, pinned by the shell so that it is never split or re-summarised), and the rest
//! (`builtin-tool-*`, `file`, instruction and delta parts): counted as text. Reading the parts
//! in Rust keeps a cold `check()` of 10k messages at 1.0-1.2x the same conversation as
//! Anthropic dicts, where converting each message to a dict in Python first (the converter of
//! `tests/_frameworks.py`) then checking cost 1.7x (process CPU time on a shared machine); the output (new and edited messages) is built by the Python shell from
//! `describe.rs`, as pydantic-ai's own dataclasses.

use super::access::Access;
use super::loc::{type_name, Loc, LocErr};
use super::Extractor;
use crate::message::{Block, BlockKind, Message, Origin, Piece, Role};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

impl<'py> Extractor<'py> {
    /// Read `obj` as a pydantic-ai message when it is one (an object with `kind` "request" or
    /// "response" and `parts`); `None` otherwise.
    pub(super) fn pydantic_ai_message(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        index: usize,
    ) -> PyResult<Option<Message<'static>>> {
        let py = self.py;
        let loc = Loc::root(Some(index), "");
        let Some(kind) = acc.get(intern!(py, "kind"), &loc)? else {
            return Ok(None);
        };
        let role = match kind
            .cast::<PyString>()
            .map(|k| k.to_string_lossy().into_owned())
        {
            Ok(k) if k == "request" => Role::User,
            Ok(k) if k == "response" => Role::Assistant,
            _ => return Ok(None),
        };
        let Some(parts) = acc.get(intern!(py, "parts"), &loc)? else {
            return Ok(None);
        };
        let class = if role == Role::User {
            "ModelRequest"
        } else {
            "ModelResponse"
        };
        let r = self.pydantic_ai_parts(&parts, role, &loc.child("parts"));
        self.hints.anthropic = true;
        self.pydantic_ai = true;
        let blocks =
            r.map_err(|e| {
                super::langchain::with_format_note(
                    py,
                    e,
                    &format!(
                    "read as a pydantic-ai {class} (its kind is {:?}; format \"anthropic\": tool \
                     returns are blocks of the next request)",
                    if role == Role::User { "request" } else { "response" }
                ),
                )
            })?;
        let mut m = Message::new(role, blocks);
        m.empty = m.blocks.is_empty();
        if self.fingerprints {
            m.fingerprint = super::super::fingerprint::fingerprint(obj);
        }
        Ok(Some(m))
    }

    fn pydantic_ai_parts(
        &mut self,
        parts: &Bound<'py, PyAny>,
        role: Role,
        loc: &Loc<'_>,
    ) -> PyResult<Vec<Block<'static>>> {
        let items = self.sequence(parts, loc)?;
        let mut blocks = Vec::with_capacity(items.len());
        for (k, part) in items.iter().enumerate() {
            let mut b = self.pydantic_ai_part(part, role, &loc.item(k))?;
            b.origin = Origin::Part(k);
            blocks.push(b);
        }
        Ok(blocks)
    }

    /// The text of a value sent as the model sees it: a string as it is, anything else as
    /// compact JSON (a tool's structured return, a retry's error details).
    fn pydantic_ai_value(
        &mut self,
        v: &Bound<'py, PyAny>,
        out: &mut Vec<Piece<'static>>,
        loc: &Loc<'_>,
    ) -> PyResult<()> {
        if let Ok(s) = v.cast::<PyString>() {
            out.push(Piece::Borrowed(self.borrow(s)?));
        } else if v.is_instance_of::<PyDict>()
            || v.is_instance_of::<pyo3::types::PyList>()
            || v.is_instance_of::<pyo3::types::PyTuple>()
        {
            let mut json = String::new();
            self.json(v, &mut json, loc, 0)?;
            out.push(Piece::Owned(json));
        } else {
            self.strings(v, out, loc, 0)?;
        }
        Ok(())
    }

    fn pydantic_ai_part(
        &mut self,
        part: &Bound<'py, PyAny>,
        role: Role,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let py = self.py;
        // Dataclass parts: their fields from the instance dict (see `framework.rs`).
        let dict = super::framework::instance_dict(part);
        let acc = match &dict {
            Some(d) => {
                super::framework::remember_part(part);
                Access::Dict(d)
            }
            None => Access::of(part, loc)?,
        };
        let kind = match acc.get(intern!(py, "part_kind"), loc)? {
            Some(k) => self
                .text(&k, &loc.child("part_kind"))?
                .to_utf8()
                .into_owned(),
            None => {
                return Err(loc.child("part_kind").err(
                    py,
                    &format!("expected a pydantic-ai part, got {}", type_name(part)),
                ))
            }
        };
        let content = acc.get(intern!(py, "content"), loc)?;
        let cloc = loc.child("content");
        Ok(match (kind.as_str(), role) {
            ("user-prompt", _) => {
                let mut b = Block::new(BlockKind::Text);
                match &content {
                    Some(c) if c.is_instance_of::<PyString>() => {
                        b.texts.push(Piece::Borrowed(self.text(c, &cloc)?))
                    }
                    Some(c) => {
                        for (j, item) in self.sequence(c, &cloc)?.iter().enumerate() {
                            if let Ok(s) = item.cast::<PyString>() {
                                b.texts.push(Piece::Borrowed(self.borrow(s)?));
                            } else if let Some(t) = item
                                .getattr_opt(intern!(py, "content"))?
                                .filter(|t| t.is_instance_of::<PyString>())
                            {
                                // TextContent
                                b.texts.push(Piece::Borrowed(self.text(&t, &cloc.item(j))?));
                            } else if item.hasattr(intern!(py, "kind"))? {
                                // ImageUrl, BinaryContent, DocumentUrl, ...: media.
                                b.images += 1;
                            }
                        }
                    }
                    None => {}
                }
                b
            }
            ("tool-return" | "retry-prompt", _) => {
                let id = self.opt_str(&acc, intern!(py, "tool_call_id"), loc)?;
                let name = self.opt_str(&acc, intern!(py, "tool_name"), loc)?;
                let retry = kind == "retry-prompt";
                if retry && name.is_none() {
                    // A retry of the output: user-side text.
                    let mut b = Block::new(BlockKind::Text);
                    if let Some(c) = &content {
                        self.pydantic_ai_value(c, &mut b.texts, &cloc)?;
                    }
                    return Ok(b);
                }
                let mut b = Block::new(BlockKind::ToolResult);
                b.id = id;
                b.name = name;
                b.is_error = retry
                    || acc
                        .get(intern!(py, "outcome"), loc)?
                        .and_then(|o| {
                            o.cast::<PyString>()
                                .ok()
                                .map(|s| s.to_string_lossy() != "success")
                        })
                        .unwrap_or(false);
                if let Some(c) = &content {
                    self.pydantic_ai_value(c, &mut b.texts, &cloc)?;
                }
                b
            }
            ("retry-feedback", _) => {
                let mut b = Block::new(BlockKind::Text);
                if let Some(c) = &content {
                    self.pydantic_ai_value(c, &mut b.texts, &cloc)?;
                }
                b
            }
            ("text", Role::Assistant) => {
                let mut b = Block::new(BlockKind::Text);
                if let Some(c) = &content {
                    b.texts.push(Piece::Borrowed(self.text(c, &cloc)?));
                }
                b
            }
            ("thinking", Role::Assistant) => {
                let mut b = Block::new(BlockKind::Thinking);
                if let Some(c) = &content {
                    b.texts.push(Piece::Borrowed(self.text(c, &cloc)?));
                }
                b
            }
            ("tool-call", Role::Assistant) => {
                let mut b = Block::new(BlockKind::ToolCall);
                b.id = self.opt_str(&acc, intern!(py, "tool_call_id"), loc)?;
                b.name = self.opt_str(&acc, intern!(py, "tool_name"), loc)?;
                let aloc = loc.child("args");
                match acc.get(intern!(py, "args"), loc)? {
                    Some(a) if a.is_instance_of::<PyString>() => {
                        b.texts.push(Piece::Borrowed(self.text(&a, &aloc)?))
                    }
                    Some(a) if a.is_instance_of::<PyDict>() => {
                        let mut json = String::new();
                        self.json(&a, &mut json, &aloc, 0)?;
                        b.texts.push(Piece::Owned(json));
                    }
                    Some(a) => {
                        return Err(aloc.err(
                            py,
                            &format!("expected str, dict or None, got {}", type_name(&a)),
                        ))
                    }
                    None => b.texts.push(Piece::Owned("{}".to_owned())),
                }
                if b.id.is_none() || b.name.is_none() {
                    b.malformed = Some(if b.id.is_none() { "id" } else { "name" });
                    b.kind = BlockKind::Other;
                }
                b
            }
            _ => {
                // System prompts, provider compactions, built-in tool parts, files, instruction
                // and delta parts: passed through, counted as text.
                let mut b = Block::new(BlockKind::Other);
                if let Some(c) = &content {
                    self.pydantic_ai_value(c, &mut b.texts, &cloc)?;
                }
                b
            }
        })
    }
}

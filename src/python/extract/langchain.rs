//! LangChain / LangGraph `BaseMessage` objects, read by attribute.
//!
//! Design note: a LangChain message has no `role`: its pydantic field `type` says what it is
//! (`human`, `ai`, `tool`, `system`, `function`, and the `*MessageChunk` class names of streamed
//! chunks). The conversation is read as OpenAI Chat Completions (a `ToolMessage` is one result
//! message, `AIMessage.tool_calls` are the calls), whichever provider wrote it: the rules that
//! keep it valid are the same, and LangChain's provider classes rebuild the wire format from
//! this shape. Content blocks are read in place: provider-native ones (`ChatAnthropic`'s
//! `thinking`/`redacted_thinking`/`tool_use`, `ChatOpenAI`'s `reasoning` with its `summary`)
//! and v1 standard blocks (`text`, `reasoning`, `image`/`audio`/`video`/`file`, `tool_call`,
//! `server_tool_*`, `non_standard`). A `tool_use`/`tool_call` block inside `content` that repeats
//! a call of `tool_calls` is left out (counted once, as the provider class sends it); one that
//! repeats none is counted as text, never paired. `invalid_tool_calls` (arguments the model
//! emitted unparsable) are calls too: `ChatOpenAI` sends them back as `tool_calls`, so each needs
//! its result.
//!
//! Only objects are read this way (`type` is also a Responses item's field): a dict with a
//! `role` is read as a wire message as before. Wrong Python types raise `MessageTypeError`
//! naming the index, the field and the format detected ("LangChain AIMessage, type 'ai'").
//! The output is turned back into LangChain classes by the Python shell
//! (`context_compactor.integrations.langchain`), told by [`Extracted::langchain`].

use super::access::Access;
use super::loc::{type_name, Loc, LocErr};
use super::Extractor;
use crate::message::{Block, BlockKind, Message, Origin, Piece, Role};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// The role a LangChain message `type` stands for, with the class name for error messages.
fn role_of(ty: &str) -> Option<(Role, &'static str)> {
    Some(match ty {
        "human" | "HumanMessageChunk" => (Role::User, "HumanMessage"),
        "ai" | "AIMessageChunk" => (Role::Assistant, "AIMessage"),
        "tool" | "ToolMessageChunk" => (Role::Tool, "ToolMessage"),
        "system" | "SystemMessageChunk" => (Role::System, "SystemMessage"),
        "function" | "FunctionMessageChunk" => (Role::Function, "FunctionMessage"),
        _ => return None,
    })
}

/// Add the format detected to a `MessageTypeError` raised while reading a framework's message
/// (`note` says which and why); any other error passes through.
pub(super) fn with_format_note(py: Python<'_>, err: PyErr, note: &str) -> PyErr {
    let value = err.value(py);
    let (Ok(index), Ok(field)) = (value.getattr("index"), value.getattr("field")) else {
        return err;
    };
    let text = format!("{value}; {note}");
    match value.get_type().call1((text, index, field)) {
        Ok(e) => {
            let e = PyErr::from_value(e);
            e.set_cause(py, err.cause(py));
            e
        }
        Err(e) => e,
    }
}

impl<'py> Extractor<'py> {
    /// Read `obj` as a LangChain message when it is one (an object whose `type` is a LangChain
    /// message type); `None` otherwise.
    pub(super) fn langchain_message(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        index: usize,
    ) -> PyResult<Option<Message<'static>>> {
        let py = self.py;
        let loc = Loc::root(Some(index), "");
        let Some(ty) = acc.get(intern!(py, "type"), &loc)? else {
            return Ok(None);
        };
        let Ok(ty) = ty.cast::<PyString>() else {
            return Ok(None);
        };
        let ty = ty.to_string_lossy();
        if ty == "remove" {
            return Err(loc.child("type").err(
                py,
                "a LangChain RemoveMessage is a state update, not a message to send \
                 (apply it to the state first)",
            ));
        }
        let Some((role, class)) = role_of(&ty) else {
            return Ok(None);
        };
        let anthropic = self.hints.anthropic;
        let r = self.langchain_read(obj, acc, role, &loc);
        // Provider-native blocks (thinking, tool_use) do not make this an Anthropic request.
        self.hints.anthropic = anthropic;
        self.hints.openai = true;
        self.langchain = true;
        r.map(Some).map_err(|e| {
            with_format_note(
                py,
                e,
                &format!(
                    "read as a LangChain {class} (its type is {ty:?}; format \"openai\": tool \
                     messages and tool_calls)"
                ),
            )
        })
    }

    fn langchain_read(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        role: Role,
        loc: &Loc<'_>,
    ) -> PyResult<Message<'static>> {
        let py = self.py;
        let content = acc.get(intern!(py, "content"), loc)?;
        let cloc = loc.child("content");
        let mut blocks = Vec::new();
        let mut empty = match &content {
            None => true,
            Some(c) => c.len().is_ok_and(|n| n == 0),
        };
        // The calls first: a `tool_use`/`tool_call` block in `content` that repeats one of them
        // (ChatAnthropic keeps both) is left out of the view, so it is counted once, as the
        // provider class sends it; a rebuilt message then holds the call in `tool_calls` only,
        // from which the provider class writes its block again.
        let mut calls = Vec::new();
        if role == Role::Assistant {
            if let Some(list) = acc.get(intern!(py, "tool_calls"), loc)? {
                let cl = loc.child("tool_calls");
                for (k, call) in self.sequence(&list, &cl)?.iter().enumerate() {
                    let mut b = self.langchain_call(call, &cl.item(k))?;
                    b.origin = Origin::Call(k);
                    empty = false;
                    calls.push(b);
                }
            }
            if let Some(bad) = acc.get(intern!(py, "invalid_tool_calls"), loc)? {
                // Calls whose arguments did not parse: the provider classes send them back as
                // calls (ChatOpenAI), so they need their results like any call.
                let bl = loc.child("invalid_tool_calls");
                for (k, call) in self.sequence(&bad, &bl)?.iter().enumerate() {
                    let cl = bl.item(k);
                    let cacc = Access::of(call, &cl)?;
                    let mut b = Block::new(BlockKind::ToolCall);
                    b.id = self.opt_str(&cacc, intern!(py, "id"), &cl)?;
                    b.name = self.opt_str(&cacc, intern!(py, "name"), &cl)?;
                    match cacc.get(intern!(py, "args"), &cl)? {
                        Some(a) => b
                            .texts
                            .push(Piece::Borrowed(self.text(&a, &cl.child("args"))?)),
                        None => b.texts.push(Piece::Owned(String::new())),
                    }
                    if b.id.is_none() || b.name.is_none() {
                        b.kind = BlockKind::Other;
                    }
                    // Renders as nothing: a rebuilt message keeps `invalid_tool_calls` from its
                    // `model_dump` copy (so a cut of their arguments is not applied).
                    b.origin = Origin::FunctionCall;
                    empty = false;
                    calls.push(b);
                }
            }
        }
        let call_ids: Vec<&str> = calls.iter().filter_map(|b| b.id.as_deref()).collect();
        if matches!(role, Role::Tool | Role::Function) {
            let mut b = Block::new(BlockKind::ToolResult);
            b.origin = Origin::Whole;
            if role == Role::Tool {
                b.id = self.opt_str(acc, intern!(py, "tool_call_id"), loc)?;
                if let Some(s) = acc.get(intern!(py, "status"), loc)? {
                    b.is_error = s
                        .cast::<PyString>()
                        .is_ok_and(|s| s.to_string_lossy() == "error");
                }
            } else {
                b.name = self.opt_str(acc, intern!(py, "name"), loc)?;
            }
            if let Some(c) = &content {
                self.langchain_content(c, &mut blocks, &cloc, &[])?;
            }
            for ib in blocks.drain(..) {
                b.images += ib.images;
                b.texts.extend(ib.texts);
            }
            blocks.push(b);
        } else if let Some(c) = &content {
            self.langchain_content(c, &mut blocks, &cloc, &call_ids)?;
        }
        blocks.extend(calls);
        let mut m = Message::new(role, blocks);
        m.empty = empty && m.blocks.iter().all(|b| b.kind != BlockKind::ToolCall);
        if self.fingerprints {
            m.fingerprint = super::super::fingerprint::fingerprint(obj);
        }
        Ok(m)
    }

    /// `content`: a string, or a list of strings and blocks.
    fn langchain_content(
        &mut self,
        c: &Bound<'py, PyAny>,
        blocks: &mut Vec<Block<'static>>,
        loc: &Loc<'_>,
        call_ids: &[&str],
    ) -> PyResult<()> {
        if let Ok(s) = c.cast::<PyString>() {
            let t = self.borrow(s)?;
            blocks.push(Block::text(Piece::Borrowed(t)));
            return Ok(());
        }
        let items = self.sequence(c, loc).map_err(|_| {
            loc.err(
                self.py,
                &format!("expected str or a list of blocks, got {}", type_name(c)),
            )
        })?;
        for (k, part) in items.iter().enumerate() {
            let ploc = loc.item(k);
            if !call_ids.is_empty() && self.repeats_a_call(part, &ploc, call_ids)? {
                continue;
            }
            let mut b = match part.cast::<PyString>() {
                Ok(s) => Block::text(Piece::Borrowed(self.borrow(s)?)),
                Err(_) => self.langchain_block(part, &ploc)?,
            };
            b.origin = Origin::Part(k);
            blocks.push(b);
        }
        Ok(())
    }

    /// Whether a content block is a `tool_use`/`tool_call` block repeating one of `call_ids`.
    fn repeats_a_call(
        &mut self,
        part: &Bound<'py, PyAny>,
        loc: &Loc<'_>,
        call_ids: &[&str],
    ) -> PyResult<bool> {
        let py = self.py;
        let Ok(d) = part.cast::<PyDict>() else {
            return Ok(false);
        };
        let acc = Access::Dict(d);
        let is_call = acc
            .get(intern!(py, "type"), loc)?
            .and_then(|t| {
                t.cast::<PyString>()
                    .ok()
                    .map(|t| t.to_string_lossy().into_owned())
            })
            .is_some_and(|t| t == "tool_use" || t == "tool_call");
        if !is_call {
            return Ok(false);
        }
        Ok(acc
            .get(intern!(py, "id"), loc)?
            .and_then(|i| {
                i.cast::<PyString>()
                    .ok()
                    .map(|i| i.to_string_lossy().into_owned())
            })
            .is_some_and(|id| call_ids.contains(&id.as_str())))
    }

    /// One content block (a dict in LangChain; an object is read by attribute all the same).
    fn langchain_block(
        &mut self,
        part: &Bound<'py, PyAny>,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let py = self.py;
        let acc = Access::of(part, loc)?;
        let ty = match acc.get(intern!(py, "type"), loc)? {
            Some(t) => self.text(&t, &loc.child("type"))?.to_utf8().into_owned(),
            None => String::new(),
        };
        Ok(match ty.as_str() {
            // The wire formats' own blocks, read as for a dict message.
            "text" | "refusal" | "image_url" | "thinking" | "redacted_thinking" | "input_audio" => {
                crate::formats::blocks::block(self, part, loc)?
            }
            "reasoning" => {
                // v1: `reasoning` text; ChatOpenAI (Responses): `summary` parts and opaque
                // `encrypted_content`. Either way the thinking of its turn.
                let mut b = Block::new(BlockKind::Thinking);
                match acc.get(intern!(py, "reasoning"), loc)? {
                    Some(r) if r.is_instance_of::<PyString>() => b
                        .texts
                        .push(Piece::Borrowed(self.text(&r, &loc.child("reasoning"))?)),
                    _ => self.strings(part, &mut b.texts, loc, 0)?,
                }
                b
            }
            // An Anthropic `image` block with its `source` (as ChatAnthropic passes content on):
            // sized from its base64 header like the dict's. LangChain's own `image` blocks
            // (`url`, `base64` + `mime_type`, `file_id`) are images of unknown size.
            "image" if acc.get(intern!(py, "source"), loc)?.is_some() => {
                crate::formats::blocks::block(self, part, loc)?
            }
            "image" | "input_image" => Block::new(BlockKind::Image),
            "audio" | "video" => {
                let mut b = Block::new(BlockKind::Audio);
                b.images = 1;
                b
            }
            "file" | "text-plain" | "document" | "input_file" => {
                let mut b = Block::new(BlockKind::Document);
                self.strings(part, &mut b.texts, loc, 0)?;
                if b.texts.iter().all(|t| t.text().char_len() < 64) {
                    b.texts.clear();
                    b.images = 1;
                }
                b
            }
            _ => {
                // `tool_use`/`tool_call` copies of `tool_calls`, server-tool blocks,
                // `non_standard` and types we do not know: counted as text.
                let mut b = Block::new(BlockKind::Other);
                self.strings(part, &mut b.texts, loc, 0)?;
                b
            }
        })
    }

    /// An `AIMessage.tool_calls[k]` entry: `{"name", "args": dict, "id", "type": "tool_call"}`.
    fn langchain_call(
        &mut self,
        call: &Bound<'py, PyAny>,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let py = self.py;
        let acc = Access::of(call, loc)?;
        let mut b = Block::new(BlockKind::ToolCall);
        b.id = self.opt_str(&acc, intern!(py, "id"), loc)?;
        b.name = self.opt_str(&acc, intern!(py, "name"), loc)?;
        match acc.get(intern!(py, "args"), loc)? {
            Some(a) if a.is_instance_of::<PyDict>() => {
                let mut json = String::new();
                self.json(&a, &mut json, &loc.child("args"), 0)?;
                b.texts.push(Piece::Owned(json));
            }
            Some(a) => {
                return Err(loc
                    .child("args")
                    .err(py, &format!("expected a dict, got {}", type_name(&a))))
            }
            None => b.texts.push(Piece::Owned("{}".to_owned())),
        }
        if b.name.is_none() {
            b.malformed = Some("name");
        }
        if b.id.is_none() {
            b.malformed = Some("id");
        }
        if b.malformed.is_some() {
            b.kind = BlockKind::Other;
        }
        Ok(b)
    }
}

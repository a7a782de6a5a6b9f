//! Message content and its blocks: a string or a list of parts (OpenAI) / blocks (Anthropic),
//! each read by its `type` into the core's [`Block`]. Chat messages, tool results (`parts.rs`)
//! and LangChain's wire-format blocks (`langchain.rs`) all come through [`Extractor::block`].
//!
//! A block without the field its type requires is marked (see `Block::malformed`), and a
//! malformed call or result is read as an unknown block that pairs with nothing.

use super::access::Access;
use super::loc::{type_name, Loc, LocErr};
use super::Extractor;
use crate::message::{Block, BlockKind, Origin, Piece};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

/// The name of a required field, for `Block::malformed`.
fn field_name(field: &Bound<'_, PyString>) -> &'static str {
    [
        "text",
        "refusal",
        "thinking",
        "data",
        "image_url",
        "source",
        "input_audio",
        "file",
    ]
    .into_iter()
    .find(|name| field.to_str().is_ok_and(|f| f == *name))
    .unwrap_or("a required field")
}

/// A malformed call or result pairs with nothing: it is read as an unknown block (counted,
/// reported, dropped by the repair pass).
fn unpaired_if_malformed(mut b: Block<'static>) -> Block<'static> {
    if b.malformed.is_some() {
        b.kind = BlockKind::Other;
    }
    b
}

impl<'py> Extractor<'py> {
    /// Message content: a string, or a list of parts/blocks.
    pub(super) fn content(
        &mut self,
        c: &Bound<'py, PyAny>,
        blocks: &mut Vec<Block<'static>>,
        loc: &Loc<'_>,
    ) -> PyResult<()> {
        if let Ok(s) = c.cast::<PyString>() {
            let t = self.borrow(s)?;
            blocks.push(Block::text(Piece::Borrowed(t)));
            return Ok(());
        }
        if !(c.is_instance_of::<PyList>() || c.is_instance_of::<PyTuple>()) {
            return Err(loc.err(
                self.py,
                &format!(
                    "expected str, None or a list of parts, got {}",
                    type_name(c)
                ),
            ));
        }
        for (k, part) in self.sequence(c, loc)?.iter().enumerate() {
            let mut b = self.block(part, &loc.item(k))?;
            b.origin = Origin::Part(k);
            blocks.push(b);
        }
        Ok(())
    }

    /// One content part (OpenAI) or block (Anthropic).
    pub(super) fn block(
        &mut self,
        part: &Bound<'py, PyAny>,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let py = self.py;
        let acc = Access::of(part, loc)?;
        // Read in place (kept alive like every borrowed text): no copy of the type name.
        let ty = match acc.get(intern!(py, "type"), loc)? {
            Some(t) => self.text(&t, &loc.child("type"))?.to_utf8(),
            None => return self.untyped_block(part, &acc, loc),
        };
        // A block without the field its type requires is marked (see `Block::malformed`).
        let text_field = |this: &mut Self, field: &Bound<'py, PyString>, kind: BlockKind| {
            let mut b = Block::new(kind);
            match acc.get(field, loc)? {
                Some(v) => {
                    let t = this.text(&v, &loc.child(&field.to_string_lossy()))?;
                    b.texts.push(Piece::Borrowed(t));
                }
                None => b.malformed = Some(field_name(field)),
            }
            Ok::<_, PyErr>(b)
        };
        let requires = |mut b: Block<'static>, field: &Bound<'py, PyString>| {
            if b.malformed.is_none() && acc.get(field, loc)?.is_none() {
                b.malformed = Some(field_name(field));
            }
            Ok::<_, PyErr>(b)
        };
        Ok(match &*ty {
            "text" => text_field(self, intern!(py, "text"), BlockKind::Text)?,
            "input_text" | "output_text" => {
                self.hints.responses = true;
                text_field(self, intern!(py, "text"), BlockKind::Text)?
            }
            "refusal" => text_field(self, intern!(py, "refusal"), BlockKind::Refusal)?,
            "image_url" => requires(self.image_block(&acc, &ty, loc), intern!(py, "image_url"))?,
            "image" => requires(self.image_block(&acc, &ty, loc), intern!(py, "source"))?,
            "input_image" => {
                self.hints.responses = true;
                self.image_block(&acc, &ty, loc)
            }
            "input_audio" => {
                let mut b = Block::new(BlockKind::Audio);
                b.images = 1;
                requires(b, intern!(py, "input_audio"))?
            }
            "file" | "document" | "input_file" => {
                if &*ty == "input_file" {
                    self.hints.responses = true;
                }
                let mut b = Block::new(BlockKind::Document);
                self.strings(part, &mut b.texts, loc, 0)?;
                if b.texts.iter().all(|t| t.text().char_len() < 64) {
                    // A binary or referenced document: its size is not known here.
                    b.texts.clear();
                    b.images = 1;
                }
                requires(
                    b,
                    match &*ty {
                        "file" => intern!(py, "file"),
                        "input_file" => intern!(py, "type"),
                        _ => intern!(py, "source"),
                    },
                )?
            }
            "thinking" => {
                self.hints.anthropic = true;
                text_field(self, intern!(py, "thinking"), BlockKind::Thinking)?
            }
            "compaction" => {
                // Anthropic's compaction block: an earlier summary by the provider (see
                // `crate::formats::anthropic_compaction`); its readable `content` may be absent.
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::Compaction);
                if let Some(c) = acc.get(intern!(py, "content"), loc)? {
                    b.texts
                        .push(Piece::Borrowed(self.text(&c, &loc.child("content"))?));
                }
                b.opaque = true;
                b
            }
            "redacted_thinking" => {
                self.hints.anthropic = true;
                text_field(self, intern!(py, "data"), BlockKind::RedactedThinking)?
            }
            "tool_use" => {
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::ToolCall);
                b.id = self.opt_str(&acc, intern!(py, "id"), loc)?;
                b.name = self.opt_str(&acc, intern!(py, "name"), loc)?;
                if let Some(input) = acc.get(intern!(py, "input"), loc)? {
                    let mut json = String::new();
                    self.json(&input, &mut json, &loc.child("input"), 0)?;
                    b.texts.push(Piece::Owned(json));
                } else {
                    b.texts.push(Piece::Owned("{}".to_owned()));
                    b.malformed = Some("input");
                }
                if b.name.is_none() {
                    b.malformed = Some("name");
                }
                if b.id.is_none() {
                    b.malformed = Some("id");
                }
                unpaired_if_malformed(b)
            }
            "tool_result" => {
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::ToolResult);
                b.id = self.opt_str(&acc, intern!(py, "tool_use_id"), loc)?;
                if let Some(e) = acc.get(intern!(py, "is_error"), loc)? {
                    b.is_error = e.is_truthy()?;
                }
                if let Some(c) = acc.get(intern!(py, "content"), loc)? {
                    self.result_content(&c, &mut b, &loc.child("content"))?;
                }
                if b.id.is_none() {
                    b.malformed = Some("tool_use_id");
                }
                unpaired_if_malformed(b)
            }
            _ => {
                // Server-tool blocks and types we do not know: passed through, counted as text.
                let mut b = Block::new(BlockKind::Other);
                self.strings(part, &mut b.texts, loc, 0)?;
                b
            }
        })
    }
}

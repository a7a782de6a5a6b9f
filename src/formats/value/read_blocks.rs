//! Message content and its blocks (see `python/extract/blocks.rs`, which this mirrors): a
//! string or a list of parts (OpenAI) / blocks (Anthropic), each read by its `type`; a block
//! without `type`; a tool result's content; image sizes from base64 data.

use super::read::type_name;
use super::read::{get, truthy, Reader, MAX_DEPTH};
use crate::formats::loc::{Loc, ReadError};
use crate::image::{base64_image_size, data_url_size, sized, Provider, SizedImage};
use crate::message::{Block, BlockKind, Origin, Piece};
use serde_json::{Map, Value};

type Res<T> = Result<T, ReadError>;

/// The name of a required field, for `Block::malformed`.
fn field_name(field: &str) -> &'static str {
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
    .find(|name| *name == field)
    .unwrap_or("a required field")
}

/// A malformed call or result pairs with nothing: it is read as an unknown block.
fn unpaired_if_malformed(mut b: Block<'_>) -> Block<'_> {
    if b.malformed.is_some() {
        b.kind = BlockKind::Other;
    }
    b
}

impl Reader {
    /// Message content: a string, or a list of parts/blocks.
    pub(super) fn content<'a>(
        &mut self,
        c: &'a Value,
        blocks: &mut Vec<Block<'a>>,
        loc: &Loc<'_>,
    ) -> Res<()> {
        match c {
            Value::String(_) => {
                blocks.push(Block::text(Piece::Borrowed(self.text(c, loc)?)));
                Ok(())
            }
            Value::Array(parts) => {
                for (k, part) in parts.iter().enumerate() {
                    let mut b = self.block(part, &loc.item(k))?;
                    b.origin = Origin::Part(k);
                    blocks.push(b);
                }
                Ok(())
            }
            other => Err(loc.error(format!(
                "expected str, None or a list of parts, got {}",
                type_name(other)
            ))),
        }
    }

    /// One content part (OpenAI) or block (Anthropic).
    pub(super) fn block<'a>(&mut self, part: &'a Value, loc: &Loc<'_>) -> Res<Block<'a>> {
        let obj = self.object(part, loc)?;
        let ty = match get(obj, "type") {
            Some(t) => self.text(t, &loc.child("type"))?,
            None => return self.untyped_block(part, obj, loc),
        };
        let ty = ty.to_utf8();
        let text_field = |this: &Self, field: &str, kind: BlockKind| -> Res<Block<'a>> {
            let mut b = Block::new(kind);
            match get(obj, field) {
                Some(v) => b
                    .texts
                    .push(Piece::Borrowed(this.text(v, &loc.child(field))?)),
                None => b.malformed = Some(field_name(field)),
            }
            Ok(b)
        };
        let requires = |mut b: Block<'a>, field: &str| -> Block<'a> {
            if b.malformed.is_none() && get(obj, field).is_none() {
                b.malformed = Some(field_name(field));
            }
            b
        };
        Ok(match &*ty {
            "text" => text_field(self, "text", BlockKind::Text)?,
            "input_text" | "output_text" => {
                self.hints.responses = true;
                text_field(self, "text", BlockKind::Text)?
            }
            "refusal" => text_field(self, "refusal", BlockKind::Refusal)?,
            "image_url" => requires(image_block(obj, &ty), "image_url"),
            "image" => requires(image_block(obj, &ty), "source"),
            "input_image" => {
                self.hints.responses = true;
                image_block(obj, &ty)
            }
            "input_audio" => {
                let mut b = Block::new(BlockKind::Audio);
                b.images = 1;
                requires(b, "input_audio")
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
                        "file" => "file",
                        "input_file" => "type",
                        _ => "source",
                    },
                )
            }
            "thinking" => {
                self.hints.anthropic = true;
                text_field(self, "thinking", BlockKind::Thinking)?
            }
            "compaction" => {
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::Compaction);
                if let Some(c) = get(obj, "content") {
                    b.texts
                        .push(Piece::Borrowed(self.text(c, &loc.child("content"))?));
                }
                b.opaque = true;
                b
            }
            "redacted_thinking" => {
                self.hints.anthropic = true;
                text_field(self, "data", BlockKind::RedactedThinking)?
            }
            "tool_use" => {
                self.hints.anthropic = true;
                let mut b = Block::new(BlockKind::ToolCall);
                b.id = self.opt_str(obj, "id", loc)?;
                b.name = self.opt_str(obj, "name", loc)?;
                if let Some(input) = get(obj, "input") {
                    let mut json = String::new();
                    self.json(input, &mut json, &loc.child("input"), 0)?;
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
                b.id = self.opt_str(obj, "tool_use_id", loc)?;
                if let Some(e) = get(obj, "is_error") {
                    b.is_error = truthy(e);
                }
                if let Some(c) = get(obj, "content") {
                    self.result_content(c, &mut b, &loc.child("content"))?;
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

    /// A content block without `type`: a text block when it has a string `text` (the repair
    /// pass adds the type), else an unknown block; both marked malformed.
    fn untyped_block<'a>(
        &mut self,
        part: &'a Value,
        obj: &'a Map<String, Value>,
        loc: &Loc<'_>,
    ) -> Res<Block<'a>> {
        let mut b = match get(obj, "text").filter(|v| v.is_string()) {
            Some(v) => {
                let mut b = Block::new(BlockKind::Text);
                b.texts
                    .push(Piece::Borrowed(self.text(v, &loc.child("text"))?));
                b
            }
            None => {
                let mut b = Block::new(BlockKind::Other);
                self.strings(part, &mut b.texts, loc, 0)?;
                b
            }
        };
        b.malformed = Some("type");
        Ok(b)
    }

    /// A tool result's content: a string, or text/image blocks.
    pub(super) fn result_content<'a>(
        &mut self,
        c: &'a Value,
        b: &mut Block<'a>,
        loc: &Loc<'_>,
    ) -> Res<()> {
        if self.result_depth >= MAX_DEPTH {
            return Err(loc.error("tool results nested too deeply (or cyclic)"));
        }
        self.result_depth += 1;
        let mut inner = Vec::new();
        let r = self.content(c, &mut inner, loc);
        self.result_depth -= 1;
        r?;
        for ib in inner {
            b.images += ib.images;
            b.image_sizes.extend(ib.image_sizes);
            b.texts.extend(ib.texts);
        }
        Ok(())
    }
}

/// An image block of type `ty`, with its size when its data is in the block.
fn image_block<'a>(obj: &Map<String, Value>, ty: &str) -> Block<'a> {
    let mut b = Block::new(BlockKind::Image);
    b.image_sizes.extend(image_of(obj, ty));
    b
}

fn url_size(v: &Value) -> Option<crate::image::ImageSize> {
    data_url_size(v.as_str()?.as_bytes())
}

fn image_of(obj: &Map<String, Value>, ty: &str) -> Option<SizedImage> {
    let detail =
        |o: &Map<String, Value>| get(o, "detail").and_then(Value::as_str).map(str::to_owned);
    match ty {
        "image_url" => {
            let v = get(obj, "image_url")?;
            if v.is_string() {
                return sized(url_size(v), None, Provider::OpenAi);
            }
            let inner = v.as_object()?;
            let url = get(inner, "url")?;
            sized(url_size(url), detail(inner).as_deref(), Provider::OpenAi)
        }
        "input_image" => {
            let url = get(obj, "image_url")?;
            sized(url_size(url), detail(obj).as_deref(), Provider::OpenAi)
        }
        "image" => {
            let inner = get(obj, "source")?.as_object()?;
            if get(inner, "type")?.as_str()? != "base64" {
                return None;
            }
            let data = get(inner, "data")?;
            sized(
                base64_image_size(data.as_str()?.as_bytes()),
                None,
                Provider::Anthropic,
            )
        }
        _ => None,
    }
}

//! Reading message content into the core's blocks, once for both readers (generic over
//! [`Source`]): a string, or a list of Chat Completions parts, Anthropic blocks or Responses
//! `input_*` / `output_*` parts, each read by its `type`; a block without `type`; a tool
//! result's content; the separate system prompt. Every message with a role comes through
//! [`content`] (`openai/read.rs`), and so do a Responses `function_call_output`'s output and the
//! binding's LangChain blocks in the wire formats' shapes ([`block`]).
//!
//! Design note: a block without the field its type requires is marked (`Block::malformed`), and
//! a malformed call or result is read as an unknown block that pairs with nothing (counted,
//! reported, dropped by the repair pass). Images: an image whose bytes are in the block (a
//! base64 data URL, or an Anthropic `source` of type `base64`) gets its size from its header
//! (`crate::image`, read by the source in place: [`Source::data_url_size`],
//! [`Source::base64_size`]); one given by URL or file id has no size and counts `image_tokens`.
//! Reading a size never fails a request: an odd field is an image of unknown size. The format
//! hints each block gives (`anthropic` for Anthropic's own types, `responses` for `input_*` /
//! `output_*`) are noted as the block is read.

use crate::formats::loc::Loc;
use crate::formats::source::{opt_string, text, Source};
use crate::image::{sized, Provider, SizedImage};
use crate::message::{Block, BlockKind, Origin, Piece};

/// Tool results inside tool results deeper than this are refused (it guards against cycles:
/// a self-containing block would otherwise recurse until the stack overflows).
pub const MAX_RESULT_DEPTH: usize = 64;

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

/// Message content: a string, or a list of parts / blocks, appended to `blocks`.
pub fn content<'a, S: Source<'a>>(
    src: &mut S,
    c: &S::Node,
    blocks: &mut Vec<Block<'a>>,
    loc: &Loc<'_>,
) -> Result<(), S::Error> {
    if let Some(t) = src.str(c)? {
        blocks.push(Block::text(Piece::Borrowed(t)));
        return Ok(());
    }
    let Some(parts) = src.list(c) else {
        let t = src.type_name(c);
        return Err(src.error(
            loc,
            &format!("expected str, None or a list of parts, got {t}"),
        ));
    };
    blocks.reserve(parts.len());
    for (k, part) in parts.iter().enumerate() {
        let mut b = block(src, part, &loc.item(k))?;
        b.origin = Origin::Part(k);
        blocks.push(b);
    }
    Ok(())
}

/// A block with a text field `field` (marked malformed without it).
fn text_field<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    field: &'static str,
    kind: BlockKind,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let mut b = Block::new(kind);
    match src.field(obj, field, loc)? {
        Some(v) => {
            let t = text(src, &v, &loc.child(field))?;
            b.texts.push(Piece::Borrowed(t));
        }
        None => b.malformed = Some(field_name(field)),
    }
    Ok(b)
}

/// `b`, marked malformed when `obj` lacks `field` (and nothing else was found missing).
fn requires<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    mut b: Block<'a>,
    field: &'static str,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    if b.malformed.is_none() && src.field(obj, field, loc)?.is_none() {
        b.malformed = Some(field_name(field));
    }
    Ok(b)
}

/// One content part (Chat Completions, Responses) or block (Anthropic).
pub fn block<'a, S: Source<'a>>(
    src: &mut S,
    part: &S::Node,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let obj = src.object(part, loc)?;
    // Read in place (kept alive like every borrowed text): no copy of the type name.
    let ty = match src.field(&obj, "type", loc)? {
        Some(t) => text(src, &t, &loc.child("type"))?,
        None => return untyped_block(src, part, &obj, loc),
    };
    let ty = ty.to_utf8();
    Ok(match &*ty {
        "text" => text_field(src, &obj, "text", BlockKind::Text, loc)?,
        "input_text" | "output_text" => {
            src.hints().responses = true;
            text_field(src, &obj, "text", BlockKind::Text, loc)?
        }
        "refusal" => text_field(src, &obj, "refusal", BlockKind::Refusal, loc)?,
        "image_url" => {
            let b = image_block(src, &obj, &ty, loc);
            requires(src, &obj, b, "image_url", loc)?
        }
        "image" => {
            let b = image_block(src, &obj, &ty, loc);
            requires(src, &obj, b, "source", loc)?
        }
        "input_image" => {
            src.hints().responses = true;
            image_block(src, &obj, &ty, loc)
        }
        "input_audio" => {
            let mut b = Block::new(BlockKind::Audio);
            b.images = 1;
            requires(src, &obj, b, "input_audio", loc)?
        }
        "file" | "document" | "input_file" => {
            if &*ty == "input_file" {
                src.hints().responses = true;
            }
            let mut b = Block::new(BlockKind::Document);
            src.strings(part, &mut b.texts, loc)?;
            if b.texts.iter().all(|t| t.text().char_len() < 64) {
                // A binary or referenced document: its size is not known here.
                b.texts.clear();
                b.images = 1;
            }
            let field = match &*ty {
                "file" => "file",
                "input_file" => "type",
                _ => "source",
            };
            requires(src, &obj, b, field, loc)?
        }
        "thinking" => {
            src.hints().anthropic = true;
            text_field(src, &obj, "thinking", BlockKind::Thinking, loc)?
        }
        "compaction" => {
            // Anthropic's compaction block: an earlier summary by the provider (see
            // `crate::formats::anthropic_compaction`); its readable `content` may be absent.
            src.hints().anthropic = true;
            let mut b = Block::new(BlockKind::Compaction);
            if let Some(c) = src.field(&obj, "content", loc)? {
                let t = text(src, &c, &loc.child("content"))?;
                b.texts.push(Piece::Borrowed(t));
            }
            b.opaque = true;
            b
        }
        "redacted_thinking" => {
            src.hints().anthropic = true;
            text_field(src, &obj, "data", BlockKind::RedactedThinking, loc)?
        }
        "tool_use" => {
            src.hints().anthropic = true;
            let mut b = Block::new(BlockKind::ToolCall);
            b.id = opt_string(src, &obj, "id", loc)?;
            b.name = opt_string(src, &obj, "name", loc)?;
            if let Some(input) = src.field(&obj, "input", loc)? {
                let mut json = String::new();
                src.json(&input, &mut json, &loc.child("input"))?;
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
            src.hints().anthropic = true;
            let mut b = Block::new(BlockKind::ToolResult);
            b.id = opt_string(src, &obj, "tool_use_id", loc)?;
            if let Some(e) = src.field(&obj, "is_error", loc)? {
                b.is_error = src.truthy(&e)?;
            }
            if let Some(c) = src.field(&obj, "content", loc)? {
                result_content(src, &c, &mut b, &loc.child("content"))?;
            }
            if b.id.is_none() {
                b.malformed = Some("tool_use_id");
            }
            unpaired_if_malformed(b)
        }
        _ => {
            // Server-tool blocks and types we do not know: passed through, counted as text.
            let mut b = Block::new(BlockKind::Other);
            src.strings(part, &mut b.texts, loc)?;
            b
        }
    })
}

/// A content block without `type`: a text block when it has a string `text` (the repair pass
/// adds the type), else an unknown block; both marked malformed.
fn untyped_block<'a, S: Source<'a>>(
    src: &mut S,
    part: &S::Node,
    obj: &S::Obj,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let t = match src.field(obj, "text", loc)? {
        Some(v) => src.str(&v)?,
        None => None,
    };
    let mut b = match t {
        Some(t) => {
            let mut b = Block::new(BlockKind::Text);
            b.texts.push(Piece::Borrowed(t));
            b
        }
        None => {
            let mut b = Block::new(BlockKind::Other);
            src.strings(part, &mut b.texts, loc)?;
            b
        }
    };
    b.malformed = Some("type");
    Ok(b)
}

/// A tool result's content (a string, or text and image blocks), folded into `b`.
pub fn result_content<'a, S: Source<'a>>(
    src: &mut S,
    c: &S::Node,
    b: &mut Block<'a>,
    loc: &Loc<'_>,
) -> Result<(), S::Error> {
    if *src.result_depth() >= MAX_RESULT_DEPTH {
        return Err(src.error(loc, "tool results nested too deeply (or cyclic)"));
    }
    *src.result_depth() += 1;
    let mut inner = Vec::new();
    let r = content(src, c, &mut inner, loc);
    *src.result_depth() -= 1;
    r?;
    for ib in inner {
        b.images += ib.images;
        b.image_sizes.extend(ib.image_sizes);
        b.texts.extend(ib.texts);
    }
    Ok(())
}

/// The separate system prompt of a message-list format: a string, or a list of text blocks.
pub fn system<'a, S: Source<'a>>(src: &mut S, v: &S::Node) -> Result<Vec<Piece<'a>>, S::Error> {
    let loc = Loc::root(None, "system");
    let mut blocks = Vec::new();
    content(src, v, &mut blocks, &loc)?;
    Ok(blocks.into_iter().flat_map(|b| b.texts).collect())
}

/// Tool definitions (the items of the request's `tools`), each as compact JSON.
pub fn tools<'a, S: Source<'a>>(
    src: &mut S,
    items: &[S::Node],
) -> Result<Vec<Piece<'a>>, S::Error> {
    let loc = Loc::root(None, "tools");
    let mut out = Vec::with_capacity(items.len());
    for (k, t) in items.iter().enumerate() {
        let mut json = String::new();
        src.json(t, &mut json, &loc.item(k))?;
        out.push(Piece::Owned(json));
    }
    Ok(out)
}

/// An image block of type `ty`, with its size when its data is in the block.
fn image_block<'a, S: Source<'a>>(src: &mut S, obj: &S::Obj, ty: &str, loc: &Loc<'_>) -> Block<'a> {
    let mut b = Block::new(BlockKind::Image);
    b.image_sizes.extend(image_of(src, obj, ty, loc));
    b
}

/// Field `key` of `obj`, `None` when it cannot be read (an image's size never fails a request).
fn get<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    key: &'static str,
    loc: &Loc<'_>,
) -> Option<S::Node> {
    src.field(obj, key, loc).ok().flatten()
}

/// A string field as UTF-8, `None` when absent or not a string.
fn get_str<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    key: &'static str,
    loc: &Loc<'_>,
) -> Option<String> {
    let v = get(src, obj, key, loc)?;
    Some(src.str(&v).ok()??.to_utf8().into_owned())
}

fn image_of<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    ty: &str,
    loc: &Loc<'_>,
) -> Option<SizedImage> {
    match ty {
        "image_url" => {
            let v = get(src, obj, "image_url", loc)?;
            if src.str(&v).ok()?.is_some() {
                return sized(src.data_url_size(&v), None, Provider::OpenAi);
            }
            let inner = src.object(&v, loc).ok()?;
            let url = get(src, &inner, "url", loc)?;
            let detail = get_str(src, &inner, "detail", loc);
            sized(src.data_url_size(&url), detail.as_deref(), Provider::OpenAi)
        }
        "input_image" => {
            let url = get(src, obj, "image_url", loc)?;
            let detail = get_str(src, obj, "detail", loc);
            sized(src.data_url_size(&url), detail.as_deref(), Provider::OpenAi)
        }
        "image" => {
            let source = get(src, obj, "source", loc)?;
            let inner = src.object(&source, loc).ok()?;
            if get_str(src, &inner, "type", loc)? != "base64" {
                return None;
            }
            let data = get(src, &inner, "data", loc)?;
            sized(src.base64_size(&data), None, Provider::Anthropic)
        }
        _ => None,
    }
}

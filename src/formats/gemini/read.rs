//! Reading Gemini `contents` into the core's view, once for both readers (generic over
//! [`Source`]: the Rust API's JSON values and the binding's Python objects, dicts or
//! `google.genai.types.Content` / `types.Part` read by attribute).
//!
//! Design note: a message is read as Gemini when `format="gemini"` is given, or, detected, when
//! it has `parts` and no `content` (no other format has such messages, so the detection of the
//! others cannot change) — for SDK objects, when its type is a `google` `Content` (the type's
//! name and module are read from the type, so an OpenAI or Anthropic SDK object costs no failed
//! attribute lookup). Roles: `user` (also when absent, as the API defaults it) and `model`
//! (read as the assistant); any other role is kept for validation to report. Parts: `text`
//! (with `thought: true` a thinking block), `function_call` (its `args` as compact JSON),
//! `function_response` (its `response` as compact JSON; images in its `parts` counted),
//! `inline_data` (an image when its MIME type is `image/*`, else a document of unknown size),
//! `file_data` (a document of unknown size), `executable_code` / `code_execution_result` and any
//! other part (passed through, their strings counted). A part's `thought_signature` marks its
//! block `signed`: the planner never edits or drops it alone. Keys read by key (dicts, JSON)
//! may be snake_case (the SDK's) or camelCase (the REST API's). Ids are paired after the whole
//! list is read ([`super::pair_ids`]).

use crate::formats::loc::Loc;
use crate::formats::source::{list, opt_string_why, text_why, Source};
use crate::message::{Block, BlockKind, Format, Message, Origin, Piece, Role};

/// Why a message was read as Gemini, for error texts.
const WHY: &str = "read as Gemini contents: the message has `parts`";

/// The fields of an SDK `types.Part` other than text, calls, responses and media, whose strings
/// are counted (a dict part's strings are all counted).
const OTHER_FIELDS: [&str; 4] = [
    "executable_code",
    "code_execution_result",
    "tool_call",
    "tool_response",
];

/// Whether `obj` is read as a Gemini `Content` (see the design note). Under a forced format it
/// also notes whether the message has the shape of one (the readers' `misfit`).
pub fn is_gemini<'a, S: Source<'a>>(src: &mut S, obj: &S::Obj) -> bool {
    let shaped = match src.sdk_type_is(obj, "google", "Content") {
        Some(is) => is,
        None => {
            !src.has_key(obj, "content").unwrap_or(true)
                && src.has_key(obj, "parts").unwrap_or(false)
        }
    };
    let (forced, shapes) = src.forced();
    let Some(forced) = forced else {
        return shaped;
    };
    shapes.gemini |= shaped;
    shapes.other |= !shaped;
    forced == Format::Gemini
}

/// Read one Gemini `Content`.
pub fn message<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    index: usize,
) -> Result<Message<'a>, S::Error> {
    let loc = Loc::root(Some(index), "");
    src.hints().gemini = true;
    let role = match src.field(obj, "role", &loc)? {
        None => Role::User,
        Some(r) => match &*text(src, &r, &loc.child("role"))?.text().to_utf8() {
            "user" => Role::User,
            "model" => Role::Assistant,
            // Chat Completions' name for the model: not a Gemini role.
            "assistant" => Role::Other,
            other => Role::parse(other),
        },
    };
    let mut blocks = Vec::new();
    let ploc = loc.child("parts");
    if let Some(parts) = src.field(obj, "parts", &loc)? {
        let Some(items) = src.list(&parts) else {
            let t = src.type_name(&parts);
            return Err(src.error(&ploc, &format!("expected a list of parts, got {t} ({WHY})")));
        };
        blocks.reserve(items.len());
        for (k, part) in items.iter().enumerate() {
            let mut b = self::part(src, part, &ploc.item(k))?;
            b.origin = Origin::Part(k);
            blocks.push(b);
        }
    }
    let mut m = Message::new(role, blocks);
    m.gemini = true;
    Ok(m)
}

/// Gemini's `system_instruction`: a string, a `Content` (its parts), a `Part`, or a list of
/// strings and parts; each part's strings counted.
pub fn system<'a, S: Source<'a>>(src: &mut S, v: &S::Node) -> Result<Vec<Piece<'a>>, S::Error> {
    let loc = Loc::root(None, "system_instruction");
    let mut out = Vec::new();
    if let Some(s) = src.str(v)? {
        out.push(Piece::Borrowed(s));
        return Ok(out);
    }
    let items = match src.list(v) {
        Some(items) => items,
        None => {
            let obj = src.object(v, &loc)?;
            match src.field(&obj, "parts", &loc)? {
                Some(parts) => list(src, &parts, &loc.child("parts"))?,
                None => vec![v.clone()],
            }
        }
    };
    for (k, item) in items.iter().enumerate() {
        if let Some(s) = src.str(item)? {
            out.push(Piece::Borrowed(s));
            continue;
        }
        let b = part(src, item, &loc.item(k))?;
        out.extend(b.texts);
    }
    Ok(out)
}

/// A string, or an error naming why the message was read as Gemini.
fn text<'a, S: Source<'a>>(src: &mut S, v: &S::Node, loc: &Loc<'_>) -> Result<Piece<'a>, S::Error> {
    text_why(src, v, loc, Some(WHY)).map(Piece::Borrowed)
}

/// Field `snake`, or (read by key) its camelCase twin.
fn field2<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    snake: &'static str,
    camel: &'static str,
    loc: &Loc<'_>,
) -> Result<Option<S::Node>, S::Error> {
    match src.field(obj, snake, loc)? {
        None if src.by_key(obj) => src.field(obj, camel, loc),
        v => Ok(v),
    }
}

/// A string field, copied (an id, a name).
fn string<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    key: &'static str,
    loc: &Loc<'_>,
) -> Result<Option<String>, S::Error> {
    opt_string_why(src, obj, key, loc, Some(WHY))
}

/// One Gemini `Part`.
fn part<'a, S: Source<'a>>(
    src: &mut S,
    part: &S::Node,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let obj = src.object(part, loc)?;
    let signed = field2(src, &obj, "thought_signature", "thoughtSignature", loc)?.is_some();
    let mut b = part_data(src, part, &obj, loc)?;
    b.signed = signed;
    Ok(b)
}

fn part_data<'a, S: Source<'a>>(
    src: &mut S,
    part: &S::Node,
    obj: &S::Obj,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    if let Some(t) = src.field(obj, "text", loc)? {
        let thought = match src.field(obj, "thought", loc)? {
            Some(v) => src.truthy(&v)?,
            None => false,
        };
        let mut b = Block::new(if thought {
            BlockKind::Thinking
        } else {
            BlockKind::Text
        });
        b.texts.push(text(src, &t, &loc.child("text"))?);
        return Ok(b);
    }
    if let Some(fc) = field2(src, obj, "function_call", "functionCall", loc)? {
        let floc = loc.child("function_call");
        let f = src.object(&fc, &floc)?;
        let mut b = Block::new(BlockKind::ToolCall);
        b.id = string(src, &f, "id", &floc)?;
        b.name = string(src, &f, "name", &floc)?;
        let mut json = String::new();
        match src.field(&f, "args", &floc)? {
            Some(args) => src.json(&args, &mut json, &floc.child("args"))?,
            None => json.push_str("{}"),
        }
        b.texts.push(Piece::Owned(json));
        if b.name.is_none() {
            b.malformed = Some("name");
            b.kind = BlockKind::Other;
        }
        return Ok(b);
    }
    if let Some(fr) = field2(src, obj, "function_response", "functionResponse", loc)? {
        let floc = loc.child("function_response");
        let f = src.object(&fr, &floc)?;
        let mut b = Block::new(BlockKind::ToolResult);
        b.id = string(src, &f, "id", &floc)?;
        b.name = string(src, &f, "name", &floc)?;
        match src.field(&f, "response", &floc)? {
            // `{"output": text}` / `{"error": text}` (the SDK's convention, and what the writers
            // make of an edited or synthetic response): the text is counted, read in place, so
            // that a rewritten response counts as the planner counted it.
            Some(r) => match lone_output(src, &r)? {
                Some(t) => b.texts.push(t),
                None => {
                    let mut json = String::new();
                    src.json(&r, &mut json, &floc.child("response"))?;
                    b.texts.push(Piece::Owned(json));
                }
            },
            None => b.texts.push(Piece::Owned("{}".to_owned())),
        }
        if let Some(parts) = src.field(&f, "parts", &floc)? {
            // Multimodal responses: each part an image or a file of unknown size.
            let n = list(src, &parts, &floc.child("parts"))?.len();
            b.images += u32::try_from(n).unwrap_or(u32::MAX);
        }
        if b.name.is_none() {
            b.malformed = Some("name");
            b.kind = BlockKind::Other;
        }
        return Ok(b);
    }
    if let Some(blob) = field2(src, obj, "inline_data", "inlineData", loc)? {
        let bloc = loc.child("inline_data");
        let bo = src.object(&blob, &bloc)?;
        let mime = match field2(src, &bo, "mime_type", "mimeType", &bloc)? {
            Some(m) => src.display(&m)?,
            None => String::new(),
        };
        let mut b = Block::new(if mime.starts_with("image/") {
            BlockKind::Image
        } else {
            BlockKind::Document
        });
        // An image's size is read where every format's images are; other media count as one
        // image of unknown size, as binary documents do.
        b.images = 1;
        return Ok(b);
    }
    if field2(src, obj, "file_data", "fileData", loc)?.is_some() {
        let mut b = Block::new(BlockKind::Document);
        b.images = 1;
        return Ok(b);
    }
    // `executable_code`, `code_execution_result`, server-side tool parts and types we do not
    // know: passed through, their strings counted.
    let mut b = Block::new(BlockKind::Other);
    match src.dict_empty(obj) {
        Some(empty) => {
            if empty {
                b.malformed = Some("data");
            }
            src.strings(part, &mut b.texts, loc)?;
        }
        None => {
            // An SDK `types.Part` (or another mapping): its other data fields.
            let mut any = false;
            for key in OTHER_FIELDS {
                if let Some(v) = src.field(obj, key, loc)? {
                    any = true;
                    let d = src.plain(v)?;
                    src.strings(&d, &mut b.texts, &loc.child(key))?;
                }
            }
            if !any {
                b.malformed = Some("data");
            }
        }
    }
    Ok(b)
}

/// The text of a response that is exactly `{"output": str}` or `{"error": str}`.
fn lone_output<'a, S: Source<'a>>(src: &mut S, r: &S::Node) -> Result<Option<Piece<'a>>, S::Error> {
    match src.only_item(r, &["output", "error"]) {
        Some(v) => Ok(src.str(&v)?.map(Piece::Borrowed)),
        None => Ok(None),
    }
}

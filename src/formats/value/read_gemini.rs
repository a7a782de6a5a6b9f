//! Reading Gemini `contents` (see `python/extract/gemini.rs`, which this mirrors, for the
//! design note): a message with `parts` and no `content`, roles `user`/`model`, parts `text`
//! (`thought`), `function_call`, `function_response`, `inline_data`, `file_data` and others;
//! snake_case or camelCase keys.

use super::loc::{type_name, Loc, ReadError};
use super::read::{get, truthy, Reader};
use crate::message::{Block, BlockKind, Format, Message, Origin, Piece, Role};
use crate::text::Text;
use serde_json::{Map, Value};

type Res<T> = Result<T, ReadError>;

const WHY: &str = "read as Gemini contents: the message has `parts`";

/// `key`, or its camelCase twin.
fn field2<'a>(obj: &'a Map<String, Value>, snake: &str, camel: &str) -> Option<&'a Value> {
    get(obj, snake).or_else(|| get(obj, camel))
}

impl Reader {
    /// Whether a message is read as a Gemini `Content` (noting its shape under a forced format).
    pub(super) fn is_gemini(&mut self, obj: &Map<String, Value>) -> bool {
        let shaped = !obj.contains_key("content") && obj.contains_key("parts");
        let Some(forced) = self.format else {
            return shaped;
        };
        self.shapes.gemini |= shaped;
        self.shapes.other |= !shaped;
        forced == Format::Gemini
    }

    fn gtext<'a>(&self, v: &'a Value, loc: &Loc<'_>) -> Res<Piece<'a>> {
        match v {
            Value::String(s) => Ok(Piece::Borrowed(Text::Utf8(s))),
            other => Err(loc.err(format!("expected str, got {} ({WHY})", type_name(other)))),
        }
    }

    fn gemini_str(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        loc: &Loc<'_>,
    ) -> Res<Option<String>> {
        match get(obj, key) {
            None => Ok(None),
            Some(v) => Ok(Some(
                self.gtext(v, &loc.child(key))?
                    .text()
                    .to_utf8()
                    .into_owned(),
            )),
        }
    }

    /// Read one Gemini `Content`.
    pub(super) fn gemini_message<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        index: usize,
    ) -> Res<Message<'a>> {
        let loc = Loc::root(Some(index), "");
        self.hints.gemini = true;
        let role = match get(obj, "role") {
            None => Role::User,
            Some(r) => match &*self.gtext(r, &loc.child("role"))?.text().to_utf8() {
                "user" => Role::User,
                "model" => Role::Assistant,
                "assistant" => Role::Other,
                other => Role::parse(other),
            },
        };
        let mut blocks = Vec::new();
        let ploc = loc.child("parts");
        if let Some(parts) = get(obj, "parts") {
            let Value::Array(items) = parts else {
                return Err(ploc.err(format!(
                    "expected a list of parts, got {} ({WHY})",
                    type_name(parts)
                )));
            };
            blocks.reserve(items.len());
            for (k, part) in items.iter().enumerate() {
                let mut b = self.gemini_part(part, &ploc.item(k))?;
                b.origin = Origin::Part(k);
                blocks.push(b);
            }
        }
        let mut m = Message::new(role, blocks);
        m.gemini = true;
        Ok(m)
    }

    /// One Gemini `Part`.
    fn gemini_part<'a>(&mut self, part: &'a Value, loc: &Loc<'_>) -> Res<Block<'a>> {
        let obj = self.object(part, loc)?;
        let signed = field2(obj, "thought_signature", "thoughtSignature").is_some();
        let mut b = self.gemini_part_data(part, obj, loc)?;
        b.signed = signed;
        Ok(b)
    }

    fn gemini_part_data<'a>(
        &mut self,
        part: &'a Value,
        obj: &'a Map<String, Value>,
        loc: &Loc<'_>,
    ) -> Res<Block<'a>> {
        if let Some(t) = get(obj, "text") {
            let thought = get(obj, "thought").is_some_and(truthy);
            let mut b = Block::new(if thought {
                BlockKind::Thinking
            } else {
                BlockKind::Text
            });
            b.texts.push(self.gtext(t, &loc.child("text"))?);
            return Ok(b);
        }
        if let Some(fc) = field2(obj, "function_call", "functionCall") {
            let floc = loc.child("function_call");
            let f = self.object(fc, &floc)?;
            let mut b = Block::new(BlockKind::ToolCall);
            b.id = self.gemini_str(f, "id", &floc)?;
            b.name = self.gemini_str(f, "name", &floc)?;
            let mut json = String::new();
            match get(f, "args") {
                Some(args) => self.json(args, &mut json, &floc.child("args"), 0)?,
                None => json.push_str("{}"),
            }
            b.texts.push(Piece::Owned(json));
            if b.name.is_none() {
                b.malformed = Some("name");
                b.kind = BlockKind::Other;
            }
            return Ok(b);
        }
        if let Some(fr) = field2(obj, "function_response", "functionResponse") {
            let floc = loc.child("function_response");
            let f = self.object(fr, &floc)?;
            let mut b = Block::new(BlockKind::ToolResult);
            b.id = self.gemini_str(f, "id", &floc)?;
            b.name = self.gemini_str(f, "name", &floc)?;
            match get(f, "response") {
                Some(r) => match lone_output(r) {
                    Some(t) => b.texts.push(Piece::Borrowed(t)),
                    None => {
                        let mut json = String::new();
                        self.json(r, &mut json, &floc.child("response"), 0)?;
                        b.texts.push(Piece::Owned(json));
                    }
                },
                None => b.texts.push(Piece::Owned("{}".to_owned())),
            }
            if let Some(parts) = get(f, "parts") {
                let n = self.sequence(parts, &floc.child("parts"))?.len();
                b.images += u32::try_from(n).unwrap_or(u32::MAX);
            }
            if b.name.is_none() {
                b.malformed = Some("name");
                b.kind = BlockKind::Other;
            }
            return Ok(b);
        }
        if let Some(blob) = field2(obj, "inline_data", "inlineData") {
            let bloc = loc.child("inline_data");
            let bo = self.object(blob, &bloc)?;
            let mime = match field2(bo, "mime_type", "mimeType") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let mut b = Block::new(if mime.starts_with("image/") {
                BlockKind::Image
            } else {
                BlockKind::Document
            });
            b.images = 1;
            return Ok(b);
        }
        if field2(obj, "file_data", "fileData").is_some() {
            let mut b = Block::new(BlockKind::Document);
            b.images = 1;
            return Ok(b);
        }
        let mut b = Block::new(BlockKind::Other);
        if obj.is_empty() {
            b.malformed = Some("data");
        }
        self.strings(part, &mut b.texts, loc, 0)?;
        Ok(b)
    }

    /// Gemini's `system_instruction`: a string, a `Content` (its parts), a `Part`, or a list of
    /// strings and parts.
    pub(super) fn gemini_system<'a>(&mut self, v: &'a Value) -> Res<Vec<Piece<'a>>> {
        let loc = Loc::root(None, "system_instruction");
        let mut out = Vec::new();
        if let Value::String(s) = v {
            out.push(Piece::Borrowed(Text::Utf8(s)));
            return Ok(out);
        }
        let items: &[Value] = match v {
            Value::Array(a) => a,
            other => {
                let o = self.object(other, &loc)?;
                match get(o, "parts") {
                    Some(parts) => self.sequence(parts, &loc.child("parts"))?,
                    None => std::slice::from_ref(other),
                }
            }
        };
        out.extend(self.gemini_system_items(items, &loc)?);
        Ok(out)
    }

    fn gemini_system_items<'a>(
        &mut self,
        items: &'a [Value],
        loc: &Loc<'_>,
    ) -> Res<Vec<Piece<'a>>> {
        let mut out = Vec::new();
        for (k, item) in items.iter().enumerate() {
            if let Value::String(s) = item {
                out.push(Piece::Borrowed(Text::Utf8(s)));
                continue;
            }
            let b = self.gemini_part(item, &loc.item(k))?;
            out.extend(b.texts);
        }
        Ok(out)
    }
}

/// The text of a response that is exactly `{"output": str}` or `{"error": str}`.
fn lone_output(r: &Value) -> Option<Text<'_>> {
    let o = r.as_object()?;
    if o.len() != 1 {
        return None;
    }
    let (k, v) = o.iter().next()?;
    match (k == "output" || k == "error", v) {
        (true, Value::String(s)) => Some(Text::Utf8(s)),
        _ => None,
    }
}

//! Read Gemini `contents` (dicts, or `google.genai.types.Content` / `types.Part` read by
//! attribute) into the core's view.
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
//! block `signed`: the planner never edits or drops it alone. Dict keys may be snake_case (the
//! SDK's) or camelCase (the REST API's). Ids are paired after the whole list is read
//! (`crate::formats::gemini::pair_ids`).

use super::access::Access;
use super::loc::{type_name, Loc};
use super::Extractor;
use crate::message::{Block, BlockKind, Format, Message, Origin, Piece, Role};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// Why a message was read as Gemini, for error texts.
const WHY: &str = "read as Gemini contents: the message has `parts`";

impl<'py> Extractor<'py> {
    /// Whether `obj` is read as a Gemini `Content` (see the design note). Under a forced format
    /// it also notes whether the message has the shape of one ([`Extractor::misfit`]).
    pub(super) fn is_gemini(&mut self, obj: &Bound<'py, PyAny>, acc: &Access<'_, 'py>) -> bool {
        let Some(forced) = self.format else {
            return self.gemini_shaped(obj, acc);
        };
        let shaped = self.gemini_shaped(obj, acc);
        self.shapes.gemini |= shaped;
        self.shapes.other |= !shaped;
        forced == Format::Gemini
    }

    /// Whether `obj` has a Gemini `Content`'s shape: `parts` and no `content`, or the SDK type.
    fn gemini_shaped(&self, obj: &Bound<'py, PyAny>, acc: &Access<'_, 'py>) -> bool {
        let py = self.py;
        match acc {
            Access::Dict(d) => {
                !d.contains(intern!(py, "content")).unwrap_or(true)
                    && d.contains(intern!(py, "parts")).unwrap_or(false)
            }
            Access::Mapping(m) => {
                !m.contains(intern!(py, "content")).unwrap_or(true)
                    && m.contains(intern!(py, "parts")).unwrap_or(false)
            }
            Access::Attrs(_) => {
                let t = obj.get_type();
                t.name().is_ok_and(|n| n == "Content")
                    && t.module()
                        .is_ok_and(|m| m.to_string_lossy().starts_with("google"))
            }
        }
    }

    /// `key` (or its camelCase twin in a dict), `None` when absent or `None`.
    fn field2(
        &self,
        acc: &Access<'_, 'py>,
        snake: &Bound<'py, PyString>,
        camel: Option<&Bound<'py, PyString>>,
        loc: &Loc<'_>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let v = acc.get(snake, loc)?;
        match (v, camel, acc) {
            (None, Some(c), Access::Dict(_) | Access::Mapping(_)) => acc.get(c, loc),
            (v, _, _) => Ok(v),
        }
    }

    fn gtext(&mut self, v: &Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Piece<'static>> {
        match v.cast::<PyString>() {
            Ok(s) => Ok(Piece::Borrowed(self.borrow(s)?)),
            Err(_) => Err(loc.err(
                self.py,
                &format!("expected str, got {} ({WHY})", type_name(v)),
            )),
        }
    }

    /// Read one Gemini `Content`.
    pub(super) fn gemini_message(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        index: usize,
    ) -> PyResult<Message<'static>> {
        let py = self.py;
        let loc = Loc::root(Some(index), "");
        self.hints.gemini = true;
        let role = match acc.get(intern!(py, "role"), &loc)? {
            None => Role::User,
            Some(r) => {
                let t = self.gtext(&r, &loc.child("role"))?;
                match &*t.text().to_utf8() {
                    "user" => Role::User,
                    "model" => Role::Assistant,
                    // Chat Completions' name for the model: not a Gemini role.
                    "assistant" => Role::Other,
                    other => Role::parse(other),
                }
            }
        };
        let mut blocks = Vec::new();
        let ploc = loc.child("parts");
        if let Some(parts) = acc.get(intern!(py, "parts"), &loc)? {
            let items = self.sequence(&parts, &ploc).map_err(|_| {
                ploc.err(
                    py,
                    &format!(
                        "expected a list of parts, got {} ({WHY})",
                        type_name(&parts)
                    ),
                )
            })?;
            blocks.reserve(items.len());
            for (k, part) in items.iter().enumerate() {
                let mut b = self.gemini_part(part, &ploc.item(k))?;
                b.origin = Origin::Part(k);
                blocks.push(b);
            }
        }
        let mut m = Message::new(role, blocks);
        m.gemini = true;
        if self.fingerprints {
            m.fingerprint = super::super::fingerprint::fingerprint(obj);
        }
        Ok(m)
    }

    /// One Gemini `Part`.
    fn gemini_part(&mut self, part: &Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Block<'static>> {
        let py = self.py;
        let acc = Access::of(part, loc)?;
        let signed = self
            .field2(
                &acc,
                intern!(py, "thought_signature"),
                Some(intern!(py, "thoughtSignature")),
                loc,
            )?
            .is_some();
        let mut b = self.gemini_part_data(part, &acc, loc)?;
        b.signed = signed;
        Ok(b)
    }

    fn gemini_part_data(
        &mut self,
        part: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let py = self.py;
        if let Some(t) = acc.get(intern!(py, "text"), loc)? {
            let thought = match acc.get(intern!(py, "thought"), loc)? {
                Some(v) => v.is_truthy()?,
                None => false,
            };
            let mut b = Block::new(if thought {
                BlockKind::Thinking
            } else {
                BlockKind::Text
            });
            b.texts.push(self.gtext(&t, &loc.child("text"))?);
            return Ok(b);
        }
        if let Some(fc) = self.field2(
            acc,
            intern!(py, "function_call"),
            Some(intern!(py, "functionCall")),
            loc,
        )? {
            let floc = loc.child("function_call");
            let facc = Access::of(&fc, &floc)?;
            let mut b = Block::new(BlockKind::ToolCall);
            b.id = self.gemini_str(&facc, intern!(py, "id"), &floc)?;
            b.name = self.gemini_str(&facc, intern!(py, "name"), &floc)?;
            let mut json = String::new();
            match facc.get(intern!(py, "args"), &floc)? {
                Some(args) => self.json(&args, &mut json, &floc.child("args"), 0)?,
                None => json.push_str("{}"),
            }
            b.texts.push(Piece::Owned(json));
            if b.name.is_none() {
                b.malformed = Some("name");
                b.kind = BlockKind::Other;
            }
            return Ok(b);
        }
        if let Some(fr) = self.field2(
            acc,
            intern!(py, "function_response"),
            Some(intern!(py, "functionResponse")),
            loc,
        )? {
            let floc = loc.child("function_response");
            let facc = Access::of(&fr, &floc)?;
            let mut b = Block::new(BlockKind::ToolResult);
            b.id = self.gemini_str(&facc, intern!(py, "id"), &floc)?;
            b.name = self.gemini_str(&facc, intern!(py, "name"), &floc)?;
            match facc.get(intern!(py, "response"), &floc)? {
                Some(r) => {
                    // `{"output": text}` / `{"error": text}` (the SDK's convention, and what the
                    // writer makes of an edited or synthetic response): the text is counted, read
                    // in place, so that a rewritten response counts as the planner counted it.
                    if let Some(t) = self.lone_output(&r)? {
                        b.texts.push(Piece::Borrowed(t));
                    } else {
                        let mut json = String::new();
                        self.json(&r, &mut json, &floc.child("response"), 0)?;
                        b.texts.push(Piece::Owned(json));
                    }
                }
                None => b.texts.push(Piece::Owned("{}".to_owned())),
            }
            if let Some(parts) = facc.get(intern!(py, "parts"), &floc)? {
                // Multimodal responses: each part an image or a file of unknown size.
                b.images += u32::try_from(self.sequence(&parts, &floc.child("parts"))?.len())
                    .unwrap_or(u32::MAX);
            }
            if b.name.is_none() {
                b.malformed = Some("name");
                b.kind = BlockKind::Other;
            }
            return Ok(b);
        }
        if let Some(blob) = self.field2(
            acc,
            intern!(py, "inline_data"),
            Some(intern!(py, "inlineData")),
            loc,
        )? {
            let bloc = loc.child("inline_data");
            let bacc = Access::of(&blob, &bloc)?;
            let mime = match self.field2(
                &bacc,
                intern!(py, "mime_type"),
                Some(intern!(py, "mimeType")),
                &bloc,
            )? {
                Some(m) => m.str()?.to_string_lossy().into_owned(),
                None => String::new(),
            };
            let mut b = Block::new(if mime.starts_with("image/") {
                BlockKind::Image
            } else {
                BlockKind::Document
            });
            // An image's size is read where every format's images are; other media count as
            // one image of unknown size, as binary documents do.
            b.images = 1;
            return Ok(b);
        }
        if self
            .field2(
                acc,
                intern!(py, "file_data"),
                Some(intern!(py, "fileData")),
                loc,
            )?
            .is_some()
        {
            let mut b = Block::new(BlockKind::Document);
            b.images = 1;
            return Ok(b);
        }
        // `executable_code`, `code_execution_result`, server-side tool parts and types we do
        // not know: passed through, their strings counted.
        let mut b = Block::new(BlockKind::Other);
        match acc {
            Access::Dict(d) => {
                if d.is_empty() {
                    b.malformed = Some("data");
                }
                self.strings(part, &mut b.texts, loc, 0)?;
            }
            _ => {
                let any = self.gemini_other_fields(acc, &mut b, loc)?;
                if !any {
                    b.malformed = Some("data");
                }
            }
        }
        Ok(b)
    }

    /// The strings of a `types.Part`'s other data fields; whether it had one.
    fn gemini_other_fields(
        &mut self,
        acc: &Access<'_, 'py>,
        b: &mut Block<'static>,
        loc: &Loc<'_>,
    ) -> PyResult<bool> {
        let py = self.py;
        let mut any = false;
        for key in [
            intern!(py, "executable_code"),
            intern!(py, "code_execution_result"),
            intern!(py, "tool_call"),
            intern!(py, "tool_response"),
        ] {
            if let Some(v) = acc.get(key, loc)? {
                any = true;
                let d = match v.getattr_opt(intern!(py, "model_dump"))? {
                    Some(dump) => {
                        let kwargs = PyDict::new(py);
                        kwargs.set_item("exclude_none", true)?;
                        kwargs.set_item("mode", "json")?;
                        dump.call((), Some(&kwargs))?
                    }
                    None => v,
                };
                self.strings(&d, &mut b.texts, &loc.child(&key.to_string_lossy()), 0)?;
            }
        }
        Ok(any)
    }

    /// The text of a response that is exactly `{"output": str}` or `{"error": str}`.
    fn lone_output(
        &mut self,
        r: &Bound<'py, PyAny>,
    ) -> PyResult<Option<crate::text::Text<'static>>> {
        let Ok(d) = r.cast::<PyDict>() else {
            return Ok(None);
        };
        if d.len() != 1 {
            return Ok(None);
        }
        let Some((k, v)) = d.iter().next() else {
            return Ok(None);
        };
        let key_ok = k
            .cast::<PyString>()
            .is_ok_and(|k| k.to_str().is_ok_and(|k| k == "output" || k == "error"));
        match (key_ok, v.cast::<PyString>()) {
            (true, Ok(s)) => Ok(Some(self.borrow(s)?)),
            _ => Ok(None),
        }
    }

    fn gemini_str(
        &mut self,
        acc: &Access<'_, 'py>,
        key: &Bound<'py, PyString>,
        loc: &Loc<'_>,
    ) -> PyResult<Option<String>> {
        match acc.get(key, loc)? {
            None => Ok(None),
            Some(v) => {
                let t = self.gtext(&v, &loc.child(&key.to_string_lossy()))?;
                Ok(Some(t.text().to_utf8().into_owned()))
            }
        }
    }

    /// Gemini's `system_instruction`: a string, a `Content` (its parts), a `Part`, or a list
    /// of strings and parts; each part's strings counted.
    pub(super) fn gemini_system(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Vec<Piece<'static>>> {
        let py = self.py;
        let loc = Loc::root(None, "system_instruction");
        let mut out = Vec::new();
        if let Ok(s) = v.cast::<PyString>() {
            out.push(Piece::Borrowed(self.borrow(s)?));
            return Ok(out);
        }
        let items = match self.sequence(v, &loc) {
            Ok(items) => items,
            Err(_) => {
                let acc = Access::of(v, &loc)?;
                match acc.get(intern!(py, "parts"), &loc)? {
                    Some(parts) => self.sequence(&parts, &loc.child("parts"))?,
                    None => vec![v.clone()],
                }
            }
        };
        for (k, item) in items.iter().enumerate() {
            if let Ok(s) = item.cast::<PyString>() {
                out.push(Piece::Borrowed(self.borrow(s)?));
                continue;
            }
            let b = self.gemini_part(item, &loc.item(k))?;
            out.extend(b.texts);
        }
        Ok(out)
    }
}

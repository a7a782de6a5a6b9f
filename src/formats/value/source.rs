//! The Rust API's reader as a [`Source`]: JSON values, for the readers written once for both
//! APIs (`formats/gemini/read.rs`, `formats/openai/read.rs`, `formats/blocks.rs`, `formats/responses/read.rs`, dispatched from `crate::formats`).

use super::read::{truthy, type_name, Reader};
use crate::formats::loc::{Loc, ReadError};
use crate::formats::source::{Shapes, Source};
use crate::image::{base64_image_size, data_url_size, ImageSize};
use crate::message::{Format, FormatHints, Message, Piece};
use crate::text::Text;
use serde_json::{Map, Value};

impl<'a> Source<'a> for Reader {
    type Node = &'a Value;
    type Obj = &'a Map<String, Value>;
    type Error = ReadError;

    fn error(&self, loc: &Loc<'_>, what: &str) -> ReadError {
        loc.error(what)
    }

    fn type_name(&self, v: &&'a Value) -> String {
        type_name(v).to_owned()
    }

    fn hints(&mut self) -> &mut FormatHints {
        &mut self.hints
    }

    fn forced(&mut self) -> (Option<Format>, &mut Shapes) {
        (self.format, &mut self.shapes)
    }

    fn object(&mut self, v: &&'a Value, loc: &Loc<'_>) -> Result<Self::Obj, ReadError> {
        Reader::object(self, v, loc)
    }

    fn field(
        &mut self,
        obj: &Self::Obj,
        key: &'static str,
        _loc: &Loc<'_>,
    ) -> Result<Option<&'a Value>, ReadError> {
        Ok(super::read::get(obj, key))
    }

    fn has_key(&mut self, obj: &Self::Obj, key: &'static str) -> Option<bool> {
        Some(super::read::entry(obj, key).is_some())
    }

    fn sdk_type_is(&self, _obj: &Self::Obj, _module: &str, _name: &str) -> Option<bool> {
        None
    }

    fn by_key(&self, _obj: &Self::Obj) -> bool {
        true
    }

    fn dict_empty(&self, obj: &Self::Obj) -> Option<bool> {
        Some(obj.is_empty())
    }

    fn str(&mut self, v: &&'a Value) -> Result<Option<Text<'a>>, ReadError> {
        Ok(match v {
            Value::String(s) => Some(Text::Utf8(s)),
            _ => None,
        })
    }

    fn list(&mut self, v: &&'a Value) -> Option<Vec<&'a Value>> {
        match v {
            Value::Array(a) => Some(a.iter().collect()),
            _ => None,
        }
    }

    fn only_item(&mut self, v: &&'a Value, keys: &[&str]) -> Option<&'a Value> {
        let o = v.as_object().filter(|o| o.len() == 1)?;
        let (k, item) = o.iter().next()?;
        keys.contains(&k.as_str()).then_some(item)
    }

    fn truthy(&mut self, v: &&'a Value) -> Result<bool, ReadError> {
        Ok(truthy(v))
    }

    fn display(&mut self, v: &&'a Value) -> Result<String, ReadError> {
        Ok(match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    fn plain(&mut self, v: &'a Value) -> Result<&'a Value, ReadError> {
        Ok(v)
    }

    fn json(&mut self, v: &&'a Value, out: &mut String, loc: &Loc<'_>) -> Result<(), ReadError> {
        Reader::json(self, v, out, loc, 0)
    }

    fn result_depth(&mut self) -> &mut usize {
        &mut self.result_depth
    }

    fn data_url_size(&mut self, v: &&'a Value) -> Option<ImageSize> {
        data_url_size(v.as_str()?.as_bytes())
    }

    fn base64_size(&mut self, v: &&'a Value) -> Option<ImageSize> {
        base64_image_size(v.as_str()?.as_bytes())
    }

    fn len_is_zero(&mut self, v: &&'a Value) -> bool {
        match v {
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    fn roleless(
        &mut self,
        _obj: &Self::Obj,
        _index: usize,
    ) -> Result<Option<Message<'a>>, ReadError> {
        Ok(None)
    }

    fn item_strings(
        &mut self,
        obj: &Self::Obj,
        out: &mut Vec<Piece<'a>>,
        loc: &Loc<'_>,
    ) -> Result<(), ReadError> {
        for (k, v) in obj.iter() {
            if !matches!(k.as_str(), "id" | "type" | "status") {
                Reader::strings(self, v, out, &loc.child(k), 1)?;
            }
        }
        Ok(())
    }

    fn note(&self, mut e: ReadError, note: &str) -> ReadError {
        e.reason = format!("{} {note}", e.reason);
        e
    }

    fn read_done(&mut self, _obj: &Self::Obj, _m: &mut Message<'a>) {}

    fn strings(
        &mut self,
        v: &&'a Value,
        out: &mut Vec<Piece<'a>>,
        loc: &Loc<'_>,
    ) -> Result<(), ReadError> {
        Reader::strings(self, v, out, loc, 0)
    }
}

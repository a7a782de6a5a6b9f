//! How a format's reader sees the caller's values, so that the format's reading rules are
//! written once, generic over [`Source`], for both readers: the Rust API's over
//! `serde_json::Value` (`formats/value/`) and the binding's over Python objects
//! (`python/extract/`, the only place that knows Python).
//!
//! Design note: the trait is on the reader rather than on the value, because reading a value
//! is not a pure function of it in the binding: a Python string is borrowed in place and kept
//! alive by the reader (`&mut self`), keys are interned once per reader, and whether an object
//! is a dict, another mapping or an SDK object with attributes decides how its fields are read.
//! Each method is one question the format readers ask (a field, a string, a list, the kind of
//! object); the errors are built by the source ([`Source::error`]) from the shared [`Loc`], so
//! both APIs name the same message index and field path. Formats read this way:
//! `formats/gemini/read.rs`, `formats/openai/read.rs` (every message with a role) and
//! `formats/blocks.rs` (its content).

use super::loc::Loc;
use crate::image::ImageSize;
use crate::message::{Format, FormatHints, Message, Piece};
use crate::text::Text;

/// The shapes of the messages read under a forced format: whether some had a Gemini
/// `Content`'s shape (`parts`, no `content`) and some another (what `misfit` reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct Shapes {
    /// A message had a Gemini `Content`'s shape.
    pub gemini: bool,
    /// A message had another shape.
    pub other: bool,
}

/// A reader of the caller's values (see the module's design note).
pub trait Source<'a> {
    /// A value: a `&serde_json::Value`, a Python object.
    type Node: Clone;
    /// A value read as an object with fields: a JSON object, a dict, another mapping or an SDK
    /// object.
    type Obj;
    /// What reading fails with: the Rust API's `ReadError`, the binding's `MessageTypeError`.
    type Error;

    /// The error for the value at `loc`.
    fn error(&self, loc: &Loc<'_>, what: &str) -> Self::Error;
    /// The Python name of `v`'s type, for error texts (`str`, `list`, `NoneType`).
    fn type_name(&self, v: &Self::Node) -> String;
    /// The format hints gathered while reading (`crate::message::FormatHints::detect`).
    fn hints(&mut self) -> &mut FormatHints;
    /// The format the caller forced, if any, and the shapes seen under it.
    fn forced(&mut self) -> (Option<Format>, &mut Shapes);

    /// `v` as an object with fields; otherwise an error naming its type.
    fn object(&mut self, v: &Self::Node, loc: &Loc<'_>) -> Result<Self::Obj, Self::Error>;
    /// Field `key` of `obj`, `None` when absent or null (`loc` is `obj`'s place).
    fn field(
        &mut self,
        obj: &Self::Obj,
        key: &'static str,
        loc: &Loc<'_>,
    ) -> Result<Option<Self::Node>, Self::Error>;
    /// Whether `obj` has the key `key`, even with a null value; `None` for an SDK object.
    fn has_key(&mut self, obj: &Self::Obj, key: &'static str) -> Option<bool>;
    /// Whether `obj` is an SDK object whose type is `name` from a module under `module`;
    /// `None` for a mapping.
    fn sdk_type_is(&self, obj: &Self::Obj, module: &str, name: &str) -> Option<bool>;
    /// Whether `obj` is read by key (a JSON object, a dict or another mapping: keys as the
    /// caller wrote them, snake_case or camelCase), not by attribute.
    fn by_key(&self, obj: &Self::Obj) -> bool;
    /// Whether `obj` is a plain dict (a JSON object, a Python `dict`) whose items are all its
    /// data, and if so whether it is empty.
    fn dict_empty(&self, obj: &Self::Obj) -> Option<bool>;

    /// `v` as a string (borrowed, not copied), `None` when it is not one.
    fn str(&mut self, v: &Self::Node) -> Result<Option<Text<'a>>, Self::Error>;
    /// The items of `v` when it is a list (or a tuple).
    fn list(&mut self, v: &Self::Node) -> Option<Vec<Self::Node>>;
    /// The value of `v`'s only item when `v` is a dict with exactly one item, under one of
    /// `keys`.
    fn only_item(&mut self, v: &Self::Node, keys: &[&str]) -> Option<Self::Node>;
    /// Python's truthiness of `v`.
    fn truthy(&mut self, v: &Self::Node) -> Result<bool, Self::Error>;
    /// `v` written as text (Python's `str`, a JSON value's text).
    fn display(&mut self, v: &Self::Node) -> Result<String, Self::Error>;
    /// `v` as plain data: an SDK object's `model_dump` (JSON mode, no `None`s), else `v`.
    fn plain(&mut self, v: Self::Node) -> Result<Self::Node, Self::Error>;
    /// `v` as compact JSON (numbers as Python's `repr`), appended to `out`, for counting.
    fn json(&mut self, v: &Self::Node, out: &mut String, loc: &Loc<'_>) -> Result<(), Self::Error>;
    /// The tool results being read inside one another (`formats/blocks.rs` bounds it).
    fn result_depth(&mut self) -> &mut usize;
    /// The size of an image given as a base64 data URL string `v`, read from its header in
    /// place; `None` when it is not one or cannot be read.
    fn data_url_size(&mut self, v: &Self::Node) -> Option<ImageSize>;
    /// The size of an image given as bare base64 text `v` (Anthropic's `source.data`).
    fn base64_size(&mut self, v: &Self::Node) -> Option<ImageSize>;
    /// Whether `v` has a length of zero (Python's `len(v) == 0`; `false` when it has none).
    fn len_is_zero(&mut self, v: &Self::Node) -> bool;
    /// A message without a role that the source reads another way (the binding's framework
    /// objects: LangChain's `type`, pydantic-ai's `kind`); `None`: an error names `role`.
    fn roleless(
        &mut self,
        obj: &Self::Obj,
        index: usize,
    ) -> Result<Option<Message<'a>>, Self::Error>;
    /// What the source adds to a message read from `obj` (the binding: its fingerprint, for a
    /// state's cache).
    fn read_done(&mut self, obj: &Self::Obj, m: &mut Message<'a>);
    /// Every string inside `v` but the values of `type` keys, appended to `out`.
    fn strings(
        &mut self,
        v: &Self::Node,
        out: &mut Vec<Piece<'a>>,
        loc: &Loc<'_>,
    ) -> Result<(), Self::Error>;
}

/// `v` as a string, or an error naming its type.
pub fn text<'a, S: Source<'a>>(
    src: &mut S,
    v: &S::Node,
    loc: &Loc<'_>,
) -> Result<Text<'a>, S::Error> {
    text_why(src, v, loc, None)
}

/// `v` as a string, or an error naming its type and, when given, why the message was read as
/// it was (`why`, in parentheses).
pub fn text_why<'a, S: Source<'a>>(
    src: &mut S,
    v: &S::Node,
    loc: &Loc<'_>,
    why: Option<&str>,
) -> Result<Text<'a>, S::Error> {
    match src.str(v)? {
        Some(t) => Ok(t),
        None => {
            let t = src.type_name(v);
            let what = match why {
                Some(why) => format!("expected str, got {t} ({why})"),
                None => format!("expected str, got {t}"),
            };
            Err(src.error(loc, &what))
        }
    }
}

/// The items of a list (or a tuple), or an error naming the type.
pub fn list<'a, S: Source<'a>>(
    src: &mut S,
    v: &S::Node,
    loc: &Loc<'_>,
) -> Result<Vec<S::Node>, S::Error> {
    match src.list(v) {
        Some(items) => Ok(items),
        None => {
            let t = src.type_name(v);
            Err(src.error(loc, &format!("expected a list, got {t}")))
        }
    }
}

/// A string field, copied (an id, a name); `loc` is `obj`'s place.
pub fn opt_string<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    key: &'static str,
    loc: &Loc<'_>,
) -> Result<Option<String>, S::Error> {
    opt_string_why(src, obj, key, loc, None)
}

/// [`opt_string`], its error saying why the message was read as it was ([`text_why`]).
pub fn opt_string_why<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    key: &'static str,
    loc: &Loc<'_>,
    why: Option<&str>,
) -> Result<Option<String>, S::Error> {
    match src.field(obj, key, loc)? {
        None => Ok(None),
        Some(v) => Ok(Some(
            text_why(src, &v, &loc.child(key), why)?
                .to_utf8()
                .into_owned(),
        )),
    }
}

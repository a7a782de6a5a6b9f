//! Where a value sits in the caller's messages, for [`ReadError`]s: the message index (none for
//! the system prompt and the tools) and the field path (`content[2].text`).
//!
//! A chain of borrowed segments, written out only when an error is built (as the Python
//! boundary's `Loc`): reading a message makes one per field and part.

use serde_json::Value;
use std::fmt::Write as _;

/// Why a message could not be read: the value at `field` of message `index` has the wrong JSON
/// type (the Rust API's `MessageError` wraps it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// Index of the message (`None`: the system prompt, the tools or the list itself).
    pub index: Option<usize>,
    /// The field path inside it (`content[2].text`; `message` for the message itself).
    pub field: String,
    /// What is wrong (`expected str, got int`).
    pub reason: String,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "message {i}, field {:?}: {}", self.field, self.reason),
            None => write!(f, "{}: {}", self.field, self.reason),
        }
    }
}

impl std::error::Error for ReadError {}

#[derive(Clone, Copy)]
pub(super) struct Loc<'a> {
    pub(super) index: Option<usize>,
    parent: Option<&'a Loc<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root(&'a str),
    Key(&'a str),
    Item(usize),
}

impl<'a> Loc<'a> {
    pub(super) fn root(index: Option<usize>, path: &'a str) -> Self {
        Loc {
            index,
            parent: None,
            seg: Seg::Root(path),
        }
    }

    pub(super) fn child<'b>(&'b self, key: &'b str) -> Loc<'b> {
        Loc {
            index: self.index,
            parent: Some(self),
            seg: Seg::Key(key),
        }
    }

    pub(super) fn item(&self, k: usize) -> Loc<'_> {
        Loc {
            index: self.index,
            parent: Some(self),
            seg: Seg::Item(k),
        }
    }

    fn path(&self) -> String {
        let mut path = self.parent.map(Loc::path).unwrap_or_default();
        match self.seg {
            Seg::Root(r) => path.push_str(r),
            Seg::Key(k) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Seg::Item(k) => {
                let _ = write!(path, "[{k}]");
            }
        }
        path
    }

    pub(super) fn err(&self, what: impl Into<String>) -> ReadError {
        ReadError {
            index: self.index,
            field: self.path(),
            reason: what.into(),
        }
    }
}

/// The Python name of a JSON value's type (the errors read as the Python API's).
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

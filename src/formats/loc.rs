//! Where a value sits in the caller's messages, for the readers' errors: the message index (none
//! for the system prompt and the tools) and the field path (`content[2].text`). One type for
//! both readers: the Rust API's ([`ReadError`]) and the binding's (`python/extract/loc.rs`
//! turns a `Loc` into a `MessageTypeError`).
//!
//! A chain of borrowed segments, written out only when an error is built: reading a message
//! makes one per field and part, and formatting each path up front cost an allocation per field
//! on every call.

use crate::text::Text;
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

/// Where a value sits: the message index (none for the system prompt and the tools) and the
/// path to it.
#[derive(Clone, Copy)]
pub struct Loc<'a> {
    /// Index of the message (`None`: the system prompt, the tools or the list itself).
    pub index: Option<usize>,
    parent: Option<&'a Loc<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    /// The start of a path (`""` for a message itself).
    Root(&'a str),
    Key(&'a str),
    /// A key as the caller's string (a JSON object key), converted only for the message.
    KeyText(Text<'a>),
    Item(usize),
}

impl<'a> Loc<'a> {
    /// The start of a path: message `index` (or none), at `path` (`""`: the message itself).
    pub fn root(index: Option<usize>, path: &'a str) -> Self {
        Loc {
            index,
            parent: None,
            seg: Seg::Root(path),
        }
    }

    /// The field `key` of this value.
    pub fn child<'b>(&'b self, key: &'b str) -> Loc<'b> {
        Loc {
            index: self.index,
            parent: Some(self),
            seg: Seg::Key(key),
        }
    }

    /// The field `key` of this value, `key` as the caller's string.
    pub fn child_text<'b>(&'b self, key: Text<'b>) -> Loc<'b> {
        Loc {
            index: self.index,
            parent: Some(self),
            seg: Seg::KeyText(key),
        }
    }

    /// Item `k` of this list.
    pub fn item(&self, k: usize) -> Loc<'_> {
        Loc {
            index: self.index,
            parent: Some(self),
            seg: Seg::Item(k),
        }
    }

    /// The path written out (`content[2].text`).
    pub fn path(&self) -> String {
        let mut path = self.parent.map(Loc::path).unwrap_or_default();
        match self.seg {
            Seg::Root(r) => path.push_str(r),
            Seg::Key(k) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Seg::KeyText(t) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&t.to_utf8());
            }
            Seg::Item(k) => {
                let _ = write!(path, "[{k}]");
            }
        }
        path
    }

    /// A [`ReadError`] here.
    pub fn error(&self, what: impl Into<String>) -> ReadError {
        ReadError {
            index: self.index,
            field: self.path(),
            reason: what.into(),
        }
    }
}

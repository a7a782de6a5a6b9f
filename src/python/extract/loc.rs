//! Where a value sits in the caller's messages, for error messages.

use super::super::errors::message_type_error;
use crate::text::Text;
use pyo3::prelude::*;
use std::fmt::Write as _;

/// Where a value sits, for error messages: message index (or none for system/tools) and path.
///
/// A chain of borrowed segments, written out only when an error is raised: reading a message
/// builds one per field and part, and formatting each path up front cost an allocation per
/// field on every call.
#[derive(Clone, Copy)]
pub struct Loc<'a> {
    pub(super) index: Option<usize>,
    pub(super) parent: Option<&'a Loc<'a>>,
    pub(super) seg: Seg<'a>,
}

#[derive(Clone, Copy)]
pub(super) enum Seg<'a> {
    /// The start of a path (`""` for a message itself).
    Root(&'a str),
    Key(&'a str),
    /// A key as the caller's string (a JSON object key), converted only for the message.
    KeyText(Text<'a>),
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
            Seg::Key(k) if path.is_empty() => path.push_str(k),
            Seg::Key(k) => {
                path.push('.');
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

    pub(super) fn err(&self, py: Python<'_>, what: &str) -> PyErr {
        message_type_error(py, self.index, &self.path(), what)
    }
}

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

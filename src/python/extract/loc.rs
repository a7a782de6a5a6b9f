//! Where a value sits in the caller's messages, for error messages: the core's
//! [`crate::formats::loc::Loc`] (one type for both readers), raised here as a
//! `MessageTypeError`.

use super::super::errors::message_type_error;
pub use crate::formats::loc::Loc;
use pyo3::prelude::*;

/// A [`Loc`] as the binding raises it.
pub(crate) trait LocErr {
    /// A `MessageTypeError` naming the message index and the field path.
    fn err(&self, py: Python<'_>, what: &str) -> PyErr;
}

impl LocErr for Loc<'_> {
    fn err(&self, py: Python<'_>, what: &str) -> PyErr {
        message_type_error(py, self.index, &self.path(), what)
    }
}

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

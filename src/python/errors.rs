//! The one place that maps failures to the package's exception classes: wrong Python types
//! ([`message_type_error`]), bad arguments ([`config_error`], [`parse_format`]) and the core's
//! [`PlanError`] ([`plan_error`]).
//!
//! The classes live in `context_compactor/errors.py` (they need multiple inheritance, e.g.
//! `MessageTypeError(CompactorError, TypeError)`, which `create_exception!` cannot express) and
//! are imported once per interpreter (cached in a `PyOnceLock`).

use super::problem::Problem;
use crate::message::Format;
use crate::planner::PlanError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyType};

static MESSAGE_TYPE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CONFIG_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static INVALID_CONVERSATION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static FORMAT_MISMATCH_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn raise<'py, A>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
    args: A,
) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    match cell.import(py, "context_compactor.errors", name) {
        Ok(cls) => match cls.call1(args) {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// `MessageTypeError(message, index, field)`: the message at `index` (or `system`/`tools` when
/// `index` is `None`) has a wrong Python type at `field`.
pub fn message_type_error(py: Python<'_>, index: Option<usize>, field: &str, what: &str) -> PyErr {
    let text = match index {
        Some(i) => format!("message {i}, field {field:?}: {what}"),
        None => format!("{field}: {what}"),
    };
    raise(
        py,
        &MESSAGE_TYPE_ERROR,
        "MessageTypeError",
        (text, index, field.to_owned()),
    )
}

/// `ConfigError(message, field)`.
pub fn config_error(py: Python<'_>, field: &str, what: &str) -> PyErr {
    raise(
        py,
        &CONFIG_ERROR,
        "ConfigError",
        (format!("{field}: {what}"), field.to_owned()),
    )
}

/// `ConfigError(message, field)` of the core's [`crate::config::ConfigError`].
pub fn config_error_of(py: Python<'_>, e: &crate::config::ConfigError) -> PyErr {
    raise(
        py,
        &CONFIG_ERROR,
        "ConfigError",
        (e.message().to_owned(), e.field().to_owned()),
    )
}

/// `FormatMismatchError(message, format, detected)`: the forced `format=` does not fit the
/// messages, which are `detected` (see `Extractor::misfit`).
pub fn format_mismatch_error(py: Python<'_>, forced: Format, detected: Format, why: &str) -> PyErr {
    raise(
        py,
        &FORMAT_MISMATCH_ERROR,
        "FormatMismatchError",
        (
            format!(
                "format={:?} does not fit these messages, detected as {:?}: {why}",
                forced.name(),
                detected.name()
            ),
            forced.name(),
            detected.name(),
        ),
    )
}

/// A core [`PlanError`] as its exception: `InvalidConversationError(message, problems)` with
/// the problems as `Problem` objects.
pub fn plan_error(py: Python<'_>, err: PlanError) -> PyErr {
    let text = err.to_string();
    match err {
        PlanError::Invalid(problems) => {
            let list = PyList::empty(py);
            for p in problems {
                let problem = Problem::from_core(p);
                if let Err(e) = Bound::new(py, problem).and_then(|p| list.append(p)) {
                    return e;
                }
            }
            raise(
                py,
                &INVALID_CONVERSATION_ERROR,
                "InvalidConversationError",
                (text, list),
            )
        }
    }
}

/// Parse a `format=` argument.
pub fn parse_format(py: Python<'_>, format: Option<&str>) -> PyResult<Option<Format>> {
    match format {
        None => Ok(None),
        Some(f) => match Format::parse(f) {
            Some(f) => Ok(Some(f)),
            None => Err(config_error(
                py,
                "format",
                &format!(
                    "unknown format {f:?}; expected one of {}",
                    Format::ALL.map(|f| format!("{:?}", f.name())).join(", ")
                ),
            )),
        },
    }
}

/// `err` with `note` added to its text when it is a `MessageTypeError` (same index and field):
/// the format a value was read as, for items whose format the type alone does not show.
pub fn with_note(py: Python<'_>, err: PyErr, note: &str) -> PyErr {
    let Ok(cls) = MESSAGE_TYPE_ERROR.import(py, "context_compactor.errors", "MessageTypeError")
    else {
        return err;
    };
    let value = err.value(py);
    if !value.is_instance(cls).unwrap_or(false) {
        return err;
    }
    let text = value.str().map(|s| s.to_string()).unwrap_or_default();
    if text.contains(note) {
        return err;
    }
    let (Ok(index), Ok(field)) = (value.getattr("index"), value.getattr("field")) else {
        return err;
    };
    let new = raise(
        py,
        &MESSAGE_TYPE_ERROR,
        "MessageTypeError",
        (format!("{text} {note}"), index, field),
    );
    new.set_cause(py, err.cause(py));
    new
}

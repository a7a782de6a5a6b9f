//! The `Problem` class: one way a request would be rejected, as Python sees it. A leaf of the
//! binding (it depends only on the core's `validate::Problem`), so `errors.rs` can build
//! `InvalidConversationError.problems` without depending on `validate.rs`, which depends on
//! the readers and counters that use `errors.rs`.

use pyo3::prelude::*;

/// One way in which a request would be rejected by the provider.
#[pyclass(frozen, eq, skip_from_py_object, module = "context_compactor._core")]
#[derive(Clone, PartialEq, Eq)]
pub struct Problem {
    #[pyo3(get)]
    index: Option<usize>,
    #[pyo3(get)]
    rule: String,
    #[pyo3(get)]
    message: String,
}

impl Problem {
    /// A problem of the request as a whole (no message index), e.g. `over_window`.
    pub fn of_request(rule: &str, message: String) -> Self {
        Problem {
            index: None,
            rule: rule.to_owned(),
            message,
        }
    }

    /// The Python object of a core problem.
    pub fn from_core(p: crate::validate::Problem) -> Self {
        Problem {
            index: p.index,
            rule: p.rule.to_owned(),
            message: p.message,
        }
    }
}

#[pymethods]
impl Problem {
    #[new]
    #[pyo3(signature = (index, rule, message))]
    fn new(index: Option<usize>, rule: String, message: String) -> Self {
        Problem {
            index,
            rule,
            message,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Problem(index={}, rule={:?}, message={:?})",
            self.index.map_or("None".to_owned(), |i| i.to_string()),
            self.rule,
            self.message
        )
    }

    fn __str__(&self) -> String {
        match self.index {
            Some(i) => format!("message {i}: {} ({})", self.message, self.rule),
            None => format!("{} ({})", self.message, self.rule),
        }
    }
}

//! Reading a field of a message or block: a dict item, a mapping's `get`, or an SDK object's
//! attribute.

use super::loc::{type_name, Loc, LocErr};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

static MAPPING: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// How a message or block is read: a dict, another mapping, or an object with attributes.
pub(super) enum Access<'a, 'py> {
    Dict(&'a Bound<'py, PyDict>),
    Mapping(&'a Bound<'py, PyAny>),
    Attrs(&'a Bound<'py, PyAny>),
}

impl<'a, 'py> Access<'a, 'py> {
    pub(super) fn of(obj: &'a Bound<'py, PyAny>, loc: &Loc<'_>) -> PyResult<Self> {
        let py = obj.py();
        if let Ok(d) = obj.cast::<PyDict>() {
            return Ok(Access::Dict(d));
        }
        if obj.is_instance_of::<PyString>()
            || obj.is_instance_of::<PyInt>()
            || obj.is_instance_of::<PyFloat>()
            || obj.is_instance_of::<PyList>()
            || obj.is_instance_of::<PyTuple>()
            || obj.is_none()
            || obj.is_instance_of::<pyo3::types::PyBytes>()
        {
            return Err(loc.err(
                py,
                &format!(
                    "expected a mapping or an SDK object, got {}",
                    type_name(obj)
                ),
            ));
        }
        let mapping = MAPPING.import(py, "collections.abc", "Mapping")?;
        if obj.is_instance(mapping)? {
            Ok(Access::Mapping(obj))
        } else {
            Ok(Access::Attrs(obj))
        }
    }

    /// The value of `key`; `None` when absent or Python `None`.
    pub(super) fn get(
        &self,
        key: &Bound<'py, PyString>,
        loc: &Loc<'_>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = key.py();
        let v = match self {
            Access::Dict(d) => d.get_item(key),
            Access::Mapping(m) => match m.call_method1(intern!(py, "get"), (key,)) {
                Ok(v) => Ok(Some(v)),
                Err(e) => Err(e),
            },
            Access::Attrs(o) => o.getattr_opt(key),
        };
        match v {
            Ok(Some(v)) if !v.is_none() => Ok(Some(v)),
            Ok(_) => Ok(None),
            Err(e) => {
                let err = loc.child(&key.to_string_lossy()).err(
                    py,
                    &format!("reading the field raised {}", e.get_type(py).name()?),
                );
                err.set_cause(py, Some(e));
                Err(err)
            }
        }
    }
}

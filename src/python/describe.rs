//! Output messages described for a Python shell that builds them in a framework's own classes
//! (pydantic-ai's dataclasses, which a dict copy cannot stand for).
//!
//! `Keep(i)` is the input object itself; a rebuilt or new message is a tuple:
//! `("rebuild", from, blocks)` or `("new", role, blocks)`, each block
//! `("orig", msg, part, edit, kind)` (part `part` of input message `msg`, its text replaced by
//! `edit` when not `None`; `kind` the view's block kind), `("text", text)` or
//! `("result", id, name, text, is_error)`.

use crate::message::{Conversation, Origin};
use crate::planner::{OutBlock, OutMsg};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

fn block<'py>(
    py: Python<'py>,
    conv: &Conversation<'_>,
    b: &OutBlock,
) -> PyResult<Bound<'py, PyTuple>> {
    match b {
        OutBlock::Orig { msg, block, edit } => {
            let view = &conv.messages[*msg].blocks[*block];
            let part = match view.origin {
                Origin::Part(k) | Origin::Call(k) => k,
                _ => 0,
            };
            let kind = format!("{:?}", view.kind);
            ("orig", *msg, part, edit.as_deref(), kind).into_pyobject(py)
        }
        OutBlock::Text(t) => ("text", t.as_str()).into_pyobject(py),
        OutBlock::Result {
            id,
            name,
            text,
            is_error,
        } => (
            "result",
            id.as_deref(),
            name.as_deref(),
            text.as_str(),
            *is_error,
        )
            .into_pyobject(py),
    }
}

fn blocks<'py>(
    py: Python<'py>,
    conv: &Conversation<'_>,
    bs: &[OutBlock],
) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for b in bs {
        l.append(block(py, conv, b)?)?;
    }
    Ok(l)
}

/// One output message: the input object, or its description.
pub fn describe<'py>(
    py: Python<'py>,
    messages: &[Py<PyAny>],
    conv: &Conversation<'_>,
    out: &OutMsg,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match out {
        OutMsg::Keep(i) => messages[*i].bind(py).clone(),
        OutMsg::Rebuild { from, blocks: bs } => ("rebuild", *from, blocks(py, conv, bs)?)
            .into_pyobject(py)?
            .into_any(),
        OutMsg::New { role, blocks: bs } => ("new", role.name(), blocks(py, conv, bs)?)
            .into_pyobject(py)?
            .into_any(),
    })
}

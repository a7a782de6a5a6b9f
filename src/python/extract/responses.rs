//! Reading OpenAI Responses items (DESIGN, Formats: "OpenAI Responses items").
//!
//! Design note: a Responses input is a flat list of items, read in place like the other
//! formats (dicts, or the `openai` SDK's pydantic output items read by attribute). Each item is
//! one view message, so that kept items come back as the same objects:
//!
//! - `message` items go through the common message reader (their parts, `input_text`,
//!   `output_text`, `input_image`, `input_file`, `refusal`, are read by the same block code as
//!   the other formats, images included); only their `input_*`/`output_*` parts mark them.
//! - calls (`function_call`, `custom_tool_call`, `local_shell_call`, `computer_call`,
//!   `shell_call`, `apply_patch_call`, `tool_search_call`, `mcp_approval_request`) are
//!   assistant views with one `ToolCall` block whose id is the item's `call_id` (an MCP
//!   approval request pairs by its `id`);
//! - outputs (`*_output`, `mcp_approval_response`) are `tool` views with one `ToolResult`
//!   block answering that id; an output whose wire shape holds no plain text (a screenshot,
//!   shell output records, an approval) is opaque: never edited on its own;
//! - `reasoning` (opaque `encrypted_content`), `compaction`, `item_reference`, server-side tool
//!   items and unknown types are opaque assistant views, counted from every string they hold
//!   (an estimate that errs high for encrypted content) and never an error.
//!
//! Every block of a typed item has `Origin::Item`, which is what the structure and validation
//! code use to recognise Responses items (see `crate::formats::responses`).

use super::access::Access;
use super::loc::Loc;
use super::Extractor;
use crate::message::{Block, BlockKind, Message, Origin, Piece, Role};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The kind of a typed (non-`message`) Responses item.
enum ItemKind {
    /// A call: its id field and the field holding its counted arguments (`None`: every
    /// string of the item).
    Call {
        id: &'static str,
        args: Option<&'static str>,
    },
    /// An output answering the call with this id field; `text`: its `output` may be
    /// replaced by a string (a cleared result).
    Output {
        id: &'static str,
        text: bool,
    },
    Reasoning,
    Compaction,
    /// `item_reference`, server-side tool items, unknown types.
    Other,
}

fn kind_of(ty: &str) -> ItemKind {
    match ty {
        "function_call" => ItemKind::Call {
            id: "call_id",
            args: Some("arguments"),
        },
        "custom_tool_call" => ItemKind::Call {
            id: "call_id",
            args: Some("input"),
        },
        "local_shell_call" | "computer_call" | "shell_call" | "apply_patch_call"
        | "tool_search_call" => ItemKind::Call {
            id: "call_id",
            args: None,
        },
        "mcp_approval_request" => ItemKind::Call {
            id: "id",
            args: Some("arguments"),
        },
        "function_call_output"
        | "custom_tool_call_output"
        | "local_shell_call_output"
        | "apply_patch_call_output" => ItemKind::Output {
            id: "call_id",
            text: true,
        },
        "computer_call_output" | "shell_call_output" | "tool_search_output" => ItemKind::Output {
            id: "call_id",
            text: false,
        },
        "mcp_approval_response" => ItemKind::Output {
            id: "approval_request_id",
            text: false,
        },
        "reasoning" => ItemKind::Reasoning,
        "compaction" => ItemKind::Compaction,
        _ => ItemKind::Other,
    }
}

/// The interned Python string of a field name (interned once per interpreter).
fn field_key<'py>(py: Python<'py>, field: &'static str) -> &'py Bound<'py, PyString> {
    match field {
        "call_id" => intern!(py, "call_id"),
        "id" => intern!(py, "id"),
        "approval_request_id" => intern!(py, "approval_request_id"),
        "arguments" => intern!(py, "arguments"),
        "input" => intern!(py, "input"),
        _ => intern!(py, "output"),
    }
}

impl<'py> Extractor<'py> {
    /// Read a typed Responses item (any `type` but `message`) at `index`.
    pub(super) fn responses_item(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        ty: &str,
        index: usize,
    ) -> PyResult<Message<'static>> {
        let py = self.py;
        let loc = Loc::root(Some(index), "");
        self.hints.responses = true;
        let id_of = |this: &mut Self, field: &'static str| -> PyResult<Option<String>> {
            let key = field_key(py, field);
            this.opt_str(acc, key, &loc)
        };
        let (role, mut b) = match kind_of(ty) {
            ItemKind::Call { id, args } => {
                let mut b = Block::new(BlockKind::ToolCall);
                b.id = id_of(self, id)?;
                b.name = Some(match acc.get(intern!(py, "name"), &loc)? {
                    Some(n) => self.text(&n, &loc.child("name"))?.to_utf8().into_owned(),
                    None => ty.to_owned(),
                });
                match args {
                    Some(field) => {
                        let key = field_key(py, field);
                        match acc.get(key, &loc)? {
                            Some(a) => {
                                let t = self.text(&a, &loc.child(field))?;
                                b.texts.push(Piece::Borrowed(t));
                            }
                            None if ty == "mcp_approval_request" => {}
                            None => b.malformed = Some(field),
                        }
                    }
                    None => {
                        // The action/operation objects: counted from their strings, kept as
                        // they are (there is no argument string to cut).
                        b.opaque = true;
                        self.item_strings(obj, acc, &mut b, &loc)?;
                    }
                }
                if b.id.is_none() {
                    b.malformed = Some(id);
                    b.kind = BlockKind::Other;
                }
                (Role::Assistant, b)
            }
            ItemKind::Output { id, text } => {
                let mut b = Block::new(BlockKind::ToolResult);
                b.id = id_of(self, id)?;
                b.name = Some(ty.trim_end_matches("_output").to_owned());
                match acc.get(intern!(py, "output"), &loc)? {
                    Some(o) => {
                        if let Ok(s) = o.cast::<PyString>() {
                            b.texts.push(Piece::Borrowed(self.borrow(s)?));
                        } else if o.is_instance_of::<pyo3::types::PyList>()
                            || o.is_instance_of::<pyo3::types::PyTuple>()
                        {
                            if ty == "shell_call_output" {
                                self.strings(&o, &mut b.texts, &loc.child("output"), 0)?;
                            } else {
                                // Content parts: texts, images, files (the same block code).
                                crate::formats::blocks::result_content(
                                    self,
                                    &o,
                                    &mut b,
                                    &loc.child("output"),
                                )?;
                            }
                        } else {
                            // A screenshot object or another structured output.
                            let mut inner = Vec::new();
                            self.strings(&o, &mut inner, &loc.child("output"), 0)?;
                            let image = ty == "computer_call_output";
                            if image {
                                b.images += 1;
                            } else {
                                b.texts.extend(inner);
                            }
                        }
                    }
                    None if ty == "mcp_approval_response" || ty == "apply_patch_call_output" => {
                        self.item_strings(obj, acc, &mut b, &loc)?;
                    }
                    None => b.malformed = Some("output"),
                }
                b.opaque = !text;
                if b.id.is_none() {
                    b.malformed = Some(id);
                    b.kind = BlockKind::Other;
                }
                (Role::Tool, b)
            }
            ItemKind::Reasoning => {
                let b = self.reasoning(acc, &loc)?;
                (Role::Assistant, b)
            }
            ItemKind::Compaction => (
                Role::Assistant,
                self.opaque(obj, acc, BlockKind::Compaction, &loc)?,
            ),
            ItemKind::Other => {
                let mut b = self.opaque(obj, acc, BlockKind::Other, &loc)?;
                b.needs_store = ty == "item_reference";
                (Role::Assistant, b)
            }
        };
        b.origin = Origin::Item;
        let mut m = Message::new(role, vec![b]);
        m.responses = true;
        if self.fingerprints {
            m.fingerprint = super::super::fingerprint::fingerprint(obj);
        }
        Ok(m)
    }

    /// A reasoning item, read field by field (an SDK object is not dumped): the texts of its
    /// `summary` and `content` parts and its `encrypted_content`.
    fn reasoning(&mut self, acc: &Access<'_, 'py>, loc: &Loc<'_>) -> PyResult<Block<'static>> {
        let py = self.py;
        let mut b = Block::new(BlockKind::Reasoning);
        b.opaque = true;
        b.id = self.opt_str(acc, intern!(py, "id"), loc)?;
        for key in [intern!(py, "summary"), intern!(py, "content")] {
            let Some(parts) = acc.get(key, loc)? else {
                continue;
            };
            let ploc = loc.child(if key.to_str()? == "summary" {
                "summary"
            } else {
                "content"
            });
            for (k, part) in self.sequence(&parts, &ploc)?.iter().enumerate() {
                let iloc = ploc.item(k);
                let pacc = Access::of(part, &iloc)?;
                if let Some(t) = pacc.get(intern!(py, "text"), &iloc)? {
                    let t = self.text(&t, &iloc.child("text"))?;
                    b.texts.push(Piece::Borrowed(t));
                }
            }
        }
        match acc.get(intern!(py, "encrypted_content"), loc)? {
            Some(e) => {
                let t = self.text(&e, &loc.child("encrypted_content"))?;
                b.texts.push(Piece::Borrowed(t));
            }
            None => b.needs_store = b.id.is_some(),
        }
        Ok(b)
    }

    /// An opaque item: counted from every string it holds.
    fn opaque(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        kind: BlockKind,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let mut b = Block::new(kind);
        b.opaque = true;
        self.item_strings(obj, acc, &mut b, loc)?;
        Ok(b)
    }

    /// Every string of an item but its `id`, `type` and `status` (which the provider does not
    /// show the model).
    fn item_strings(
        &mut self,
        obj: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        b: &mut Block<'static>,
        loc: &Loc<'_>,
    ) -> PyResult<()> {
        let d = match acc {
            Access::Attrs(o) => match o.getattr(intern!(self.py, "model_dump")) {
                Ok(dump) => {
                    let kwargs = pyo3::types::PyDict::new(self.py);
                    kwargs.set_item("exclude_none", true)?;
                    dump.call((), Some(&kwargs))?
                }
                Err(_) => obj.clone(),
            },
            _ => obj.clone(),
        };
        if let Ok(d) = d.cast::<pyo3::types::PyDict>() {
            for (k, v) in d.iter() {
                let skip = k.cast::<PyString>().is_ok_and(|k| {
                    k.to_str()
                        .is_ok_and(|k| matches!(k, "id" | "type" | "status"))
                });
                if !skip {
                    let key = k.str()?.to_string_lossy().into_owned();
                    self.strings(&v, &mut b.texts, &loc.child(&key), 1)?;
                }
            }
            return Ok(());
        }
        self.strings(obj, &mut b.texts, loc, 0)
    }
}

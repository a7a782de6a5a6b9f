//! Reading OpenAI Responses items into the core's view (DESIGN, Formats: "OpenAI Responses
//! items"), once for both readers (generic over [`Source`]).
//!
//! Design note: a Responses input is a flat list of items, read in place like the other
//! formats (JSON values, dicts, or the `openai` SDK's pydantic output items read by attribute). Each item is
//! one view message, so that kept items come back as the same objects:
//!
//! - `message` items go through the common message reader (`crate::formats::openai::read`) (their parts, `input_text`,
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
//! code use to recognise Responses items (see `super`). A typed item is one whose `type` is a
//! string other than `message` ([`item`]); a `type` that cannot be read or is not a string is
//! left to the message reader (which names `role`). An error inside an item says it was read as
//! one (`(format "responses": a <type> item)`).

use crate::formats::blocks;
use crate::formats::loc::Loc;
use crate::formats::source::{list, opt_string, text, Source};
use crate::message::{Block, BlockKind, Message, Origin, Piece, Role};

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

/// Read message `index` when it is a typed Responses item (see the design note); `None`: it is
/// read as a message with a role.
pub fn item<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    index: usize,
) -> Result<Option<Message<'a>>, S::Error> {
    let loc = Loc::root(Some(index), "");
    let Ok(Some(t)) = src.field(obj, "type", &loc) else {
        return Ok(None);
    };
    let Some(ty) = src.str(&t)? else {
        return Ok(None);
    };
    let ty = ty.to_utf8();
    if ty == "message" {
        return Ok(None);
    }
    // A framework object of a type not seen yet (LangChain's `type` is "human", "ai", ...): the
    // source's reader first, then a Responses item.
    if let Some(m) = src.roleless(obj, index)? {
        return Ok(Some(m));
    }
    match typed_item(src, obj, &ty, index) {
        Ok(m) => Ok(Some(m)),
        Err(e) => Err(src.note(e, &format!("(format \"responses\": a {ty} item)"))),
    }
}

/// Read a typed Responses item (any `type` but `message`) at `index`.
fn typed_item<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    ty: &str,
    index: usize,
) -> Result<Message<'a>, S::Error> {
    let loc = Loc::root(Some(index), "");
    src.hints().responses = true;
    let (role, mut b) = match kind_of(ty) {
        ItemKind::Call { id, args } => {
            let mut b = Block::new(BlockKind::ToolCall);
            b.id = opt_string(src, obj, id, &loc)?;
            b.name = Some(match src.field(obj, "name", &loc)? {
                Some(n) => text(src, &n, &loc.child("name"))?.to_utf8().into_owned(),
                None => ty.to_owned(),
            });
            match args {
                Some(field) => match src.field(obj, field, &loc)? {
                    Some(a) => {
                        let t = text(src, &a, &loc.child(field))?;
                        b.texts.push(Piece::Borrowed(t));
                    }
                    None if ty == "mcp_approval_request" => {}
                    None => b.malformed = Some(field),
                },
                None => {
                    // The action/operation objects: counted from their strings, kept as they
                    // are (there is no argument string to cut).
                    b.opaque = true;
                    src.item_strings(obj, &mut b.texts, &loc)?;
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
            b.id = opt_string(src, obj, id, &loc)?;
            b.name = Some(ty.trim_end_matches("_output").to_owned());
            match src.field(obj, "output", &loc)? {
                Some(o) => {
                    let oloc = loc.child("output");
                    if let Some(s) = src.str(&o)? {
                        b.texts.push(Piece::Borrowed(s));
                    } else if src.list(&o).is_some() {
                        if ty == "shell_call_output" {
                            src.strings(&o, &mut b.texts, &oloc)?;
                        } else {
                            // Content parts: texts, images, files (the same block code).
                            blocks::result_content(src, &o, &mut b, &oloc)?;
                        }
                    } else {
                        // A screenshot object or another structured output.
                        let mut inner = Vec::new();
                        src.strings(&o, &mut inner, &oloc)?;
                        if ty == "computer_call_output" {
                            b.images += 1;
                        } else {
                            b.texts.extend(inner);
                        }
                    }
                }
                None if ty == "mcp_approval_response" || ty == "apply_patch_call_output" => {
                    src.item_strings(obj, &mut b.texts, &loc)?;
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
        ItemKind::Reasoning => (Role::Assistant, reasoning(src, obj, &loc)?),
        ItemKind::Compaction => (
            Role::Assistant,
            opaque(src, obj, BlockKind::Compaction, &loc)?,
        ),
        ItemKind::Other => {
            let mut b = opaque(src, obj, BlockKind::Other, &loc)?;
            b.needs_store = ty == "item_reference";
            (Role::Assistant, b)
        }
    };
    b.origin = Origin::Item;
    let mut m = Message::new(role, vec![b]);
    m.responses = true;
    src.read_done(obj, &mut m);
    Ok(m)
}

/// A reasoning item, read field by field (an SDK object is not dumped): the texts of its
/// `summary` and `content` parts and its `encrypted_content`.
fn reasoning<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let mut b = Block::new(BlockKind::Reasoning);
    b.opaque = true;
    b.id = opt_string(src, obj, "id", loc)?;
    for key in ["summary", "content"] {
        let Some(parts) = src.field(obj, key, loc)? else {
            continue;
        };
        let ploc = loc.child(key);
        for (k, part) in list(src, &parts, &ploc)?.iter().enumerate() {
            let iloc = ploc.item(k);
            let p = src.object(part, &iloc)?;
            if let Some(t) = src.field(&p, "text", &iloc)? {
                let t = text(src, &t, &iloc.child("text"))?;
                b.texts.push(Piece::Borrowed(t));
            }
        }
    }
    match src.field(obj, "encrypted_content", loc)? {
        Some(e) => {
            let t = text(src, &e, &loc.child("encrypted_content"))?;
            b.texts.push(Piece::Borrowed(t));
        }
        None => b.needs_store = b.id.is_some(),
    }
    Ok(b)
}

/// An opaque item: counted from every string it holds.
fn opaque<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    kind: BlockKind,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let mut b = Block::new(kind);
    b.opaque = true;
    src.item_strings(obj, &mut b.texts, loc)?;
    Ok(b)
}

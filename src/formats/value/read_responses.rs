//! Reading OpenAI Responses items other than `message` (see `python/extract/responses.rs`,
//! which this mirrors, for the design note): calls, outputs, reasoning, compaction and opaque
//! items, each one view message whose block has `Origin::Item`.

use super::read::{get, Reader};
use crate::formats::loc::{Loc, ReadError};
use crate::message::{Block, BlockKind, Message, Origin, Piece, Role};
use crate::text::Text;
use serde_json::{Map, Value};

type Res<T> = Result<T, ReadError>;

enum ItemKind {
    Call {
        id: &'static str,
        args: Option<&'static str>,
    },
    Output {
        id: &'static str,
        text: bool,
    },
    Reasoning,
    Compaction,
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

impl Reader {
    /// Read a typed Responses item (any `type` but `message`) at `index`.
    pub(super) fn responses_item<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        ty: &str,
        index: usize,
    ) -> Res<Message<'a>> {
        let loc = Loc::root(Some(index), "");
        self.hints.responses = true;
        let (role, mut b) = match kind_of(ty) {
            ItemKind::Call { id, args } => {
                let mut b = Block::new(BlockKind::ToolCall);
                b.id = self.opt_str(obj, id, &loc)?;
                b.name = Some(match get(obj, "name") {
                    Some(n) => self.text(n, &loc.child("name"))?.to_utf8().into_owned(),
                    None => ty.to_owned(),
                });
                match args {
                    Some(field) => match get(obj, field) {
                        Some(a) => b
                            .texts
                            .push(Piece::Borrowed(self.text(a, &loc.child(field))?)),
                        None if ty == "mcp_approval_request" => {}
                        None => b.malformed = Some(field),
                    },
                    None => {
                        b.opaque = true;
                        self.item_strings(obj, &mut b, &loc)?;
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
                b.id = self.opt_str(obj, id, &loc)?;
                b.name = Some(ty.trim_end_matches("_output").to_owned());
                match get(obj, "output") {
                    Some(Value::String(s)) => b.texts.push(Piece::Borrowed(Text::Utf8(s))),
                    Some(o @ Value::Array(_)) => {
                        if ty == "shell_call_output" {
                            self.strings(o, &mut b.texts, &loc.child("output"), 0)?;
                        } else {
                            crate::formats::blocks::result_content(
                                self,
                                &o,
                                &mut b,
                                &loc.child("output"),
                            )?;
                        }
                    }
                    Some(o) => {
                        let mut inner = Vec::new();
                        self.strings(o, &mut inner, &loc.child("output"), 0)?;
                        if ty == "computer_call_output" {
                            b.images += 1;
                        } else {
                            b.texts.extend(inner);
                        }
                    }
                    None if ty == "mcp_approval_response" || ty == "apply_patch_call_output" => {
                        self.item_strings(obj, &mut b, &loc)?;
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
            ItemKind::Reasoning => (Role::Assistant, self.reasoning(obj, &loc)?),
            ItemKind::Compaction => (
                Role::Assistant,
                self.opaque(obj, BlockKind::Compaction, &loc)?,
            ),
            ItemKind::Other => {
                let mut b = self.opaque(obj, BlockKind::Other, &loc)?;
                b.needs_store = ty == "item_reference";
                (Role::Assistant, b)
            }
        };
        b.origin = Origin::Item;
        let mut m = Message::new(role, vec![b]);
        m.responses = true;
        Ok(m)
    }

    /// A reasoning item: the texts of its `summary` and `content` parts and its
    /// `encrypted_content`.
    fn reasoning<'a>(&mut self, obj: &'a Map<String, Value>, loc: &Loc<'_>) -> Res<Block<'a>> {
        let mut b = Block::new(BlockKind::Reasoning);
        b.opaque = true;
        b.id = self.opt_str(obj, "id", loc)?;
        for key in ["summary", "content"] {
            let Some(parts) = get(obj, key) else {
                continue;
            };
            let ploc = loc.child(key);
            for (k, part) in self.sequence(parts, &ploc)?.iter().enumerate() {
                let iloc = ploc.item(k);
                let p = self.object(part, &iloc)?;
                if let Some(t) = get(p, "text") {
                    b.texts
                        .push(Piece::Borrowed(self.text(t, &iloc.child("text"))?));
                }
            }
        }
        match get(obj, "encrypted_content") {
            Some(e) => b.texts.push(Piece::Borrowed(
                self.text(e, &loc.child("encrypted_content"))?,
            )),
            None => b.needs_store = b.id.is_some(),
        }
        Ok(b)
    }

    /// An opaque item: counted from every string it holds.
    fn opaque<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        kind: BlockKind,
        loc: &Loc<'_>,
    ) -> Res<Block<'a>> {
        let mut b = Block::new(kind);
        b.opaque = true;
        self.item_strings(obj, &mut b, loc)?;
        Ok(b)
    }

    /// Every string of an item but its `id`, `type` and `status`.
    fn item_strings<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        b: &mut Block<'a>,
        loc: &Loc<'_>,
    ) -> Res<()> {
        for (k, v) in obj {
            if !matches!(k.as_str(), "id" | "type" | "status") {
                self.strings(v, &mut b.texts, &loc.child(k), 1)?;
            }
        }
        Ok(())
    }
}

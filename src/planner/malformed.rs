//! The part of the repair pass that looks at one message at a time: a role the format does not
//! have, and content blocks without a field the provider requires (`Block::malformed`).
//!
//! - A role the format lacks (any unknown role; `system`/`developer` inside Anthropic's list) is
//!   sent as a `user` message with the same content: nothing the caller wrote is lost, and the
//!   change is recorded. Tool calls or results it carried cannot sit on a user message and are
//!   dropped.
//! - A block without `type` that has a string `text` becomes a text block; any other malformed
//!   block is dropped. A message left with no block is dropped.
//!
//! It runs on the repair pass's output, so it also cleans blocks that pass moved or merged.

use super::output::{Change, OutBlock, OutMsg, RecordEntry};
use crate::message::{BlockKind, Conversation, Format, Role};

/// Whether `role` is one the format's requests may carry in their message list.
fn role_is_valid(format: Format, role: Role) -> bool {
    // Tool and function roles are left to the repair of results (not dropped here).
    format.has_role(role) || (role != Role::Other && !role.is_instruction())
}

/// Whether any message of `conv` needs this pass.
pub fn needed(conv: &Conversation<'_>) -> bool {
    conv.messages.iter().any(|m| {
        !role_is_valid(conv.format, m.role) || m.blocks.iter().any(|b| b.malformed.is_some())
    })
}

/// Rewrite or drop what `out` holds of malformed blocks and invalid roles.
pub fn clean(
    conv: &Conversation<'_>,
    out: Vec<OutMsg>,
    repairs: &mut Vec<String>,
    record: &mut Vec<RecordEntry>,
) -> Vec<OutMsg> {
    let msgs = &conv.messages;
    let format = conv.format;
    let mut note = |index: usize, action: Change, repair: String, detail: String| {
        repairs.push(format!("message {index}: {repair}"));
        record.push(RecordEntry {
            index,
            action,
            detail,
        });
    };
    let mut cleaned = Vec::with_capacity(out.len());
    for o in out {
        let source = o.source();
        let retype = source.filter(|&i| !role_is_valid(format, msgs[i].role));
        let blocks_of = |o: &OutMsg| -> Vec<OutBlock> {
            match o {
                OutMsg::Keep(i) => (0..msgs[*i].blocks.len())
                    .map(|k| OutBlock::Orig {
                        msg: *i,
                        block: k,
                        edit: None,
                    })
                    .collect(),
                OutMsg::Rebuild { blocks, .. } | OutMsg::New { blocks, .. } => blocks.clone(),
            }
        };
        let touched = retype.is_some()
            || blocks_of(&o).iter().any(|b| {
                matches!(b, OutBlock::Orig { msg, block, .. } if msgs[*msg].blocks[*block].malformed.is_some())
            });
        if !touched {
            cleaned.push(o);
            continue;
        }
        let mut blocks = Vec::new();
        for b in blocks_of(&o) {
            let OutBlock::Orig { msg, block, .. } = &b else {
                blocks.push(b);
                continue;
            };
            let (msg, block) = (*msg, *block);
            let view = &msgs[msg].blocks[block];
            let place = place(view.origin);
            match view.malformed {
                Some("type") if view.kind == BlockKind::Text => {
                    let text: String = view.texts.iter().map(|t| t.text().to_utf8()).collect();
                    note(
                        msg,
                        Change::Repaired,
                        format!("{place} had no \"type\": sent as a text block"),
                        format!("{place} without a type made a text block"),
                    );
                    blocks.push(OutBlock::Text(text));
                }
                Some(field) => note(
                    msg,
                    Change::Repaired,
                    format!("dropped {place}: it has no {field:?}"),
                    format!("{place} dropped (no {field:?})"),
                ),
                None if retype.is_some()
                    && matches!(view.kind, BlockKind::ToolCall | BlockKind::ToolResult) =>
                {
                    note(
                        msg,
                        Change::Repaired,
                        format!("dropped {place}: a tool call or result on a message whose role was not valid"),
                        format!("{place} dropped with the invalid role"),
                    );
                }
                None => blocks.push(b),
            }
        }
        if blocks.is_empty() {
            if let Some(i) = source {
                note(
                    i,
                    Change::Dropped,
                    "dropped the message: nothing valid was left in it".to_owned(),
                    "nothing valid left".to_owned(),
                );
            }
            continue;
        }
        cleaned.push(match (retype, o) {
            (Some(i), _) => {
                note(
                    i,
                    Change::Repaired,
                    format!("{format} has no such message role: sent as a user message"),
                    "invalid role: sent as user".to_owned(),
                );
                OutMsg::New {
                    role: Role::User,
                    blocks,
                }
            }
            (None, OutMsg::New { role, .. }) => OutMsg::New { role, blocks },
            (None, OutMsg::Keep(from) | OutMsg::Rebuild { from, .. }) => {
                OutMsg::Rebuild { from, blocks }
            }
        });
    }
    cleaned
}

/// Where a block sits in its message, for repair texts.
fn place(origin: crate::message::Origin) -> String {
    use crate::message::Origin;
    match origin {
        Origin::Part(k) => format!("content[{k}]"),
        Origin::Call(k) => format!("tool_calls[{k}]"),
        Origin::Refusal => "refusal".to_owned(),
        Origin::FunctionCall => "function_call".to_owned(),
        Origin::Content | Origin::Whole | Origin::Item => "content".to_owned(),
    }
}

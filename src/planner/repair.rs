//! Repair invalid input the way Codex's normalize pass does: every call gets its results right
//! after it (a missing one gets a synthetic "no result was recorded" result, unless the call
//! is the conversation's last and may still be waiting), results found elsewhere are moved
//! there, orphan and duplicate results are dropped; for Anthropic also thinking blocks first,
//! no empty messages, and a user message first; invalid roles and malformed blocks are
//! rewritten or dropped (`malformed.rs`). Each repair is described in plain words.

use super::draft::{Count, Slot};
use super::output::{Change, OutBlock, OutMsg, RecordEntry};
use crate::message::{BlockKind, Conversation, Format, Message, Role, NO_RESULT};
use crate::structure::result_region_end;
use crate::tokens::counter::Framing;
use std::collections::{HashMap, HashSet};

/// Result of the repair pass.
pub struct Repaired<'a> {
    pub slots: Vec<Slot<'a>>,
    pub repairs: Vec<String>,
    pub record: Vec<RecordEntry>,
}

/// Whether the results of the calls at `i` already sit right after it, each once, first in
/// their messages: then the block is kept untouched.
fn region_is_clean(messages: &[Message<'_>], i: usize, end: usize, anthropic: bool) -> bool {
    // Gemini wants every response in the one content right after the call.
    if messages[i].gemini && end > i + 2 {
        return false;
    }
    let mut open: Vec<Option<&str>> = messages[i].calls().map(|c| c.id.as_deref()).collect();
    for m in &messages[i + 1..end] {
        if anthropic && m.kind_after_others(|k| k == BlockKind::ToolResult) {
            return false;
        }
        for r in m.results() {
            match open.iter().position(|&o| o == r.id.as_deref()) {
                Some(k) => {
                    open.swap_remove(k);
                }
                None => return false,
            }
        }
    }
    open.is_empty() || end == messages.len()
}

/// Repair `conv` (or keep it as it is when it needs nothing).
pub fn repair<'a>(
    conv: &Conversation<'a>,
    tokens: &[usize],
    pinned: &[bool],
    framing: Framing,
    counter: &dyn Count,
) -> Repaired<'a> {
    let msgs = &conv.messages;
    let n = msgs.len();
    // Results are blocks of user messages (Anthropic, Gemini); thinking-first is Anthropic's.
    let anthropic = conv.format.results_in_user_messages();
    let thinking_first = conv.format == Format::Anthropic;
    let mut repairs = Vec::new();
    let mut record = Vec::new();

    // Where each result sits, and where each call is first made.
    let mut results: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        for (k, b) in m.blocks.iter().enumerate() {
            match (b.kind, b.id.as_deref()) {
                (BlockKind::ToolResult, Some(id)) => results.entry(id).or_default().push((i, k)),
                (BlockKind::ToolCall, Some(id)) if m.role == Role::Assistant => {
                    call_at.entry(id).or_insert(i);
                }
                _ => {}
            }
        }
    }

    let mut used: HashSet<(usize, usize)> = HashSet::new();
    let mut consumed = vec![false; n];
    let mut out: Vec<OutMsg> = Vec::with_capacity(n);

    for i in 0..n {
        if consumed[i] {
            continue;
        }
        let m = &msgs[i];
        if m.role == Role::Assistant && m.has_calls() {
            out.push(order_thinking(m, i, thinking_first, &mut repairs));
            let end = result_region_end(msgs, i);
            if region_is_clean(msgs, i, end, anthropic) {
                for j in i + 1..end {
                    consumed[j] = true;
                    for (k, b) in msgs[j].blocks.iter().enumerate() {
                        if b.kind == BlockKind::ToolResult {
                            used.insert((j, k));
                        }
                    }
                    out.push(OutMsg::Keep(j));
                }
                continue;
            }
            // Gather each call's result, wherever it is.
            let waiting_allowed = end == n;
            let mut found: Vec<OutBlock> = Vec::new();
            let mut openai_out: Vec<OutMsg> = Vec::new();
            for c in m.calls() {
                let id = c.id.as_deref();
                let hit = id.and_then(|id| {
                    results.get(id).and_then(|v| {
                        // Prefer a result in the block's own region, then any unused one.
                        v.iter()
                            .copied()
                            .find(|&(j, k)| j > i && j < end && !used.contains(&(j, k)))
                            .or_else(|| v.iter().copied().find(|p| !used.contains(p)))
                    })
                });
                match hit {
                    Some((j, k)) => {
                        used.insert((j, k));
                        if !(j > i && j < end) {
                            repairs.push(format!(
                                "message {j}: moved the result of tool call {} right after its call (message {i})",
                                show(id)
                            ));
                            record.push(RecordEntry {
                                index: j,
                                action: Change::Repaired,
                                detail: format!("result of {} moved after message {i}", show(id)),
                            });
                        }
                        if anthropic {
                            found.push(OutBlock::Orig {
                                msg: j,
                                block: k,
                                edit: None,
                            });
                        } else {
                            consumed[j] = true;
                            openai_out.push(OutMsg::Keep(j));
                        }
                    }
                    None if waiting_allowed => {}
                    None => {
                        repairs.push(format!(
                            "message {end}: inserted a synthetic result for tool call {} of message {i} (no result was recorded)",
                            show(id)
                        ));
                        record.push(RecordEntry {
                            index: i,
                            action: Change::Repaired,
                            detail: format!("synthetic result added for {}", show(id)),
                        });
                        let block = OutBlock::Result {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            text: NO_RESULT.to_owned(),
                            is_error: true,
                        };
                        if anthropic {
                            found.push(block);
                        } else {
                            openai_out.push(OutMsg::New {
                                role: Role::Tool,
                                blocks: vec![block],
                            });
                        }
                    }
                }
            }
            if !anthropic {
                out.extend(openai_out);
                continue;
            }
            // When one message already holds exactly these results, in order, it stays as it is
            // (the same object) and only the strays around it are dropped.
            let single = match found.first() {
                Some(OutBlock::Orig { msg: j, .. }) => {
                    let j = *j;
                    let in_order = found.iter().enumerate().all(|(k, b)| {
                        matches!(b, OutBlock::Orig { msg, block, edit: None } if *msg == j && *block == k)
                    });
                    let others_plain = (i + 1..end)
                        .filter(|&x| x != j)
                        .all(|x| !msgs[x].has_non_result_content());
                    (in_order
                        && msgs[j].blocks.len() == found.len()
                        && others_plain
                        && j > i
                        && j < end)
                        .then_some(j)
                }
                _ => None,
            };
            if let Some(j) = single {
                for x in i + 1..end {
                    consumed[x] = true;
                    if x == j {
                        continue;
                    }
                    for b in msgs[x].results() {
                        repairs.push(format!(
                            "message {x}: dropped a duplicate or orphan result for tool call {}",
                            show(b.id.as_deref())
                        ));
                        record.push(RecordEntry {
                            index: x,
                            action: Change::Dropped,
                            detail: format!("stray result for {}", show(b.id.as_deref())),
                        });
                    }
                }
                out.push(OutMsg::Keep(j));
                continue;
            }
            // One user message: the results, then whatever else the region's messages said.
            let mut blocks = found;
            for j in i + 1..end {
                consumed[j] = true;
                for (k, b) in msgs[j].blocks.iter().enumerate() {
                    if b.kind != BlockKind::ToolResult {
                        blocks.push(OutBlock::Orig {
                            msg: j,
                            block: k,
                            edit: None,
                        });
                        continue;
                    }
                    let id = b.id.as_deref();
                    let later_call = id.and_then(|id| call_at.get(id)).is_some_and(|&c| c > i);
                    if !used.contains(&(j, k)) && !later_call {
                        repairs.push(format!(
                            "message {j}: dropped a duplicate or orphan result for tool call {}",
                            show(id)
                        ));
                        record.push(RecordEntry {
                            index: j,
                            action: Change::Dropped,
                            detail: format!("stray result for {}", show(id)),
                        });
                    }
                }
            }
            for j in i + 1..end {
                record.push(RecordEntry {
                    index: j,
                    action: Change::Repaired,
                    detail: format!("merged into the results of message {i}"),
                });
            }
            if end < n && msgs[end].role == Role::User && !msgs[end].has_results() {
                // The conversation went on with user text: it joins the results message.
                record.push(RecordEntry {
                    index: end,
                    action: Change::Repaired,
                    detail: format!("merged into the results of message {i}"),
                });
                consumed[end] = true;
                for k in 0..msgs[end].blocks.len() {
                    blocks.push(OutBlock::Orig {
                        msg: end,
                        block: k,
                        edit: None,
                    });
                }
            }
            if !blocks.is_empty() {
                out.push(OutMsg::New {
                    role: Role::User,
                    blocks,
                });
            }
            continue;
        }

        // Any other message: drop results that belong elsewhere (already used, or orphans).
        if m.has_results() {
            let mut keep_blocks = Vec::new();
            let mut dropped = 0;
            for (k, b) in m.blocks.iter().enumerate() {
                if b.kind != BlockKind::ToolResult {
                    keep_blocks.push(k);
                    continue;
                }
                let id = b.id.as_deref();
                let later_call = id.and_then(|id| call_at.get(id)).is_some_and(|&c| c > i);
                if later_call {
                    // Moved after its call when the call comes up.
                    continue;
                }
                if used.contains(&(i, k)) {
                    continue;
                }
                dropped += 1;
                let why = if id.and_then(|id| call_at.get(id)).is_some() {
                    "a duplicate result"
                } else {
                    "an orphan result (no matching call)"
                };
                repairs.push(format!(
                    "message {i}: dropped {why} for tool call {}",
                    show(id)
                ));
                record.push(RecordEntry {
                    index: i,
                    action: Change::Dropped,
                    detail: format!("{why} for {}", show(id)),
                });
            }
            let moved_or_dropped = keep_blocks.len() < m.blocks.len();
            if !moved_or_dropped {
                out.push(OutMsg::Keep(i));
            } else if !keep_blocks.is_empty() && anthropic {
                out.push(OutMsg::Rebuild {
                    from: i,
                    blocks: keep_blocks
                        .into_iter()
                        .map(|k| OutBlock::Orig {
                            msg: i,
                            block: k,
                            edit: None,
                        })
                        .collect(),
                });
            }
            // Otherwise the whole message was results that moved or were dropped.
            let _ = dropped;
            continue;
        }
        if anthropic && m.empty && !(i + 1 == n && m.role == Role::Assistant) {
            repairs.push(format!(
                "message {i}: dropped an empty {} message",
                m.role.name()
            ));
            record.push(RecordEntry {
                index: i,
                action: Change::Dropped,
                detail: "empty content".to_owned(),
            });
            continue;
        }
        out.push(order_thinking(m, i, thinking_first, &mut repairs));
    }

    // Invalid roles and malformed blocks, wherever the pass above put them.
    if super::malformed::needed(conv) {
        out = super::malformed::clean(conv, out, &mut repairs, &mut record);
    }

    let mut slots: Vec<Slot<'a>> = out
        .into_iter()
        .map(|o| match o {
            OutMsg::Keep(i) => Slot::keep(conv, i, tokens[i], pinned[i]),
            other => {
                let pin = other.source().is_some_and(|i| pinned[i]);
                let mut s = Slot::build(conv, other, framing, counter);
                s.pinned = pin;
                s
            }
        })
        .collect();

    if anthropic {
        slots = super::provider_compaction::start_at_latest_block(
            conv,
            slots,
            tokens,
            pinned,
            &mut repairs,
            &mut record,
        );
    }
    // Anthropic (and strict templates) need the user to speak first (or a compaction block).
    if anthropic {
        if let Some(first) = slots.iter().position(|s| !s.view.role.is_instruction()) {
            if slots[first].view.role != Role::User
                && !crate::formats::anthropic_compaction::opens_with_block(&slots[first].view)
            {
                repairs.push(
                    format!("message 0: inserted a user message before the first assistant message ({} requires the user first)", if thinking_first { "Anthropic" } else { "Gemini" }),
                );
                let s = Slot::build(
                    conv,
                    OutMsg::New {
                        role: Role::User,
                        blocks: vec![OutBlock::Text("(conversation continued)".to_owned())],
                    },
                    framing,
                    counter,
                );
                slots.insert(first, s);
            }
        }
    }
    Repaired {
        slots,
        repairs,
        record,
    }
}

fn show(id: Option<&str>) -> String {
    match id {
        Some(id) if crate::formats::gemini::is_synthetic(id) => "(without id)".to_owned(),
        Some(id) => format!("{id:?}"),
        None => "(legacy function_call)".to_owned(),
    }
}

/// Anthropic wants thinking blocks first in an assistant message.
fn order_thinking(m: &Message<'_>, i: usize, anthropic: bool, repairs: &mut Vec<String>) -> OutMsg {
    if !anthropic || m.role != Role::Assistant {
        return OutMsg::Keep(i);
    }
    if !m.kind_after_others(BlockKind::is_thinking) {
        return OutMsg::Keep(i);
    }
    repairs.push(format!(
        "message {i}: moved thinking blocks before the other blocks"
    ));
    let mut order: Vec<usize> = (0..m.blocks.len())
        .filter(|&k| m.blocks[k].kind.is_thinking())
        .collect();
    order.extend((0..m.blocks.len()).filter(|&k| !m.blocks[k].kind.is_thinking()));
    OutMsg::Rebuild {
        from: i,
        blocks: order
            .into_iter()
            .map(|k| OutBlock::Orig {
                msg: i,
                block: k,
                edit: None,
            })
            .collect(),
    }
}

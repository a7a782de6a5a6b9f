//! The repair pass's part for Anthropic compaction blocks (see `crate::formats::anthropic_compaction`): the
//! conversation starts with the assistant message that holds the latest block; everything
//! before it is dropped (recorded); the task is re-sent right after it unless the block's
//! readable content holds the task's opening words. Our earlier summary before the block (its
//! ledger) moves to right after it instead.

use super::draft::Slot;
use super::output::{Change, RecordEntry};
use crate::formats::anthropic_compaction::{blocks, holds_task, opens_with_block};
use crate::message::{BlockKind, Conversation};

/// Apply the rule to the repaired `slots` (a no-op without a misplaced or second block).
pub fn start_at_latest_block<'a>(
    conv: &Conversation<'a>,
    slots: Vec<Slot<'a>>,
    tokens: &[usize],
    pinned: &[bool],
    repairs: &mut Vec<String>,
    record: &mut Vec<RecordEntry>,
) -> Vec<Slot<'a>> {
    let msgs = &conv.messages;
    let Some(&(latest, _)) = blocks(msgs).last() else {
        return slots;
    };
    let first = slots.iter().position(|s| !s.view.role.is_instruction());
    if first.and_then(|f| slots[f].source()) == Some(latest) && opens_with_block(&msgs[latest]) {
        return slots;
    }
    let task = msgs.iter().position(|m| m.is_user_text());
    let mut out = Vec::with_capacity(slots.len());
    let mut dropped_task = false;
    // Our earlier summary before the block: its ledger is the library's to carry, so it moves to
    // right after the block (read back by the next compaction) instead of being dropped.
    let mut ours: Vec<Slot<'a>> = Vec::new();
    for s in slots {
        let before = s.source().is_none_or(|i| i < latest);
        if before && s.is_summary() && !s.view.role.is_instruction() {
            ours.push(s);
            continue;
        }
        if before && !s.view.role.is_instruction() {
            if let Some(i) = s.source() {
                dropped_task |= Some(i) == task;
                repairs.push(format!(
                    "message {i}: dropped (before the latest compaction block, message {latest}, which the provider requires first)"
                ));
                record.push(RecordEntry {
                    index: i,
                    action: Change::Dropped,
                    detail: format!("before the compaction block of message {latest}"),
                });
            }
            continue;
        }
        let at_latest = s.source() == Some(latest);
        out.push(s);
        if at_latest && dropped_task {
            let t = task.expect("a dropped task has an index");
            let block_text: String = msgs[latest]
                .blocks
                .iter()
                .filter(|b| b.kind == BlockKind::Compaction)
                .flat_map(|b| b.texts.iter().map(|p| p.text().to_utf8().into_owned()))
                .collect();
            if !holds_task(&block_text, &msgs[t].prose()) {
                repairs.push(format!(
                    "message {t}: the task re-sent right after the compaction block (its content does not hold the task)"
                ));
                out.push(Slot::keep(conv, t, tokens[t], pinned[t]));
            }
        }
        if at_latest && !ours.is_empty() {
            repairs.push(format!(
                "our earlier summary moved right after the compaction block of message {latest} (its ledger carried)"
            ));
            out.append(&mut ours);
        }
    }
    out
}

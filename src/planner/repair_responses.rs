//! The repair pass for OpenAI Responses items (the rules are in `crate::formats::responses`).
//!
//! Items are never merged or reordered: a second call with a `call_id` already used is
//! dropped; an output whose call is not before it, or a second output for one call, is dropped;
//! a call still without an output when the user speaks again gets a synthetic
//! `function_call_output` ("no result was recorded") right before that user message, or is
//! dropped when its kind has no plain-text output (a computer or shell call); then a reasoning
//! item left without its following item is dropped. Every change is recorded by item index.

use super::draft::{Count, Slot};
use super::output::{Change, OutBlock, OutMsg, RecordEntry};
use super::repair::Repaired;
use crate::formats::responses::{is_call_item, is_item, is_reasoning};
use crate::message::{Conversation, Role, NO_RESULT};
use crate::tokens::counter::Framing;
use std::collections::HashSet;

/// Repair a Responses item list.
pub fn repair<'a>(
    conv: &Conversation<'a>,
    tokens: &[usize],
    pinned: &[bool],
    framing: Framing,
    counter: &dyn Count,
) -> Repaired<'a> {
    let msgs = &conv.messages;
    let mut repairs = Vec::new();
    let mut record = Vec::new();

    // Duplicate calls, orphan and duplicate outputs.
    let mut seen_calls: HashSet<&str> = HashSet::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut kept: Vec<usize> = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        if is_call_item(m) {
            if let Some(id) = m.calls().next().and_then(|c| c.id.as_deref()) {
                if !seen_calls.insert(id) {
                    dropped(
                        i,
                        format!("a second call with call_id {id:?}"),
                        &mut repairs,
                        &mut record,
                    );
                    continue;
                }
            }
        }
        if is_item(m) && m.has_results() {
            if let Some(id) = m.results().next().and_then(|r| r.id.as_deref()) {
                if !seen_calls.contains(id) {
                    dropped(
                        i,
                        format!("an output for call_id {id:?} with no call before it"),
                        &mut repairs,
                        &mut record,
                    );
                    continue;
                }
                if !answered.insert(id) {
                    dropped(
                        i,
                        format!("a second output for call_id {id:?}"),
                        &mut repairs,
                        &mut record,
                    );
                    continue;
                }
            }
        }
        kept.push(i);
    }

    // Calls still unanswered when the user speaks again.
    let mut out: Vec<OutMsg> = Vec::with_capacity(kept.len());
    let mut waiting: Vec<usize> = Vec::new();
    let mut dropped_calls: HashSet<usize> = HashSet::new();
    let flush = |out: &mut Vec<OutMsg>,
                 waiting: &mut Vec<usize>,
                 at: usize,
                 repairs: &mut Vec<String>,
                 record: &mut Vec<RecordEntry>| {
        for &c in waiting.iter() {
            let call = msgs[c].calls().next().expect("a call item has its call");
            let id = call.id.as_deref().unwrap_or_default();
            if call.opaque {
                continue;
            }
            repairs.push(format!(
                "item {at}: inserted a synthetic output for call_id {id:?} of item {c} (no output was recorded)"
            ));
            record.push(RecordEntry {
                index: c,
                action: Change::Repaired,
                detail: format!("synthetic output added for {id:?}"),
            });
            out.push(OutMsg::New {
                role: Role::Tool,
                blocks: vec![OutBlock::Result {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    text: NO_RESULT.to_owned(),
                    is_error: true,
                }],
            });
        }
        waiting.clear();
    };
    for &i in &kept {
        let m = &msgs[i];
        if m.is_user_text() && !waiting.is_empty() {
            flush(&mut out, &mut waiting, i, &mut repairs, &mut record);
        }
        if is_call_item(m) {
            let id = m.calls().next().and_then(|c| c.id.as_deref());
            if id.is_some_and(|id| !answered.contains(id)) {
                let opaque = m.calls().next().is_some_and(|c| c.opaque);
                let later_user = kept.iter().any(|&j| j > i && msgs[j].is_user_text());
                if opaque && later_user {
                    dropped_calls.insert(i);
                    continue;
                }
                waiting.push(i);
            }
        }
        out.push(OutMsg::Keep(i));
    }
    for i in dropped_calls {
        dropped(
            i,
            "a call with no output (its kind has no text output to stand in)".to_owned(),
            &mut repairs,
            &mut record,
        );
    }

    // Reasoning left without its following item.
    let mut final_out: Vec<OutMsg> = Vec::with_capacity(out.len());
    let follows = |o: &OutMsg| match o {
        OutMsg::Keep(j) => msgs[*j].role == Role::Assistant && !is_reasoning(&msgs[*j]),
        _ => false,
    };
    let mut k = 0;
    while k < out.len() {
        let run_end = (k..out.len())
            .find(|&x| !matches!(out[x], OutMsg::Keep(j) if is_reasoning(&msgs[j])))
            .unwrap_or(out.len());
        if run_end == k {
            final_out.push(out[k].clone());
            k += 1;
            continue;
        }
        if run_end < out.len() && follows(&out[run_end]) {
            final_out.extend(out[k..run_end].iter().cloned());
        } else {
            for o in &out[k..run_end] {
                if let Some(j) = o.source() {
                    dropped(
                        j,
                        "a reasoning item without its following item".to_owned(),
                        &mut repairs,
                        &mut record,
                    );
                }
            }
        }
        k = run_end;
    }

    let mut out = final_out;
    if super::malformed::needed(conv) {
        out = super::malformed::clean(conv, out, &mut repairs, &mut record);
    }
    let slots: Vec<Slot<'a>> = out
        .into_iter()
        .map(|o| match o {
            OutMsg::Keep(i) => Slot::keep(conv, i, tokens[i], pinned[i]),
            other => Slot::build(conv, other, framing, counter),
        })
        .collect();
    Repaired {
        slots,
        repairs,
        record,
    }
}

fn dropped(i: usize, what: String, repairs: &mut Vec<String>, record: &mut Vec<RecordEntry>) {
    repairs.push(format!("item {i}: dropped {what}"));
    record.push(RecordEntry {
        index: i,
        action: Change::Dropped,
        detail: what,
    });
}

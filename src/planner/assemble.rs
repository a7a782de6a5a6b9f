//! Putting the output together: head, summary, kept instructions and pinned messages, tail;
//! the shape the provider needs; the result with its record and counts.

use super::draft::{total, Count, Slot};
use super::micro::Offload;
use super::output::{Change, OutBlock, OutMsg, RecordEntry, Strategy};
use super::plan::{calibrated, Planned};
use crate::message::{Conversation, Format, Message, Role};
use crate::summary::rule::truncation_summary;
use crate::validate::Profile;
use std::collections::BTreeSet;

/// A finished compaction.
#[derive(Clone, Debug)]
pub struct Outcome<'a> {
    pub slots: Vec<Slot<'a>>,
    /// The summary to add to Anthropic's system prompt (`summary_role="system"`).
    pub system_summary: Option<String>,
    pub summary: Option<String>,
    pub summary_truncated: bool,
    pub strategy: Strategy,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub over_budget: bool,
    pub over_budget_reason: Option<String>,
    pub reason: Option<String>,
    pub record: Vec<RecordEntry>,
    pub repairs: Vec<String>,
    pub phases: Vec<(&'static str, usize)>,
    pub must_keep_missing: Vec<String>,
    pub offloads: Vec<Offload>,
    pub original_count: usize,
    pub retained_count: usize,
    pub compacted_count: usize,
}

/// Every input message a slot is built from.
pub(super) fn sources(slot: &Slot<'_>) -> Vec<usize> {
    let mut out = Vec::new();
    match &slot.out {
        OutMsg::Keep(i) => out.push(*i),
        OutMsg::Rebuild { from, blocks } => {
            out.push(*from);
            out.extend(blocks.iter().filter_map(|b| match b {
                OutBlock::Orig { msg, .. } => Some(*msg),
                _ => None,
            }));
        }
        OutMsg::New { blocks, .. } => out.extend(blocks.iter().filter_map(|b| match b {
            OutBlock::Orig { msg, .. } => Some(*msg),
            _ => None,
        })),
    }
    out.sort_unstable();
    out.dedup();
    out
}

impl<'a> Planned<'a> {
    /// Head + summary + kept + tail; returns the slots, the system-prompt summary and the raw
    /// tokens of the system prompt and tools with it (`extra` when it is a message).
    ///
    /// System and developer messages that lead the conversation stay first, also when the
    /// span starts with an earlier summary (which the new summary replaces in place): the
    /// instruction slots kept in the span with nothing but instructions and earlier summaries
    /// before them go before the new summary.
    pub(super) fn assemble(
        &self,
        text: &str,
        tail_start: usize,
        late: &[usize],
        counter: &dyn Count,
    ) -> (Vec<Slot<'a>>, Option<String>, usize) {
        let cfg = &self.cfg;
        let mut text = text.to_owned();
        if !late.is_empty() {
            let late_views: Vec<Message<'_>> =
                late.iter().map(|&i| self.slots[i].view.clone()).collect();
            text.push_str("\n\n");
            text.push_str(&truncation_summary(
                &late_views,
                self.language,
                100,
                cfg.summary_max_tokens,
            ));
        }
        let conv_for_build = Conversation::new(self.format, Vec::new());
        let mut out: Vec<Slot<'a>> = self.slots[..self.head_end].to_vec();
        let instruction = |s: &Slot<'_>| s.view.role.is_instruction();
        let leading = if out.iter().all(instruction) {
            self.kept_in_span
                .iter()
                .take_while(|&&i| {
                    self.slots[self.head_end..i]
                        .iter()
                        .all(|s| instruction(s) || s.is_summary())
                })
                .count()
        } else {
            0
        };
        out.extend(
            self.kept_in_span[..leading]
                .iter()
                .map(|&i| self.slots[i].clone()),
        );
        let mut system_summary = None;
        let anthropic = self.format == Format::Anthropic;
        let extra = if cfg.summary_in_system && anthropic {
            let extra = self.extra_with(Some(&text), counter);
            system_summary = Some(text);
            extra
        } else {
            // A strict template wants system messages first only: the summary is the user's there.
            let strict = cfg.profile == Some(Profile::Strict);
            let role = if cfg.summary_in_system && !strict {
                Role::System
            } else {
                Role::User
            };
            out.push(Slot::build(
                &conv_for_build,
                OutMsg::New {
                    role,
                    blocks: vec![OutBlock::Text(text)],
                },
                cfg.framing,
                counter,
            ));
            self.extra
        };
        for &i in &self.kept_in_span[leading..] {
            out.push(self.slots[i].clone());
        }
        // Instructions and pinned messages of a tail the ladder shortened stay too.
        let tail_start = tail_start.min(self.slots.len());
        out.extend(
            self.slots[self.tail_start.min(tail_start)..tail_start]
                .iter()
                .filter(|s| s.pinned || s.view.role.is_instruction())
                .cloned(),
        );
        out.extend(self.slots[tail_start..].iter().cloned());
        (out, system_summary, extra)
    }

    /// The shape the provider (or a strict template) needs: Anthropic and strict want the user
    /// first; strict wants user and assistant to alternate. Only new short messages are
    /// inserted; no input message is changed.
    pub(super) fn fix_shape(&self, slots: &mut Vec<Slot<'a>>, counter: &dyn Count) -> Vec<String> {
        let strict = self.cfg.profile == Some(Profile::Strict);
        let anthropic = self.format == Format::Anthropic;
        let mut repairs = Vec::new();
        if !(strict || anthropic) {
            return repairs;
        }
        let conv = Conversation::new(self.format, Vec::new());
        let new = |role: Role, text: &str| {
            Slot::build(
                &conv,
                OutMsg::New {
                    role,
                    blocks: vec![OutBlock::Text(text.to_owned())],
                },
                self.cfg.framing,
                counter,
            )
        };
        if strict {
            // System/developer messages after the start move to the front (unchanged).
            let first_other = slots.iter().position(|s| !s.view.role.is_instruction());
            if let Some(f) = first_other {
                let late: Vec<usize> = (f..slots.len())
                    .filter(|&i| slots[i].view.role.is_instruction())
                    .collect();
                for (k, &i) in late.iter().enumerate() {
                    let s = slots.remove(i - k);
                    repairs.push(format!(
                        "moved a {} message to the start (strict templates need system messages first)",
                        s.view.role.name()
                    ));
                    slots.insert(f + k, s);
                }
            }
        }
        match slots.iter().position(|s| !s.view.role.is_instruction()) {
            Some(first) if slots[first].view.role != Role::User => {
                slots.insert(first, new(Role::User, "(continuing the conversation)"));
                repairs
                    .push("inserted a user message before the first assistant message".to_owned());
            }
            None if anthropic => {
                slots.push(new(Role::User, "(continuing the conversation)"));
                repairs.push("added a user message: an Anthropic request needs one".to_owned());
            }
            _ => {}
        }
        if !strict {
            return repairs;
        }
        let mut i = 0;
        let mut last: Option<bool> = None;
        while i < slots.len() {
            if slots[i].view.role.is_instruction() {
                i += 1;
                continue;
            }
            let user = super::draft::is_user_side(&slots[i].view);
            // The results of parallel calls are one turn of the user side.
            let more_results = slots[i].view.is_result_only()
                && slots[..i]
                    .iter()
                    .rev()
                    .find(|s| !s.view.role.is_instruction())
                    .is_some_and(|s| s.view.is_result_only());
            if last == Some(user) && !more_results {
                let filler = if user {
                    new(Role::Assistant, "Understood.")
                } else {
                    new(Role::User, "Continue.")
                };
                repairs.push(format!(
                    "inserted a short {} message between two {} messages (strict alternation)",
                    filler.view.role.name(),
                    if user { "user" } else { "assistant" }
                ));
                slots.insert(i, filler);
                i += 1;
            }
            last = Some(user);
            i += 1;
        }
        repairs
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &self,
        slots: Vec<Slot<'a>>,
        system_summary: Option<String>,
        summary: Option<String>,
        truncated: bool,
        strategy: Strategy,
        must_keep_missing: Vec<String>,
        soft: usize,
        counter: &dyn Count,
    ) -> Outcome<'a> {
        let ratio = self.ratio;
        let extra = self.extra_with(system_summary.as_deref(), counter);
        let mut slots = slots;
        let mut repairs = self.repairs.clone();
        repairs.extend(self.fix_shape(&mut slots, counter));
        let mut raw_after = total(&slots) + extra;
        let mut tokens_after = calibrated(raw_after, ratio);
        let mut strategy = strategy;
        let mut reason = self.reason.clone();
        let mut phases = self.phases.clone();
        let mut summary = summary;
        let mut system_summary = system_summary;
        let mut record = self.record.clone();
        // Refuse a compaction that saves too little (no loops, never grow).
        let saved = self.tokens_before.saturating_sub(tokens_after);
        if strategy != Strategy::None
            && (saved == 0
                || (saved as f64) < self.cfg.min_savings_ratio * self.tokens_before as f64)
        {
            reason = Some(format!(
                "a compaction would save {saved} of {} tokens, under min_savings_ratio={}",
                self.tokens_before, self.cfg.min_savings_ratio
            ));
            slots = self.repaired.clone();
            repairs = self.repairs.clone();
            repairs.extend(self.fix_shape(&mut slots, counter));
            strategy = Strategy::None;
            summary = None;
            system_summary = None;
            record.retain(|r| matches!(r.action, Change::Repaired | Change::Dropped));
            phases.retain(|p| p.0 == "repair");
            raw_after = total(&slots) + self.extra;
            tokens_after = calibrated(raw_after, ratio);
        } else if summary.is_some() {
            phases.push((strategy.as_str(), tokens_after));
            let mut covered = BTreeSet::new();
            for s in &slots {
                covered.extend(sources(s));
            }
            for &i in &self.span {
                for src in sources(&self.slots[i]) {
                    if !covered.contains(&src) {
                        record.push(RecordEntry {
                            index: src,
                            action: Change::Summarized,
                            detail: String::new(),
                        });
                    }
                }
            }
        }
        // Every input message that is no longer in the output and not yet named is named now.
        let mut present = BTreeSet::new();
        for s in &slots {
            present.extend(sources(s));
        }
        let named: BTreeSet<usize> = record.iter().map(|r| r.index).collect();
        for i in 0..self.original_count {
            if !present.contains(&i) && !named.contains(&i) {
                record.push(RecordEntry {
                    index: i,
                    action: if strategy == Strategy::Truncation {
                        Change::Truncated
                    } else {
                        Change::Summarized
                    },
                    detail: String::new(),
                });
            }
        }
        record.sort_by_key(|r| r.index);
        let retained_count = present.len();
        let over = raw_after > soft;
        let over_budget_reason = if over {
            Some(self.over_budget_reason.clone().unwrap_or_else(|| match &reason {
                Some(why) => format!("{tokens_after} tokens, above the soft threshold {}: {why}", self.cfg.soft),
                None => format!(
                    "{tokens_after} tokens after compaction, still above the soft threshold {} (the kept head, tail, pinned and system messages alone are too large)",
                    self.cfg.soft
                ),
            }))
        } else {
            None
        };
        Outcome {
            slots,
            system_summary,
            summary,
            summary_truncated: truncated,
            strategy,
            tokens_before: self.tokens_before,
            tokens_after,
            over_budget: over,
            over_budget_reason,
            reason,
            record,
            repairs,
            phases,
            must_keep_missing,
            offloads: self.offloads.clone(),
            original_count: self.original_count,
            retained_count,
            compacted_count: self.original_count - retained_count,
        }
    }
}

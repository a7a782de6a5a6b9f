//! Putting the output together: head, summary, kept instructions and pinned messages, tail;
//! the shape the provider needs; the result with its record and counts.

use super::draft::{total, views, Count, Slot};
use super::micro::Offload;
use super::output::{
    truncated, Change, Origin, OutBlock, OutMsg, RecordEntry, Strategy, SummarySource,
};
use super::plan::{calibrated, Planned};
use crate::message::{Conversation, Format, Message, Role};
use crate::summary::artifacts::Trail;
use crate::summary::facts::{fact_present, must_keep_facts};
use crate::summary::ledger::{strip_fakes, Ledger};
use crate::summary::truncation_summary;
use crate::text::Text;
use crate::validate::Profile;
use std::collections::BTreeSet;

/// A finished compaction.
#[derive(Clone, Debug)]
pub struct Outcome<'a> {
    pub slots: Vec<Slot<'a>>,
    /// Where each output message came from (parallel to `slots`).
    pub origins: Vec<Origin>,
    /// The summary to add to Anthropic's system prompt (`summary_role="system"`).
    pub system_summary: Option<String>,
    pub summary: Option<String>,
    pub summary_source: Option<SummarySource>,
    /// Why the summarizer's summary was not used as it came, when the ladder replaced it.
    pub fallback_reason: Option<String>,
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
    /// Originals the output's placeholders and summary name (`recall`), each id once.
    pub recalls: Vec<crate::recall::Recall>,
    pub original_count: usize,
    pub retained_count: usize,
    pub compacted_count: usize,
}

/// What the ladder varies between assemblies.
#[derive(Clone, Debug)]
pub(super) struct Shape {
    /// The summary's body (before facts and the user's words are added).
    pub body: String,
    /// Where the kept tail starts (slot index).
    pub tail_start: usize,
    /// Tail slots the ladder moved into the summary (non-frozen ones before `tail_start`).
    pub late: Vec<usize>,
    /// Head slots removed to fit (after the task; whole blocks).
    pub head_dropped: Vec<usize>,
    /// The ledger's budgets: its user words, its details and trail (the configured ones).
    pub words_budget: usize,
    pub details_budget: usize,
    /// The ladder's last step: smaller budgets for the words and the details, and the highest
    /// rank of words it may evict (`ledger::rank`; prohibitions and safety rules never).
    pub ladder: Option<(usize, usize, u8)>,
    /// The sentences of the task's cut part (when the ladder shortened it): the ledger's first
    /// user words.
    pub task_words: Vec<String>,
    /// User words the kept task shows verbatim (its text or its cut's list of constraints): left
    /// out of the ledger, which would only repeat them (a template's rules said again in a later
    /// message); the ladder checks the final task still shows each.
    pub in_task: Vec<String>,
    /// The narrative left out down to its floor (the ladder's step before any ledger entry is
    /// evicted): the summary is its marker line, the continuation's floor (the last unresolved
    /// error and the next open to-do items, bounded) and the ledger.
    pub bare: bool,
    /// The continuation's floor left out too (the ladder's very last step, after the ledger's
    /// evictable entries): the summary is its marker line and the ledger.
    pub floor_dropped: bool,
}

/// An assembled output on its way through the ladder.
#[derive(Clone, Debug)]
pub(super) struct Draft<'a> {
    pub slots: Vec<Slot<'a>>,
    pub system_summary: Option<String>,
    /// Raw tokens of the system prompt (with a system summary) and the tools.
    pub extra: usize,
    /// The summary message's text.
    pub summary: Option<String>,
    /// Must-keep facts that did not fit the summary's cap.
    pub missing: Vec<String>,
    pub strategy: Strategy,
    pub source: Option<SummarySource>,
    pub fallback_reason: Option<String>,
    /// The summary was cut (capped, or replaced by a shorter one).
    pub cut: bool,
    /// The ladder's own record entries (removed head messages, shortened ones).
    pub record: Vec<RecordEntry>,
    /// Index in `slots` where the kept tail starts.
    pub tail_from: usize,
    pub tail_shortened: bool,
    /// Tokens of the ledger's words and of its details and trail, after eviction.
    pub ledger_costs: (usize, usize),
    /// The shape this draft was assembled from.
    pub shape: Shape,
    /// Originals its summary and the ladder's cuts name (`recall`).
    pub recalls: Vec<crate::recall::Recall>,
    /// The last block's cut left out the open checklist items of cut arguments to stay under
    /// the soft threshold (a shorter narrative may make room for them).
    pub items_dropped: bool,
}

impl<'a> Draft<'a> {
    /// The plan's slots as they are (no summary).
    pub fn unchanged(p: &Planned<'a>) -> Self {
        Draft {
            slots: p.slots.clone(),
            system_summary: None,
            extra: p.extra,
            summary: None,
            missing: Vec::new(),
            strategy: p.strategy,
            source: None,
            fallback_reason: None,
            cut: false,
            record: Vec::new(),
            // Nothing was summarised: the last block's cut may reach back to the task (the head
            // runs on past it when no legal cut follows it, e.g. a pending thinking loop).
            tail_from: p
                .task
                .map_or(p.head_end, |t| t + 1)
                .min(p.head_end)
                .min(p.slots.len()),
            tail_shortened: false,
            ledger_costs: (0, 0),
            shape: Shape {
                body: String::new(),
                tail_start: p.tail_start,
                late: Vec::new(),
                head_dropped: Vec::new(),
                words_budget: 0,
                details_budget: 0,
                ladder: None,
                task_words: Vec::new(),
                in_task: Vec::new(),
                bare: false,
                floor_dropped: false,
            },
            recalls: Vec::new(),
            items_dropped: false,
        }
    }

    /// Raw tokens of the request.
    pub fn tokens(&self) -> usize {
        total(&self.slots) + self.extra
    }

    /// Keep what the ladder decided in `prev` (strategy, who wrote the summary, the summary's
    /// cut flag) across a new assembly; record entries are made again by each assembly.
    pub fn carry(&mut self, prev: &Draft<'a>) {
        self.strategy = prev.strategy;
        self.source = prev.source;
        self.fallback_reason = prev.fallback_reason.clone();
        self.cut = prev.cut;
    }

    pub fn raise(&mut self, s: Strategy) {
        self.strategy.raise(s);
    }

    /// A ladder step changed a message.
    pub fn note(&mut self, entry: RecordEntry, s: Strategy) {
        self.record.push(entry);
        self.raise(s);
    }
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
    /// The replaced messages (as they were before this compaction's passes) rendered whole:
    /// the original text a summary's recall id names.
    pub(super) fn replaced_text(&self) -> &str {
        self.replaced_text.get_or_init(|| {
            crate::summary::transcript::render_transcript(&self.replaced, usize::MAX).join("\n\n")
        })
    }

    /// Head + summary + kept + tail for `shape`.
    ///
    /// System and developer messages that lead the conversation stay first, also when the
    /// span starts with an earlier summary (which the new summary replaces in place): the
    /// instruction slots kept in the span with nothing but instructions and earlier summaries
    /// before them go before the new summary.
    pub(super) fn assemble(&self, shape: &Shape, counter: &dyn Count) -> Draft<'a> {
        let cfg = &self.cfg;
        // What the ladder removed besides the span: its facts and the user's words go into the
        // summary too (DESIGN: facts of everything a compaction removes or cuts).
        let late = views(&self.slots, &shape.late);
        let head = views(&self.slots, &shape.head_dropped);
        let mut body = if shape.bare {
            String::new()
        } else {
            shape.body.clone()
        };
        if !late.is_empty() && !shape.bare {
            body.push_str("\n\n");
            body.push_str(&truncation_summary(
                &late,
                self.language,
                100,
                cfg.summary_max_tokens,
            ));
        }
        let mut body = strip_fakes(&body);
        // The ledger: what the earlier summaries carried and the span's entries, then those of
        // what the ladder removed besides the span (DESIGN: facts of everything a compaction
        // removes or cuts; the user's words of every replaced part, in order).
        let mut ledger = if head.is_empty() {
            self.ledger.clone()
        } else {
            // Dropped head messages come before the span: their words go first (after what the
            // earlier summaries carried, which the head's messages followed).
            let mut l = self.carried.clone();
            for m in head.iter().filter(|m| m.is_user_text()) {
                l.add_user_text(&m.prose());
            }
            let mut span = self.ledger.clone();
            span.words.retain(|w| !self.carried.words.contains(w));
            l.merge(Ledger {
                words: span.words,
                details: span.details,
                trail: span.trail,
                lang: span.lang,
            });
            l
        };
        for m in late.iter().filter(|m| m.is_user_text()) {
            ledger.add_user_text(&m.prose());
        }
        if !shape.task_words.is_empty() {
            let mut first = Ledger::default();
            for w in &shape.task_words {
                first.add_user_text(w);
            }
            first.merge(ledger);
            ledger = first;
        }
        if !late.is_empty() || !head.is_empty() {
            let all: Vec<Message<'a>> = head.iter().chain(&late).cloned().collect();
            ledger.absorb_trail(Trail::of(None, &all));
        }
        let mut facts = self.facts.clone();
        for f in must_keep_facts(&late)
            .into_iter()
            .chain(must_keep_facts(&head))
        {
            if !facts.contains(&f) {
                facts.push(f);
            }
        }
        // Not the facts the narrative or the kept task shows (the task is never removed; a cut
        // of it lists the facts of its cut part).
        let task = self
            .task
            .map(|t| &self.slots[t])
            .filter(|s| !s.is_summary())
            .map(|s| s.view.prose())
            .unwrap_or_default();
        let shown: Vec<&str> = facts
            .iter()
            .map(String::as_str)
            .filter(|f| !fact_present(&body, f) && !task.contains(f) && !ledger.trail_has(f))
            .collect();
        let hidden = ledger.add_details(&shown);
        let count = |s: &str| counter.count(Text::Utf8(s));
        if cfg.user_messages_budget_tokens == 0 {
            ledger.words.clear();
        }
        if cfg.details_budget_tokens == 0 {
            ledger.details.clear();
            ledger.trail.clear();
        }
        if !shape.in_task.is_empty() {
            ledger.words.retain(|w| !shape.in_task.contains(&w.text));
        }
        let mut evicted = ledger.fit(shape.words_budget, shape.details_budget, 2, &count);
        if let Some((w, d, r)) = shape.ladder {
            let more = ledger.fit(w, d, r, &count);
            evicted.words.extend(more.words);
            evicted.facts.extend(more.facts);
        }
        let ledger_costs = ledger.costs(&count);
        // A fact left out because a longer entry shows it is lost with that entry.
        if cfg.details_budget_tokens > 0 {
            let shown = |f: &str| fact_present(&body, f) || task.contains(f);
            let more = ledger.lost(&hidden, &evicted.facts, &shown);
            evicted.facts.extend(more);
        }
        let missing = evicted.all();
        // Continuation: the open to-do items and the last unresolved error stay, in the kept
        // tail or after the narrative, whatever the narrative's cap left out. Added after the
        // facts were checked against the narrative: a fact these lines show is carried by the
        // ledger still (the lines go when the list or the error changes).
        let mut cont = self.continuation.clone();
        cont.visit(&late);
        let after = self.slots[shape.tail_start.min(self.slots.len())..]
            .iter()
            .map(|s| &s.view);
        // A twentieth of the budget (in chars, about 4 a token), at most summary_max_tokens.
        let room = (cfg.hard / 20).clamp(64, cfg.summary_max_tokens.max(64)) * 4;
        // Part of the narrative; when the ladder left the narrative out, its floor (bounded),
        // which goes only after the ledger's evictable entries.
        let carried = if !shape.bare {
            cont.missing(&body, after, self.language, room)
        } else if !shape.floor_dropped {
            cont.floor(after, self.language, room)
        } else {
            String::new()
        };
        if !carried.is_empty() {
            body = if body.trim().is_empty() {
                carried
            } else {
                format!("{}\n\n{carried}", body.trim_end())
            };
        }
        // With `recall` the summary names the id of what it replaced (as it was before this
        // compaction's passes; what the ladder removed besides the span follows it).
        let recall = cfg.recall.then(|| {
            let mut text = self.replaced_text().to_owned();
            for m in head.iter().chain(&late) {
                let names = crate::summary::transcript::call_names(std::slice::from_ref(m));
                text.push_str("\n\n");
                text.push_str(&crate::summary::transcript::render_message(
                    m,
                    &names,
                    usize::MAX,
                ));
            }
            crate::recall::Recall::of(text)
        });
        let text = self.summary_message(&body, &ledger, recall.as_ref().map(|r| r.id.as_str()));
        let conv_for_build = Conversation::new(self.format, Vec::new());
        let mut record = Vec::new();
        let mut out: Vec<Slot<'a>> = Vec::with_capacity(self.slots.len());
        for (i, s) in self.slots[..self.head_end].iter().enumerate() {
            if shape.head_dropped.contains(&i) {
                if let Some(src) = s.source() {
                    record.push(truncated(
                        src,
                        "kept head message removed to fit; its facts are in the summary",
                    ));
                }
            } else {
                out.push(s.clone());
            }
        }
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
            system_summary = Some(text.clone());
            extra
        } else {
            // A strict template wants system messages first only: the summary is the user's there.
            let strict = cfg.profile == Some(Profile::Strict);
            let role = if cfg.summary_in_system && !strict {
                self.format.summary_system_role()
            } else {
                Role::User
            };
            out.push(Slot::build(
                &conv_for_build,
                OutMsg::New {
                    role,
                    blocks: vec![OutBlock::Text(text.clone())],
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
        let tail_start = shape.tail_start.min(self.slots.len());
        out.extend(
            self.slots[self.tail_start.min(tail_start)..tail_start]
                .iter()
                .filter(|s| s.is_fixed())
                .cloned(),
        );
        let tail_from = out.len();
        out.extend(self.slots[tail_start..].iter().cloned());
        Draft {
            slots: out,
            system_summary,
            extra,
            summary: Some(text),
            missing,
            strategy: self.strategy,
            source: None,
            fallback_reason: None,
            cut: false,
            record,
            tail_from,
            tail_shortened: self.tail_shortened || tail_start != self.tail_start,
            ledger_costs,
            shape: shape.clone(),
            recalls: recall.into_iter().collect(),
            items_dropped: false,
        }
    }

    /// The result: the provider's shape, the `min_savings_ratio` refusal (only below the hard
    /// threshold), the record naming every input message that is gone, the counts, and
    /// `over_budget` with the parts that did not fit.
    pub(super) fn finish(&self, d: Draft<'a>, soft: usize, counter: &dyn Count) -> Outcome<'a> {
        let ratio = self.ratio;
        let Draft {
            mut slots,
            mut system_summary,
            mut summary,
            missing,
            mut strategy,
            mut source,
            mut fallback_reason,
            cut,
            record: ladder,
            tail_shortened,
            recalls: mut draft_recalls,
            ..
        } = d;
        let extra = self.extra_with(system_summary.as_deref(), counter);
        let mut repairs = self.repairs.clone();
        repairs.extend(self.fix_shape(&mut slots, counter));
        let mut raw_after = total(&slots) + extra;
        let mut tokens_after = calibrated(raw_after, ratio);
        let mut reason = self.reason.clone();
        let mut phases = self.phases.clone();
        let mut record = self.record.clone();
        // Never grow. Refuse a compaction that saves too little (no loops) only below the hard
        // threshold: above it the conversation must be compacted whatever it saves.
        let saved = self.tokens_before.saturating_sub(tokens_after);
        let small = (saved as f64) < self.cfg.min_savings_ratio * self.tokens_before as f64;
        // A small saving that brings the context from above the soft threshold to under it is
        // what the call was for: not refused.
        let fits_now = raw_after <= soft && self.tokens_before > self.cfg.soft;
        // A forced call with min_savings_ratio=0 asked for the compaction whatever it saves (a
        // re-compaction of a compacted context: the narrative rewritten, the ledger carried).
        let any = self.forced && self.cfg.min_savings_ratio <= 0.0;
        let grew = tokens_after > self.tokens_before;
        let refuse = grew
            || (saved == 0 && !any)
            || (small && self.tokens_before < self.cfg.hard && !fits_now);
        if strategy != Strategy::None && refuse {
            // Saving nothing is refused above the hard threshold too: the ladder ran to its end
            // and found nothing left to cut (the context is already its smallest legal form,
            // e.g. a Session's tail an earlier compaction cut), or the result would not be
            // smaller.
            let nothing = if saved == 0 {
                " (nothing left to cut)"
            } else {
                ""
            };
            reason = Some(format!(
                "a compaction would save {saved} of {} tokens{nothing}, under min_savings_ratio={}",
                self.tokens_before, self.cfg.min_savings_ratio
            ));
            slots = self.repaired.clone();
            repairs = self.repairs.clone();
            repairs.extend(self.fix_shape(&mut slots, counter));
            strategy = Strategy::None;
            summary = None;
            system_summary = None;
            source = None;
            fallback_reason = None;
            record.retain(|r| matches!(r.action, Change::Repaired | Change::Dropped));
            phases.retain(|p| p.0 == "repair");
            raw_after = total(&slots) + self.extra;
            tokens_after = calibrated(raw_after, ratio);
        } else {
            record.extend(ladder.iter().cloned());
            if tail_shortened && summary.is_some() {
                phases.push(("tail_shortened", tokens_after));
            }
            if let Some(src) = source {
                phases.push((
                    match src {
                        SummarySource::Llm => "summary",
                        SummarySource::Rule => "rule_summary",
                    },
                    tokens_after,
                ));
            }
            if ladder.iter().any(|r| r.action == Change::Shortened) {
                phases.push(("truncation", tokens_after));
            }
        }
        let mut present = BTreeSet::new();
        for s in &slots {
            present.extend(sources(s));
        }
        // The span's messages the summary replaced.
        if source.is_some() {
            for &i in &self.span {
                for src in sources(&self.slots[i]) {
                    if !present.contains(&src) {
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
        let named: BTreeSet<usize> = record.iter().map(|r| r.index).collect();
        for i in 0..self.original_count {
            if !present.contains(&i) && !named.contains(&i) {
                record.push(RecordEntry {
                    index: i,
                    action: if summary.is_some() {
                        Change::Summarized
                    } else {
                        Change::Truncated
                    },
                    detail: String::new(),
                });
            }
        }
        record.sort_by_key(|r| r.index);
        let retained_count = present.len();
        let over = raw_after > soft;
        let over_budget_reason = over.then(|| match &reason {
            Some(why) if strategy == Strategy::None => {
                format!(
                    "{tokens_after} tokens, above the soft threshold {}: {why}",
                    self.cfg.soft
                )
            }
            _ if !self.due => format!(
                "{tokens_after} tokens, above the soft threshold {}: micro-compaction only, no summary or cut was asked for",
                self.cfg.soft
            ),
            _ => self.too_large(&slots, extra, tokens_after, counter),
        });
        let origins = slots.iter().map(Slot::origin).collect();
        let recalls = {
            let mut all = self.recalls.clone();
            all.append(&mut draft_recalls);
            let mut seen = rustc_hash::FxHashSet::default();
            all.retain(|r| seen.insert(r.id.clone()));
            all
        };
        // With `offload_dir`, the originals go there (`recall-<id>.txt`) for the recall handler.
        let mut offloads = self.offloads.clone();
        if let Some(dir) = self.cfg.offload_dir.as_deref().filter(|_| self.cfg.recall) {
            offloads.extend(recalls.iter().map(|r| Offload {
                path: crate::recall::recall_path(dir, &r.id),
                text: r.text.clone(),
            }));
        }
        Outcome {
            slots,
            origins,
            system_summary,
            summary,
            summary_source: source,
            fallback_reason,
            summary_truncated: cut || !missing.is_empty(),
            strategy,
            tokens_before: self.tokens_before,
            tokens_after,
            over_budget: over,
            over_budget_reason,
            reason,
            record,
            repairs,
            phases,
            must_keep_missing: missing,
            offloads,
            recalls,
            original_count: self.original_count,
            retained_count,
            compacted_count: self.original_count - retained_count,
        }
    }
}

//! `Planned::apply`: the summary (the caller's reply or the rule summary) made into the summary
//! message with its must-keep facts, then the budget ladder (see the module note in `mod.rs`).
//! Over 600 lines: the ladder's steps, in their order, read top to bottom in one place.

use super::assemble::{Draft, Outcome, Shape};
use super::draft::Count;
use super::last_block::shorten_last_block_recalled;
use super::output::{Change, Strategy, SummarySource};
use super::plan::{raw_of, Planned};
use super::shorten::shorten_task;
use super::SUMMARY_MARKER;
use crate::message::BlockKind;
use crate::structure::analyze;
use crate::summary::instruction::user_instructions;
use crate::summary::language::Language;
use crate::summary::ledger::{strip_fakes, Ledger};
use crate::summary::reply::{cap_to_tokens, extract_summary};
use crate::summary::{rule_summary_chained, truncation_summary};
use crate::text::Text;

impl<'a> Planned<'a> {
    /// Finish: `summary` is the reply for the last chunk (`None`: the built-in rule summary).
    pub fn apply(
        &self,
        summary: Option<&str>,
        truncated: bool,
        counter: &dyn Count,
    ) -> Outcome<'a> {
        // Each ladder step assembles again and asks the classifier about the same sentences.
        // The rule summary reads the span's results again: the transcoding memo's scope too.
        crate::summary::instruction::memoized(|| {
            crate::text::utf8_memo_scope(|| self.apply_memoized(summary, truncated, counter))
        })
    }

    /// [`Planned::apply`] within the classifier's memo.
    fn apply_memoized(
        &self,
        summary: Option<&str>,
        truncated: bool,
        counter: &dyn Count,
    ) -> Outcome<'a> {
        let out = self.apply_summary(summary, truncated, counter);
        // A forced call with min_savings_ratio=0 asked for a compaction: when the summarizer's
        // narrative would grow the context (refused: a compaction never grows it), the rule
        // summary's (with nothing new: the earlier narrative as it was) is used instead.
        if summary.is_some()
            && out.strategy == Strategy::None
            && self.forced
            && self.needs_summary
            && self.cfg.min_savings_ratio <= 0.0
        {
            let mut rule = self.apply_summary(None, false, counter);
            if rule.strategy != Strategy::None {
                rule.fallback_reason = Some(
                    "the summary would have grown the context: the rule summary instead".to_owned(),
                );
                return rule;
            }
        }
        out
    }

    /// [`Planned::apply`] with `summary` as it is.
    fn apply_summary(
        &self,
        summary: Option<&str>,
        truncated: bool,
        counter: &dyn Count,
    ) -> Outcome<'a> {
        let cfg = &self.cfg;
        let soft = raw_of(cfg.soft, self.ratio);
        let target = raw_of(cfg.target, self.ratio);
        if !self.needs_summary {
            let mut d = Draft::unchanged(self);
            if self.due {
                self.fit(&mut d, soft, counter);
            }
            return self.finish(d, soft, counter);
        }
        let count_str = |s: &str| counter.count(Text::Utf8(s));
        let (mut body, strategy, source, mut cut) = match summary {
            Some(reply) => {
                let (text, _tagged) = extract_summary(reply);
                // The summarizer writes only the narrative: a sentinel or ledger header it
                // wrote (or copied from a page it read) is not ours.
                let text = strip_fakes(&text);
                let cap = cfg.summary_cap;
                let (text, cut) = cap_to_tokens(&text, cap, count_str);
                (
                    text,
                    Strategy::Summary,
                    SummarySource::Llm,
                    cut || truncated,
                )
            }
            // The summarizer failed at a later chunk: the chunks it did summarise are kept and
            // the rule summary covers only the rest (`partial_summary`).
            None if self.chunk_index > 0 && self.previous_summary.is_some() => {
                let text = self.partial_summary(counter);
                let (text, cut) = cap_to_tokens(&text, cfg.summary_cap, count_str);
                (text, Strategy::Summary, SummarySource::Llm, cut)
            }
            None => {
                let cap = cfg.summary_cap;
                // A summary is never re-summarised from scratch: the earlier rule summary's
                // lines compete with the new ones by priority within one bound, newest first
                // (appending them made each chained summary longer until the cap cut the new
                // part off). The bound is in characters: when the text counts over the cap
                // (CJK text is about one token a character, English about four characters a
                // token), it is built again smaller, so lines drop by priority rather than the
                // cap cutting the last sections off.
                let mut max_chars = cap * 3;
                let mut text = String::new();
                for _ in 0..4 {
                    text = rule_summary_chained(
                        self.previous_summary.as_deref(),
                        &self.replaced,
                        self.language,
                        max_chars,
                    );
                    let n = count_str(&text);
                    if n <= cap {
                        break;
                    }
                    max_chars = max_chars * cap / n * 9 / 10;
                }
                let (text, cut) = cap_to_tokens(&text, cap, count_str);
                (text, Strategy::RuleSummary, SummarySource::Rule, cut)
            }
        };
        if body.trim().is_empty() {
            let trunc = truncation_summary(
                &self.replaced,
                self.language,
                100,
                cfg.summary_max_tokens * 3,
            );
            // Its header alone (nothing of the span to show, e.g. only an earlier summary whose
            // narrative the ladder left out) is no narrative: it would only take room.
            if trunc.trim().lines().count() > 1 {
                body = trunc;
            }
        }
        let mut shape = Shape {
            body,
            tail_start: self.tail_start,
            late: Vec::new(),
            head_dropped: Vec::new(),
            words_budget: cfg.user_messages_budget_tokens,
            details_budget: cfg.details_budget_tokens,
            ladder: None,
            task_words: Vec::new(),
            in_task: Vec::new(),
            bare: false,
            floor_dropped: false,
        };
        let mut d = self.assemble(&shape, counter);
        d.strategy = strategy;
        d.source = Some(source);

        // Step 1: fewer kept tail messages, down to the last legal block (they are summarised
        // by the truncation summary appended to the summary, their facts carried).
        let st = analyze(&self.slots);
        let last_cut = st.pending_block.map_or(self.slots.len(), |b| b.start + 1);
        let legal_tail: Vec<usize> = st
            .cut_points
            .iter()
            .copied()
            .filter(|&c| c > self.tail_start && c < self.slots.len() && c < last_cut)
            .collect();
        for &c in &legal_tail {
            if d.tokens() <= target {
                break;
            }
            let from = shape.tail_start;
            shape
                .late
                .extend((from..c).filter(|&i| !self.slots[i].is_fixed()));
            shape.tail_start = c;
            d = self.reassemble(&shape, &d, counter);
        }
        // Step 2: the kept head's messages after the task (keep_first_messages > 1), whole
        // blocks, their facts and the user's words carried by the summary.
        if d.tokens() > soft {
            let dropped: Vec<usize> = (0..self.head_end)
                .filter(|&i| Some(i) != self.task && !self.slots[i].is_fixed())
                .collect();
            if !dropped.is_empty() {
                shape.head_dropped = dropped;
                d = self.reassemble(&shape, &d, counter);
                d.raise(Strategy::Truncation);
            }
        }
        // Steps 3 and 4: the task to task_max_tokens, then the kept tail's tool output.
        self.fit(&mut d, soft, counter);
        // Where room counts, the ledger does not repeat what the kept task shows verbatim.
        if d.tokens() > soft || !d.missing.is_empty() {
            d = self.without_task_repeats(&d, soft, counter);
        }
        // Step 5: the shorter truncation summary instead of the summary (the narrative's length).
        if d.tokens() > soft {
            // The rule summary at the truncation summary's size first: by priority it keeps the
            // constraints and the artifact trail, which the truncation summary has no room for.
            let trunc =
                truncation_summary(&self.replaced, self.language, 60, cfg.summary_max_tokens);
            let rule = rule_summary_chained(
                self.previous_summary.as_deref(),
                &self.replaced,
                self.language,
                trunc.chars().count(),
            );
            let short = if rule.trim().is_empty() { trunc } else { rule };
            let alt_shape = Shape {
                body: short,
                ..d.shape.clone()
            };
            let mut alt = self.reassemble(&alt_shape, &d, counter);
            // The assembly starts from the plan's slots again: the same cuts, as far as needed.
            self.fit(&mut alt, soft, counter);
            if alt.tokens() < d.tokens() {
                alt.source = Some(SummarySource::Rule);
                alt.strategy = Strategy::RuleSummary;
                if source == SummarySource::Llm {
                    alt.fallback_reason = Some(
                        "the summary did not fit the window: replaced by the shorter truncation summary"
                            .to_owned(),
                    );
                }
                cut = true;
                d = alt;
            }
        }
        // Continuation: when the last block's cut left out the open checklist items of cut
        // arguments to stay under the soft threshold, the narrative's length gives room for
        // them (DESIGN: the latest plan stays in the kept tail or the narrative whatever the
        // target), never the ledger: only a shorter narrative under the soft threshold that
        // keeps them is taken.
        if d.items_dropped && d.tokens() <= soft {
            let found = self
                .narratives(&d, soft, counter)
                .find(|alt| alt.tokens() <= soft && !alt.items_dropped);
            if let Some(alt) = found {
                cut = true;
                d = alt;
            }
        }
        // Step 6: the narrative's length gives what it can before any ledger entry goes (DESIGN,
        // invariant 5): the rule summary at a half and a quarter of the narrative's size, then
        // none at all (the marker line and the ledger).
        // A forced call with min_savings_ratio=0 must compact and never return more tokens than
        // it got (invariant 8): the narrative gives way down to the size that does not grow it
        // (with nothing new, the earlier one's size), also under the soft threshold.
        let before = if self.forced && cfg.min_savings_ratio <= 0.0 {
            raw_of(self.tokens_before, self.ratio)
        } else {
            usize::MAX
        };
        let limit = soft.min(before);
        // Keeping what does not fit is worth it only while the result saves something (a forced
        // call with min_savings_ratio=0 may return what it got, never more).
        let raw_before = raw_of(self.tokens_before, self.ratio);
        let gains_nothing = |x: &Draft<'a>| {
            x.tokens() > raw_before || (x.tokens() == raw_before && before == usize::MAX)
        };
        // When no narrative at all still leaves it over the soft threshold, the ledger must give
        // too; if even its minimum cannot bring the context under (over_budget either way), the
        // narrative stays unless the hard threshold needs it gone.
        let hard = raw_of(cfg.hard, self.ratio);
        // Kept over the hard threshold, the narrative and the ledger still never take the context
        // over the model's window while a smaller legal context exists (over_budget either way).
        let window = if cfg.window == 0 {
            usize::MAX
        } else {
            raw_of(cfg.window, self.ratio).max(hard)
        };
        if d.tokens() > limit {
            if let Some(alt) = self.shorter_narrative(&d, limit, soft, counter) {
                if alt.tokens() <= limit {
                    cut = true;
                    d = alt;
                } else if d.tokens() > soft {
                    let full = self.evict_last(&alt, soft, soft, counter);
                    if full.tokens() <= soft {
                        d = full;
                        cut = true;
                    } else if d.tokens() > hard.min(before) {
                        // Only when that helps: with the system prompt and tools alone over
                        // the hard threshold, the narrative (and its facts) stays.
                        // (It stays only while the result still saves something: a
                        // compaction never returns what it got.)
                        let aim = hard.min(before);
                        if let Some(alt) = self.shorter_narrative(&d, aim, soft, counter) {
                            if alt.tokens() <= aim
                                || gains_nothing(&d)
                                || self.evict_last(&alt, aim, soft, counter).tokens() <= aim
                            {
                                d = alt;
                                cut = true;
                            }
                        }
                        if d.tokens() > window {
                            if let Some(alt) = self
                                .shorter_narrative(&d, window, soft, counter)
                                .filter(|alt| {
                                    alt.tokens() <= window
                                        || self.evict_last(alt, window, soft, counter).tokens()
                                            <= window
                                })
                            {
                                d = alt;
                                cut = true;
                            }
                        }
                    }
                } else if let Some(floorless) = self
                    .floorless(&alt, soft, counter)
                    .filter(|f| f.tokens() <= limit)
                {
                    // A forced call that must not grow (invariant 8): the narrative's floor is
                    // part of the narrative, which gives way; the ledger is carried whole.
                    cut = true;
                    d = floorless;
                }
            }
        }
        // Step 7: ledger entries evicted in the stated order (sentences that are not
        // instructions, then facts, then instructions; prohibitions and safety rules stay: the
        // ledger's minimum), each listed in `must_keep_missing`; step 8, the last resort: the
        // narrative's continuation floor (`evict_last`). When even the minimum leaves the
        // context over the soft threshold (over_budget either way), only as many as keep it
        // within the hard one go: the rest are kept for the next compaction.
        if d.tokens() > soft {
            let full = self.evict_last(&d, soft, soft, counter);
            d = if full.tokens() <= soft {
                full
            } else {
                // Over budget either way: entries go only when that brings it within the hard
                // threshold (else they are kept for the next compaction).
                let within = self.evict_last(&d, hard, soft, counter);
                if within.tokens() <= hard || gains_nothing(&d) {
                    within
                } else {
                    // Not within the hard threshold either way: within the model's window if
                    // the entries can bring it there, else they are all kept.
                    Some(&d)
                        .filter(|d| d.tokens() > window)
                        .map(|d| self.evict_last(d, window, soft, counter))
                        .filter(|w| w.tokens() <= window)
                        .unwrap_or(d)
                }
            };
        }
        // The ladder's cuts changed the task: the words left out must still be shown by it.
        if !d.shape.in_task.is_empty() {
            let checked = self.without_task_repeats(&d, soft, counter);
            d = if checked.tokens() > soft && checked.tokens() > d.tokens() {
                self.evict(&checked, soft.max(d.tokens()), soft, counter)
            } else {
                checked
            };
        }
        d.cut |= cut;
        self.finish(d, soft, counter)
    }

    /// `d` with a shorter narrative: the first of the narrative at half and a quarter of its
    /// characters and no narrative at all that brings it to `aim` or under (the ladder's cuts
    /// re-run to `soft`), else the smallest (`None` when none is smaller than `d`). An LLM's
    /// narrative is cut at its last sentence end that fits (at a word when none does): it stays
    /// the LLM's, marked truncated; the rule summary is written again at the smaller size.
    fn shorter_narrative(
        &self,
        d: &Draft<'a>,
        aim: usize,
        soft: usize,
        counter: &dyn Count,
    ) -> Option<Draft<'a>> {
        let mut best: Option<Draft<'a>> = None;
        for alt in self.narratives(d, soft, counter) {
            if alt.tokens() >= best.as_ref().map_or(d.tokens(), Draft::tokens) {
                continue;
            }
            let fits = alt.tokens() <= aim;
            best = Some(alt);
            if fits {
                break;
            }
        }
        best
    }

    /// `d` with its narrative at a half and a quarter of its characters, then none (each
    /// assembled, the ladder's cuts re-run to `soft`), lazily; see [`Planned::shorter_narrative`].
    fn narratives<'s>(
        &'s self,
        d: &'s Draft<'a>,
        soft: usize,
        counter: &'s dyn Count,
    ) -> impl Iterator<Item = Draft<'a>> + 's {
        let chars = d.shape.body.chars().count();
        let llm = d.source == Some(SummarySource::Llm);
        // The narrative's characters at a half, a quarter, then none.
        [Some(chars / 2), Some(chars / 4), None]
            .into_iter()
            .filter_map(move |size| {
                let mut own = false;
                let shape = if let Some(max_chars) = size {
                    let own_cut = llm
                        .then(|| {
                            cap_to_tokens(&d.shape.body, max_chars, |s: &str| s.chars().count()).0
                        })
                        .filter(|t| !t.trim().is_empty());
                    own = own_cut.is_some();
                    let body = own_cut.unwrap_or_else(|| {
                        rule_summary_chained(
                            self.previous_summary.as_deref(),
                            &self.replaced,
                            self.language,
                            max_chars,
                        )
                    });
                    if body.trim().is_empty() {
                        return None;
                    }
                    Shape {
                        body,
                        ..d.shape.clone()
                    }
                } else {
                    Shape {
                        bare: true,
                        ..d.shape.clone()
                    }
                };
                let mut alt = self.reassemble(&shape, d, counter);
                self.fit(&mut alt, soft, counter);
                if alt.source == Some(SummarySource::Llm) && !own {
                    alt.source = Some(SummarySource::Rule);
                    alt.strategy = Strategy::RuleSummary;
                    alt.fallback_reason = Some(
                        "the summary did not fit the window: replaced by a shorter rule summary"
                            .to_owned(),
                    );
                }
                Some(alt)
            })
    }

    /// `d` with ledger entries evicted in the stated order until it is at or under `aim` (or
    /// only the ledger's minimum is left); the ladder's cuts re-run to `soft`.
    fn evict(&self, d: &Draft<'a>, aim: usize, soft: usize, counter: &dyn Count) -> Draft<'a> {
        let mut d = d.clone();
        for stage in 0..3 {
            for _ in 0..3 {
                if d.tokens() <= aim {
                    return d;
                }
                let excess = d.tokens() - aim;
                let (w, det) = d.ledger_costs;
                let (mut wb, mut db, mut r) = d.shape.ladder.unwrap_or((w, det, 0));
                match stage {
                    0 => (wb, r) = (w.saturating_sub(excess), 0),
                    1 => db = det.saturating_sub(excess),
                    _ => (wb, r) = (w.saturating_sub(excess), 1),
                }
                let shape = Shape {
                    ladder: Some((wb, db, r)),
                    ..d.shape.clone()
                };
                let mut alt = self.reassemble(&shape, &d, counter);
                self.fit(&mut alt, soft, counter);
                if alt.tokens() >= d.tokens() {
                    break;
                }
                d = alt;
            }
        }
        d
    }

    /// The summary of a chunked span whose summarizer failed at chunk `chunk_index` (> 0): the
    /// summarizer's summary of the chunks before it, then the rule summary of the messages of
    /// this chunk and the ones after, within what the cap leaves.
    fn partial_summary(&self, counter: &dyn Count) -> String {
        let done = self.previous_summary.as_deref().unwrap_or("").trim();
        let from = self
            .transcript(counter)
            .chunks
            .get(self.chunk_index)
            .map_or(self.replaced.len(), |c| c.start)
            .min(self.replaced.len());
        let rest = &self.replaced[from..];
        if rest.is_empty() {
            return done.to_owned();
        }
        let cap = self.cfg.summary_cap;
        let used = counter.count(Text::Utf8(done));
        let max_chars = cap.saturating_sub(used).max(cap / 4) * 3;
        let rule = rule_summary_chained(None, rest, self.language, max_chars);
        format!("{done}\n\n{}", rule.trim())
    }

    /// `d` (whose narrative was left out) without the narrative's continuation floor either,
    /// the ladder's cuts re-run to `soft`; `None` when `d` has a narrative or no floor to drop.
    fn floorless(&self, d: &Draft<'a>, soft: usize, counter: &dyn Count) -> Option<Draft<'a>> {
        if !d.shape.bare || d.shape.floor_dropped {
            return None;
        }
        let shape = Shape {
            floor_dropped: true,
            ..d.shape.clone()
        };
        let mut alt = self.reassemble(&shape, d, counter);
        self.fit(&mut alt, soft, counter);
        (alt.tokens() < d.tokens()).then_some(alt)
    }

    /// The ladder's last two steps: [`Planned::evict`] to `aim`, and only when even the ledger's
    /// minimum with the narrative's continuation floor is over `aim`, the floor left out too
    /// (entries then evicted again from `d`, as far as `aim` needs without the floor).
    fn evict_last(&self, d: &Draft<'a>, aim: usize, soft: usize, counter: &dyn Count) -> Draft<'a> {
        let full = self.evict(d, aim, soft, counter);
        if full.tokens() <= aim {
            return full;
        }
        match self.floorless(d, soft, counter) {
            Some(alt) => {
                let alt = self.evict(&alt, aim, soft, counter);
                if alt.tokens() <= aim {
                    alt
                } else {
                    full
                }
            }
            None => full,
        }
    }

    /// [`Planned::assemble`] again with the ladder's state of `prev` carried over.
    fn reassemble(&self, shape: &Shape, prev: &Draft<'a>, counter: &dyn Count) -> Draft<'a> {
        let mut d = self.assemble(shape, counter);
        d.carry(prev);
        d
    }

    /// The task, then the last block (the kept tail, which the shorter tail brought down to the
    /// last legal block), each cut only when still over (also the whole ladder when there is
    /// nothing to summarise between the kept head and tail).
    pub(super) fn fit(&self, d: &mut Draft<'a>, soft: usize, counter: &dyn Count) {
        if d.tokens() <= soft {
            return;
        }
        // Down to the target, not just under the soft threshold: cutting the kept tail breaks
        // the cached prefix from that message on, and cutting only to the threshold makes the
        // next call cut again (a prefix break at every call).
        let aim = if self.cfg.cache_aware_cuts {
            raw_of(self.cfg.target, self.ratio).min(soft)
        } else {
            soft
        };
        // The task is shortened only when the result with it verbatim would be over the soft
        // threshold, and then by the least amount (DESIGN, "The task"): the kept tail's cut
        // first, on a copy; when that is not enough, the task gives what the tail could not.
        let mut tail = d.clone();
        self.shorten_tail(&mut tail, aim, soft, counter);
        if tail.tokens() <= soft || self.task.is_none() {
            *d = tail;
            return;
        }
        let gives = d.tokens().saturating_sub(tail.tokens());
        self.shorten_task_in(d, soft + gives, counter);
        if d.tokens() > soft {
            self.shorten_tail(d, aim, soft, counter);
        }
    }

    /// The ladder's task step: the task slot of `d` cut by the least amount that brings `d` to
    /// `goal`, never below `task_max_tokens` (DESIGN, "The task"). With a summary, the
    /// instructions of the cut part that the cut task does not list join the ledger's user
    /// words (the task's first, oldest of all): the summary is assembled again with them and
    /// the task cut again by what is then over (a few rounds: what the ledger now carries
    /// takes room the task gives). Its facts are written after the cut marker.
    fn shorten_task_in(&self, d: &mut Draft<'a>, goal: usize, counter: &dyn Count) {
        let Some(src) = self.task.and_then(|t| self.slots[t].source()) else {
            return;
        };
        let Some(mut at) = d.slots.iter().position(|s| s.source() == Some(src)) else {
            return;
        };
        let excess = d.tokens().saturating_sub(goal);
        let Some((_, entry)) =
            shorten_task(&mut d.slots, at, excess, &self.cfg, counter, &mut d.recalls)
        else {
            return;
        };
        d.note(entry, Strategy::Truncation);
        if d.summary.is_none() || !d.shape.task_words.is_empty() {
            return;
        }
        let original = self.slots[self.task.unwrap_or(at)].view.prose();
        let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut words: Vec<String> = Vec::new();
        for _ in 0..3 {
            let shortened = collapse(&d.slots[at].view.prose());
            let more: Vec<String> = user_instructions(&original)
                .into_iter()
                .map(|(_, s)| s)
                .filter(|s| !shortened.contains(&collapse(s)) && !words.contains(s))
                .collect();
            if more.is_empty() {
                return;
            }
            words.extend(more);
            // In the task's order.
            words.sort_by_key(|w| original.find(w.as_str()).unwrap_or(usize::MAX));
            let shape = Shape {
                task_words: words.clone(),
                ..d.shape.clone()
            };
            let mut alt = self.reassemble(&shape, d, counter);
            // The same assembly but for the ledger: its record is `d`'s, the task's cut noted
            // again with its new size.
            alt.record = d.record.clone();
            alt.record
                .retain(|e| !(e.index == src && e.action == Change::Shortened));
            let Some(at2) = alt.slots.iter().position(|s| s.source() == Some(src)) else {
                return;
            };
            let excess = alt.tokens().saturating_sub(goal);
            if let Some((_, entry)) = shorten_task(
                &mut alt.slots,
                at2,
                excess,
                &self.cfg,
                counter,
                &mut alt.recalls,
            ) {
                alt.note(entry, Strategy::Truncation);
            }
            *d = alt;
            at = at2;
        }
    }

    /// The ladder's last step: the kept tail after the summary (the last block, which the
    /// shorter tail could not remove) cut as far as needed: arguments of calls that ran, then
    /// tool output (see `last_block.rs`).
    fn shorten_tail(&self, d: &mut Draft<'a>, aim: usize, soft: usize, counter: &dyn Count) {
        let from = d.tail_from;
        let excess = d.tokens().saturating_sub(aim);
        // Cut arguments keep their cut part's open checklist items (continuation), unless that
        // leaves the context over the soft threshold where the cut without them does not: they
        // are not part of the smallest legal context (invariant 5).
        let checklist = d.slots.get(from..).unwrap_or(&[]).iter().any(|s| {
            s.view.blocks.iter().any(|b| {
                b.kind == BlockKind::ToolCall && {
                    let t = b.joined("\n");
                    t.contains("[ ]") || t.contains("\\u")
                }
            })
        });
        let before = checklist.then(|| d.clone());
        let (_, mut entries) = shorten_last_block_recalled(
            &mut d.slots,
            from,
            excess,
            &self.cfg,
            counter,
            &mut d.recalls,
            checklist,
        );
        if let Some(mut without) = before.filter(|_| d.tokens() > soft) {
            let (_, plain) = shorten_last_block_recalled(
                &mut without.slots,
                from,
                excess,
                &self.cfg,
                counter,
                &mut without.recalls,
                false,
            );
            if without.tokens() < d.tokens() {
                *d = without;
                entries = plain;
                d.items_dropped = true;
            }
        }
        for e in entries {
            d.note(e, Strategy::Truncation);
        }
    }

    /// The summary message text: the marker line, the narrative (`body`), then the ledger
    /// (its sentinel and sections; see `summary::ledger`).
    pub(super) fn summary_message(
        &self,
        body: &str,
        ledger: &Ledger,
        recall: Option<&str>,
    ) -> String {
        let zh = self.language == Language::Zh;
        let mut text = String::new();
        text.push_str(SUMMARY_MARKER);
        text.push(' ');
        text.push_str(if zh {
            "此前的对话已被压缩，以下摘要取代了被替换的消息。"
        } else {
            "The earlier part of this conversation was compacted; this summary replaces it."
        });
        // On the first line, which a later compaction strips before reading the narrative.
        if let Some(id) = recall {
            let r = crate::recall::recall_ref(id);
            if zh {
                text.push_str(&format!("被替换的原文：{r}。"));
            } else {
                text.push_str(&format!(" The replaced messages: {r}."));
            }
        }
        let body = body.trim();
        if !body.is_empty() {
            text.push_str("\n\n");
            text.push_str(body);
        }
        text.push_str("\n\n");
        text.push_str(&ledger.render(self.language));
        text
    }
}

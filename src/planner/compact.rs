//! `plan` and `Planned::apply`: the compaction itself.

use super::draft::{total, Count, Slot};
use super::micro::{self, head_and_tail, Offload};
use super::out::{OutBlock, OutMsg, RecordEntry};
use super::repair::repair;
use super::{Mode, PlanConfig, SUMMARY_MARKER};
use crate::message::{BlockKind, Conversation, Format, Message, Role};
use crate::structure::analyze;
use crate::summary::facts::{fact_present, must_keep_facts};
use crate::summary::language::{detect_language, Language};
use crate::summary::rule::{rule_summary, truncation_summary};
use crate::summary::summary_prompts;
use crate::summary::text::{cap_to_tokens, extract_summary};
use crate::summary::transcript::{chunk_transcript, fit_entries, render_transcript};
use crate::text::Text;
use crate::validate::{validate, Problem, Profile};
use std::collections::BTreeSet;
use std::ops::Range;

/// What the caller's summarizer is asked for (one chunk of the replaced span).
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRequest {
    pub system_prompt: String,
    pub user_prompt: String,
    pub previous_summary: Option<String>,
    pub instructions: Option<String>,
    pub max_tokens: usize,
    pub must_keep: Vec<String>,
    pub language: Language,
    pub replaced_count: usize,
    /// This chunk (0-based) and the number of chunks.
    pub chunk: usize,
    pub chunks: usize,
}

/// Why planning refused.
#[derive(Debug)]
pub enum PlanError {
    /// `repair=false` and the input is invalid for the provider.
    Invalid(Vec<Problem>),
}

/// The separate system prompt (Anthropic `system`) as the boundary returns it with a
/// `summary_role="system"` summary added: the planner counts exactly that request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SystemPrompt {
    /// None: the summary becomes the system prompt (a string).
    #[default]
    Absent,
    /// A string: the summary follows it after a blank line, in the same string
    /// ([`join_system_text`]).
    Text(String),
    /// A list of blocks: the summary is one more text block. `empty`: the list has no text.
    Blocks { empty: bool },
}

/// A string system prompt with a summary added (how the boundary returns it).
pub fn join_system_text(system: &str, summary: &str) -> String {
    format!("{system}\n\n{summary}")
}

/// A compaction waiting for its summary.
#[derive(Clone, Debug)]
pub struct Planned<'a> {
    pub format: Format,
    slots: Vec<Slot<'a>>,
    /// Slots before the repair/micro/selective passes changed anything (for `strategy="none"`).
    repaired: Vec<Slot<'a>>,
    head_end: usize,
    tail_start: usize,
    /// Slot indices the summary replaces.
    span: Vec<usize>,
    /// Instruction and pinned slots inside the span: kept, right after the summary.
    kept_in_span: Vec<usize>,
    previous_summary: Option<String>,
    transcript: Vec<String>,
    chunks: Vec<Range<usize>>,
    pub chunk_index: usize,
    pub facts: Vec<String>,
    pub language: Language,
    user_texts: Vec<String>,
    instructions: Option<String>,
    pub record: Vec<RecordEntry>,
    pub repairs: Vec<String>,
    pub phases: Vec<(&'static str, usize)>,
    pub tokens_before: usize,
    pub original_count: usize,
    ratio: f64,
    /// Raw tokens of the system prompt and the tool definitions.
    extra: usize,
    /// The separate system prompt and its raw tokens (part of `extra`), for counting a
    /// summary added to it ([`Planned::set_system_prompt`]).
    system: SystemPrompt,
    system_tokens: usize,
    strategy: &'static str,
    offloads: Vec<Offload>,
    needs_summary: bool,
    /// The kept tail is shorter than configured (it alone was over the target).
    tail_shortened: bool,
    cfg: PlanConfig,
    /// Why nothing (more) was done.
    pub reason: Option<String>,
    /// Why the result would be over budget without a summary (cool-down).
    over_budget_reason: Option<String>,
}

/// A finished compaction.
#[derive(Clone, Debug)]
pub struct Outcome<'a> {
    pub slots: Vec<Slot<'a>>,
    /// The summary to add to Anthropic's system prompt (`summary_role="system"`).
    pub system_summary: Option<String>,
    pub summary: Option<String>,
    pub summary_truncated: bool,
    pub strategy: &'static str,
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

fn calibrated(raw: usize, ratio: f64) -> usize {
    (raw as f64 * ratio).ceil() as usize
}

fn raw_of(calibrated: usize, ratio: f64) -> usize {
    (calibrated as f64 / ratio).floor() as usize
}

/// The text of a message view's text-like blocks.
fn text_of(m: &Message<'_>) -> String {
    let mut s = String::new();
    for b in m.blocks.iter() {
        if matches!(b.kind, BlockKind::Text | BlockKind::Refusal) {
            for p in &b.texts {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(&p.text().to_utf8());
            }
        }
    }
    s
}

/// Every input message a slot is built from.
fn sources(slot: &Slot<'_>) -> Vec<usize> {
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

/// Plan a compaction of `conv`.
///
/// `tokens` are the raw counts of each message, `extra` those of the system prompt and tools,
/// `ratio` the calibration (calibrated = raw × ratio; thresholds in `cfg` are calibrated).
#[allow(clippy::too_many_arguments)]
pub fn plan<'a>(
    conv: &Conversation<'a>,
    tokens: &[usize],
    extra: usize,
    pinned: &[bool],
    cfg: &PlanConfig,
    mode: Mode,
    cooldown: bool,
    ratio: f64,
    instructions: Option<String>,
    counter: &dyn Count,
) -> Result<Planned<'a>, PlanError> {
    let ratio = if ratio.is_finite() && ratio > 0.0 {
        ratio
    } else {
        1.0
    };
    let raw_before = tokens.iter().sum::<usize>() + extra;
    let tokens_before = calibrated(raw_before, ratio);
    let soft = raw_of(cfg.soft, ratio);
    let target = raw_of(cfg.target, ratio);
    let micro_threshold = raw_of(cfg.micro_threshold, ratio);
    let profile = cfg.profile.unwrap_or(Profile::for_format(conv.format));

    // Pinning a message pins its whole tool block: a lone call or result would be invalid.
    let mut pinned = pinned.to_vec();
    if pinned.iter().any(|&p| p) {
        for b in analyze(&conv.messages).tool_blocks {
            let span = b.span.start..=b.span.end;
            if span.clone().any(|i| pinned[i]) {
                for i in span {
                    pinned[i] = true;
                }
            }
        }
    }
    let pinned = &pinned[..];
    let problems = validate(&conv.messages, conv.format, profile);
    // Only the provider-breaking problems are repaired; strict alternation is the caller's.
    let repairable = problems.iter().any(|p| {
        !matches!(
            p.rule,
            "not_alternating" | "system_not_first" | "invalid_role"
        )
    });
    if !problems.is_empty() && !cfg.repair {
        return Err(PlanError::Invalid(problems));
    }
    let mut record = Vec::new();
    let mut repairs = Vec::new();
    let slots: Vec<Slot<'a>> = if repairable {
        let r = repair(conv, tokens, pinned, cfg.framing, counter);
        record.extend(r.record);
        repairs.extend(r.repairs);
        r.slots
    } else {
        (0..conv.messages.len())
            .map(|i| Slot::keep(conv, i, tokens[i], pinned[i]))
            .collect()
    };
    let mut p = Planned {
        format: conv.format,
        repaired: slots.clone(),
        slots,
        head_end: 0,
        tail_start: 0,
        span: Vec::new(),
        kept_in_span: Vec::new(),
        previous_summary: None,
        transcript: Vec::new(),
        chunks: Vec::new(),
        chunk_index: 0,
        facts: Vec::new(),
        language: Language::En,
        user_texts: Vec::new(),
        instructions,
        record,
        repairs,
        phases: Vec::new(),
        tokens_before,
        original_count: conv.messages.len(),
        ratio,
        extra,
        system: SystemPrompt::Absent,
        system_tokens: 0,
        strategy: "none",
        offloads: Vec::new(),
        needs_summary: false,
        tail_shortened: false,
        cfg: cfg.clone(),
        reason: None,
        over_budget_reason: None,
    };
    let now = |p: &Planned<'_>| total(&p.slots) + p.extra;
    if !p.repairs.is_empty() {
        p.phases.push(("repair", calibrated(now(&p), ratio)));
    }

    let due = mode == Mode::Force || now(&p) >= soft;
    let run_micro = mode != Mode::Auto || now(&p) >= micro_threshold;
    if run_micro {
        let pass = micro::micro(&mut p.slots, cfg, counter);
        if pass.changed > 0 {
            p.strategy = "micro";
            p.record.extend(pass.record);
            p.offloads.extend(pass.offloads);
            p.phases.push(("micro", calibrated(now(&p), ratio)));
        }
    }
    if mode == Mode::Micro || !due {
        if p.strategy == "none" {
            p.reason = Some(if due || mode == Mode::Micro {
                "micro-compaction found nothing worth clearing".to_owned()
            } else {
                format!(
                    "below the soft threshold ({} < {})",
                    calibrated(now(&p), ratio),
                    cfg.soft
                )
            });
        }
        return Ok(p);
    }
    if now(&p) > target || mode == Mode::Force {
        let pass = micro::selective(&mut p.slots, cfg, counter, p.extra, target);
        if pass.changed > 0 {
            p.strategy = "selective";
            p.record.extend(pass.record);
            p.offloads.extend(pass.offloads);
            p.phases.push(("selective", calibrated(now(&p), ratio)));
        }
    }
    if now(&p) <= target && mode != Mode::Force {
        return Ok(p);
    }
    if cooldown {
        if now(&p) > soft {
            p.over_budget_reason = Some(
                "summarizer cool-down after a failure: only micro and selective compaction ran"
                    .to_owned(),
            );
        }
        p.reason = Some("summarizer cool-down: no summary this call".to_owned());
        return Ok(p);
    }
    select_span(&mut p, target, counter);
    Ok(p)
}

/// Choose what the summary replaces and prepare the request.
fn select_span(p: &mut Planned<'_>, target: usize, counter: &dyn Count) {
    let cfg = p.cfg.clone();
    let (head_end, mut tail_start) = head_and_tail(&p.slots, &cfg);
    let n = p.slots.len();
    let st = analyze(&p.slots);
    let legal: Vec<usize> = st
        .cut_points
        .iter()
        .copied()
        .filter(|&c| c > head_end && c < n)
        .collect();
    // When the kept part alone is over the target, summarise the early part of the current
    // turn too: move the tail start later, down to the last legal block.
    let reserve = cfg.summary_max_tokens.min(target / 4);
    let kept_tokens = |tail: usize| -> usize {
        let mut t = p.extra + reserve;
        for (i, s) in p.slots.iter().enumerate() {
            let in_span = i >= head_end && i < tail;
            if !in_span || s.pinned || s.view.role.is_instruction() {
                t += s.tokens;
            }
        }
        t
    };
    let configured_tail = tail_start;
    for &c in &legal {
        if c <= tail_start {
            continue;
        }
        if kept_tokens(tail_start) <= target {
            break;
        }
        tail_start = c;
    }
    if tail_start != configured_tail {
        p.tail_shortened = true;
    }
    // Kept where they are: pinned messages (a pinned earlier summary too: DESIGN, invariant 2,
    // pinned messages are never changed) and instructions that are not an earlier summary
    // (those are ours, updated by the new one).
    let frozen_in_span =
        |s: &Slot<'_>| s.pinned || (s.view.role.is_instruction() && !s.is_summary());
    let mut span = Vec::new();
    let mut kept = Vec::new();
    let mut previous = None;
    for i in head_end..tail_start.max(head_end) {
        let s = &p.slots[i];
        if frozen_in_span(s) {
            kept.push(i);
        } else {
            if s.is_summary() {
                let text = text_of(&s.view);
                let body = text
                    .trim_start()
                    .strip_prefix(SUMMARY_MARKER)
                    .map(|b| b.split_once('\n').map_or("", |x| x.1).trim().to_owned())
                    .unwrap_or(text);
                previous = Some(match previous {
                    Some(prev) => format!("{prev}\n\n{body}"),
                    None => body,
                });
            }
            span.push(i);
        }
    }
    let replaced: Vec<&Slot<'_>> = span
        .iter()
        .map(|&i| &p.slots[i])
        .filter(|s| !s.is_summary())
        .collect();
    if replaced.is_empty() && previous.is_none() {
        p.reason = Some("nothing between the kept head and tail to summarise".to_owned());
        return;
    }
    let replaced_views: Vec<Message<'_>> = replaced.iter().map(|s| s.view.clone()).collect();
    p.language = detect_language(&replaced_views);
    let mut facts = must_keep_facts(&replaced_views);
    if let Some(prev) = &previous {
        let m = Message::text(Role::User, prev.as_str());
        for f in must_keep_facts(std::slice::from_ref(&m)) {
            if !facts.contains(&f) {
                facts.push(f);
            }
        }
    }
    p.facts = facts;
    p.user_texts = replaced_views
        .iter()
        .rev()
        .filter(|m| m.is_user_text())
        .map(text_of)
        .filter(|t| !t.trim().is_empty())
        .collect();
    p.transcript = render_transcript(&replaced_views, cfg.transcript_item_max_chars);
    let max_input = cfg.summarizer_max_input_tokens.unwrap_or(cfg.hard).max(256);
    // Leave room for the prompt and the previous summary in each chunk.
    let room = max_input
        .saturating_sub(cfg.summary_max_tokens + 512)
        .max(128);
    let count_str = |s: &str| counter.count(Text::Utf8(s));
    // A single over-long entry (a huge paste) is cut to fit one chunk.
    fit_entries(&mut p.transcript, count_str, room);
    p.chunks = if p.transcript.is_empty() {
        vec![std::ops::Range { start: 0, end: 0 }]
    } else {
        chunk_transcript(&p.transcript, count_str, room)
    };
    p.previous_summary = previous;
    p.head_end = head_end;
    p.tail_start = tail_start.max(head_end);
    p.span = span;
    p.kept_in_span = kept;
    p.needs_summary = true;
}

impl<'a> Planned<'a> {
    /// Say what the separate system prompt is and its raw tokens (counted in `extra`), so a
    /// `summary_role="system"` summary is counted as part of it, exactly as returned. Without
    /// this call the planner assumes there is none.
    pub fn set_system_prompt(&mut self, system: SystemPrompt, tokens: usize) {
        self.system_tokens = tokens.min(self.extra);
        self.system = system;
    }

    /// Raw tokens of the system prompt and tools once `summary` (if any) is added to the
    /// system prompt.
    fn extra_with(&self, summary: Option<&str>, counter: &dyn Count) -> usize {
        let Some(text) = summary else {
            return self.extra;
        };
        let overhead = self.cfg.framing.message_overhead_tokens;
        let count = |s: &str| counter.count(Text::Utf8(s));
        let tools = self.extra - self.system_tokens;
        let system = match &self.system {
            SystemPrompt::Absent => overhead + count(text),
            SystemPrompt::Text(s) => overhead + count(&join_system_text(s, text)),
            SystemPrompt::Blocks { empty } => {
                self.system_tokens + count(text) + if *empty { overhead } else { 0 }
            }
        };
        tools + system
    }

    /// The request for the current chunk, or `None` when no summary is needed.
    pub fn request(&self) -> Option<SummaryRequest> {
        if !self.needs_summary {
            return None;
        }
        let chunk = self.chunks.get(self.chunk_index)?;
        let transcript = self.transcript[chunk.clone()].join("\n\n");
        let (system_prompt, user_prompt) = summary_prompts(
            self.language,
            self.previous_summary.as_deref(),
            self.instructions.as_deref(),
            &transcript,
            self.cfg.summary_max_tokens,
        );
        Some(SummaryRequest {
            system_prompt,
            user_prompt,
            previous_summary: self.previous_summary.clone(),
            instructions: self.instructions.clone(),
            max_tokens: self.cfg.summary_max_tokens,
            must_keep: self.facts.clone(),
            language: self.language,
            replaced_count: self.span.len(),
            chunk: self.chunk_index,
            chunks: self.chunks.len(),
        })
    }

    /// Chunks still to be summarised after the current one.
    pub fn remaining_chunks(&self) -> usize {
        if !self.needs_summary {
            return 0;
        }
        self.chunks.len().saturating_sub(self.chunk_index + 1)
    }

    /// The plan for the next chunk, with `summary` (the reply for this chunk) as the summary to
    /// update.
    pub fn advance(&self, summary: &str) -> Planned<'a> {
        let mut next = self.clone();
        let (body, _) = extract_summary(summary);
        next.previous_summary = Some(body);
        next.chunk_index += 1;
        next
    }

    /// Finish: `summary` is the reply for the last chunk (`None`: the built-in rule summary).
    pub fn apply(
        &self,
        summary: Option<&str>,
        truncated: bool,
        counter: &dyn Count,
    ) -> Outcome<'a> {
        let cfg = &self.cfg;
        let ratio = self.ratio;
        let soft = raw_of(cfg.soft, ratio);
        let target = raw_of(cfg.target, ratio);
        if !self.needs_summary {
            return self.finish(
                self.slots.clone(),
                None,
                None,
                false,
                self.strategy,
                Vec::new(),
                soft,
                counter,
            );
        }
        let count_str = |s: &str| counter.count(Text::Utf8(s));
        let replaced_views: Vec<Message<'_>> = self
            .span
            .iter()
            .map(|&i| &self.slots[i])
            .filter(|s| !s.is_summary())
            .map(|s| s.view.clone())
            .collect();
        let (mut body, strategy, mut cut) = match summary {
            Some(reply) => {
                let (text, _tagged) = extract_summary(reply);
                let (text, cut) = cap_to_tokens(&text, cfg.summary_max_tokens, count_str);
                (text, "summary", cut || truncated)
            }
            None => {
                let max_chars = cfg.summary_max_tokens * 3;
                let rule = rule_summary(&replaced_views, self.language, max_chars);
                let text = match &self.previous_summary {
                    // A summary is never re-summarised from scratch: the rule summary of the
                    // new messages is added to the previous one.
                    Some(prev) => format!("{prev}\n\n{rule}"),
                    None => rule,
                };
                let (text, cut) = cap_to_tokens(&text, cfg.summary_max_tokens, count_str);
                (text, "rule_summary", cut)
            }
        };
        if body.trim().is_empty() {
            body = truncation_summary(
                &replaced_views,
                self.language,
                100,
                cfg.summary_max_tokens * 3,
            );
        }
        let (text, missing) = self.summary_message(&body, counter);
        cut |= !missing.is_empty();

        // Assemble: head, summary, kept instructions/pinned, tail.
        let mut tail_start = self.tail_start;
        let mut late: Vec<usize> = Vec::new();
        let st = analyze(&self.slots);
        let last_cut = st.pending_block.map_or(self.slots.len(), |b| b.start + 1);
        let legal_tail: Vec<usize> = st
            .cut_points
            .iter()
            .copied()
            .filter(|&c| c > self.tail_start && c < self.slots.len() && c < last_cut)
            .collect();
        let mut assembled = self.assemble(&text, tail_start, &late, counter);
        let mut strategy = strategy;
        // Ladder step 1: fewer kept tail messages, down to the last legal block.
        for &c in &legal_tail {
            if total(&assembled.0) + assembled.2 <= target {
                break;
            }
            late.extend(
                (tail_start..c).filter(|&i| {
                    !self.slots[i].pinned && !self.slots[i].view.role.is_instruction()
                }),
            );
            tail_start = c;
            assembled = self.assemble(&text, tail_start, &late, counter);
        }
        let tail_shortened = self.tail_shortened || tail_start != self.tail_start;
        let (mut slots, mut system_summary, mut extra) = assembled;
        // Ladder step 2: hard trim of the oldest legal blocks: the kept head (whole blocks; the
        // head ends at a legal cut), keeping instructions and pinned messages.
        if total(&slots) + extra > soft {
            let before = slots.len();
            if let Some(at) = slots.iter().position(Slot::is_summary) {
                let mut k = 0;
                let mut end = at;
                while k < end {
                    if slots[k].pinned || slots[k].view.role.is_instruction() {
                        k += 1;
                    } else {
                        slots.remove(k);
                        end -= 1;
                    }
                }
            }
            if slots.len() < before {
                strategy = "truncation";
            }
            // Last resort: a truncation summary instead of the summary text.
            if total(&slots) + extra > soft {
                let short =
                    truncation_summary(&replaced_views, self.language, 60, cfg.summary_max_tokens);
                let (t2, _) = self.summary_message(&short, counter);
                let a = self.assemble(&t2, tail_start, &late, counter);
                if total(&a.0) + a.2 < total(&slots) + extra {
                    slots = a.0;
                    system_summary = a.1;
                    extra = a.2;
                    strategy = "truncation";
                    cut = true;
                }
            }
        }
        let _ = extra;
        let summary_text = Some(text);
        let mut out = self.finish(
            slots,
            system_summary,
            summary_text,
            cut,
            strategy,
            missing,
            soft,
            counter,
        );
        if tail_shortened && out.strategy != "none" {
            let at = out.phases.len().saturating_sub(1);
            out.phases.insert(at, ("tail_shortened", out.tokens_after));
        }
        out
    }

    /// The summary message text and the must-keep facts that did not fit.
    fn summary_message(&self, body: &str, counter: &dyn Count) -> (String, Vec<String>) {
        let zh = self.language == Language::Zh;
        let cfg = &self.cfg;
        let count_str = |s: &str| counter.count(Text::Utf8(s));
        let mut text = String::new();
        text.push_str(SUMMARY_MARKER);
        text.push(' ');
        text.push_str(if zh {
            "此前的对话已被压缩，以下摘要取代了被替换的消息。"
        } else {
            "The earlier part of this conversation was compacted; this summary replaces it."
        });
        text.push_str("\n\n");
        text.push_str(body.trim());
        let missing: Vec<&String> = self
            .facts
            .iter()
            .filter(|f| !fact_present(body, f))
            .collect();
        let mut dropped = Vec::new();
        if !missing.is_empty() {
            text.push_str(if zh {
                "\n\n保留的细节：\n"
            } else {
                "\n\nPreserved details:\n"
            });
            // Facts are short; cap the section at the summary budget so a session that touched
            // thousands of files cannot blow the summary up.
            let mut used = 0;
            for f in missing {
                let t = count_str(f) + 2;
                if used + t > cfg.summary_max_tokens {
                    dropped.push(f.clone());
                    continue;
                }
                used += t;
                text.push_str("- ");
                text.push_str(f);
                text.push('\n');
            }
        }
        let mut used = 0;
        let mut header = false;
        for u in &self.user_texts {
            if fact_present(body, u.trim()) {
                continue;
            }
            let t = count_str(u);
            if used + t > cfg.user_messages_budget_tokens {
                continue;
            }
            if !header {
                text.push_str(if zh {
                    "\n\n用户在被压缩部分中的原话（最新的在前）：\n"
                } else {
                    "\n\nThe user's own messages in the compacted part (verbatim, newest first):\n"
                });
                header = true;
            }
            used += t;
            text.push_str("> ");
            text.push_str(&u.replace('\n', "\n> "));
            text.push('\n');
        }
        (text.trim_end().to_owned(), dropped)
    }

    /// Head + summary + kept + tail; returns the slots, the system-prompt summary and the raw
    /// tokens of the system prompt and tools with it (`extra` when it is a message).
    ///
    /// System and developer messages that lead the conversation stay first, also when the
    /// span starts with an earlier summary (which the new summary replaces in place): the
    /// instruction slots kept in the span with nothing but instructions and earlier summaries
    /// before them go before the new summary.
    fn assemble(
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
    fn fix_shape(&self, slots: &mut Vec<Slot<'a>>, counter: &dyn Count) -> Vec<String> {
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
    fn finish(
        &self,
        slots: Vec<Slot<'a>>,
        system_summary: Option<String>,
        summary: Option<String>,
        truncated: bool,
        strategy: &'static str,
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
        if strategy != "none"
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
            strategy = "none";
            summary = None;
            system_summary = None;
            record.retain(|r| matches!(r.action, "repaired" | "dropped"));
            phases.retain(|p| p.0 == "repair");
            raw_after = total(&slots) + self.extra;
            tokens_after = calibrated(raw_after, ratio);
        } else if summary.is_some() {
            phases.push((strategy, tokens_after));
            let mut covered = BTreeSet::new();
            for s in &slots {
                covered.extend(sources(s));
            }
            for &i in &self.span {
                for src in sources(&self.slots[i]) {
                    if !covered.contains(&src) {
                        record.push(RecordEntry {
                            index: src,
                            action: "summarized",
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
                    action: if strategy == "truncation" {
                        "truncated"
                    } else {
                        "summarized"
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

//! `plan`: check the thresholds, repair, run micro and selective compaction, and choose the
//! span a summary replaces (the kept head, the span, the kept tail, each at legal cuts).

use super::draft::{total, Count, Slot};
use super::micro::{self, head_and_tail_in, task_index, Offload};
use super::output::SystemPrompt;
use super::output::{RecordEntry, Strategy};
use super::repair::repair;
use super::repair_responses::repair as repair_responses;
use super::{Mode, PlanConfig, SUMMARY_MARKER};
use crate::cut::head_tail;
use crate::formats::Rules;
use crate::message::{Conversation, Format, Message, Role};
use crate::structure::analyze;
use crate::summary::artifacts::Trail;
use crate::summary::continuation::Continuation;
use crate::summary::facts::must_keep_facts;
use crate::summary::language::{detect_language, Language};
use crate::summary::ledger::{self, Ledger};
use crate::summary::transcript::{chunk_transcript, fit_entries, render_transcript};
use crate::text::Text;
use crate::validate::{validate, Problem, Profile};
use rustc_hash::FxHashMap;
use std::ops::Range;
use std::sync::OnceLock;

/// Why planning refused.
#[derive(Debug)]
pub enum PlanError {
    /// `repair=false` and the input is invalid for the provider.
    Invalid(Vec<Problem>),
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Invalid(problems) => {
                write!(
                    f,
                    "the conversation is not valid for the provider ({} problem(s)",
                    problems.len()
                )?;
                if let Some(first) = problems.first() {
                    write!(f, ", first: {first}")?;
                }
                write!(f, ") and repair=False")
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// A compaction waiting for its summary.
#[derive(Clone, Debug)]
pub struct Planned<'a> {
    pub format: Format,
    pub(super) slots: Vec<Slot<'a>>,
    /// Slots before the repair/micro/selective passes changed anything (for `strategy="none"`).
    pub(super) repaired: Vec<Slot<'a>>,
    pub(super) head_end: usize,
    pub(super) tail_start: usize,
    /// Slot indices the summary replaces.
    pub(super) span: Vec<usize>,
    /// Instruction and pinned slots inside the span: kept, right after the summary.
    pub(super) kept_in_span: Vec<usize>,
    /// The open to-do items and the last unresolved error of the span (and of the earlier
    /// summaries it replaces): kept in the narrative when the kept tail does not show them.
    pub(super) continuation: Continuation,
    /// The earlier summaries' narratives (their ledgers left out: `carried`).
    pub(super) previous_summary: Option<String>,
    /// The ledger read back from the earlier summaries the span replaces, with the span's own
    /// user words and artifact trail after it (the facts the narrative lacks are added when the
    /// summary message is assembled).
    pub(super) ledger: Ledger,
    /// The ledger read back from the earlier summaries only (`SummaryRequest.ledger`).
    pub(super) carried: Ledger,
    /// The transcript the summarizer reads, in chunks: built on the first request (a
    /// compaction with the rule summary never reads the span's tool output this way).
    pub(super) transcript: OnceLock<Transcript>,
    pub chunk_index: usize,
    pub facts: Vec<String>,
    pub language: Language,
    /// The replaced messages as they were before this compaction's micro and selective passes
    /// (the rule summary and the truncation summary read them).
    pub(super) replaced: Vec<Message<'a>>,
    pub(super) instructions: Option<String>,
    pub record: Vec<RecordEntry>,
    pub repairs: Vec<String>,
    pub phases: Vec<(&'static str, usize)>,
    pub tokens_before: usize,
    pub original_count: usize,
    pub(super) ratio: f64,
    /// Raw tokens of the system prompt and the tool definitions.
    pub(super) extra: usize,
    /// The separate system prompt and its raw tokens (part of `extra`), for counting a
    /// summary added to it ([`Planned::set_system_prompt`]).
    pub(super) system: SystemPrompt,
    pub(super) system_tokens: usize,
    /// The system prompt holds an earlier summary of ours (its raw tokens when a block).
    pub(super) system_ours: Option<usize>,
    pub(super) strategy: Strategy,
    pub(super) offloads: Vec<Offload>,
    pub(super) recalls: Vec<crate::recall::Recall>,
    /// The replaced messages rendered whole (`recall`), built on first use.
    pub(super) replaced_text: OnceLock<String>,
    pub(super) needs_summary: bool,
    /// The caller's summarizer is asked (false under cool-down: the rule summary is used).
    pub(super) llm: bool,
    /// A compaction is due (not `micro_compact()`, not below the soft threshold): the ladder
    /// may shorten the task and the last block to fit.
    pub(super) due: bool,
    /// `compact(force=True)`: with `min_savings_ratio=0` a compaction that saves nothing (a
    /// re-compaction of its own output) is returned, not refused, unless it grows.
    pub(super) forced: bool,
    /// The task's slot (the first user text), kept in the head.
    pub(super) task: Option<usize>,
    /// The task's text, shown to the summarizer as context (it stays in the conversation).
    pub(super) task_text: Option<String>,
    /// The kept tail is shorter than configured (it alone was over the target).
    pub(super) tail_shortened: bool,
    pub(super) cfg: PlanConfig,
    /// Why nothing (more) was done.
    pub reason: Option<String>,
}

pub(super) fn calibrated(raw: usize, ratio: f64) -> usize {
    (raw as f64 * ratio).ceil() as usize
}

pub(super) fn raw_of(calibrated: usize, ratio: f64) -> usize {
    (calibrated as f64 / ratio).floor() as usize
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
    // The micro pass, the trail, the facts and the continuation each read the span's results.
    crate::text::utf8_memo_scope(|| {
        plan_in_scope(
            conv,
            tokens,
            extra,
            pinned,
            cfg,
            mode,
            cooldown,
            ratio,
            instructions,
            counter,
        )
    })
}

/// [`plan`] within a transcoding memo's scope.
#[allow(clippy::too_many_arguments)]
fn plan_in_scope<'a>(
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
    let repairable = problems
        .iter()
        .any(|p| !matches!(p.rule, "not_alternating" | "system_not_first"));
    if !problems.is_empty() && !cfg.repair {
        return Err(PlanError::Invalid(problems));
    }
    let mut record = Vec::new();
    let mut repairs = Vec::new();
    let slots: Vec<Slot<'a>> = if repairable {
        // Responses items have their own repair (`repair_responses.rs`).
        let r = match crate::formats::rules(conv.format) {
            Rules::Items(_) => repair_responses(conv, tokens, pinned, cfg.framing, counter),
            Rules::MessageList(_) => repair(conv, tokens, pinned, cfg.framing, counter),
        };
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
        continuation: Continuation::default(),
        previous_summary: None,
        ledger: Ledger::default(),
        carried: Ledger::default(),
        transcript: OnceLock::new(),
        chunk_index: 0,
        facts: Vec::new(),
        language: Language::En,
        replaced: Vec::new(),
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
        system_ours: None,
        strategy: Strategy::None,
        offloads: Vec::new(),
        recalls: Vec::new(),
        replaced_text: OnceLock::new(),
        needs_summary: false,
        llm: true,
        due: false,
        forced: false,
        task: None,
        task_text: None,
        tail_shortened: false,
        cfg: cfg.clone(),
        reason: None,
    };
    let now = |p: &Planned<'_>| total(&p.slots) + p.extra;
    if !p.repairs.is_empty() {
        p.phases.push(("repair", calibrated(now(&p), ratio)));
    }

    // Held: the last compaction could not get under the soft threshold and the context has not
    // grown by `retry_growth_tokens` since (nor reached the hard threshold): compacting again
    // now would end the same way, breaking the cached prefix at every call.
    let held = mode == Mode::Auto
        && tokens_before < cfg.hard
        && cfg.held_until.is_some_and(|h| tokens_before < h);
    // `target_ratio = "auto"` may have set an earlier due point (the state's `due_at`).
    let due_from = cfg.due_at.map_or(soft, |d| raw_of(d.min(cfg.soft), ratio));
    let due = mode == Mode::Force || (now(&p) >= due_from && !held);
    p.due = due && mode != Mode::Micro;
    p.forced = mode == Mode::Force;
    let run_micro = mode != Mode::Auto || now(&p) >= micro_threshold;
    if run_micro {
        let pass = micro::micro(&mut p.slots, cfg, counter);
        if pass.changed > 0 {
            p.strategy = Strategy::Micro;
            p.record.extend(pass.record);
            p.offloads.extend(pass.offloads);
            p.recalls.extend(pass.recalls);
            p.phases.push(("micro", calibrated(now(&p), ratio)));
        }
    }
    if mode == Mode::Micro || !due {
        if p.strategy == Strategy::None {
            p.reason = Some(if due || mode == Mode::Micro {
                "micro-compaction found nothing worth clearing".to_owned()
            } else if held {
                format!(
                    "held: the last compaction could not get under the soft threshold with room \
                     to spare (retry_growth_tokens); the next is due at {} tokens or the hard \
                     threshold {} ({} now)",
                    cfg.held_until.unwrap_or(0),
                    cfg.hard,
                    tokens_before
                )
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
            p.strategy = Strategy::Selective;
            p.record.extend(pass.record);
            p.offloads.extend(pass.offloads);
            p.recalls.extend(pass.recalls);
            p.phases.push(("selective", calibrated(now(&p), ratio)));
        }
    }
    if now(&p) <= target && mode != Mode::Force {
        return Ok(p);
    }
    // Cool-down skips the LLM, not the summary: micro and selective ran and did not reach the
    // target, so the built-in rule summary does (no request is made).
    if cooldown {
        p.llm = false;
        p.reason =
            Some("summarizer cool-down after a failure: the rule summary, no LLM call".to_owned());
    }
    select_span(&mut p, target);
    Ok(p)
}

/// Choose what the summary replaces and prepare the request.
fn select_span(p: &mut Planned<'_>, target: usize) {
    let cfg = p.cfg.clone();
    let st = analyze(&p.slots);
    let (head_end, mut tail_start) = head_and_tail_in(&p.slots, &st, &cfg);
    let n = p.slots.len();
    p.head_end = head_end;
    p.tail_start = tail_start;
    p.task = task_index(&p.slots).filter(|&t| t < head_end);
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
            if !in_span || s.is_fixed() {
                t += s.tokens;
            }
        }
        t
    };
    let configured_tail = tail_start;
    // Moving the tail start from `tail_start` to `c` takes the slots between into the span
    // (kept: what is frozen there): one pass over the slots in all.
    let mut kept = kept_tokens(tail_start);
    for &c in &legal {
        if c <= tail_start {
            continue;
        }
        if kept <= target {
            break;
        }
        kept -= p.slots[tail_start..c]
            .iter()
            .filter(|s| !s.is_fixed())
            .map(|s| s.tokens)
            .sum::<usize>();
        tail_start = c;
    }
    // A forced re-compaction of a compacted context whose kept tail reaches back over our earlier
    // summary (nothing else between head and tail): the tail starts at the first legal cut after
    // that summary, so the summary is updated (its narrative rewritten, its ledger carried).
    if p.forced && !(head_end..tail_start).any(|i| p.slots[i].is_summary()) {
        if let Some(s) = (tail_start..n).rev().find(|&i| p.slots[i].is_summary()) {
            if let Some(&c) = legal.iter().find(|&&c| c > s) {
                tail_start = c;
            }
        }
    }
    if tail_start != configured_tail {
        p.tail_shortened = true;
    }
    // Kept where they are: pinned messages (a pinned earlier summary too: DESIGN, invariant 2,
    // pinned messages are never changed) and instructions that are not an earlier summary
    // (those are ours, updated by the new one).
    // A provider's compaction item is an earlier summary that is not ours: kept as it is.
    // OpenAI's `responses.compact` returns the user messages followed by its compaction item:
    // user messages before the latest one are kept too (see `crate::formats::anthropic_compaction`).
    let latest_item = p.slots.iter().rposition(|s| {
        crate::formats::responses::is_item(&s.view)
            && crate::formats::responses::is_compaction(&s.view)
    });
    let frozen_in_span = |i: usize, s: &Slot<'_>| {
        s.pinned
            || (s.view.role.is_instruction() && !s.is_summary())
            || crate::formats::responses::is_compaction(&s.view)
            || latest_item.is_some_and(|c| i < c && s.view.is_user_text() && !s.is_summary())
    };
    let mut span = Vec::new();
    let mut kept = Vec::new();
    let mut previous = None;
    let mut carried = Ledger::default();
    for i in head_end..tail_start.max(head_end) {
        let s = &p.slots[i];
        if frozen_in_span(i, s) {
            kept.push(i);
        } else {
            if s.is_summary() {
                let text = s.view.prose();
                let body = text
                    .trim_start()
                    .strip_prefix(SUMMARY_MARKER)
                    .map(|b| b.split_once('\n').map_or("", |x| x.1).trim().to_owned())
                    .unwrap_or(text);
                // The ledger is carried by the library, not the summarizer: only the narrative
                // is the summary to update.
                let (body, ledger) = ledger::split(&body);
                carried.merge(ledger);
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
    // The summarizer, the rule summary and the must-keep facts read the messages as they were
    // before this compaction's micro and selective passes: a placeholder this call wrote would
    // hide the content it replaced.
    let replaced_views = originals(&p.repaired, &replaced);
    // A span of earlier summaries only (a re-compaction with nothing new): their language, so
    // the ledger's headers do not flip.
    p.language = if replaced_views.is_empty() {
        let summaries: Vec<Message<'_>> = span.iter().map(|&i| p.slots[i].view.clone()).collect();
        detect_language(&summaries)
    } else {
        detect_language(&replaced_views)
    };
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
    let mut led = carried.clone();
    for m in replaced_views.iter().filter(|m| m.is_user_text()) {
        led.add_user_text(&m.prose());
    }
    led.absorb_trail(Trail::of(None, &replaced_views));
    p.ledger = led;
    p.carried = carried;
    p.task_text = p.task.map(|t| {
        let text = p.slots[t].view.prose();
        head_tail(&text, cfg.transcript_item_max_chars).unwrap_or(text)
    });
    let mut continuation = Continuation::default();
    if let Some(prev) = &previous {
        continuation.seed(prev);
    }
    continuation.visit(&replaced_views);
    p.continuation = continuation;
    p.replaced = replaced_views;
    p.previous_summary = previous;
    p.tail_start = tail_start.max(head_end);
    p.span = span;
    p.kept_in_span = kept;
    p.needs_summary = true;
}

/// The views of `slots` as they were before the micro and selective passes (`before` holds the
/// slots after repair, each naming its input message).
pub(super) fn originals<'a>(before: &[Slot<'a>], slots: &[&Slot<'a>]) -> Vec<Message<'a>> {
    let by_source: FxHashMap<usize, &Slot<'a>> = before
        .iter()
        .filter_map(|s| s.source().map(|i| (i, s)))
        .collect();
    slots
        .iter()
        .map(|s| {
            s.source()
                .and_then(|i| by_source.get(&i))
                .map_or(&s.view, |o| &o.view)
                .clone()
        })
        .collect()
}

/// The summarizer's transcript of the replaced span: one entry per message, in chunks that fit
/// `summarizer_max_input_tokens` with the prompt and the previous summary.
#[derive(Clone, Debug)]
pub(super) struct Transcript {
    pub entries: Vec<String>,
    pub chunks: Vec<Range<usize>>,
}

impl Planned<'_> {
    /// A compaction was due (not `micro_compact()`, not below the soft threshold, not held).
    pub fn is_due(&self) -> bool {
        self.due
    }

    /// The configuration it was planned with.
    pub fn config(&self) -> &PlanConfig {
        &self.cfg
    }

    /// The transcript, built on first use with `counter` (the configured tokenizer).
    pub(super) fn transcript(&self, counter: &dyn Count) -> &Transcript {
        self.transcript.get_or_init(|| {
            let cfg = &self.cfg;
            let mut entries = render_transcript(&self.replaced, cfg.transcript_item_max_chars);
            let max_input = cfg.summarizer_max_input_tokens.unwrap_or(cfg.hard).max(256);
            // Leave room for the prompt and the previous summary (at most the bounded cap) in
            // each chunk.
            let room = max_input.saturating_sub(cfg.summary_cap + 512).max(128);
            let count_str = |s: &str| counter.count(Text::Utf8(s));
            // A single over-long entry (a huge paste) is cut to fit one chunk.
            fit_entries(&mut entries, count_str, room);
            let chunks = if entries.is_empty() {
                vec![Range { start: 0, end: 0 }]
            } else {
                chunk_transcript(&entries, count_str, room)
            };
            Transcript { entries, chunks }
        })
    }
}

//! Cuts that keep their must-keep facts (a text or a call's arguments cut head + tail, the facts
//! of the cut part written after the marker), and the ladder's task step before `over_budget`:
//! the task shortened to `task_max_tokens` (the last block's cut is in `last_block.rs`).
//!
//! Design note: the task step only runs when everything else (micro, selective, the summary, a
//! shorter tail, the extra head messages) left the context above the soft threshold. The task
//! is never removed (DESIGN invariant 7): its head and tail stay, the cut is marked, and every
//! must-keep fact of the cut part is written after the marker, so the agent still sees every
//! path, URL and error name its task named. When those facts alone are longer than
//! `task_max_tokens` the task keeps them all and is cut as far as that allows: the smallest cut
//! found is used rather than none.

use super::draft::{block_tokens, Count, Slot};
use super::output::{Change, RecordEntry};
use super::PlanConfig;
use crate::cut::PLACEHOLDER_PREFIX;
use crate::cut::{head_tail_opening, head_tail_text};
use crate::json::{json_string_literal, json_strings};
use crate::message::{BlockKind, Message, Role};
use crate::summary::continuation::{cut_error_note, cut_items_note};
use crate::summary::facts::{fact_present, must_keep_facts};
use crate::summary::instruction::{
    classify, instruction_sentences, is_marked_rule, user_instructions, InstructionKind,
};
use crate::text::Text;

/// Characters a cut task keeps at least (head + marker + tail stay readable).
const MIN_CHARS: usize = 160;
/// Characters of the task's opening a cut keeps verbatim first (DESIGN, "The task").
pub const TASK_OPENING_CHARS: usize = 300;
/// Characters a cut task keeps at least when its allowance holds them: its opening, the cut
/// marker and a little of its tail.
const TASK_MIN_CHARS: usize = TASK_OPENING_CHARS + 40;
/// Characters a cut tool result or assistant text of the last block keeps at least: the last
/// resort before `over_budget`, where the marker (how much was cut) and a few characters each
/// side are all that fits (a CJK character is about a token: 160 would keep 160 tokens).
const MIN_RESULT_CHARS: usize = 40;

/// How [`cut_block`] cuts a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keep {
    /// Head + tail (tool output: no must-keep facts by definition), its last error line after
    /// the marker when the cut removed it.
    Plain,
    /// Head + tail, the must-keep facts of the cut part after the marker (assistant text).
    Facts,
    /// The task: its facts and the user's constraint sentences kept, at least 160 characters.
    Task,
}

/// `text` cut head + tail to about `max_chars`, with the must-keep facts of the cut part
/// written right after the cut marker (a text cut before is cut again, its facts kept the same
/// way). `None` when it is already that short.
pub fn cut_keeping_facts(text: &str, max_chars: usize) -> Option<String> {
    cut_keeping_facts_min(text, max_chars, MIN_CHARS, 0)
}

/// [`cut_keeping_facts`] keeping at least `min_chars` characters of text, and the first
/// `opening` characters of it before anything else (0: head and tail alike).
fn cut_keeping_facts_min(
    text: &str,
    max_chars: usize,
    min_chars: usize,
    opening: usize,
) -> Option<String> {
    cut_with_facts(text, &text_facts(text), max_chars, min_chars, opening)
}

/// The must-keep facts of `text` (found once for the several cuts tried of one text).
fn text_facts(text: &str) -> Vec<String> {
    must_keep_facts(std::slice::from_ref(&Message::text(Role::User, text)))
}

/// [`cut_keeping_facts_min`] with the `facts` of `text` already found.
fn cut_with_facts(
    text: &str,
    facts: &[String],
    max_chars: usize,
    min_chars: usize,
    opening: usize,
) -> Option<String> {
    // The list takes room from the text, and less text may lose more facts: grow the list until
    // it names every fact the cut it leaves room for lost (at most one round per fact).
    let mut lost = vec![false; facts.len()];
    loop {
        let list = mentions(facts.iter().zip(&lost).filter(|(_, &l)| l).map(|(f, _)| f));
        // The opening comes before the list (DESIGN, "The task"): all of it the allowance holds.
        let room = max_chars
            .saturating_sub(list.chars().count())
            .max(min_chars)
            .max(if opening > 0 {
                TASK_MIN_CHARS.min(max_chars)
            } else {
                0
            });
        let cut = if opening > 0 {
            head_tail_opening(Text::Utf8(text), room, opening)?
        } else {
            head_tail_text(Text::Utf8(text), room)?
        };
        let mut more = false;
        for (f, l) in facts.iter().zip(lost.iter_mut()) {
            if !*l && !fact_present(&cut, f) {
                *l = true;
                more = true;
            }
        }
        if more {
            continue;
        }
        return with_list(cut, &list);
    }
}

/// `cut` with `list` (the cut part's instructions) right after its cut marker.
fn with_list(cut: String, list: &str) -> Option<String> {
    if list.is_empty() {
        return Some(cut);
    }
    let at = cut_marker_end(&cut)?;
    let mut out = String::with_capacity(cut.len() + list.len());
    out.push_str(&cut[..at]);
    out.push_str(list);
    out.push_str(&cut[at..]);
    Some(out)
}

/// A task's text with its instructions and must-keep facts found once, for the several cuts
/// [`cut_block`] tries (a task may be megabytes long).
pub(super) struct TaskText<'t> {
    original: &'t str,
    text: std::borrow::Cow<'t, str>,
    instructions: Vec<(InstructionKind, String)>,
    facts: Vec<String>,
}

/// The opening of the list of the user's constraints a task's cut writes after its marker.
const LISTED: &str = " (the user's constraints, verbatim: ";

/// `text` without the list of constraints an earlier cut wrote in it, and the list's sentences
/// (`text` itself and none when it has no whole list: one a later cut went through is left).
fn split_listed(text: &str) -> (std::borrow::Cow<'_, str>, Vec<String>) {
    let Some(start) = text.find(LISTED) else {
        return (text.into(), Vec::new());
    };
    let inner = start + LISTED.len();
    let mut depth = 1usize;
    let mut end = None;
    for (i, c) in text[inner..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(inner + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(end) = end else {
        return (text.into(), Vec::new());
    };
    let list = &text[inner..end];
    if cut_marker_end(list).is_some() {
        return (text.into(), Vec::new());
    }
    let rest = text[end + 1..]
        .strip_prefix(' ')
        .unwrap_or(&text[end + 1..]);
    (
        format!("{}{rest}", &text[..start]).into(),
        instruction_sentences(list),
    )
}

impl<'t> TaskText<'t> {
    pub(super) fn new(original: &'t str) -> Self {
        // A task cut before is cut again from its text without the list that cut wrote, the
        // list's sentences among its instructions: a second cut of the list itself would keep
        // its head and tail and lose whole rules from its middle.
        let (text, listed) = split_listed(original);
        let mut instructions = user_instructions(&text);
        for s in listed {
            if !instructions.iter().any(|(_, x)| *x == s) {
                let kind = classify(&s).unwrap_or(InstructionKind::Requirement);
                instructions.push((kind, s));
            }
        }
        // The facts of all of it (a fact only the list named is still listed when it goes).
        let facts = text_facts(original);
        TaskText {
            original,
            text,
            instructions,
            facts,
        }
    }

    /// This text cut to about `max_chars` ([`Self::cut_parts`]). A task cut before is cut with
    /// its earlier list of rules whole when that fits; when the whole rules alone are over the
    /// allowance, the earlier cut is cut as it stands, through its list, if that is shorter:
    /// the task must still come down to `task_max_tokens` with its opening (DESIGN invariant 5),
    /// and the ledger carries the instructions of every part a cut removes.
    pub(super) fn cut(&self, max_chars: usize) -> Option<String> {
        let cut = self.cut_parts(max_chars);
        let fits = |c: &Option<String>| c.as_ref().is_some_and(|c| c.chars().count() <= max_chars);
        if matches!(self.text, std::borrow::Cow::Borrowed(_)) || fits(&cut) {
            return cut;
        }
        let through = TaskText {
            original: self.original,
            text: self.original.into(),
            instructions: user_instructions(self.original),
            facts: self.facts.clone(),
        }
        .cut_parts(max_chars);
        match (cut, through) {
            (Some(a), Some(b)) if b.chars().count() < a.chars().count() => Some(b),
            (a, b) => a.or(b),
        }
    }

    /// This text cut to about `max_chars`, as [`cut_keeping_facts`] cuts a text but keeping
    /// its opening first; the user's instructions ([`user_instructions`]) the cut removed are
    /// also written after the cut marker, verbatim (` (the user's constraints, verbatim: …) `):
    /// "never modify the tests" must not go with the middle of a long task.
    fn cut_parts(&self, max_chars: usize) -> Option<String> {
        let text: &str = &self.text;
        let facts = &self.facts;
        // Safety rules and rules with a marker word ("never", "don't", "must", "only", "always",
        // 不要, 必须 …: [`is_marked_rule`]) are always listed (as the keyword list was); the other instructions (conditions, preferences,
        // goals, then plain requests; shortest first, the most that fit) only within the room the
        // cut leaves above MIN_CHARS of text, so a task full of imperative steps stays within
        // task_max_tokens. They are listed in their order. (The ledger carries the task's cut
        // instructions whole; this list keeps the task readable on its own.)
        let all = &self.instructions;
        let rank = |k: InstructionKind, s: &str| match (k, is_marked_rule(s)) {
            (InstructionKind::Safety, _) | (InstructionKind::Prohibition, true) => 0,
            (_, true) => 1,
            (InstructionKind::Requirement, false) => 3,
            _ => 2,
        };
        let room = max_chars.saturating_sub(TASK_OPENING_CHARS.max(MIN_CHARS) + 40);
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by_key(|&i| (rank(all[i].0, &all[i].1), all[i].1.chars().count(), i));
        let mut taken = vec![false; all.len()];
        let mut used = 0;
        for i in order {
            let n = all[i].1.chars().count() + 1;
            if rank(all[i].0, &all[i].1) <= 1 || used + n <= room {
                used += n;
                taken[i] = true;
            }
        }
        let constraints: Vec<&String> = all
            .iter()
            .zip(taken)
            .filter(|(_, t)| *t)
            .map(|((_, s), _)| s)
            .collect();
        if constraints.is_empty() {
            return cut_with_facts(text, facts, max_chars, MIN_CHARS, TASK_OPENING_CHARS);
        }
        let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut lost: Vec<&String> = Vec::new();
        loop {
            let mut list = String::new();
            if !lost.is_empty() {
                list.push_str(" (the user's constraints, verbatim: ");
                list.push_str(
                    &lost
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                list.push_str(") ");
            }
            let room = max_chars
                .saturating_sub(list.chars().count())
                .max(MIN_CHARS)
                .max(TASK_MIN_CHARS.min(max_chars));
            // A task cut before whose text without its list fits: that text, a new list after
            // its marker.
            let cut = match cut_with_facts(text, facts, room, MIN_CHARS, TASK_OPENING_CHARS) {
                Some(cut) => cut,
                None if matches!(self.text, std::borrow::Cow::Owned(_)) => text.to_owned(),
                None => return None,
            };
            let flat = collapse(&cut);
            let more: Vec<&String> = constraints
                .iter()
                .copied()
                .filter(|c| !lost.contains(c) && !flat.contains(c.as_str()))
                .collect();
            if !more.is_empty() {
                lost.extend(more);
                continue;
            }
            return with_list(cut, &list);
        }
    }
}

/// ` (cut part mentions: a, b) `, or nothing for no facts.
pub(super) fn mentions<'f>(facts: impl Iterator<Item = &'f String>) -> String {
    let mut list = String::new();
    for f in facts {
        list.push_str(if list.is_empty() {
            " (cut part mentions: "
        } else {
            ", "
        });
        list.push_str(f);
    }
    if !list.is_empty() {
        list.push_str(") ");
    }
    list
}

/// `cut` (of the arguments `args`) with the must-keep facts of the string values it removed
/// written right after its first cut marker, inside that JSON string (escaped): DESIGN counts
/// the facts of everything a compaction cuts, and a micro pass makes no summary to carry them.
pub(super) fn with_cut_facts(args: &str, mut cut: String) -> String {
    let spans = json_strings(args);
    let values: String = match &spans {
        Some(spans) => spans
            .iter()
            .filter(|s| !s.is_key)
            .map(|s| s.decode(args))
            .collect::<Vec<_>>()
            .join("\n"),
        None => args.to_owned(),
    };
    let facts = must_keep_facts(std::slice::from_ref(&Message::text(
        Role::User,
        values.as_str(),
    )));
    let lost: Vec<&String> = facts.iter().filter(|f| !cut.contains(f.as_str())).collect();
    if lost.is_empty() {
        return cut;
    }
    let list = mentions(lost.iter().copied());
    let Some(at) = cut_marker_end(&cut) else {
        return cut;
    };
    let insert = if spans.is_some() {
        let lit = json_string_literal(&list);
        lit[1..lit.len() - 1].to_owned()
    } else {
        list
    };
    cut.insert_str(at, &insert);
    cut
}

/// `cut` (of the arguments `args`) with the open checklist items of the string values it
/// removed written right after its first cut marker, inside that JSON string (escaped): the
/// last block's cut keeps the plan it shows (DESIGN's continuation: a PR's test plan is the
/// agent's next steps), as a cut tool output keeps its error line.
pub(super) fn with_cut_items(args: &str, mut cut: String) -> String {
    if !args.contains("[ ]") && !args.contains("\\u") {
        return cut;
    }
    let values = |json: &str| match json_strings(json) {
        Some(spans) => spans
            .iter()
            .filter(|s| !s.is_key)
            .map(|s| s.decode(json))
            .collect::<Vec<_>>()
            .join("\n"),
        None => json.to_owned(),
    };
    let Some(note) = cut_items_note(&values(args), &values(&cut)) else {
        return cut;
    };
    let Some(at) = cut_marker_end(&cut) else {
        return cut;
    };
    let insert = if json_strings(&cut).is_some() {
        let lit = json_string_literal(&note);
        lit[1..lit.len() - 1].to_owned()
    } else {
        note
    };
    cut.insert_str(at, &insert);
    cut
}

/// Byte offset just after the first cut marker in `cut`.
pub fn cut_marker_end(cut: &str) -> Option<usize> {
    const TAIL: &str = " chars omitted]…";
    cut.find(TAIL).map(|i| i + TAIL.len())
}

/// `cut` (arguments or text with a cut marker) with `recall("id")` right after its first cut
/// marker; inside a JSON string when the cut is one (the quotes escaped).
pub fn with_recall_ref(mut cut: String, id: &str) -> String {
    let Some(at) = cut_marker_end(&cut) else {
        return cut;
    };
    let r = format!(" {} ", crate::recall::recall_ref(id));
    let inside_json = crate::json::json_strings(&cut).is_some();
    let r = if inside_json {
        let lit = crate::json::json_string_literal(&r);
        lit[1..lit.len() - 1].to_owned()
    } else {
        r
    };
    cut.insert_str(at, &r);
    cut
}

/// Cut text block `k` of `slot` (a text or a tool result) so the slot loses about `excess`
/// tokens, never below `floor` tokens for the block. Returns the tokens saved. With `recalls`
/// (and `recall` on) the cut names its original, which is added there.
#[allow(clippy::too_many_arguments)]
pub(super) fn cut_block(
    slot: &mut Slot<'_>,
    k: usize,
    excess: usize,
    floor: usize,
    cfg: &PlanConfig,
    counter: &dyn Count,
    keep: Keep,
    recalls: Option<&mut Vec<crate::recall::Recall>>,
) -> usize {
    let b = &slot.view.blocks[k];
    if b.images > 0 {
        return 0;
    }
    let text = b.joined_text("\n");
    // A placeholder is as short as it gets; text cut before (by an earlier compaction of a
    // chain) may be cut again: the ladder's last steps must be able to fit the window.
    if text.starts_with(PLACEHOLDER_PREFIX) {
        return 0;
    }
    let tokens = block_tokens(b, cfg.framing, counter);
    let goal = tokens.saturating_sub(excess).max(floor);
    if goal >= tokens {
        return 0;
    }
    let chars = text.chars().count();
    let min_chars = if keep == Keep::Task {
        // Its opening, whole (DESIGN, "The task").
        TASK_MIN_CHARS
    } else {
        MIN_RESULT_CHARS
    };
    let mut max_chars = (chars as f64 * goal as f64 / tokens as f64) as usize;
    // With `recall` the cut names its original right after the marker (counted with the cut).
    let recalled =
        (cfg.recall && recalls.is_some()).then(|| crate::recall::Recall::of(text.clone()));
    // Counting is not linear in characters: shrink until the cut text is within the goal. When
    // it never gets there (a task whose must-keep facts alone are longer than the goal), the
    // smallest cut found is used: a cut that falls short still saves what it can.
    let task = (keep == Keep::Task).then(|| TaskText::new(&text));
    let facts = if keep == Keep::Facts {
        text_facts(&text)
    } else {
        Vec::new()
    };
    // Tool output keeps its error line after the marker (the last unresolved error stays in the
    // kept tail): part of its floor, as the must-keep facts are of a text's cut.
    let is_error = b.is_error;
    let with_error = keep == Keep::Plain;
    let plain = |max_chars: usize, with_error: bool| {
        let cut = head_tail_text(Text::Utf8(&text), max_chars.max(min_chars))?;
        match with_error
            .then(|| cut_error_note(&text, is_error, &cut))
            .flatten()
        {
            Some(note) => with_list(cut, &note),
            None => Some(cut),
        }
    };
    let cut_at = |max_chars: usize, with_error: bool| {
        let cut = match (keep, &task) {
            (Keep::Task, Some(task)) => task.cut(max_chars),
            (Keep::Task, None) => None,
            (Keep::Facts, _) => cut_with_facts(&text, &facts, max_chars, min_chars, 0),
            (Keep::Plain, _) => plain(max_chars, with_error),
        }?;
        Some(match &recalled {
            Some(r) => with_recall_ref(cut, &r.id),
            None => cut,
        })
    };
    let mut best: Option<(String, usize)> = None;
    // The longest cut seen over the goal (`max_chars`), to search back from for the task.
    let mut over: Option<usize> = None;
    for _ in 0..6 {
        let Some(cut) = cut_at(max_chars, with_error) else {
            break;
        };
        let new = counter.count(Text::Utf8(&cut));
        let done = new <= goal || max_chars <= min_chars;
        if best.as_ref().is_none_or(|b| new < b.1) {
            best = Some((cut, new));
        }
        if done {
            break;
        }
        over = Some(max_chars);
        // Aim again by the ratio this cut missed by (a cut just over the goal is trimmed a
        // little, not by a fixed fifth: the task is cut by the least amount).
        let aim = (max_chars as f64 * goal as f64 / new as f64 * 0.97) as usize;
        max_chars = aim.clamp(min_chars, max_chars.saturating_sub(1).max(min_chars));
    }
    // The task is cut by the least amount: between the last cut under the goal and the one
    // before it over the goal (or the whole text, when the first cut was already under), the
    // longest cut still within the goal (a few halvings).
    if keep == Keep::Task {
        if let (Some(mut hi), Some((_, new))) = (over.or(Some(chars)), best.as_ref()) {
            let mut lo = max_chars;
            if *new <= goal {
                for _ in 0..7 {
                    if hi <= lo + 8 {
                        break;
                    }
                    let mid = lo + (hi - lo) / 2;
                    let Some(cut) = cut_at(mid, false) else {
                        break;
                    };
                    let n = counter.count(Text::Utf8(&cut));
                    if n <= goal {
                        lo = mid;
                        best = Some((cut, n));
                    } else {
                        hi = mid;
                    }
                }
            }
        }
    }
    let Some((cut, new)) = best else {
        return 0;
    };
    let before = slot.tokens;
    if new >= tokens || !slot.edit_block_counted(k, cut, tokens, new) {
        return 0;
    }
    if let (Some(r), Some(out)) = (recalled, recalls) {
        out.push(r);
    }
    before.saturating_sub(slot.tokens)
}

/// Shorten the task in `slots[at]` by about `excess` tokens, never below `task_max_tokens` (a
/// floor, not a target: DESIGN, "The task"), its text blocks longest first, each keeping its
/// opening verbatim first. Returns the tokens saved and the record entry. With `recall` each
/// cut block names its original, which is added to `recalls`.
pub fn shorten_task(
    slots: &mut [Slot<'_>],
    at: usize,
    excess: usize,
    cfg: &PlanConfig,
    counter: &dyn Count,
    recalls: &mut Vec<crate::recall::Recall>,
) -> Option<(usize, RecordEntry)> {
    let slot = &mut slots[at];
    if slot.pinned || slot.tokens <= cfg.task_max_tokens || excess == 0 {
        return None;
    }
    let index = slot.source()?;
    let before = slot.tokens;
    let floor = cfg.task_max_tokens;
    let mut need = (slot.tokens - floor).min(excess);
    let mut order: Vec<usize> = (0..slot.view.blocks.len())
        .filter(|&k| slot.view.blocks[k].kind == BlockKind::Text)
        .collect();
    order.sort_by_key(|&k| {
        std::cmp::Reverse(block_tokens(&slot.view.blocks[k], cfg.framing, counter))
    });
    for k in order {
        if need == 0 {
            break;
        }
        let b = block_tokens(&slot.view.blocks[k], cfg.framing, counter);
        // The block's own floor: what keeps the whole task at `task_max_tokens`.
        let others = slot.tokens.saturating_sub(b);
        let block_floor = floor.saturating_sub(others).max(32);
        let saved = cut_block(
            slot,
            k,
            need,
            block_floor,
            cfg,
            counter,
            Keep::Task,
            Some(&mut *recalls),
        );
        need = need.saturating_sub(saved);
    }
    let saved = before.saturating_sub(slot.tokens);
    (saved > 0).then(|| {
        (
            saved,
            RecordEntry {
                index,
                action: Change::Shortened,
                detail: format!("the task cut from {before} to {} tokens", slot.tokens),
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cut::cut_json_args;

    #[test]
    fn the_list_names_every_fact_whatever_the_room() {
        // Facts all along the text: making room for the list cuts more of the text, and the
        // list must then name what that second cut lost too.
        let text: String = (0..40)
            .map(|i| format!("step {i} edits src/module_{i}/file_{i}.py and more words here. "))
            .collect();
        for max in (160..900).step_by(13) {
            let cut = cut_keeping_facts(&text, max).unwrap();
            for i in 0..40 {
                let f = format!("src/module_{i}/file_{i}.py");
                assert!(cut.contains(&f), "max {max}: {f} missing from {cut}");
            }
        }
    }

    #[test]
    fn a_task_whose_facts_outgrow_the_limit_is_still_cut_as_far_as_they_allow() {
        // A demonstration trajectory of a swe-agent task: hundreds of paths. Its facts alone are
        // longer than task_max_tokens; the task keeps them all and is still cut (it was left
        // whole: 5,078 tokens against a limit of 281).
        let text: String = (0..150)
            .map(|i| format!("step {i}: open src/pkg_{i}/module_{i}.py and read it carefully. "))
            .collect();
        let conv = crate::message::Conversation::new(
            crate::message::Format::OpenAi,
            vec![Message::text(Role::User, text.as_str())],
        );
        let c = |t: Text<'_>| crate::tokens::counter::Tokenizer::Approx.count(t);
        let framing = crate::tokens::counter::Framing::default();
        let tokens = crate::tokens::counter::message_tokens(
            crate::tokens::counter::Tokenizer::Approx,
            &conv.messages[0],
            framing,
        );
        let mut slots = vec![Slot::keep(&conv, 0, tokens, false)];
        let cfg = PlanConfig {
            task_max_tokens: 200,
            ..PlanConfig::default()
        };
        let (saved, entry) = shorten_task(
            &mut slots,
            0,
            usize::MAX,
            &cfg,
            &c as &dyn Count,
            &mut Vec::new(),
        )
        .expect("cut");
        assert!(saved > tokens / 3, "saved {saved} of {tokens}");
        assert_eq!(entry.action, Change::Shortened);
        let cut = slots[0].view.blocks[0].texts[0]
            .text()
            .to_utf8()
            .into_owned();
        for i in 0..150 {
            let f = format!("src/pkg_{i}/module_{i}.py");
            assert!(cut.contains(&f), "{f} missing");
        }
    }

    #[test]
    fn a_cut_task_keeps_the_facts_of_the_cut_part() {
        let mut text = String::from("请修复 src/app/main.py 里的问题。");
        text.push_str(&"背景说明。".repeat(400));
        text.push_str("相关文件：/etc/nginx/nginx.conf，见 https://example.com/issue/42 。");
        text.push_str(&"更多背景。".repeat(400));
        text.push_str("最后运行测试。");
        let cut = cut_keeping_facts(&text, 300).unwrap();
        assert!(cut.chars().count() < 500, "{}", cut.chars().count());
        for f in [
            "src/app/main.py",
            "/etc/nginx/nginx.conf",
            "https://example.com/issue/42",
        ] {
            assert!(cut.contains(f), "{f} missing from {cut}");
        }
        assert!(cut.starts_with("请修复") && cut.ends_with("最后运行测试。"));
    }

    /// A task cut again (the next compaction of a chain cuts the kept, already cut task) lists
    /// whole rules: the earlier cut's list is read back, not cut through its middle.
    #[test]
    fn a_cut_task_cut_again_lists_whole_rules() {
        let rules = [
            "Always start by trying to replicate the bug that the issue discusses.",
            "If the script prints nothing, we recommend adding a print at the end of the file.",
            "When you think you've fixed the bug, re-run the reproduction script to make sure.",
            "If you run a command and it doesn't work, try running a different command.",
            "Never edit the tests in tests/regress, and never skip a failing test.",
            "Always check the code after you issue an edit to make sure it is what you meant.",
        ];
        let mut text = String::from("Fix the TimeDelta rounding in src/marshmallow/fields.py.\n");
        text.push_str(&"Some background about the issue and its history. ".repeat(120));
        text.push_str("\nIMPORTANT TIPS:\n");
        for (i, r) in rules.iter().enumerate() {
            text.push_str(&format!("{}. {r}\n", i + 1));
        }
        text.push_str(&"More background about the repository layout here. ".repeat(120));
        let first = TaskText::new(&text).cut(1_400).unwrap();
        let again = TaskText::new(&first).cut(1_000).unwrap();
        assert!(again.chars().count() < first.chars().count());
        assert_eq!(again.matches(LISTED).count(), 1, "{again}");
        let start = again.find(LISTED).unwrap() + LISTED.len();
        let list = &again[start..];
        assert!(
            cut_marker_end(list).is_none_or(|e| e > list.find(") ").unwrap()),
            "{again}"
        );
        for r in rules {
            let shown = again.matches(r).count();
            assert!(shown <= 1, "{r} twice in {again}");
        }
        // The marked rules ("always", "never") are always listed.
        for r in [rules[0], rules[4], rules[5]] {
            assert!(again.contains(r), "{r} missing from {again}");
        }
    }

    #[test]
    fn cut_arguments_keep_the_facts_of_their_cut_part() {
        let body = format!(
            "{}\nsee /etc/nginx/nginx.conf and C:\\\\app\\\\main.py, then fix the KeyError\n{}",
            "line of code\n".repeat(200),
            "更多代码\n".repeat(200)
        );
        let args = serde_json::json!({"path": "src/app.py", "content": body}).to_string();
        let cut = with_cut_facts(&args, cut_json_args(&args, 500).unwrap());
        let v: serde_json::Value = serde_json::from_str(&cut).expect("still valid JSON");
        let content = v["content"].as_str().unwrap();
        for f in ["/etc/nginx/nginx.conf", "KeyError"] {
            assert!(content.contains(f), "{f} missing: {content}");
        }
        assert!(content.contains("cut part mentions"), "{content}");
        assert_eq!(v["path"], "src/app.py");
        assert!(cut.chars().count() < 800, "{}", cut.chars().count());
    }
}

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
use crate::cut::head_tail_text;
use crate::cut::PLACEHOLDER_PREFIX;
use crate::json::{json_string_literal, json_strings};
use crate::message::{BlockKind, Message, Role};
use crate::summary::facts::{fact_present, must_keep_facts};
use crate::summary::instruction::{is_marked_rule, user_instructions, InstructionKind};
use crate::text::Text;

/// Characters a cut task keeps at least (head + marker + tail stay readable).
const MIN_CHARS: usize = 160;
/// Characters a cut tool result or assistant text of the last block keeps at least: the last
/// resort before `over_budget`, where the marker (how much was cut) and a few characters each
/// side are all that fits (a CJK character is about a token: 160 would keep 160 tokens).
const MIN_RESULT_CHARS: usize = 40;

/// How [`cut_block`] cuts a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keep {
    /// Head + tail (tool output: no must-keep facts by definition).
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
    cut_keeping_facts_min(text, max_chars, MIN_CHARS)
}

/// [`cut_keeping_facts`] keeping at least `min_chars` characters of text.
fn cut_keeping_facts_min(text: &str, max_chars: usize, min_chars: usize) -> Option<String> {
    let facts = must_keep_facts(std::slice::from_ref(&Message::text(Role::User, text)));
    // The list takes room from the text, and less text may lose more facts: grow the list until
    // it names every fact the cut it leaves room for lost (at most one round per fact).
    let mut lost = vec![false; facts.len()];
    loop {
        let list = mentions(facts.iter().zip(&lost).filter(|(_, &l)| l).map(|(f, _)| f));
        let room = max_chars
            .saturating_sub(list.chars().count())
            .max(min_chars);
        let cut = head_tail_text(Text::Utf8(text), room)?;
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
        if list.is_empty() {
            return Some(cut);
        }
        let at = cut_marker_end(&cut)?;
        let mut out = String::with_capacity(cut.len() + list.len());
        out.push_str(&cut[..at]);
        out.push_str(&list);
        out.push_str(&cut[at..]);
        return Some(out);
    }
}

/// [`cut_keeping_facts`] for the task: the user's instructions ([`user_instructions`]) the cut removed are also
/// written after the cut marker, verbatim (` (the user's constraints, verbatim: …) `): "never
/// modify the tests" must not go with the middle of a long task.
pub fn cut_task_keeping_constraints(text: &str, max_chars: usize) -> Option<String> {
    // Safety rules and rules with a marker word ("never", "don't", "must", "only", "always",
    // 不要, 必须 …: [`is_marked_rule`]) are always listed (as the keyword list was); the other instructions (conditions, preferences,
    // goals, then plain requests; shortest first, the most that fit) only within the room the
    // cut leaves above MIN_CHARS of text, so a task full of imperative steps stays within
    // task_max_tokens. They are listed in their order. (The ledger carries the task's cut
    // instructions whole; this list keeps the task readable on its own.)
    let all = user_instructions(text);
    let rank = |k: InstructionKind, s: &str| match (k, is_marked_rule(s)) {
        (InstructionKind::Safety, _) | (InstructionKind::Prohibition, true) => 0,
        (_, true) => 1,
        (InstructionKind::Requirement, false) => 3,
        _ => 2,
    };
    let room = max_chars.saturating_sub(MIN_CHARS + 40);
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
    let constraints: Vec<String> = all
        .into_iter()
        .zip(taken)
        .filter(|(_, t)| *t)
        .map(|((_, s), _)| s)
        .collect();
    if constraints.is_empty() {
        return cut_keeping_facts(text, max_chars);
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
            .max(MIN_CHARS);
        let cut = cut_keeping_facts(text, room)?;
        let flat = collapse(&cut);
        let more: Vec<&String> = constraints
            .iter()
            .filter(|c| !lost.contains(c) && !flat.contains(c.as_str()))
            .collect();
        if !more.is_empty() {
            lost.extend(more);
            continue;
        }
        if list.is_empty() {
            return Some(cut);
        }
        let at = cut_marker_end(&cut)?;
        let mut out = String::with_capacity(cut.len() + list.len());
        out.push_str(&cut[..at]);
        out.push_str(&list);
        out.push_str(&cut[at..]);
        return Some(out);
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

/// Byte offset just after the first cut marker in `cut`.
pub fn cut_marker_end(cut: &str) -> Option<usize> {
    const TAIL: &str = " chars omitted]…";
    cut.find(TAIL).map(|i| i + TAIL.len())
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
        MIN_CHARS
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
    let mut best: Option<(String, usize)> = None;
    for _ in 0..6 {
        let cut = match keep {
            Keep::Task => cut_task_keeping_constraints(&text, max_chars),
            Keep::Facts => cut_keeping_facts_min(&text, max_chars, min_chars),
            Keep::Plain => head_tail_text(Text::Utf8(&text), max_chars.max(min_chars)),
        };
        let Some(mut cut) = cut else {
            break;
        };
        if let Some(r) = &recalled {
            cut = super::micro::with_recall_ref(cut, &r.id);
        }
        let new = counter.count(Text::Utf8(&cut));
        let done = new <= goal || max_chars <= min_chars;
        if best.as_ref().is_none_or(|b| new < b.1) {
            best = Some((cut, new));
        }
        if done {
            break;
        }
        max_chars = max_chars * 8 / 10;
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

/// Shorten the task in `slots[at]` to `task_max_tokens` (its text blocks, longest first).
/// Always to the limit, not just the overflow: a task cut once is marked and stays as it is in
/// later compactions (a stable prefix for the provider's cache). Returns the tokens saved and
/// the record entry.
pub fn shorten_task(
    slots: &mut [Slot<'_>],
    at: usize,
    cfg: &PlanConfig,
    counter: &dyn Count,
) -> Option<(usize, RecordEntry)> {
    let slot = &mut slots[at];
    if slot.pinned || slot.tokens <= cfg.task_max_tokens {
        return None;
    }
    let index = slot.source()?;
    let before = slot.tokens;
    let mut need = slot.tokens - cfg.task_max_tokens;
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
        let saved = cut_block(slot, k, need, 32, cfg, counter, Keep::Task, None);
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
        let (saved, entry) = shorten_task(&mut slots, 0, &cfg, &c as &dyn Count).expect("cut");
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

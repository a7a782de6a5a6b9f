//! Micro-compaction and selective rules: shrink old tool output, long arguments, thinking of
//! finished turns, images and long old texts — no LLM, no change of message order.
//!
//! Design note: what is cleared is chosen so that the recent context stays byte-identical (the
//! kept head and tail are the same objects, which keeps a provider's cached prompt prefix up to
//! the first edit valid), protected tools are never touched, and text that already carries a
//! placeholder or cut marker is never cut again. A micro pass whose savings stay under
//! `clear_at_least_tokens` is dropped whole: editing an old message invalidates the provider's
//! prompt cache from that point on, which costs more than a few hundred tokens save.
//!
//! Over 600 lines on purpose: the micro pass and the selective rules share what is frozen
//! (`frozen`, the kept head and tail, the continuation's live messages) and the edit helpers
//! (placeholders, argument cuts, recall ids, the record), so a change to one rule is read
//! beside the other.

use super::draft::{Count, Slot};
use super::output::{Change, RecordEntry};
use super::shorten::{cut_keeping_facts, with_cut_facts, with_recall_ref};
use super::superseded::{superseded, Superseded};
use super::{Action, Item, PlanConfig};
use crate::cut::{cut_json_args, head_tail, is_cut, PLACEHOLDER_PREFIX};
use crate::message::{Block, BlockKind, Message, Role};
use crate::recall::{is_recall_tool, with_ref, Recall};
use crate::structure::{analyze, Structure};
use rustc_hash::{FxHashMap, FxHashSet};

/// Whether a text is (or starts with) one of our placeholders or cut markers.
pub fn already_compacted(text: &str) -> bool {
    text.starts_with(PLACEHOLDER_PREFIX) || is_cut(text)
}

/// Which slots micro and selective compaction may not touch: instructions, pinned messages,
/// the kept head and the recent tail.
pub fn frozen(slots: &[Slot<'_>], cfg: &PlanConfig) -> Vec<bool> {
    let n = slots.len();
    let mut frozen: Vec<bool> = slots
        .iter()
        .map(|s| s.is_fixed() || s.is_summary())
        .collect();
    let st = analyze(slots);
    // The assistant messages of the pending thinking loop go back exactly as the model wrote
    // them (Anthropic refuses a rebuilt one: see the design note in `structure.rs`); their tool
    // results may still be cleared.
    if let Some(l) = st.pending_loop {
        for i in l.start..=l.end {
            frozen[i] |= slots[i].view.role == Role::Assistant;
        }
    }
    // The item after a Responses reasoning item goes back exactly as the model wrote it.
    for i in 1..n {
        frozen[i] |= crate::formats::responses::is_reasoning(&slots[i - 1].view);
    }
    // What the agent needs next stays whole: the latest to-do list call and the result of the
    // last unresolved error (with its call).
    let views: Vec<&Message<'_>> = slots.iter().map(|s| &s.view).collect();
    // A long failing output is not kept whole: a twentieth of the budget at most (in chars).
    let max_chars = (cfg.hard / 20).max(200) * 4;
    for i in crate::summary::continuation::live_messages(&views, max_chars) {
        frozen[i] = true;
    }
    let (head_end, tail_start) = head_and_tail_in(slots, &st, cfg);
    for f in &mut frozen[..head_end] {
        *f = true;
    }
    for f in &mut frozen[tail_start.max(head_end).min(n)..] {
        *f = true;
    }
    frozen
}

/// The task: the first user text message, unless an earlier summary comes first (then the
/// conversation starts with what a compaction left and the summary carries the start).
pub fn task_index(slots: &[Slot<'_>]) -> Option<usize> {
    slots
        .iter()
        .position(|s| s.is_summary() || s.view.is_user_text())
        .filter(|&i| !slots[i].is_summary())
}

/// End of the kept head and start of the kept tail, both at legal cut points.
pub fn head_and_tail(slots: &[Slot<'_>], cfg: &PlanConfig) -> (usize, usize) {
    head_and_tail_in(slots, &analyze(slots), cfg)
}

/// [`head_and_tail`] with the slots' structure already worked out.
pub fn head_and_tail_in(slots: &[Slot<'_>], s: &Structure, cfg: &PlanConfig) -> (usize, usize) {
    let n = slots.len();
    let legal = |c: usize| s.cut_points.binary_search(&c).is_ok();
    // Head: the first `keep_first_messages` conversation messages (the task), stopping at an
    // earlier summary, extended to a legal cut.
    let mut head_end = 0;
    // Leading system/developer messages always stay first.
    while head_end < n
        && slots[head_end].view.role.is_instruction()
        && !slots[head_end].is_summary()
    {
        head_end += 1;
    }
    // The task (the first user text) is always in the head, whatever `keep_first_messages`
    // says (DESIGN invariant 7): it may be shortened by the ladder, never summarised away.
    let task = task_index(slots);
    let mut taken = 0;
    while head_end < n && (taken < cfg.keep_first_messages || task.is_some_and(|t| head_end <= t)) {
        let v = &slots[head_end];
        if v.is_summary() {
            break;
        }
        if !v.view.role.is_instruction() {
            taken += 1;
        }
        head_end += 1;
    }
    while head_end < n && !legal(head_end) {
        head_end += 1;
    }
    // Tail: at least `keep_recent_messages` messages and `keep_recent_tokens` tokens, starting
    // at a legal cut (the longer tail when both are set).
    let mut tail_start = n.saturating_sub(cfg.keep_recent_messages);
    if let Some(min_tokens) = cfg.keep_recent_tokens {
        let mut acc = 0;
        let mut c = n;
        while c > 0 && acc < min_tokens {
            c -= 1;
            acc += slots[c].tokens;
        }
        tail_start = tail_start.min(c);
    }
    // A call still waiting for its result stays last, with its block.
    if let Some(b) = s.pending_block {
        tail_start = tail_start.min(b.start);
    }
    while tail_start > 0 && !legal(tail_start) {
        tail_start -= 1;
    }
    (head_end, tail_start.max(head_end))
}

/// Map call id → tool name over the slots.
fn tool_names<'s>(slots: &'s [Slot<'_>]) -> FxHashMap<&'s str, &'s str> {
    let mut names = FxHashMap::default();
    for s in slots {
        for b in s.view.calls() {
            if let (Some(id), Some(name)) = (&b.id, &b.name) {
                names.insert(id.as_str(), name.as_str());
            }
        }
    }
    names
}

/// The placeholder for a cleared tool result.
pub fn result_placeholder(
    name: &str,
    chars: usize,
    tokens: usize,
    offload: Option<&str>,
) -> String {
    match offload {
        Some(path) => format!(
            "{PLACEHOLDER_PREFIX} output of {name} cleared, {chars} chars / ~{tokens} tokens; full output saved to {path}]"
        ),
        None => format!(
            "{PLACEHOLDER_PREFIX} output of {name} cleared, {chars} chars / ~{tokens} tokens]"
        ),
    }
}

/// A planned offload of a cleared result's full text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offload {
    pub path: String,
    pub text: String,
}

/// File name for offloaded text: a content hash, so the same output is written once.
pub fn offload_path(dir: &str, text: &str) -> String {
    let h = crate::fingerprint::hash_bytes(text.as_bytes());
    let h2 = crate::fingerprint::mix(h, text.len() as u64);
    format!(
        "{}/tool-output-{h:016x}{h2:08x}.txt",
        dir.trim_end_matches('/')
    )
    .replace("//", "/")
    .chars()
    .take(4096)
    .collect()
}

/// What a pass changed.
#[derive(Default)]
pub struct Pass {
    pub changed: usize,
    pub record: Vec<RecordEntry>,
    pub offloads: Vec<Offload>,
    /// Originals the placeholders of this pass name (`recall`).
    pub recalls: Vec<Recall>,
}

fn result_text(slot: &Slot<'_>, k: usize) -> String {
    slot.view.blocks[k].joined_text("\n")
}

/// Clear one result block into a placeholder. Returns the tokens saved (0 if not worth it).
#[allow(clippy::too_many_arguments)]
fn clear_result(
    slot: &mut Slot<'_>,
    k: usize,
    name: &str,
    cfg: &PlanConfig,
    counter: &dyn Count,
    pass: &mut Pass,
    superseded: Option<&Superseded>,
) -> usize {
    let b = &slot.view.blocks[k];
    // Our placeholders start with the prefix; nothing is cleared twice.
    if b.texts.first().is_some_and(|p| {
        p.text()
            .chars()
            .take(PLACEHOLDER_PREFIX.len())
            .eq(PLACEHOLDER_PREFIX.chars())
    }) {
        return 0;
    }
    let chars: usize = b.texts.iter().map(|p| p.text().char_len()).sum();
    // A message that is only this result (an OpenAI tool message) was counted already.
    let tokens = if slot.view.blocks.len() == 1 && slot.out.is_keep() {
        slot.tokens
            .saturating_sub(cfg.framing.message_overhead_tokens)
    } else {
        super::draft::block_tokens(b, cfg.framing, counter)
    };
    // With `recall` the placeholder names the original's id (the shell stores the text); a
    // recall result itself is never stored again (it is a page of an original already stored:
    // the model calls recall again).
    let mut recalled = None;
    if cfg.recall {
        let base = match superseded {
            Some(s) => s.placeholder(name),
            None => result_placeholder(name, chars, tokens, None),
        };
        let placeholder = if is_recall_tool(name) {
            let body = base.strip_suffix(']').unwrap_or(&base);
            format!("{body}; call recall again to read it]")
        } else {
            let r = Recall::of(result_text(slot, k));
            let p = with_ref(&base, &r.id);
            recalled = Some(r);
            p
        };
        return finish_clear(
            slot,
            k,
            name,
            chars,
            tokens,
            placeholder,
            (None, recalled),
            counter,
            pass,
            superseded,
        );
    }
    // The full text is only built when it is written to the offload file.
    let offloaded = cfg.offload_dir.as_deref().map(|dir| {
        let text = result_text(slot, k);
        (offload_path(dir, &text), text)
    });
    let placeholder = match superseded {
        Some(s) if offloaded.is_none() => s.placeholder(name),
        _ => result_placeholder(
            name,
            chars,
            tokens,
            offloaded.as_ref().map(|o| o.0.as_str()),
        ),
    };
    finish_clear(
        slot,
        k,
        name,
        chars,
        tokens,
        placeholder,
        (offloaded, None),
        counter,
        pass,
        superseded,
    )
}

/// Write a cleared result's placeholder into block `k` when it saves enough; records it.
#[allow(clippy::too_many_arguments)]
fn finish_clear(
    slot: &mut Slot<'_>,
    k: usize,
    name: &str,
    chars: usize,
    tokens: usize,
    placeholder: String,
    (offloaded, recalled): (Option<(String, String)>, Option<Recall>),
    counter: &dyn Count,
    pass: &mut Pass,
    superseded: Option<&Superseded>,
) -> usize {
    let new = counter.count(crate::text::Text::Utf8(&placeholder));
    if new + 8 >= tokens {
        return 0;
    }
    let before = slot.tokens;
    if !slot.edit_block_counted(k, placeholder, tokens, new) {
        return 0;
    }
    if let Some((path, text)) = offloaded {
        pass.offloads.push(Offload { path, text });
    }
    pass.recalls.extend(recalled);
    pass.changed += 1;
    if let Some(i) = slot.source() {
        pass.record.push(RecordEntry {
            index: i,
            action: Change::Cleared,
            detail: match superseded {
                Some(s) => format!("output of {name} superseded by message {}", s.later),
                None => format!("output of {name}: {chars} chars, ~{tokens} tokens"),
            },
        });
    }
    before.saturating_sub(slot.tokens)
}

/// The cut of one call's long arguments and the record's detail, without editing anything
/// (pure: the calls of a long conversation are cut on the pool, see [`micro`]).
fn args_cut(b: &Block<'_>, cfg: &PlanConfig) -> Option<(String, String, Option<Recall>)> {
    let chars: usize = b.texts.iter().map(|p| p.text().char_len()).sum();
    if chars <= cfg.max_tool_arg_chars {
        return None;
    }
    // One piece (always, from the boundary) is read in place when it is UTF-8 already.
    let args: std::borrow::Cow<'_, str> = match &b.texts[..] {
        [one] => one.text().to_utf8(),
        many => many
            .iter()
            .map(|p| p.text().to_utf8())
            .collect::<String>()
            .into(),
    };
    if already_compacted(&args) {
        return None;
    }
    let cut = with_cut_facts(&args, cut_json_args(&args, cfg.max_tool_arg_chars)?);
    let detail = format!(
        "arguments of {}: {chars} chars",
        b.name.as_deref().unwrap_or("?")
    );
    if cfg.recall {
        let r = Recall::of(args.into_owned());
        return Some((with_recall_ref(cut, &r.id), detail, Some(r)));
    }
    Some((cut, detail, None))
}

/// Write a cut made by [`args_cut`] into block `k`. Returns the tokens saved.
fn cut_args(
    slot: &mut Slot<'_>,
    k: usize,
    (cut, detail): (String, String),
    cfg: &PlanConfig,
    counter: &dyn Count,
) -> Option<(usize, RecordEntry)> {
    let before = slot.tokens;
    if !slot.edit_block(k, cut, cfg.framing, counter) {
        return None;
    }
    let entry = RecordEntry {
        index: slot.source()?,
        action: Change::ArgsCut,
        detail,
    };
    Some((before.saturating_sub(slot.tokens), entry))
}

/// Micro-compaction: results older than the last `keep_recent_tool_results` become
/// placeholders, older long arguments are cut; skipped whole when it frees too little.
pub fn micro(slots: &mut Vec<Slot<'_>>, cfg: &PlanConfig, counter: &dyn Count) -> Pass {
    let frozen = frozen(slots, cfg);
    let protected = |name: &str| cfg.protected_tools.iter().any(|p| p == name);

    // Every result block, in order; the last N stay intact.
    let mut results: Vec<(usize, usize)> = Vec::new();
    for (si, s) in slots.iter().enumerate() {
        for (k, b) in s.view.blocks.iter().enumerate() {
            if b.kind == BlockKind::ToolResult {
                results.push((si, k));
            }
        }
    }
    let keep_from = results.len().saturating_sub(cfg.keep_recent_tool_results);
    // The old results to clear, each with its tool's name, and the ids of the old calls
    // (calls whose results are old), worked out before any edit.
    // Superseded reads (`supersede_reads`) go too, the recent results included.
    let sup = if cfg.supersede_reads {
        superseded(slots)
    } else {
        FxHashMap::default()
    };
    let (to_clear, old_ids) = {
        let names = tool_names(slots);
        let mut old_ids: FxHashSet<String> = FxHashSet::default();
        let mut to_clear: Vec<(usize, usize, String)> = Vec::new();
        for (n, &(si, k)) in results.iter().enumerate() {
            let b = &slots[si].view.blocks[k];
            let old = n < keep_from;
            if let (true, Some(id)) = (old, &b.id) {
                old_ids.insert(id.clone());
            }
            if frozen[si] || !(old || sup.contains_key(&(si, k))) {
                continue;
            }
            let name = b
                .name
                .as_deref()
                .or_else(|| b.id.as_deref().and_then(|id| names.get(id).copied()))
                .unwrap_or("a tool");
            if !protected(name) {
                to_clear.push((si, k, name.to_owned()));
            }
        }
        (to_clear, old_ids)
    };

    // Edits go to the slots directly; the few edited slots are backed up first, so a pass that
    // frees too little is undone without copying the whole conversation.
    let mut backup: Vec<(usize, Slot<'_>)> = Vec::new();
    let mut touched = vec![false; slots.len()];
    let mut pass = Pass::default();
    let mut saved = 0;
    for (si, k, name) in &to_clear {
        let si = *si;
        if !touched[si] {
            touched[si] = true;
            backup.push((si, slots[si].clone()));
        }
        let why = sup.get(&(si, *k));
        saved += clear_result(&mut slots[si], *k, name, cfg, counter, &mut pass, why);
    }
    // Old calls with long arguments: cut on the pool when there is enough text (cutting JSON
    // is most of a micro pass over a long agent run), written in order.
    let mut calls: Vec<(usize, usize)> = Vec::new();
    let mut weight = 0;
    for si in 0..slots.len() {
        if frozen[si] || slots[si].view.role != Role::Assistant {
            continue;
        }
        for (k, b) in slots[si].view.blocks.iter().enumerate() {
            if b.kind != BlockKind::ToolCall
                || !b.id.as_ref().is_some_and(|id| old_ids.contains(id))
                || protected(b.name.as_deref().unwrap_or_default())
            {
                continue;
            }
            weight += b.texts.iter().map(|p| p.text().char_len()).sum::<usize>();
            calls.push((si, k));
        }
    }
    let cuts = {
        let view: &[Slot<'_>] = slots;
        crate::parallel::map(&calls, weight, |&(si, k)| {
            args_cut(&view[si].view.blocks[k], cfg)
        })
    };
    for (&(si, k), cut) in calls.iter().zip(cuts) {
        let Some((cut, detail, recalled)) = cut else {
            continue;
        };
        let cut = (cut, detail);
        if !touched[si] {
            touched[si] = true;
            backup.push((si, slots[si].clone()));
        }
        if let Some((s, entry)) = cut_args(&mut slots[si], k, cut, cfg, counter) {
            saved += s;
            pass.changed += 1;
            pass.record.push(entry);
            pass.recalls.extend(recalled);
        }
    }
    // Cache-aware: an edit re-writes the provider's cache from the first edited message on;
    // the pass must free at least `micro_min_gain_ratio` of what it makes the cache write again.
    let rewritten: usize = backup
        .iter()
        .map(|b| b.0)
        .min()
        .map_or(0, |first| slots[first..].iter().map(|s| s.tokens).sum());
    if pass.changed == 0
        || saved < cfg.clear_at_least_tokens
        || (saved as f64) < cfg.micro_min_gain_ratio * rewritten as f64
    {
        for (si, slot) in backup {
            slots[si] = slot;
        }
        return Pass::default();
    }
    pass
}

/// Selective rules in priority order until the slots fit `target` tokens (plus `extra`).
pub fn selective(
    slots: &mut Vec<Slot<'_>>,
    cfg: &PlanConfig,
    counter: &dyn Count,
    extra: usize,
    target: usize,
) -> Pass {
    let mut pass = Pass::default();
    let mut rules = cfg.selective_rules.clone();
    rules.sort_by_key(|r| r.2);
    let names: FxHashMap<String, String> = tool_names(slots)
        .into_iter()
        .map(|(id, name)| (id.to_owned(), name.to_owned()))
        .collect();
    let protected = |name: &str| cfg.protected_tools.iter().any(|p| p == name);
    let mut k = 0;
    while k < rules.len() {
        if super::draft::total(slots) + extra <= target {
            break;
        }
        let priority = rules[k].2;
        let frozen = frozen(slots, cfg);
        // Thinking of the pending loop stays (Anthropic needs it with its tool results).
        let st = analyze(slots);
        let pending_loop = st.pending_loop;
        let mut drop_slots = Vec::new();
        while k < rules.len() && rules[k].2 == priority {
            let (item, action, _) = rules[k];
            k += 1;
            if action == Action::Never {
                continue;
            }
            for si in 0..slots.len() {
                if frozen[si] {
                    continue;
                }
                let role = slots[si].view.role;
                let mut bi = 0;
                while bi < slots[si].view.blocks.len() {
                    let b = &slots[si].view.blocks[bi];
                    let kind = b.kind;
                    let before = slots[si].tokens;
                    let mut removed = false;
                    match (item, kind) {
                        (Item::ToolResults, BlockKind::ToolResult) => {
                            let name = b
                                .name
                                .clone()
                                .or_else(|| b.id.as_ref().and_then(|id| names.get(id).cloned()))
                                .unwrap_or_else(|| "a tool".to_owned());
                            if !protected(&name) {
                                if action == Action::HeadTail {
                                    let text = result_text(&slots[si], bi);
                                    if !already_compacted(&text) {
                                        if let Some(cut) =
                                            head_tail(&text, cfg.max_tool_arg_chars * 2)
                                        {
                                            // A recall page is not stored again (the model
                                            // calls recall for it).
                                            let (cut, recalled) = if is_recall_tool(&name) {
                                                (cut, None)
                                            } else {
                                                recalled_cut(cut, &text, cfg)
                                            };
                                            pass.recalls.extend(recalled);
                                            if slots[si].edit_block(bi, cut, cfg.framing, counter) {
                                                record(
                                                    &mut pass,
                                                    &slots[si],
                                                    Change::TextCut,
                                                    format!("output of {name}"),
                                                );
                                            }
                                        }
                                    }
                                } else {
                                    clear_result(
                                        &mut slots[si],
                                        bi,
                                        &name,
                                        cfg,
                                        counter,
                                        &mut pass,
                                        None,
                                    );
                                }
                            }
                        }
                        (Item::Thinking, BlockKind::Thinking | BlockKind::RedactedThinking) => {
                            let in_pending =
                                pending_loop.is_some_and(|l| l.start <= si && si <= l.end);
                            if !in_pending {
                                if slots[si].view.blocks.len() == 1 {
                                    drop_slots.push(si);
                                } else if slots[si].drop_block(bi, cfg.framing, counter) {
                                    removed = true;
                                    record(
                                        &mut pass,
                                        &slots[si],
                                        Change::ThinkingDropped,
                                        String::new(),
                                    );
                                }
                            }
                        }
                        (Item::Images, BlockKind::Image) => {
                            if action == Action::Drop && slots[si].view.blocks.len() > 1 {
                                if slots[si].drop_block(bi, cfg.framing, counter) {
                                    removed = true;
                                    record(
                                        &mut pass,
                                        &slots[si],
                                        Change::ImageRemoved,
                                        String::new(),
                                    );
                                }
                            } else if slots[si].edit_block(
                                bi,
                                format!("{PLACEHOLDER_PREFIX} image removed]"),
                                cfg.framing,
                                counter,
                            ) {
                                record(&mut pass, &slots[si], Change::ImageRemoved, String::new());
                            }
                        }
                        (Item::AssistantText, BlockKind::Text) if role == Role::Assistant => {
                            cut_text(&mut slots[si], bi, cfg, counter, &mut pass);
                        }
                        (Item::UserText, BlockKind::Text) if role == Role::User => {
                            cut_text(&mut slots[si], bi, cfg, counter, &mut pass);
                        }
                        _ => {}
                    }
                    if slots[si].tokens != before || removed {
                        pass.changed += 1;
                    }
                    if !removed {
                        bi += 1;
                    }
                }
            }
        }
        // Assistant messages that were only thinking go entirely (they hold no calls).
        for &si in drop_slots.iter().rev() {
            if let Some(i) = slots[si].source() {
                pass.record.push(RecordEntry {
                    index: i,
                    action: Change::ThinkingDropped,
                    detail: "a message of thinking only".to_owned(),
                });
            }
            slots.remove(si);
            pass.changed += 1;
        }
    }
    pass
}

fn record(pass: &mut Pass, slot: &Slot<'_>, action: Change, detail: String) {
    if let Some(i) = slot.source() {
        pass.record.push(RecordEntry {
            index: i,
            action,
            detail,
        });
    }
}

fn cut_text(slot: &mut Slot<'_>, k: usize, cfg: &PlanConfig, counter: &dyn Count, pass: &mut Pass) {
    let text = result_text(slot, k);
    let limit = (cfg.max_tool_arg_chars * 4).max(1_000);
    if text.chars().count() <= limit || already_compacted(&text) || super::is_summary_text(&text) {
        return;
    }
    if let Some(cut) = cut_keeping_facts(&text, limit / 2) {
        let chars = text.chars().count();
        let (cut, recalled) = recalled_cut(cut, &text, cfg);
        if slot.edit_block(k, cut, cfg.framing, counter) {
            record(pass, slot, Change::TextCut, format!("{chars} chars"));
            pass.recalls.extend(recalled);
        }
    }
}

/// With `recall`, `cut` (of `text`) naming its original after the cut marker, and the original.
fn recalled_cut(cut: String, text: &str, cfg: &PlanConfig) -> (String, Option<Recall>) {
    if !cfg.recall {
        return (cut, None);
    }
    let r = Recall::of(text.to_owned());
    (with_recall_ref(cut, &r.id), Some(r))
}

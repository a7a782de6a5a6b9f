//! The ladder's last cut before `over_budget`: the last block shortened.
//!
//! Design note. DESIGN invariant 5 allows `over_budget` only when even the smallest legal
//! context does not fit: system, tools, pinned, the task at `task_max_tokens`, the capped
//! summary, and the last block shortened. What "shortened" may touch, in the order it is cut:
//!
//! 1. The arguments of calls that already ran (their result is in the context), the largest
//!    first, down to `max_tool_arg_chars` — what micro-compaction does to older calls. The call
//!    happened; its result says what came of it, and the model reads the result now. The cut is
//!    marked and the must-keep facts of the cut part are written after the marker.
//! 2. Then the tool results and those arguments together, the largest first, each down to a
//!    floor (the marker and a few characters each side), only as far as the overflow needs.
//! 3. Last, the assistant's own text in the block (what it wrote around its calls), head +
//!    tail with its must-keep facts after the marker, as the selective rule cuts the assistant
//!    text of old turns. Only the thinking of a message is signed: the text and call blocks
//!    after a message's last thinking block may be edited, the thinking blocks and everything
//!    before them go back as they came.
//!
//! Never cut: thinking and redacted thinking (Anthropic refuses an edited one: its signature is
//! checked), signed parts (Gemini `thought_signature`), opaque items, the item after a Responses
//! reasoning item (it goes back exactly as the model wrote it), a message holding a call still
//! waiting for its result (its arguments are what will run; the caller appends the result right
//! after that very object), pinned messages, protected tools, user text and images. The user's latest message is what the model answers now, and an image cannot be
//! shortened: replacing the image the user just sent with a placeholder would have the model
//! answer about a picture it cannot see, so a last block whose images alone are over the
//! threshold is a legitimate `over_budget` (the reason names the images).
//!
//! Token counts are not linear in characters, so the caps are worked out on estimates and the
//! cuts made from the texts as they came again with a larger goal when a round falls short. A
//! text an earlier compaction cut (a Session's tail) may be cut again here: the window must fit.

use super::draft::{block_tokens, Count, Slot};
use super::output::{Change, RecordEntry};
use super::shorten::{cut_block, with_cut_facts, with_cut_items, Keep};
use super::PlanConfig;
use crate::cut::PLACEHOLDER_PREFIX;
use crate::cut::{cut_json_args_with, is_cut};
use crate::message::{BlockKind, Role};
use crate::recall::Recall;
use crate::text::Text;
use rustc_hash::{FxHashMap, FxHashSet};

/// Tokens a cut tool result keeps at least (the marker and a few characters each side).
const RESULT_FLOOR: usize = 12;
/// Tokens cut arguments keep at least (the JSON structure, each long value's head and tail).
const ARGS_FLOOR: usize = 16;
/// Tokens a cut assistant text keeps at least (its head and tail, the marker).
const TEXT_FLOOR: usize = 32;
/// Rounds of cutting from the original texts when a round falls short (counting is not linear
/// in characters; a cut keeps its facts).
const ROUNDS: usize = 5;

/// What a candidate block is (the order the cut reaches them, see the module note).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// The arguments of a call that already ran.
    Args,
    Result,
    /// The assistant's own text.
    Text,
}

/// One block the last block's cut may shorten.
#[derive(Clone, Debug)]
struct Cand {
    slot: usize,
    block: usize,
    tokens: usize,
    part: Part,
    /// Tokens the block keeps at least.
    floor: usize,
    /// Arguments: tokens at `max_tool_arg_chars` (where step 1 stops); results: `tokens`.
    soft_floor: usize,
}

/// The blocks of `slots[from..]` that may be cut (see the module note).
fn candidates(slots: &[Slot<'_>], from: usize, cfg: &PlanConfig, counter: &dyn Count) -> Vec<Cand> {
    let mut names: FxHashMap<&str, &str> = FxHashMap::default();
    let mut answered: FxHashSet<&str> = FxHashSet::default();
    for s in slots {
        for b in s.view.blocks.iter() {
            match (b.kind, b.id.as_deref()) {
                (BlockKind::ToolCall, Some(id)) => {
                    if let Some(name) = b.name.as_deref() {
                        names.insert(id, name);
                    }
                }
                (BlockKind::ToolResult, Some(id)) => {
                    answered.insert(id);
                }
                _ => {}
            }
        }
    }
    let protected = |id: Option<&str>, name: Option<&str>| {
        let name = name.or_else(|| id.and_then(|id| names.get(id).copied()));
        name.is_some_and(|n| cfg.protected_tools.iter().any(|p| p == n))
    };
    let mut out = Vec::new();
    for (si, slot) in slots.iter().enumerate().skip(from) {
        if slot.is_fixed() || slot.is_summary() {
            continue;
        }
        // The item after a Responses reasoning item goes back exactly as the model wrote it; a
        // message holding a call still waiting for its result stays the caller's object (its
        // result is appended to it next).
        let waiting = slot
            .view
            .calls()
            .any(|c| !c.id.as_deref().is_some_and(|id| answered.contains(id)));
        if waiting || (si > 0 && crate::formats::responses::is_reasoning(&slots[si - 1].view)) {
            continue;
        }
        // Nothing before or in a thinking block changes: only what follows a message's last
        // thinking block may be cut (its signature covers the thinking; a later thinking block
        // would count what precedes it as its prefix).
        let after_thinking = slot
            .view
            .blocks
            .iter()
            .rposition(|b| b.kind.is_thinking() || b.kind == BlockKind::Reasoning)
            .map_or(0, |t| t + 1);
        for (k, b) in slot.view.blocks.iter().enumerate().skip(after_thinking) {
            if b.opaque || b.signed || b.images > 0 || protected(b.id.as_deref(), b.name.as_deref())
            {
                continue;
            }
            let text_of = || {
                b.texts
                    .iter()
                    .map(|p| p.text().to_utf8())
                    .collect::<String>()
            };
            match b.kind {
                BlockKind::ToolResult => {
                    if text_of().starts_with(PLACEHOLDER_PREFIX) {
                        continue;
                    }
                    let tokens = block_tokens(b, cfg.framing, counter);
                    out.push(Cand {
                        slot: si,
                        block: k,
                        tokens,
                        part: Part::Result,
                        floor: RESULT_FLOOR,
                        soft_floor: tokens,
                    });
                }
                BlockKind::ToolCall
                    if slot.view.role == Role::Assistant
                        && b.id.as_deref().is_some_and(|id| answered.contains(id)) =>
                {
                    let text = text_of();
                    if text.starts_with(PLACEHOLDER_PREFIX) {
                        continue;
                    }
                    let tokens = block_tokens(b, cfg.framing, counter);
                    let chars = text.chars().count();
                    let soft_floor = if chars > cfg.max_tool_arg_chars {
                        (tokens * cfg.max_tool_arg_chars).div_ceil(chars.max(1))
                    } else {
                        tokens
                    };
                    out.push(Cand {
                        slot: si,
                        block: k,
                        tokens,
                        part: Part::Args,
                        floor: ARGS_FLOOR.min(tokens),
                        soft_floor: soft_floor.max(ARGS_FLOOR).min(tokens),
                    });
                }
                BlockKind::Text if slot.view.role == Role::Assistant => {
                    if text_of().starts_with(PLACEHOLDER_PREFIX) {
                        continue;
                    }
                    let tokens = block_tokens(b, cfg.framing, counter);
                    if tokens > TEXT_FLOOR {
                        out.push(Cand {
                            slot: si,
                            block: k,
                            tokens,
                            part: Part::Text,
                            floor: TEXT_FLOOR,
                            soft_floor: tokens,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The largest cap such that cutting every `(size, floor)` above it down to `max(cap, floor)`
/// frees at least `need` (0 when even cutting everything to its floor is not enough).
pub(super) fn level(items: &[(usize, usize)], need: usize) -> usize {
    let saved = |cap: usize| -> usize {
        items
            .iter()
            .map(|&(s, f)| s.saturating_sub(cap.max(f)))
            .sum()
    };
    let mut hi = items.iter().map(|i| i.0).max().unwrap_or(0);
    if need == 0 {
        return hi;
    }
    if saved(0) < need {
        return 0;
    }
    // saved() does not grow with the cap: the largest cap in [0, hi] with saved(cap) >= need.
    let mut lo = 0;
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if saved(mid) >= need {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// How many tokens each candidate should keep to free `need`: arguments to
/// `max_tool_arg_chars` first, then results and arguments together, then the assistant's text
/// (see the module note).
fn targets(cands: &[Cand], need: usize) -> Vec<usize> {
    let mut keep: Vec<usize> = cands.iter().map(|c| c.tokens).collect();
    // Each step gives the floor of every candidate at its current size `k` (a candidate the step
    // does not cut keeps `k`).
    let steps = [
        |c: &Cand, k: usize| match c.part {
            Part::Args => c.soft_floor.min(k),
            _ => k,
        },
        |c: &Cand, k: usize| match c.part {
            Part::Text => k,
            _ => c.floor.min(k),
        },
        |c: &Cand, k: usize| c.floor.min(k),
    ];
    let mut freed = 0;
    for floor_of in steps {
        if freed >= need {
            break;
        }
        let items: Vec<(usize, usize)> = cands
            .iter()
            .zip(&keep)
            .map(|(c, &k)| (k, floor_of(c, k)))
            .collect();
        let cap = level(&items, need - freed);
        for (k, &(s, f)) in items.iter().enumerate() {
            keep[k] = s.min(cap.max(f));
            freed += s - keep[k];
        }
    }
    keep
}

/// Cut the arguments of call block `k` of `slot` to about `goal` tokens, head + tail with the
/// cut marked and the must-keep facts of the cut part written after the marker (valid JSON
/// stays valid JSON). Returns whether the slot changed.
fn cut_args_to(
    slot: &mut Slot<'_>,
    k: usize,
    goal: usize,
    cfg: &PlanConfig,
    counter: &dyn Count,
    recalls: &mut Vec<Recall>,
    items: bool,
) -> bool {
    let b = &slot.view.blocks[k];
    let args: String = b.texts.iter().map(|p| p.text().to_utf8()).collect();
    // With `recall` the cut names the whole arguments (counted with the cut).
    let recalled = cfg.recall.then(|| Recall::of(args.clone()));
    let tokens = block_tokens(b, cfg.framing, counter);
    if goal >= tokens {
        return false;
    }
    let chars = args.chars().count();
    let mut max_chars = (chars as f64 * goal as f64 / tokens as f64) as usize;
    let mut best: Option<(String, usize)> = None;
    for _ in 0..6 {
        let Some(cut) = cut_json_args_with(&args, max_chars.max(1), true) else {
            break;
        };
        let mut cut = with_cut_facts(&args, cut);
        if items {
            cut = with_cut_items(&args, cut);
        }
        if let Some(r) = &recalled {
            cut = super::shorten::with_recall_ref(cut, &r.id);
        }
        let new = counter.count(Text::Utf8(&cut));
        let done = new <= goal || max_chars <= 40;
        if best.as_ref().is_none_or(|b| new < b.1) {
            best = Some((cut, new));
        }
        if done {
            break;
        }
        max_chars = max_chars * 8 / 10;
    }
    match best {
        Some((cut, new)) if new < tokens && is_cut(&cut) => {
            let edited = slot.edit_block_counted(k, cut, tokens, new);
            if edited {
                recalls.extend(recalled);
            }
            edited
        }
        _ => false,
    }
}

/// Cut the last block (`slots[from..]`, see the module note) until `excess` tokens are saved,
/// or as far as it goes. Returns the tokens saved and one `shortened` record entry per message.
#[cfg(test)]
pub fn shorten_last_block(
    slots: &mut [Slot<'_>],
    from: usize,
    excess: usize,
    cfg: &PlanConfig,
    counter: &dyn Count,
) -> (usize, Vec<RecordEntry>) {
    let mut recalls = Vec::new();
    shorten_last_block_recalled(slots, from, excess, cfg, counter, &mut recalls, true)
}

/// [`shorten_last_block`], the originals its cuts name (`recall`) added to `recalls` (a round
/// the ladder undoes may leave one that no output names: stored, never named). With `items`,
/// cut arguments keep the open checklist items of their cut part after the marker (the ladder
/// cuts again without them when they leave the context over the soft threshold: they are not
/// part of the smallest legal context).
pub fn shorten_last_block_recalled(
    slots: &mut [Slot<'_>],
    from: usize,
    excess: usize,
    cfg: &PlanConfig,
    counter: &dyn Count,
    recalls: &mut Vec<Recall>,
    items: bool,
) -> (usize, Vec<RecordEntry>) {
    let from = from.min(slots.len());
    let cands = candidates(slots, from, cfg, counter);
    if cands.is_empty() || excess == 0 {
        return (0, Vec::new());
    }
    let original: Vec<Slot<'_>> = slots[from..].to_vec();
    let before: usize = original.iter().map(|s| s.tokens).sum();
    let mut need = excess;
    let mut saved = 0;
    let mut best: Option<Vec<Slot<'_>>> = None;
    for round in 0..ROUNDS {
        if round > 0 {
            slots[from..].clone_from_slice(&original);
        }
        let keep = targets(&cands, need);
        for (c, &goal) in cands.iter().zip(&keep) {
            if goal >= c.tokens {
                continue;
            }
            let slot = &mut slots[c.slot];
            let floor = goal.min(c.floor);
            match c.part {
                Part::Args => {
                    cut_args_to(slot, c.block, goal, cfg, counter, recalls, items);
                }
                Part::Result | Part::Text => {
                    // The assistant's text keeps its must-keep facts; tool output has none.
                    let keep = if c.part == Part::Text {
                        Keep::Facts
                    } else {
                        Keep::Plain
                    };
                    cut_block(
                        slot,
                        c.block,
                        c.tokens - goal,
                        floor,
                        cfg,
                        counter,
                        keep,
                        Some(&mut *recalls),
                    );
                }
            }
        }
        let now: usize = slots[from..].iter().map(|s| s.tokens).sum();
        let got = before.saturating_sub(now);
        if got <= saved {
            // No better than the round before: that one stands.
            if let Some(b) = &best {
                slots[from..].clone_from_slice(b);
            }
            break;
        }
        saved = got;
        let all_floors = keep.iter().zip(&cands).all(|(&k, c)| k <= c.floor);
        if got >= excess || all_floors || round + 1 == ROUNDS {
            break;
        }
        best = Some(slots[from..].to_vec());
        // The floors the caps assumed were not all reached (facts kept, markers): ask the
        // others for twice the shortfall.
        need += 2 * (excess - got) + 4;
    }
    (saved, record(slots, &original, from, &cands))
}

/// One `shortened` entry per message of `slots[from..]` the cut made smaller.
fn record(
    slots: &[Slot<'_>],
    original: &[Slot<'_>],
    from: usize,
    cands: &[Cand],
) -> Vec<RecordEntry> {
    let mut out = Vec::new();
    for (j, (now, was)) in slots[from..].iter().zip(original).enumerate() {
        if now.tokens >= was.tokens {
            continue;
        }
        let Some(index) = now.source() else { continue };
        // What was cut, from the blocks that changed.
        let mut what: Vec<String> = Vec::new();
        for c in cands.iter().filter(|c| c.slot == from + j) {
            let (b, a) = (&was.view.blocks[c.block], &now.view.blocks[c.block]);
            if b.texts.len() == a.texts.len()
                && b.texts
                    .iter()
                    .zip(a.texts.iter())
                    .all(|(x, y)| x.text().to_utf8() == y.text().to_utf8())
            {
                continue;
            }
            let w = match c.part {
                Part::Args => format!("arguments of {}", b.name.as_deref().unwrap_or("a call")),
                Part::Result => "tool output".to_owned(),
                Part::Text => "assistant text".to_owned(),
            };
            if !what.contains(&w) {
                what.push(w);
            }
        }
        let what = if what.is_empty() {
            "tool output".to_owned()
        } else {
            what.join(", ")
        };
        out.push(RecordEntry {
            index,
            action: Change::Shortened,
            detail: format!(
                "{what} cut from {} to {} tokens (the last block, to fit)",
                was.tokens, now.tokens
            ),
        });
    }
    out
}

#[cfg(test)]
#[path = "last_block_tests.rs"]
mod tests;

//! `target_ratio = "auto"`: the target that minimises the predicted billed input per model call
//! over a whole compaction cycle, per conversation. One copy for both APIs: Python's
//! `ContextCompactor.auto_target` calls [`auto_target`] through the binding, the Rust API calls
//! it when it plans.
//!
//! Design note, the model. A cycle starts with a compaction that leaves the context at `T` tokens
//! (the fixed part `F`, system prompt and tool definitions, included) and lasts
//! `n = ceil((S - T) / g)` model calls, `S` being the soft threshold and `g` the growth per call
//! the conversation's state observed. Prices are per million tokens: `r` for a cache read, `w` for
//! what is not read from the cache (a cache write with Anthropic, the uncached input price with
//! OpenAI, which charges no write), `i` for plain input and `o` for output.
//!
//! - the compaction's own cost: its call reads `F` (the prefix the compaction does not touch) and
//!   writes the new prefix `T - F`; with an LLM summarizer, its input (the span, about `S - T`
//!   tokens, with its prompt and the previous summary) and its output (the summary's cap);
//! - every later call of the cycle reads the previous call's context from the cache and writes
//!   the growth `g`;
//! - the cache's lifetime is the cycle: the next compaction rewrites the prefix after `F`.
//!
//! The cost per call of a cycle rises with `T` (a deeper compaction rewrites less and lasts
//! longer), so the choice is bounded by what must stay: never below the floor that keeps
//! `keep_recent_messages`/`keep_recent_tokens` of the tail, the task at `task_max_tokens`, the
//! ledger (the one the context carries, the user's words the compaction moves into it and room
//! for its details: not the ledger's budgets, which in a small window are most of it) and the
//! summary's cap, and within [`AUTO_MIN`]-[`AUTO_MAX`] of the budget. A floor over `AUTO_MAX`
//! cannot be kept within the bounds: the ladder cuts the recent tail down to whatever target is
//! set, and a target held at `AUTO_MAX` leaves cycles of a call or two (the soft threshold is
//! 0.8 of the budget by default), so the prefix is rewritten at nearly every call, the loop the
//! cycle model prices highest. No floor holds then, and the target is the fixed ratio
//! [`AUTO_FALLBACK`], as without an observed growth (at 10% windows of the eval's corpus, where
//! such floors are common, this bills 2.7 / 3.1 points less than holding `AUTO_MAX`, OpenAI /
//! Anthropic prices). Candidates are the ratios from `AUTO_MIN` to `AUTO_MAX` in steps of
//! [`AUTO_STEP`] and the floor's own ratio; ties go to
//! the larger target (it keeps more). The choice is a pure function of the config, the counts and
//! the state's observed growth (DESIGN invariant 4); without an observed growth the fixed ratio
//! [`AUTO_FALLBACK`] applies.

use super::{Config, AUTO_FALLBACK};
use crate::message::{BlockKind, Message, Role};
use crate::summary::ledger::SENTINEL;
use crate::summary::SUMMARY_MARKER;
use crate::text::Text;

/// The smallest target `"auto"` chooses, as a share of the budget.
pub const AUTO_MIN: f64 = 0.2;
/// The largest target `"auto"` chooses, as a share of the budget.
pub const AUTO_MAX: f64 = 0.7;
/// The step between the candidate ratios.
pub const AUTO_STEP: f64 = 0.05;
/// Tokens of the summarizer's prompt around the span (instructions, task, previous summary header).
pub const PROMPT_TOKENS: usize = 600;
/// Room in the target's floor for the details the next compaction adds to the ledger (must-keep
/// facts its narrative lacks), over the ledger the context already carries and the user's words
/// of the span it replaces.
pub const LEDGER_SLACK_TOKENS: usize = 256;

/// What `target_ratio = "auto"` chose for one compaction (Python's `AutoTarget`): see
/// [`Compactor::auto_target`](crate::Compactor::auto_target).
///
/// ```
/// use context_compactor::{AutoTarget, Compactor, Options};
/// let messages = [serde_json::json!({"role": "user", "content": "hello"})];
/// let auto: AutoTarget = Compactor::default().auto_target(&messages, &Options::new(), false)?;
/// assert_eq!(auto.ratio, 0.5); // no observed growth: the fallback
/// assert_eq!(auto.tokens, 60_000); // half the budget (128,000 - 8,000)
/// assert!(auto.cost_per_call.is_none());
/// # Ok::<(), context_compactor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct AutoTarget {
    /// The target as a share of the budget.
    pub ratio: f64,
    /// The target in tokens.
    pub tokens: usize,
    /// The smallest target that keeps the tail, the task, the ledger and the summary.
    pub floor: usize,
    /// The growth per call it was computed from (`None`: the fixed fallback ratio).
    pub growth: Option<f64>,
    /// The predicted billed input per model call over a cycle (dollars) at the chosen target
    /// (`None` with the fallback).
    pub cost_per_call: Option<f64>,
    /// The fixed part (system prompt and tool definitions, calibrated), in tokens.
    pub fixed: usize,
    /// The prices weighed (input, cached read, cache write, output per million tokens).
    pub prices: [f64; 4],
}

/// The predicted billed input per model call (dollars) over one compaction cycle that starts at
/// `target` tokens (see the module note). `prices`: input, cached read, cache write, output, in
/// dollars per million tokens. The arithmetic is in the order of the Python original, so both
/// give the same bits.
pub fn cycle_cost(
    target: usize,
    soft: usize,
    fixed: usize,
    growth: f64,
    prices: [f64; 4],
    llm: bool,
    summary_tokens: usize,
) -> f64 {
    let [i, r, w, o] = prices;
    let g = growth.max(1.0);
    let span = soft.saturating_sub(target);
    let n = ((span as f64 / g).ceil() as u64).max(1);
    let fixed = fixed.min(target);
    let mut cost = fixed as f64 * r + (target - fixed) as f64 * w;
    if llm {
        cost += (span + summary_tokens + PROMPT_TOKENS) as f64 * i + summary_tokens as f64 * o;
    }
    let later = n - 1;
    let (lf, tf) = (later as f64, target as f64);
    cost +=
        (later as f64 * tf) * r + r * g * lf * (later.saturating_sub(1)) as f64 / 2.0 + lf * g * w;
    cost / n as f64 / 1e6
}

/// The inputs of one choice: the budget and soft threshold in tokens, the fixed part and the
/// floor (calibrated), the observed growth, the prices, whether an LLM summarises, and the
/// summary's share and cap.
#[derive(Clone, Copy, Debug)]
pub struct Choice {
    /// `max_context_tokens - reserve`.
    pub budget: usize,
    /// The soft threshold.
    pub soft: usize,
    /// The system prompt and the tool definitions.
    pub fixed: usize,
    /// What must stay (see the module note).
    pub floor: usize,
    /// The growth per call observed (`None`: the fallback ratio).
    pub growth: Option<f64>,
    /// Input, cached read, cache write, output, dollars per million tokens.
    pub prices: [f64; 4],
    /// Whether an LLM summarises (its call costs too).
    pub llm: bool,
    /// `summary_target_share`.
    pub summary_share: Option<f64>,
    /// `summary_max_tokens`.
    pub summary_max_tokens: usize,
}

/// The target of one compaction under `target_ratio = "auto"` (see the module note).
pub fn choose_target(c: Choice) -> AutoTarget {
    let budget = c.budget;
    let at = |ratio: f64| (ratio * budget as f64) as usize;
    // A floor over the bound cannot be kept: the fixed ratio (see the module note).
    let unreachable = c.floor > at(AUTO_MAX);
    let lo = at(AUTO_MIN).max(c.floor.min(at(AUTO_MAX)));
    let hi = at(AUTO_MAX).min(c.soft);
    if unreachable && budget > 0 {
        let t = at(AUTO_FALLBACK).min(c.soft);
        let cost = c.growth.map(|g| {
            let summary = match c.summary_share {
                Some(s) if s != 0.0 => c
                    .summary_max_tokens
                    .min(256usize.max((t as f64 * s) as usize)),
                _ => c.summary_max_tokens,
            };
            cycle_cost(t, c.soft, c.fixed, g, c.prices, c.llm, summary)
        });
        return AutoTarget {
            ratio: t as f64 / budget as f64,
            tokens: t,
            floor: c.floor,
            growth: c.growth,
            cost_per_call: cost,
            fixed: c.fixed,
            prices: c.prices,
        };
    }
    let growth = match c.growth {
        Some(g) if budget > 0 => g,
        _ => {
            let t = at(AUTO_FALLBACK).max(lo).min(c.soft);
            let ratio = if budget > 0 {
                t as f64 / budget as f64
            } else {
                AUTO_FALLBACK
            };
            return AutoTarget {
                ratio,
                tokens: t,
                floor: c.floor,
                growth: None,
                cost_per_call: None,
                fixed: c.fixed,
                prices: c.prices,
            };
        }
    };
    let steps = ((AUTO_MAX - AUTO_MIN) / AUTO_STEP).round() as usize;
    let mut candidates: Vec<usize> = (0..=steps)
        .map(|k| at(AUTO_MIN + k as f64 * AUTO_STEP))
        .chain([lo])
        .collect();
    candidates = if lo <= hi {
        candidates.iter().map(|&t| t.max(lo).min(hi)).collect()
    } else {
        vec![lo.min(c.soft)]
    };
    candidates.sort_unstable_by(|a, b| b.cmp(a)); // ties go to the larger target
    candidates.dedup();
    let mut best: Option<(f64, usize)> = None;
    for t in candidates {
        let summary = match c.summary_share {
            Some(s) if s != 0.0 => c
                .summary_max_tokens
                .min(256usize.max((t as f64 * s) as usize)),
            _ => c.summary_max_tokens,
        };
        let cost = cycle_cost(t, c.soft, c.fixed, growth, c.prices, c.llm, summary);
        if best.is_none_or(|(b, _)| cost < b - 1e-15) {
            best = Some((cost, t));
        }
    }
    let (cost, t) = best.unwrap_or((0.0, lo.min(c.soft)));
    AutoTarget {
        ratio: t as f64 / budget as f64,
        tokens: t,
        floor: c.floor,
        growth: Some(growth),
        cost_per_call: Some(cost),
        fixed: c.fixed,
        prices: c.prices,
    }
}

/// When the next compaction is due under `"auto"`, after one that left `tokens_after` tokens.
///
/// Design note. The same cycle, left to run from the `T` tokens a compaction left to a due point
/// `S`, bills per call about `(T - F) w g / (S - T)` (the prefix the compaction rewrote, spread
/// over the cycle's calls) plus `r (T + S) / 2` (the reads of a context between `T` and `S`) plus
/// `g w` (the growth, the same whatever `S`). The first term falls and the second rises with `S`;
/// their sum is least at `S - T = sqrt(2 (w / r) (T - F) g)`. So the next compaction is due from
/// `T + max(g, that gap)` when that is below the soft threshold (`None`: the soft threshold, also
/// without an observed growth). Deterministic: a function of the tokens after the compaction,
/// the fixed part, the growth the state observed before it and the prices.
pub fn due_at(
    tokens_after: usize,
    soft: usize,
    fixed: usize,
    growth: Option<f64>,
    prices: [f64; 4],
) -> Option<usize> {
    let [_, r, w, _] = prices;
    let g = growth.filter(|&g| g > 0.0 && r > 0.0)?;
    let gap = (2.0 * (w / r) * tokens_after.saturating_sub(fixed) as f64 * g).sqrt();
    let due = (tokens_after as f64 + g.max(gap)).ceil() as usize;
    (due < soft).then_some(due)
}

/// The tokens the ledger will take after the next compaction, for the floor: the ledger of the
/// summary the context already carries (it sits right after the kept head: the last
/// [`SENTINEL`] in the four messages from `head`), the user's own words of the messages the next
/// compaction would replace (from `head` to `tail_start`, tool results and our summaries left
/// out) and [`LEDGER_SLACK_TOKENS`] for its details. Not the ledger's budgets: they bound a long
/// session's ledger, and in a small window most of the target would go to room it never uses.
pub fn ledger_tokens(
    messages: &[Message<'_>],
    head: usize,
    tail_start: usize,
    count: &dyn Fn(Text<'_>) -> usize,
) -> usize {
    let mut ledger = 0;
    for m in messages.iter().skip(head).take(4) {
        for p in m.blocks.iter().flat_map(|b| b.texts.iter()) {
            let s = p.text().to_utf8();
            if let Some(at) = s.rfind(SENTINEL) {
                ledger = ledger.max(count(Text::Utf8(&s[at..])));
            }
        }
    }
    let span = messages
        .get(head..tail_start.min(messages.len()))
        .unwrap_or(&[]);
    let words: usize = span
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| {
            let parts: Vec<String> = (m.blocks.iter())
                .filter(|b| b.kind == BlockKind::Text)
                .flat_map(|b| b.texts.iter().map(|p| p.text().to_utf8().into_owned()))
                .collect();
            parts.join("\n")
        })
        .filter(|t| !t.is_empty() && !t.contains(SUMMARY_MARKER))
        .map(|t| count(Text::Utf8(&t)))
        .sum();
    ledger + words + LEDGER_SLACK_TOKENS
}

/// The target `target_ratio = "auto"` chooses for a conversation now (whatever the configured
/// `target_ratio`): `per` is each message's tokens, `fixed` the system prompt's and the tools',
/// `scale` the state's calibration (1.0 without), `growth` the growth per call it observed,
/// `anthropic` whether the conversation is Anthropic messages (the default price table), `llm`
/// whether a summarizer is set.
#[allow(clippy::too_many_arguments)]
pub fn auto_target(
    config: &Config,
    messages: &[Message<'_>],
    per: &[usize],
    fixed: usize,
    scale: f64,
    growth: Option<f64>,
    anthropic: bool,
    llm: bool,
    count: &dyn Fn(Text<'_>) -> usize,
) -> AutoTarget {
    let keep_first = config.keep_first_messages;
    let task = config.task_token_limit();
    let head: usize = per.iter().take(keep_first).map(|&n| n.min(task)).sum();
    let (mut tail, mut tail_count) = (0usize, 0usize);
    for (kept, &n) in per.iter().skip(keep_first).rev().enumerate() {
        if kept >= config.keep_recent_messages && tail >= config.keep_recent_tokens.unwrap_or(0) {
            break;
        }
        tail += n;
        tail_count = kept + 1;
    }
    let budget = config.budget();
    let share = config.summary_target_share.filter(|&s| s != 0.0);
    let summary = match share {
        None => config.summary_max_tokens,
        Some(s) => 256usize.max(config.summary_max_tokens.min((budget as f64 * s) as usize)),
    };
    let ledger = ledger_tokens(messages, keep_first, per.len() - tail_count, count)
        .min(config.user_words_token_limit() + config.details_token_limit());
    let floor = fixed + head + tail + summary + ledger;
    choose_target(Choice {
        budget,
        soft: config.soft_threshold(),
        fixed: (fixed as f64 * scale).ceil() as usize,
        floor: (floor as f64 * scale).ceil() as usize,
        growth,
        prices: config.price_table(anthropic),
        llm,
        summary_share: share,
        summary_max_tokens: config.summary_max_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(growth: Option<f64>, floor: usize) -> Choice {
        Choice {
            budget: 100_000,
            soft: 80_000,
            fixed: 5_000,
            floor,
            growth,
            prices: [3.0, 0.3, 3.75, 15.0],
            llm: false,
            summary_share: Some(0.1),
            summary_max_tokens: 2_000,
        }
    }

    #[test]
    fn the_due_point_is_the_cheapest_cycle_below_the_soft_threshold() {
        let p = [3.0, 0.3, 3.75, 15.0];
        // gap = sqrt(2 * 12.5 * 15_000 * 1_000) = 19_364.9...
        assert_eq!(
            due_at(20_000, 80_000, 5_000, Some(1_000.0), p),
            Some(39_365)
        );
        assert_eq!(
            due_at(70_000, 80_000, 5_000, Some(1_000.0), p),
            None,
            "not below soft"
        );
        assert_eq!(due_at(20_000, 80_000, 5_000, None, p), None);
        assert_eq!(
            due_at(20_000, 80_000, 5_000, Some(1_000.0), [3.0, 0.0, 3.75, 15.0]),
            None
        );
    }

    #[test]
    fn the_cost_per_call_rises_with_the_target() {
        let costs: Vec<f64> = (20_000..=70_000)
            .step_by(5_000)
            .map(|t| {
                cycle_cost(
                    t,
                    80_000,
                    5_000,
                    1_500.0,
                    [3.0, 0.3, 3.75, 15.0],
                    false,
                    800,
                )
            })
            .collect();
        assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
        let llm = cycle_cost(
            40_000,
            80_000,
            5_000,
            1_500.0,
            [3.0, 0.3, 3.75, 15.0],
            true,
            800,
        );
        assert!(llm > costs[4]);
    }

    #[test]
    fn without_a_growth_half_the_budget_and_the_floor_bounds_the_choice() {
        let a = choose_target(choice(None, 0));
        assert_eq!(
            (a.tokens, a.ratio, a.growth, a.cost_per_call),
            (50_000, 0.5, None, None)
        );
        let low = choose_target(choice(Some(1_500.0), 0));
        assert_eq!(low.tokens, 20_000, "the cheapest: the lowest bound");
        let floored = choose_target(choice(Some(1_500.0), 43_210));
        assert_eq!(floored.tokens, 43_210, "never below the floor");
        let capped = choose_target(choice(Some(1_500.0), 69_000));
        assert_eq!(capped.tokens, 69_000, "the floor up to AUTO_MAX");
        let unreachable = choose_target(choice(Some(1_500.0), 95_000));
        assert_eq!(
            (unreachable.tokens, unreachable.growth),
            (50_000, Some(1_500.0)),
            "a floor over AUTO_MAX: the fixed ratio"
        );
        assert_eq!(choose_target(choice(None, 95_000)).tokens, 50_000);
        assert_eq!(
            choose_target(choice(Some(1_500.0), 43_210)),
            floored,
            "deterministic"
        );
        let empty = choose_target(Choice {
            budget: 0,
            ..choice(Some(1.0), 0)
        });
        assert_eq!((empty.tokens, empty.ratio), (0, AUTO_FALLBACK));
    }
}

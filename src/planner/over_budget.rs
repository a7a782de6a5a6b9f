//! `over_budget_reason` when even the smallest legal context is over the soft threshold: what
//! it is made of, and which part did not fit.
//!
//! By the time this is written the ladder has run to its end (`apply.rs`): the tail is the last
//! legal block, the task is at `task_max_tokens`, the summary at its cap or shorter, and the
//! last block cut as far as it goes (`last_block.rs`). What is left of the last block is what
//! may not be cut (thinking, images, signed or opaque parts, the user's own text, calls still
//! waiting) plus the floors of the cuts (and each message's framing), and the reason says so by
//! name.

use super::draft::{block_tokens, Count, Slot};
use super::output::OutMsg;
use super::plan::{calibrated, Planned};
use crate::message::{BlockKind, Role};

/// What a block of the last block is, for the reason: the parts the ladder never cuts.
fn kind_of(slot: &Slot<'_>, k: usize, answered: &dyn Fn(&str) -> bool) -> Option<&'static str> {
    let b = &slot.view.blocks[k];
    Some(match b.kind {
        _ if b.kind.is_thinking() || b.kind == BlockKind::Reasoning => "thinking",
        _ if b.images > 0 || b.kind == BlockKind::Image => "images",
        _ if b.opaque || b.signed || b.kind == BlockKind::Compaction => "signed or opaque parts",
        _ if slot
            .view
            .calls()
            .any(|c| !c.id.as_deref().is_some_and(answered)) =>
        {
            "a message with a call still waiting for its result"
        }
        BlockKind::ToolCall | BlockKind::ToolResult => return None,
        _ if slot.view.role == Role::User => "the user's own text",
        _ => return None,
    })
}

impl<'a> Planned<'a> {
    /// Why even the smallest legal context is over: its parts, in calibrated tokens.
    pub(super) fn too_large(
        &self,
        slots: &[Slot<'a>],
        extra: usize,
        tokens_after: usize,
        counter: &dyn Count,
    ) -> String {
        let task = self.task.and_then(|t| self.slots[t].source());
        let (mut summary, mut task_tokens, mut pinned, mut system) = (0, 0, 0, extra);
        let mut rest: Vec<&Slot<'a>> = Vec::new();
        let mut task_cut = false;
        for s in slots {
            if matches!(s.out, OutMsg::New { .. }) && s.is_summary() {
                summary += s.tokens;
            } else if task.is_some() && s.source() == task {
                task_tokens += s.tokens;
                task_cut = !matches!(s.out, OutMsg::Keep(_));
            } else if s.pinned {
                pinned += s.tokens;
            } else if s.view.role.is_instruction() {
                system += s.tokens;
            } else {
                rest.push(s);
            }
        }
        let c = |t: usize| calibrated(t, self.ratio);
        let soft = self.cfg.soft;
        let mut parts = vec![format!("system prompt and tools {}", c(system))];
        if task.is_some() {
            parts.push(if task_cut {
                format!(
                    "the task {} (cut to task_max_tokens={}, its must-keep facts kept)",
                    c(task_tokens),
                    self.cfg.task_max_tokens
                )
            } else {
                format!("the task {}", c(task_tokens))
            });
        }
        if summary > 0 {
            parts.push(format!("the summary {}", c(summary)));
        }
        if pinned > 0 {
            parts.push(format!("pinned messages {}", c(pinned)));
        }
        // The last block: its uncut parts by kind, the rest is what the cuts left.
        let answered = |id: &str| {
            slots
                .iter()
                .flat_map(|s| s.view.results())
                .any(|r| r.id.as_deref() == Some(id))
        };
        let mut kinds: Vec<(&'static str, usize)> = Vec::new();
        let mut last = 0;
        for s in &rest {
            last += s.tokens;
            for k in 0..s.view.blocks.len() {
                if let Some(kind) = kind_of(s, k, &answered) {
                    let t = block_tokens(&s.view.blocks[k], self.cfg.framing, counter);
                    match kinds.iter_mut().find(|x| x.0 == kind) {
                        Some(x) => x.1 += t,
                        None => kinds.push((kind, t)),
                    }
                }
            }
        }
        if !rest.is_empty() {
            let sources: Vec<usize> = rest.iter().filter_map(|s| s.source()).collect();
            let range = match (sources.iter().min(), sources.iter().max()) {
                (Some(a), Some(b)) if a == b => format!(" (message {a})"),
                (Some(a), Some(b)) => format!(" (messages {a}-{b})"),
                _ => String::new(),
            };
            let kept: usize = kinds.iter().map(|x| x.1).sum();
            let mut inner: Vec<String> = kinds
                .iter()
                .map(|(k, t)| format!("{k} {}", c(*t)))
                .collect();
            inner.push(format!(
                "calls, results and assistant text cut as far as they go {}",
                c(last.saturating_sub(kept))
            ));
            parts.push(format!(
                "the last block{range} {}: {}",
                c(last),
                inner.join(", ")
            ));
        }
        // Which part did not fit: the first of these that is alone over the threshold.
        let fixed = system + task_tokens + summary + pinned;
        let culprit = if c(system) > soft {
            "the system prompt and tools alone are over it".to_owned()
        } else if c(fixed) > soft {
            "the system prompt, tools, task, summary and pinned messages alone are over it"
                .to_owned()
        } else {
            let uncut: Vec<&str> = kinds.iter().map(|x| x.0).collect();
            let mut why = "the last block does not fit the room left".to_owned();
            if !uncut.is_empty() {
                why.push_str(&format!(" (never cut: {})", uncut.join(", ")));
            }
            if uncut.contains(&"images") {
                why.push_str("; an image cannot be shortened");
            }
            why
        };
        format!(
            "{tokens_after} tokens after compaction, above the soft threshold {soft}: the smallest legal context does not fit, {culprit} ({})",
            parts.join(", ")
        )
    }
}

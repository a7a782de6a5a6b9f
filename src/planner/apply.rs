//! `Planned::apply`: the summary (the caller's reply or the rule summary) made into the summary
//! message with its must-keep facts, then the budget ladder.

use super::assemble::Outcome;
use super::draft::{total, Count, Slot};
use super::output::Strategy;
use super::plan::{raw_of, Planned};
use super::SUMMARY_MARKER;
use crate::message::Message;
use crate::structure::analyze;
use crate::summary::facts::fact_present;
use crate::summary::language::Language;
use crate::summary::rule::{rule_summary, truncation_summary};
use crate::summary::text::{cap_to_tokens, extract_summary};
use crate::text::Text;

impl<'a> Planned<'a> {
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
                (text, Strategy::Summary, cut || truncated)
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
                (text, Strategy::RuleSummary, cut)
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
                strategy = Strategy::Truncation;
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
                    strategy = Strategy::Truncation;
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
        if tail_shortened && out.strategy != Strategy::None {
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
}

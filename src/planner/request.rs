//! The summarizer's side of a plan: the request for each chunk of the span, the next chunk's
//! plan, and how a summary added to Anthropic's system prompt is counted.

use super::draft::Count;
use super::output::{join_system_text, SystemPrompt};
use super::plan::Planned;
use crate::summary::instruction::user_instructions;
use crate::summary::language::Language;
use crate::summary::ledger::{strip_fakes, with_ledger_context};
use crate::summary::prompts::with_user_instructions;
use crate::summary::reply::extract_summary;
use crate::summary::{summary_prompts, with_task_context};
use crate::text::Text;

/// What the caller's summarizer is asked for (one chunk of the replaced span).
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRequest {
    pub system_prompt: String,
    pub user_prompt: String,
    /// The earlier summary's narrative (its ledger left out).
    pub previous_summary: Option<String>,
    /// The ledger the library carries after the summary (read-only context), if any.
    pub ledger: Option<String>,
    pub instructions: Option<String>,
    pub max_tokens: usize,
    pub must_keep: Vec<String>,
    pub language: Language,
    pub replaced_count: usize,
    /// This chunk (0-based) and the number of chunks.
    pub chunk: usize,
    pub chunks: usize,
}

impl<'a> Planned<'a> {
    /// The input indices of the messages the summary replaces, ascending (the Rust API's
    /// `Plan::replaced`).
    pub fn span_sources(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .span
            .iter()
            .filter_map(|&k| self.slots.get(k).and_then(|s| s.source()))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Say what the separate system prompt is and its raw tokens (counted in `extra`), so a
    /// `summary_role="system"` summary is counted as part of it, exactly as returned. Without
    /// this call the planner assumes there is none.
    pub fn set_system_prompt(&mut self, system: SystemPrompt, tokens: usize) {
        self.system_tokens = tokens.min(self.extra);
        self.system = system;
    }

    /// An earlier summary found in the separate system prompt (`summary_role="system"`: our
    /// part of it, `text`; `tokens` the raw tokens of that part when it is a block of its own).
    /// It is read back like an earlier summary message (its narrative the previous summary, its
    /// ledger carried) and replaced in place by the new summary (or removed when the new one is
    /// a message). Call after [`Planned::set_system_prompt`], which names the client's part.
    pub fn set_system_summary(&mut self, text: &str, tokens: usize) {
        self.system_ours = Some(tokens);
        if !self.needs_summary {
            return;
        }
        let body = text
            .trim_start()
            .strip_prefix(super::SUMMARY_MARKER)
            .map(|b| b.split_once('\n').map_or("", |x| x.1).trim().to_owned())
            .unwrap_or_default();
        let (narrative, earlier) = crate::summary::ledger::split(&body);
        let m = crate::message::Message::text(crate::message::Role::User, narrative.as_str());
        for f in crate::summary::facts::must_keep_facts(std::slice::from_ref(&m)) {
            if !self.facts.contains(&f) {
                self.facts.push(f);
            }
        }
        // Older than any summary in the messages: its entries first.
        let mut carried = earlier.clone();
        carried.merge(std::mem::take(&mut self.carried));
        self.carried = carried;
        let mut ledger = earlier;
        ledger.merge(std::mem::take(&mut self.ledger));
        self.ledger = ledger;
        self.previous_summary = match self.previous_summary.take() {
            Some(p) if !p.trim().is_empty() => Some(format!("{narrative}\n\n{p}")),
            _ => Some(narrative),
        };
    }

    /// Raw tokens of the system prompt and tools once `summary` (if any) is added to the
    /// system prompt (replacing our part of it, when it holds an earlier summary).
    pub(super) fn extra_with(&self, summary: Option<&str>, counter: &dyn Count) -> usize {
        let overhead = self.cfg.framing.message_overhead_tokens;
        let count = |s: &str| counter.count(Text::Utf8(s));
        let tools = self.extra - self.system_tokens;
        let Some(text) = summary else {
            // The earlier summary in the system prompt goes when a summary message replaces it.
            return match (self.system_ours, &self.system) {
                (Some(_), SystemPrompt::Absent) if self.needs_summary => tools,
                (Some(_), SystemPrompt::Text(s)) if self.needs_summary => {
                    tools + overhead + count(s)
                }
                (Some(ours), SystemPrompt::Blocks { .. }) if self.needs_summary => {
                    self.extra.saturating_sub(ours)
                }
                _ => self.extra,
            };
        };
        let system = match &self.system {
            SystemPrompt::Absent => overhead + count(text),
            SystemPrompt::Text(s) => overhead + count(&join_system_text(s, text)),
            SystemPrompt::Blocks { empty } => {
                self.system_tokens
                    .saturating_sub(self.system_ours.unwrap_or(0))
                    + count(text)
                    + if *empty { overhead } else { 0 }
            }
        };
        tools + system
    }

    /// The request for the current chunk, or `None` when no summary is needed. `counter` (the
    /// configured tokenizer) sizes the chunks the first time.
    pub fn request(&self, counter: &dyn Count) -> Option<SummaryRequest> {
        if !self.needs_summary || !self.llm {
            return None;
        }
        let t = self.transcript(counter);
        let chunk = t.chunks.get(self.chunk_index)?;
        let transcript = t.entries[chunk.clone()].join("\n\n");
        let cap = self.cfg.summary_cap;
        let (system_prompt, user_prompt) = summary_prompts(
            self.language,
            self.previous_summary.as_deref(),
            self.instructions.as_deref(),
            &transcript,
            cap,
        );
        // The user's instructions in the span, oldest first.
        let found: Vec<_> = self
            .replaced
            .iter()
            .filter(|m| m.is_user_text())
            .flat_map(|m| user_instructions(&m.prose()))
            .collect();
        let user_prompt = with_user_instructions(self.language, &found, &user_prompt);
        let user_prompt = match &self.task_text {
            Some(task) => with_task_context(self.language, task, &user_prompt),
            None => user_prompt,
        };
        let ledger = (!self.carried.is_empty()).then(|| self.carried.render(self.language));
        let user_prompt = match &ledger {
            Some(l) => with_ledger_context(self.language, l, &user_prompt),
            None => user_prompt,
        };
        Some(SummaryRequest {
            system_prompt,
            user_prompt,
            previous_summary: self
                .previous_summary
                .clone()
                .filter(|s| !s.trim().is_empty()),
            ledger,
            instructions: self.instructions.clone(),
            max_tokens: cap,
            must_keep: self.facts.clone(),
            language: self.language,
            replaced_count: self.span.len(),
            chunk: self.chunk_index,
            chunks: t.chunks.len(),
        })
    }

    /// Chunks still to be summarised after the current one.
    pub fn remaining_chunks(&self, counter: &dyn Count) -> usize {
        if !self.needs_summary || !self.llm {
            return 0;
        }
        let t = self.transcript(counter);
        t.chunks.len().saturating_sub(self.chunk_index + 1)
    }

    /// The plan for the next chunk, with `summary` (the reply for this chunk) as the summary to
    /// update.
    pub fn advance(&self, summary: &str) -> Planned<'a> {
        let mut next = self.clone();
        let (body, _) = extract_summary(summary);
        // The next chunk updates this narrative: a fake ledger in it is not carried.
        next.previous_summary = Some(strip_fakes(&body));
        next.chunk_index += 1;
        next
    }
}

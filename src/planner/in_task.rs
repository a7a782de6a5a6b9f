//! The ledger's user words that the kept task already shows verbatim, left out of the ledger.
//!
//! A template's rules are often said twice: in the task (a SWE-agent demonstration) and again in
//! a later user message (the real issue). When the task is shortened, its cut keeps such rules
//! in its text or in its list of the user's constraints; the ledger would carry the same
//! sentences a second time, and over a budget the room they take is what evicts the user's later
//! words. A sentence the final task shows verbatim is still in the context: it is not carried
//! twice (nor listed missing). The ladder re-runs its cuts with the words left out, and only the
//! words the task still shows afterwards stay out (the task's cut depends on the room the ledger
//! leaves): when that does not settle, nothing is left out.

use super::assemble::{Draft, Shape};
use super::draft::Count;
use super::plan::Planned;

/// A sentence this short ("Thanks.", "Yes, go on.") is kept in the ledger even when the task
/// happens to contain it: said later it is an answer of its own.
const MIN_CHARS: usize = 24;

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl<'a> Planned<'a> {
    /// The kept task's text in `d`, its white space collapsed (`None` without a task).
    fn task_text(&self, d: &Draft<'a>) -> Option<String> {
        let src = self.task.and_then(|t| self.slots[t].source())?;
        let slot = d.slots.iter().find(|s| s.source() == Some(src))?;
        Some(collapse(&slot.view.prose()))
    }

    /// The ledger's user words that `text` (a task's collapsed text) shows verbatim.
    fn shown_by(&self, text: &str) -> Vec<String> {
        self.ledger
            .words
            .iter()
            .filter(|w| w.text.chars().count() >= MIN_CHARS && text.contains(&collapse(&w.text)))
            .map(|w| w.text.clone())
            .collect()
    }

    /// `d` with the ledger's user words that its task shows verbatim left out (see the module
    /// note), the ladder's cuts re-run to `soft`; `d` itself when it has none to leave out and
    /// leaves none out. Every word left out is shown by the returned draft's task.
    pub(super) fn without_task_repeats(
        &self,
        d: &Draft<'a>,
        soft: usize,
        counter: &dyn Count,
    ) -> Draft<'a> {
        if d.summary.is_none() {
            return d.clone();
        }
        let Some(text) = self.task_text(d) else {
            return d.clone();
        };
        let mut shown = self.shown_by(&text);
        let mut cur = d.clone();
        for _ in 0..4 {
            if shown == cur.shape.in_task {
                return cur;
            }
            let shape = Shape {
                in_task: shown.clone(),
                ..cur.shape.clone()
            };
            let mut alt = self.assemble(&shape, counter);
            alt.carry(&cur);
            self.fit(&mut alt, soft, counter);
            let Some(text) = self.task_text(&alt) else {
                break;
            };
            // Every word left out must be shown by this draft's task; the words it shows now
            // are left out next (the task's cut may have changed with the ledger's room).
            let now = self.shown_by(&text);
            let all_shown = shown.iter().all(|w| now.contains(w));
            cur = alt;
            if all_shown && now == shown {
                return cur;
            }
            shown = if all_shown {
                now
            } else {
                shown.into_iter().filter(|w| now.contains(w)).collect()
            };
        }
        if d.shape.in_task.is_empty() {
            return d.clone();
        }
        // Not settled: nothing left out.
        let shape = Shape {
            in_task: Vec::new(),
            ..d.shape.clone()
        };
        let mut alt = self.assemble(&shape, counter);
        alt.carry(d);
        self.fit(&mut alt, soft, counter);
        alt
    }
}

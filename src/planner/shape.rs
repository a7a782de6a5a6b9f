//! The shape the provider (or a strict template) needs after assembly: Anthropic and strict
//! want the user first; strict wants user and assistant to alternate. Only new short messages
//! are inserted; no input message is changed.

use super::draft::{Count, Slot};
use super::output::{OutBlock, OutMsg};
use super::plan::Planned;
use crate::message::{Conversation, Role};
use crate::validate::Profile;

impl<'a> Planned<'a> {
    /// The shape the provider (or a strict template) needs: Anthropic and strict want the user
    /// first; strict wants user and assistant to alternate. Only new short messages are
    /// inserted; no input message is changed.
    pub(super) fn fix_shape(&self, slots: &mut Vec<Slot<'a>>, counter: &dyn Count) -> Vec<String> {
        let strict = self.cfg.profile == Some(Profile::Strict);
        let anthropic = self.format.results_in_user_messages();
        let mut repairs = Vec::new();
        if !(strict || anthropic) {
            return repairs;
        }
        let conv = Conversation::new(self.format, Vec::new());
        let new = |role: Role, text: &str| {
            Slot::build(
                &conv,
                OutMsg::New {
                    role,
                    blocks: vec![OutBlock::Text(text.to_owned())],
                },
                self.cfg.framing,
                counter,
            )
        };
        if strict {
            // System/developer messages after the start move to the front (unchanged).
            let first_other = slots.iter().position(|s| !s.view.role.is_instruction());
            if let Some(f) = first_other {
                let late: Vec<usize> = (f..slots.len())
                    .filter(|&i| slots[i].view.role.is_instruction())
                    .collect();
                for (k, &i) in late.iter().enumerate() {
                    let s = slots.remove(i - k);
                    repairs.push(format!(
                        "moved a {} message to the start (strict templates need system messages first)",
                        s.view.role.name()
                    ));
                    slots.insert(f + k, s);
                }
            }
        }
        match slots.iter().position(|s| !s.view.role.is_instruction()) {
            // After Anthropic's compaction, its block opens the conversation (crate::formats::anthropic_compaction).
            Some(first)
                if slots[first].view.role != Role::User
                    && !(anthropic
                        && !strict
                        && crate::formats::anthropic_compaction::opens_with_block(
                            &slots[first].view,
                        )) =>
            {
                slots.insert(first, new(Role::User, "(continuing the conversation)"));
                repairs
                    .push("inserted a user message before the first assistant message".to_owned());
            }
            None if anthropic => {
                slots.push(new(Role::User, "(continuing the conversation)"));
                repairs.push(format!(
                    "added a user message: an {} request needs one",
                    self.format
                ));
            }
            _ => {}
        }
        if self.format.calls_follow_user_turn() {
            // A function-call turn must follow a user turn (`crate::formats::gemini::rule`).
            let mut i = 1;
            while i < slots.len() {
                let v = &slots[i].view;
                if v.role == Role::Assistant
                    && v.has_calls()
                    && slots[i - 1].view.role != Role::User
                {
                    slots.insert(i, new(Role::User, "(continuing the conversation)"));
                    repairs.push(
                        "inserted a user message before a function call turn that followed a model turn"
                            .to_owned(),
                    );
                    i += 1;
                }
                i += 1;
            }
        }
        if !strict {
            return repairs;
        }
        let mut i = 0;
        let mut last: Option<bool> = None;
        while i < slots.len() {
            if slots[i].view.role.is_instruction() {
                i += 1;
                continue;
            }
            let user = super::draft::is_user_side(&slots[i].view);
            // The results of parallel calls are one turn of the user side.
            let more_results = slots[i].view.is_result_only()
                && slots[..i]
                    .iter()
                    .rev()
                    .find(|s| !s.view.role.is_instruction())
                    .is_some_and(|s| s.view.is_result_only());
            if last == Some(user) && !more_results {
                let filler = if user {
                    new(Role::Assistant, "Understood.")
                } else {
                    new(Role::User, "Continue.")
                };
                repairs.push(format!(
                    "inserted a short {} message between two {} messages (strict alternation)",
                    filler.view.role.name(),
                    if user { "user" } else { "assistant" }
                ));
                slots.insert(i, filler);
                i += 1;
            }
            last = Some(user);
            i += 1;
        }
        repairs
    }
}

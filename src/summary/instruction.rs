//! The one instruction classifier (DESIGN, "Instruction"): a sentence of a user message that
//! prohibits, requires, sets a condition, states a rule for every reply or action, a
//! preference, a goal or a safety rule, in English or Chinese. Questions, quotes, code and
//! pasted tool output are not instructions.
//!
//! Used by the ledger (to rank eviction: what is not an instruction goes first, prohibitions
//! and safety rules last), the rule summary and the summarizer prompt (to list instructions).
//! The classifier ranks; it does not decide what the ledger carries (the ledger carries every
//! user sentence within its budget).
//!
//! Interface first (this file's signatures are what the ledger and the rule summary call);
//! the first implementation delegates to the keyword test of [`super::constraints`].

use super::constraints::{is_constraint, looks_like_code, MAX_CONSTRAINT_CHARS};

/// What kind of instruction a sentence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstructionKind {
    /// "don't / never / do not / 不要 / 禁止 …"
    Prohibition,
    /// "you must / always / make sure / 必须 / 务必 …"
    Requirement,
    /// "when / before / after / if / once …, do …" (如果…就…, 先…再…)
    Condition,
    /// "every / each / all …" (每次, 以后, 总是)
    EveryRule,
    /// "I prefer / please use / use X instead of Y"
    Preference,
    /// "the goal is / I want / we need"
    Goal,
    /// what must never happen to data, money, credentials, production
    Safety,
}

impl InstructionKind {
    /// Every kind, in declaration order.
    pub const ALL: [InstructionKind; 7] = [
        InstructionKind::Prohibition,
        InstructionKind::Requirement,
        InstructionKind::Condition,
        InstructionKind::EveryRule,
        InstructionKind::Preference,
        InstructionKind::Goal,
        InstructionKind::Safety,
    ];

    /// The kind's name (`"prohibition"`, `"every_rule"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            InstructionKind::Prohibition => "prohibition",
            InstructionKind::Requirement => "requirement",
            InstructionKind::Condition => "condition",
            InstructionKind::EveryRule => "every_rule",
            InstructionKind::Preference => "preference",
            InstructionKind::Goal => "goal",
            InstructionKind::Safety => "safety",
        }
    }

    /// Whether the ledger evicts this kind last (prohibitions and safety rules), after every
    /// other instruction.
    pub fn evicted_last(self) -> bool {
        matches!(self, InstructionKind::Prohibition | InstructionKind::Safety)
    }
}

/// The kind of instruction `sentence` is, or `None` when it is not one.
pub fn classify(sentence: &str) -> Option<InstructionKind> {
    let s = sentence.trim();
    if s.is_empty() || s.chars().count() > MAX_CONSTRAINT_CHARS || looks_like_code(s) {
        return None;
    }
    if !is_constraint(s) {
        return None;
    }
    let lower = s.to_lowercase();
    let negative = [
        "don't", "don’t", "do not", "never", "不要", "别", "禁止", "不能", "绝不",
    ]
    .iter()
    .any(|w| lower.contains(w));
    Some(if negative {
        InstructionKind::Prohibition
    } else {
        InstructionKind::Requirement
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface() {
        assert_eq!(
            classify("Never push to main."),
            Some(InstructionKind::Prohibition)
        );
        assert_eq!(classify("What is this?"), None);
        assert!(InstructionKind::Safety.evicted_last());
        assert!(!InstructionKind::Goal.evicted_last());
    }
}

//! A memo of the classifier's answers for the length of one compaction's ladder ([`memoized`]).
//!
//! The ladder assembles the output again at each step, and each assembly asks the classifier
//! about the same sentences: the ledger's eviction ranks every word, the task's cut reads every
//! instruction of the task (a task of 25,000 characters was classified again at each of its
//! cuts: 70% of a 4,000-token-window compaction of the codex session). Within
//! [`memoized`], [`classify`](super::classify) and [`user_instructions`](super::user_instructions)
//! answer each distinct text once; outside it (and on other threads) they compute as before.
//! Both are pure functions of their text, so the memo changes no output.

use super::InstructionKind;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Default)]
struct Memo {
    kinds: FxHashMap<Box<str>, Option<InstructionKind>>,
    texts: FxHashMap<Box<str>, Rc<[(InstructionKind, String)]>>,
}

thread_local! {
    static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

/// `f()` with the classifier's answers memoized on this thread until it returns (nested calls
/// share the outer memo).
pub fn memoized<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
    if MEMO.with(|m| m.borrow().is_some()) {
        return f();
    }
    MEMO.with(|m| *m.borrow_mut() = Some(Memo::default()));
    let _reset = Reset;
    f()
}

/// `sentence`'s kind from the memo, else `compute(sentence)` (kept when a memo is active).
pub(super) fn kind(
    sentence: &str,
    compute: impl FnOnce(&str) -> Option<InstructionKind>,
) -> Option<InstructionKind> {
    if let Some(k) = MEMO.with(|m| m.borrow().as_ref()?.kinds.get(sentence).copied()) {
        return k;
    }
    let k = compute(sentence);
    MEMO.with(|m| {
        if let Some(memo) = m.borrow_mut().as_mut() {
            memo.kinds.insert(sentence.into(), k);
        }
    });
    k
}

/// `text`'s instructions from the memo, else `compute(text)` (kept when a memo is active).
pub(super) fn instructions(
    text: &str,
    compute: impl FnOnce(&str) -> Vec<(InstructionKind, String)>,
) -> Vec<(InstructionKind, String)> {
    if let Some(found) = MEMO.with(|m| m.borrow().as_ref()?.texts.get(text).cloned()) {
        return found.to_vec();
    }
    let found = compute(text);
    MEMO.with(|m| {
        if let Some(memo) = m.borrow_mut().as_mut() {
            memo.texts.insert(text.into(), found.as_slice().into());
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::super::{classify, user_instructions};
    use super::*;

    #[test]
    fn the_memo_answers_as_the_classifier_does_and_ends_with_its_scope() {
        let text = "Never push to main. Why is it slow? 以后每次回复都用中文。Run the tests.";
        let plain = (user_instructions(text), classify("Never push to main."));
        let memo = memoized(|| {
            let first = (user_instructions(text), classify("Never push to main."));
            let again = (user_instructions(text), classify("Never push to main."));
            assert_eq!(first, again);
            assert!(MEMO.with(|m| m.borrow().as_ref().is_some_and(|m| !m.kinds.is_empty())));
            // Nested: the outer memo stays.
            memoized(|| ());
            assert!(MEMO.with(|m| m.borrow().is_some()));
            first
        });
        assert_eq!(memo, plain);
        assert!(MEMO.with(|m| m.borrow().is_none()));
    }
}

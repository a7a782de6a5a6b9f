//! OpenAI Responses items: their structure (tool blocks, reasoning kept with its item) and the
//! rules the Responses API enforces on an input list.
//!
//! Design note — what the provider rejects, as its 400 errors say (the texts are the ones users
//! report; our local stub in `tests/_responses_stub.py` answers them verbatim):
//!
//! - an output whose call is not in the input: `No tool call found for function call output
//!   with call_id {call_id}.` (`orphan_output`);
//! - a call whose output is missing while the conversation goes on: `No tool output found for
//!   function call {call_id}.` (`missing_output`; a trailing call may wait for its output);
//! - two calls with one `call_id`, or two items with one `id`: `Duplicate item found with id
//!   {id}. Remove duplicate items from your input and try again.` (`duplicate_call_id`,
//!   `duplicate_item_id`);
//! - a reasoning item whose following item is not sent: `Item 'rs_…' of type 'reasoning' was
//!   provided without its required following item.` (`reasoning_without_item`). A reasoning
//!   item belongs to the output item the model produced right after it; real logs (Codex) hold
//!   runs of several reasoning items before one call, so a run is kept whole with the
//!   non-reasoning assistant-side item that ends it.
//!
//! Under `store=false` (profile `responses_stateless`) nothing is persisted on the provider's
//! side: `Item with id 'rs_…' not found. Items are not persisted when `store` is set to false.
//! Try again with `store` set to true, or remove this item from your input.` So an
//! `item_reference` cannot be resolved (`item_reference_stateless`), and a reasoning item must
//! carry its `encrypted_content` (asked for with `include=["reasoning.encrypted_content"]`):
//! one with an `id` and no encrypted content refers to a stored item (`reasoning_not_stored`).
//!
//! Structure. Calls and outputs are separate items, paired by `call_id`; parallel calls are
//! consecutive call items followed by their outputs. A tool block is a call item and every
//! item up to the one that answers the last of the calls opened in it (items in between, more
//! calls included, belong to the block). Cuts never fall inside a block, and never right after
//! a reasoning item (it stays with the item that follows it). The assistant turn is the run of
//! reasoning, message and call items between user messages.

pub mod read;

use crate::message::{BlockKind, Message, Origin, Role};
use crate::validate::problem::{rule, Problem, Profile};
use std::collections::{HashMap, HashSet};

/// Whether `m` is a typed Responses item (not a `message`).
pub fn is_item(m: &Message<'_>) -> bool {
    m.blocks.first().is_some_and(|b| b.origin == Origin::Item)
}

/// Whether `m` is a Responses call item.
pub fn is_call_item(m: &Message<'_>) -> bool {
    is_item(m) && m.role == Role::Assistant && m.has_calls()
}

/// Whether `m` is a Responses `reasoning` item.
pub fn is_reasoning(m: &Message<'_>) -> bool {
    m.blocks
        .first()
        .is_some_and(|b| b.kind == BlockKind::Reasoning)
}

/// Whether `m` carries a provider compaction item.
pub fn is_compaction(m: &Message<'_>) -> bool {
    m.blocks.iter().any(|b| b.kind == BlockKind::Compaction)
}

/// An item a reasoning item may precede: an assistant-side item other than reasoning.
fn follows_reasoning(m: &Message<'_>) -> bool {
    m.role == Role::Assistant && !is_reasoning(m)
}

/// One past the last item of the tool block that starts with the call item at `i`.
pub fn region_end<'a, M: AsRef<Message<'a>>>(messages: &[M], i: usize) -> usize {
    let mut open: HashSet<&str> = messages[i]
        .as_ref()
        .calls()
        .filter_map(|c| c.id.as_deref())
        .collect();
    let mut j = i + 1;
    while j < messages.len() && !open.is_empty() {
        let m = messages[j].as_ref();
        if m.is_user_text() {
            break;
        }
        if m.role == Role::Assistant {
            for c in m.calls() {
                if let Some(id) = c.id.as_deref() {
                    open.insert(id);
                }
            }
        }
        for r in m.results() {
            if let Some(id) = r.id.as_deref() {
                open.remove(id);
            }
        }
        j += 1;
    }
    j
}

/// Calls of the block `messages[i..end]` that have no output in it.
pub fn pending_in<'a, M: AsRef<Message<'a>>>(messages: &[M], i: usize, end: usize) -> usize {
    let answered: HashSet<&str> = messages[i..end]
        .iter()
        .flat_map(|m| m.as_ref().results())
        .filter_map(|r| r.id.as_deref())
        .collect();
    messages[i..end]
        .iter()
        .filter(|m| m.as_ref().role == Role::Assistant)
        .flat_map(|m| m.as_ref().calls())
        .filter(|c| c.id.as_deref().is_none_or(|id| !answered.contains(id)))
        .count()
}

/// Whether a cut before `c` would separate a reasoning item from the item that follows it.
pub fn splits_reasoning<'a, M: AsRef<Message<'a>>>(messages: &[M], c: usize) -> bool {
    c > 0 && c < messages.len() && is_reasoning(messages[c - 1].as_ref())
}

/// The Responses rules (see the design note), each problem at the item's index.
pub fn validate(messages: &[Message<'_>], profile: Profile) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut push = |index: usize, rule: &'static str, message: String| {
        out.push(Problem::at(index, rule, message))
    };
    let n = messages.len();
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        if !is_item(m) {
            if matches!(m.role, Role::Tool | Role::Function | Role::Other) {
                push(
                    i,
                    rule::INVALID_ROLE,
                    format!(
                        "a message item with role {:?}; Responses messages are user, assistant, system or developer",
                        m.role.name()
                    ),
                );
            }
            if m.has_calls() || m.has_results() {
                push(
                    i,
                    rule::MISPLACED_TOOL_CALL,
                    "a message item carries Chat Completions tool calls or results".to_owned(),
                );
            }
        }
        for b in m.blocks.iter() {
            if let Some(field) = b.malformed {
                push(
                    i,
                    rule::MALFORMED_BLOCK,
                    format!("the item has no {field:?}"),
                );
            }
            if profile == Profile::ResponsesStateless && b.needs_store {
                let (rule, what) = if b.kind == BlockKind::Reasoning {
                    (
                        rule::REASONING_NOT_STORED,
                        "a reasoning item with an id and no encrypted_content refers to a stored item; under store=false send it with its encrypted_content (include=[\"reasoning.encrypted_content\"])",
                    )
                } else {
                    (
                        rule::ITEM_REFERENCE_STATELESS,
                        "an item_reference needs a stored response; under store=false send the item itself",
                    )
                };
                push(i, rule, what.to_owned());
            }
        }
        if !is_item(m) {
            continue;
        }
        if m.role == Role::Assistant {
            for c in m.calls() {
                let Some(id) = c.id.as_deref() else { continue };
                if let Some(&first) = call_at.get(id) {
                    push(
                        i,
                        rule::DUPLICATE_CALL_ID,
                        format!("call_id {id:?} was already used by item {first}"),
                    );
                    continue;
                }
                call_at.insert(id, i);
            }
        }
        for r in m.results() {
            let Some(id) = r.id.as_deref() else { continue };
            match (call_at.get(id), answered.get(id)) {
                (None, _) => push(
                    i,
                    rule::ORPHAN_OUTPUT,
                    format!("no call with call_id {id:?} before this output"),
                ),
                (Some(_), Some(&prev)) => push(
                    i,
                    rule::DUPLICATE_TOOL_RESULT,
                    format!("call_id {id:?} already has an output (item {prev})"),
                ),
                (Some(_), None) => {
                    answered.insert(id, i);
                }
            }
        }
        if is_reasoning(m) {
            let mut j = i + 1;
            while j < n && is_reasoning(&messages[j]) {
                j += 1;
            }
            if j == n || !follows_reasoning(&messages[j]) {
                push(
                    i,
                    rule::REASONING_WITHOUT_ITEM,
                    "a reasoning item must be followed by the item it belongs to (a message or call of the same turn)".to_owned(),
                );
            }
        }
    }
    // Calls without an output: the conversation went on past their block.
    let mut i = 0;
    while i < n {
        if is_call_item(&messages[i]) {
            let end = region_end(messages, i);
            if end < n {
                for (at, m) in messages.iter().enumerate().take(end).skip(i) {
                    for c in m.calls() {
                        let id = c.id.as_deref().unwrap_or_default();
                        if m.role == Role::Assistant
                            && is_item(m)
                            && !answered.contains_key(id)
                            && call_at.get(id) == Some(&at)
                        {
                            push(
                                end,
                                rule::MISSING_OUTPUT,
                                format!(
                                    "call {id:?} of item {} has no output before this item",
                                    call_at[id]
                                ),
                            );
                        }
                    }
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out.sort_by_key(|p| p.index);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Block;
    use crate::structure::analyze;

    fn item<'a>(role: Role, mut b: Block<'a>) -> Message<'a> {
        b.origin = Origin::Item;
        let mut m = Message::new(role, vec![b]);
        m.responses = true;
        m
    }
    fn call<'a>(id: &str) -> Message<'a> {
        item(Role::Assistant, Block::tool_call(Some(id), "bash", "{}"))
    }
    fn out<'a>(id: &str) -> Message<'a> {
        item(Role::Tool, Block::tool_result(Some(id), "ok"))
    }
    fn rs<'a>() -> Message<'a> {
        let mut b = Block::new(BlockKind::Reasoning);
        b.opaque = true;
        item(Role::Assistant, b)
    }
    fn rules(msgs: &[Message<'_>]) -> Vec<(usize, &'static str)> {
        validate(msgs, Profile::Format(crate::message::Format::Responses))
            .into_iter()
            .map(|p| (p.index.unwrap(), p.rule))
            .collect()
    }

    #[test]
    fn parallel_calls_and_reasoning_runs_are_kept_whole() {
        let msgs = vec![
            Message::text(Role::User, "go"),
            rs(),
            rs(),
            call("a"),
            call("b"),
            out("b"),
            out("a"),
            rs(),
            Message::text(Role::Assistant, "done"),
            Message::text(Role::User, "next"),
        ];
        assert!(rules(&msgs).is_empty(), "{:?}", rules(&msgs));
        let s = analyze(&msgs);
        assert_eq!(s.tool_blocks.len(), 1);
        assert_eq!(s.tool_blocks[0].span.start, 3);
        assert_eq!(s.tool_blocks[0].span.end, 6);
        // Not at 2, 3 (inside the reasoning run before the calls) nor 8 (after a reasoning item).
        assert_eq!(s.cut_points, vec![0, 1, 7, 9, 10]);
    }

    #[test]
    fn each_rule_names_the_item() {
        let msgs = vec![
            Message::text(Role::User, "go"),
            out("x"),
            call("a"),
            call("a"),
            Message::text(Role::User, "next"),
            rs(),
            Message::text(Role::User, "again"),
            call("w"),
        ];
        assert_eq!(
            rules(&msgs),
            vec![
                (1, rule::ORPHAN_OUTPUT),
                (3, rule::DUPLICATE_CALL_ID),
                (4, rule::MISSING_OUTPUT),
                (5, rule::REASONING_WITHOUT_ITEM),
            ]
        );
        let s = analyze(&msgs);
        assert_eq!(s.tool_blocks.last().unwrap().pending, 1);
    }

    #[test]
    fn stateless_profile_flags_stored_references() {
        let mut r = Block::new(BlockKind::Reasoning);
        r.needs_store = true;
        let msgs = vec![
            Message::text(Role::User, "go"),
            item(Role::Assistant, r),
            Message::text(Role::Assistant, "ok"),
        ];
        assert!(rules(&msgs).is_empty());
        let p = validate(&msgs, Profile::ResponsesStateless);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].rule, rule::REASONING_NOT_STORED);
    }
}

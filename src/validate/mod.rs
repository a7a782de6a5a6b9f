//! Is this list of messages a request the provider accepts? (DESIGN, Invariant 1)
//!
//! Well-typed but provider-invalid input is reported as [`Problem`]s, never as an error: the
//! caller decides whether to repair, refuse, or send anyway. Each problem names the index of
//! the message where the provider would reject the request, a stable rule name, and a
//! readable explanation.
//!
//! Layout: the shared vocabulary (`Problem`, `Profile`, the rule names) is the leaf
//! `problem.rs`, which the formats' own checks use; this module holds the rules every
//! message-list format shares and calls the checks each format adds, which live beside their
//! format in `crate::formats` (Responses' whole rule set, Gemini's turn rules, Anthropic's
//! compaction blocks).
//!
//! Design note — thinking. Anthropic requires the thinking block that opens a tool loop to stay
//! with the results that follow it. Whether a request had thinking enabled is not in the
//! messages, and real Claude Code traffic (interleaved thinking) has loops whose first assistant
//! message has no thinking while a later one does — in 18 of 210 corpus prefixes a rule on the
//! opener flagged accepted requests, one on the last message 124. So validation checks only the
//! block order inside a message (`thinking_not_first`); the compactor keeps loops whole by
//! construction: no cut inside the pending loop, and its thinking is never dropped.

use crate::formats::Rules;
use crate::message::{Block, BlockKind, Format, Message, Origin, Role};
use crate::structure::result_region_end;
use std::collections::{HashMap, HashSet};

pub mod problem;
pub use problem::{rule, Problem, Profile};

/// Where a block sits in its message, for problem texts.
fn block_place(b: &Block<'_>) -> String {
    match b.origin {
        Origin::Part(k) => format!("content[{k}]"),
        Origin::Call(k) => format!("tool_calls[{k}]"),
        _ => "the message".to_owned(),
    }
}

fn id_text(id: Option<&str>) -> String {
    match id {
        // A Gemini call or response that came without an id (`crate::formats::gemini::pair_ids`).
        Some(id) if crate::formats::gemini::is_synthetic(id) => "(without id)".to_owned(),
        Some(id) => format!("{id:?}"),
        None => "(legacy function_call)".to_owned(),
    }
}

/// Check `messages` (in `format`) against `profile`.
pub fn validate(messages: &[Message<'_>], format: Format, profile: Profile) -> Vec<Problem> {
    // The message-list formats share the rules below; Responses items have their own.
    let own_check = match crate::formats::rules(format) {
        Rules::Items(own) => return own(messages, profile),
        Rules::MessageList(check) => check,
    };
    let mut out = Vec::new();
    let mut push = |index: usize, rule: &'static str, message: String| {
        out.push(Problem::at(index, rule, message))
    };
    let n = messages.len();
    let anthropic = format == Format::Anthropic;
    // Anthropic's rules that Gemini shares: the user first, no empty content.
    let user_parts = format.results_in_user_messages();

    // Roles and block placement.
    for (i, m) in messages.iter().enumerate() {
        if !format.has_role(m.role) {
            push(
                i,
                rule::INVALID_ROLE,
                match m.role {
                    Role::Other => format!("an unknown role; {format} has no such message role"),
                    r => format!("{format} has no {:?} role in its message list", r.name()),
                },
            );
        }
        for b in m.blocks.iter() {
            if let Some(field) = b.malformed {
                push(
                    i,
                    rule::MALFORMED_BLOCK,
                    format!("{} has no {field:?}", block_place(b)),
                );
            }
        }
        if m.has_calls() && m.role != Role::Assistant {
            push(
                i,
                rule::MISPLACED_TOOL_CALL,
                format!("a {} message carries a tool call", m.role.name()),
            );
        }
        if m.has_results() && m.role == Role::Assistant {
            push(
                i,
                rule::MISPLACED_TOOL_RESULT,
                "an assistant message carries a tool result".to_owned(),
            );
        }
        if anthropic {
            if m.kind_after_others(|k| k == BlockKind::ToolResult) {
                push(
                    i,
                    rule::TOOL_RESULT_NOT_FIRST,
                    "tool_result blocks must come before any other block".to_owned(),
                );
            }
            if m.kind_after_others(BlockKind::is_thinking) {
                push(
                    i,
                    rule::THINKING_NOT_FIRST,
                    "thinking blocks must come before any other block".to_owned(),
                );
            }
        }
        let prefill = anthropic && i + 1 == n && m.role == Role::Assistant;
        if user_parts && m.empty && !prefill {
            push(
                i,
                rule::EMPTY_CONTENT,
                format!("content is empty; {format} requires non-empty content"),
            );
        }
    }
    if user_parts || profile == Profile::Strict {
        if let Some(first) = messages.iter().position(|m| !m.role.is_instruction()) {
            // A conversation continued after Anthropic's compaction opens with its block.
            let compacted = anthropic
                && crate::formats::anthropic_compaction::opens_with_block(&messages[first]);
            if messages[first].role != Role::User && !compacted {
                push(
                    first,
                    rule::FIRST_NOT_USER,
                    format!(
                        "the first message must be from the user, not {}",
                        messages[first].role.name()
                    ),
                );
            }
        }
    }

    if anthropic {
        crate::formats::anthropic_compaction::check(messages, &mut push);
    }
    pair_calls_and_results(messages, &mut push);
    if let Some(check) = own_check {
        check(messages, &mut push);
    }

    if profile == Profile::Strict {
        check_strict(messages, &mut push);
    }
    out.sort_by_key(|p| p.index);
    out
}

/// Every call answered right after it, every result right after its call, no duplicates.
fn pair_calls_and_results(
    messages: &[Message<'_>],
    push: &mut impl FnMut(usize, &'static str, String),
) {
    let n = messages.len();
    // Where each call id was made (legacy calls have no id and pair by position only).
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    let mut answered_ids: HashSet<&str> = HashSet::new();
    // Result messages already accounted for by the block of the call before them.
    let mut in_region = vec![false; n];

    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Assistant && m.has_calls() {
            for c in m.calls() {
                if let Some(id) = c.id.as_deref() {
                    if let Some(&first) = call_at.get(id) {
                        push(
                            i,
                            rule::DUPLICATE_TOOL_CALL_ID,
                            format!("tool call id {id:?} was already used by message {first}"),
                        );
                    } else {
                        call_at.insert(id, i);
                    }
                }
            }
            let end = result_region_end(messages, i);
            let mut open: Vec<Option<&str>> = m.calls().map(|c| c.id.as_deref()).collect();
            for (j, rm) in messages.iter().enumerate().take(end).skip(i + 1) {
                in_region[j] = true;
                for r in rm.results() {
                    let id = r.id.as_deref();
                    if let Some(k) = open.iter().position(|&o| o == id) {
                        open.swap_remove(k);
                        if let Some(id) = id {
                            answered_ids.insert(id);
                        }
                    } else {
                        report_stray_result(j, id, &call_at, &answered_ids, i, push);
                    }
                }
            }
            if end < n {
                for id in open {
                    push(
                        end,
                        rule::MISSING_TOOL_RESULT,
                        format!(
                            "tool call {} of message {i} has no result before this message",
                            id_text(id)
                        ),
                    );
                }
            }
        } else if !in_region[i] {
            for r in m.results() {
                let id = r.id.as_deref();
                report_stray_result(i, id, &call_at, &answered_ids, usize::MAX, push);
            }
        }
    }
}

fn report_stray_result(
    at: usize,
    id: Option<&str>,
    call_at: &HashMap<&str, usize>,
    answered_ids: &HashSet<&str>,
    block_start: usize,
    push: &mut impl FnMut(usize, &'static str, String),
) {
    match id.and_then(|id| call_at.get(id).map(|&c| (id, c))) {
        Some((id, c)) if answered_ids.contains(id) => push(
            at,
            rule::DUPLICATE_TOOL_RESULT,
            format!("tool call {id:?} of message {c} already has a result"),
        ),
        Some((id, c)) if c != block_start => push(
            at,
            rule::RESULT_NOT_ADJACENT,
            format!("result for tool call {id:?} is not right after its call (message {c})"),
        ),
        _ => push(
            at,
            rule::ORPHAN_TOOL_RESULT,
            format!(
                "tool result for {} has no matching call before it",
                id_text(id)
            ),
        ),
    }
}

fn check_strict(messages: &[Message<'_>], push: &mut impl FnMut(usize, &'static str, String)) {
    let mut seen_other = false;
    let mut last: Option<(Role, usize)> = None;
    for (i, m) in messages.iter().enumerate() {
        if m.role.is_instruction() {
            if seen_other {
                push(
                    i,
                    rule::SYSTEM_NOT_FIRST,
                    format!("a {} message after the conversation started", m.role.name()),
                );
            }
            continue;
        }
        seen_other = true;
        // Tool results answer the assistant, as Anthropic's user-role results do; the results
        // of parallel calls are one turn.
        let prev_results = i > 0 && messages[i - 1].is_result_only();
        if m.is_result_only() && prev_results {
            continue;
        }
        let side = if m.role == Role::Assistant {
            Role::Assistant
        } else {
            Role::User
        };
        if let Some((prev, at)) = last {
            if prev == side {
                push(
                    i,
                    rule::NOT_ALTERNATING,
                    format!("two {} messages in a row (also message {at})", side.name()),
                );
            }
        }
        last = Some((side, i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Block;

    fn rules(msgs: &[Message<'_>], format: Format, profile: Profile) -> Vec<(usize, &'static str)> {
        validate(msgs, format, profile)
            .into_iter()
            .map(|p| (p.index.unwrap(), p.rule))
            .collect()
    }

    fn call<'a>(id: &str) -> Message<'a> {
        Message::new(
            Role::Assistant,
            vec![Block::tool_call(Some(id), "bash", "{}")],
        )
    }

    fn result<'a>(id: &str) -> Message<'a> {
        Message::new(Role::Tool, vec![Block::tool_result(Some(id), "ok")])
    }

    #[test]
    fn clean_openai() {
        let msgs = vec![
            Message::text(Role::System, "s"),
            Message::text(Role::User, "u"),
            call("a"),
            result("a"),
            Message::text(Role::Assistant, "done"),
            Message::text(Role::System, "mid-conversation system is fine for openai"),
            Message::text(Role::User, "u"),
            call("b"),
        ];
        assert!(rules(&msgs, Format::OpenAi, Profile::Format(Format::OpenAi)).is_empty());
        assert_eq!(
            rules(&msgs, Format::OpenAi, Profile::Strict),
            vec![(5, rule::SYSTEM_NOT_FIRST)]
        );
    }

    #[test]
    fn missing_result_is_reported_where_the_conversation_goes_on() {
        let msgs = vec![
            Message::text(Role::User, "u"),
            call("a"),
            Message::text(Role::User, "again"),
        ];
        assert_eq!(
            rules(&msgs, Format::OpenAi, Profile::Format(Format::OpenAi)),
            vec![(2, rule::MISSING_TOOL_RESULT)]
        );
    }

    #[test]
    fn orphan_late_and_duplicate_results() {
        let msgs = vec![
            Message::text(Role::User, "u"),
            result("x"),
            call("a"),
            result("a"),
            result("a"),
            Message::text(Role::Assistant, "..."),
            call("b"),
            Message::text(Role::User, "..."),
            result("b"),
            call("a"),
            result("a"),
        ];
        assert_eq!(
            rules(&msgs, Format::OpenAi, Profile::Format(Format::OpenAi)),
            vec![
                (1, rule::ORPHAN_TOOL_RESULT),
                (4, rule::DUPLICATE_TOOL_RESULT),
                (7, rule::MISSING_TOOL_RESULT),
                (8, rule::RESULT_NOT_ADJACENT),
                (9, rule::DUPLICATE_TOOL_CALL_ID),
            ]
        );
    }

    #[test]
    fn anthropic_rules() {
        let mut late_result = Message::new(Role::User, vec![Block::text("see:")]);
        late_result
            .blocks_mut()
            .push(Block::tool_result(Some("a"), "ok"));
        let msgs = vec![
            Message::text(Role::Assistant, "hi"),
            Message::text(Role::System, "no"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::tool_call(Some("a"), "bash", "{}"),
                    Block::thinking("late"),
                ],
            ),
            late_result,
            Message::new(Role::User, vec![]),
        ];
        assert_eq!(
            rules(&msgs, Format::Anthropic, Profile::Format(Format::Anthropic)),
            vec![
                (0, rule::FIRST_NOT_USER),
                (1, rule::INVALID_ROLE),
                (2, rule::THINKING_NOT_FIRST),
                (3, rule::TOOL_RESULT_NOT_FIRST),
                (4, rule::EMPTY_CONTENT),
            ]
        );
    }

    #[test]
    fn malformed_blocks_and_unknown_roles() {
        let mut no_text = Block::text("");
        no_text.texts.clear();
        no_text.malformed = Some("text");
        no_text.origin = Origin::Part(1);
        let msgs = vec![
            Message::new(Role::User, vec![Block::text("hi"), no_text]),
            Message::text(Role::Other, "abracadabra"),
        ];
        let problems = validate(&msgs, Format::OpenAi, Profile::Format(Format::OpenAi));
        assert_eq!(
            problems
                .iter()
                .map(|p| (p.index.unwrap(), p.rule))
                .collect::<Vec<_>>(),
            vec![(0, rule::MALFORMED_BLOCK), (1, rule::INVALID_ROLE)]
        );
        assert_eq!(problems[0].message, "content[1] has no \"text\"");
    }

    #[test]
    fn strict_alternation() {
        let msgs = vec![
            Message::text(Role::User, "a"),
            Message::text(Role::User, "b"),
            call("x"),
            result("x"),
            Message::text(Role::Assistant, "c"),
        ];
        assert_eq!(
            rules(&msgs, Format::OpenAi, Profile::Strict),
            vec![(1, rule::NOT_ALTERNATING)]
        );
    }
}

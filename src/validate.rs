//! Is this list of messages a request the provider accepts? (DESIGN, Invariant 1)
//!
//! Well-typed but provider-invalid input is reported as [`Problem`]s, never as an error: the
//! caller decides whether to repair, refuse, or send anyway. Each problem names the index of
//! the message where the provider would reject the request, a stable rule name, and a
//! readable explanation.
//!
//! Design note — thinking. Anthropic requires the thinking block that opens a tool loop to stay
//! with the results that follow it. Whether a request had thinking enabled is not in the
//! messages, and real Claude Code traffic (interleaved thinking) has loops whose first assistant
//! message has no thinking while a later one does — in 18 of 210 corpus prefixes a rule on the
//! opener flagged accepted requests, one on the last message 124. So validation checks only the
//! block order inside a message (`thinking_not_first`); the compactor keeps loops whole by
//! construction: no cut inside the pending loop, and its thinking is never dropped.

use crate::message::{Block, BlockKind, Format, Message, Origin, Role};
use crate::structure::result_region_end;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Which provider's rules to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    OpenAi,
    Anthropic,
    /// Gemini `contents` (see `crate::formats::gemini`).
    Gemini,
    /// The format's rules plus strict user/assistant alternation and system messages only
    /// first (some local chat templates need both).
    Strict,
    /// OpenAI Responses items (see `crate::formats::responses`).
    Responses,
    /// Responses with `store=false`: no item references, reasoning with its encrypted content.
    ResponsesStateless,
}

impl Profile {
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "openai" => Some(Profile::OpenAi),
            "anthropic" => Some(Profile::Anthropic),
            "gemini" => Some(Profile::Gemini),
            "strict" => Some(Profile::Strict),
            "responses" => Some(Profile::Responses),
            "responses_stateless" => Some(Profile::ResponsesStateless),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::OpenAi => "openai",
            Profile::Anthropic => "anthropic",
            Profile::Gemini => "gemini",
            Profile::Strict => "strict",
            Profile::Responses => "responses",
            Profile::ResponsesStateless => "responses_stateless",
        }
    }

    pub fn for_format(format: Format) -> Profile {
        match format {
            Format::OpenAi => Profile::OpenAi,
            Format::Anthropic => Profile::Anthropic,
            Format::Responses => Profile::Responses,
            Format::Gemini => Profile::Gemini,
        }
    }
}

/// The rules, by stable name.
pub mod rule {
    /// A role the format does not have (Anthropic: anything but user/assistant).
    pub const INVALID_ROLE: &str = "invalid_role";
    /// Anthropic (and strict): the first message must be from the user.
    pub const FIRST_NOT_USER: &str = "first_not_user";
    /// A tool result whose call appears nowhere before it.
    pub const ORPHAN_TOOL_RESULT: &str = "orphan_tool_result";
    /// A tool result whose call exists but not right before it.
    pub const RESULT_NOT_ADJACENT: &str = "result_not_adjacent";
    /// A call with no result before the conversation goes on (a trailing call may wait).
    pub const MISSING_TOOL_RESULT: &str = "missing_tool_result";
    /// Two calls with one id.
    pub const DUPLICATE_TOOL_CALL_ID: &str = "duplicate_tool_call_id";
    /// Two results for one call.
    pub const DUPLICATE_TOOL_RESULT: &str = "duplicate_tool_result";
    /// A tool call in a message that is not the assistant's.
    pub const MISPLACED_TOOL_CALL: &str = "misplaced_tool_call";
    /// A tool result in an assistant message.
    pub const MISPLACED_TOOL_RESULT: &str = "misplaced_tool_result";
    /// Anthropic: `tool_result` blocks must come before any other block of their message.
    pub const TOOL_RESULT_NOT_FIRST: &str = "tool_result_not_first";
    /// Anthropic: thinking blocks must open the assistant message.
    pub const THINKING_NOT_FIRST: &str = "thinking_not_first";
    /// Anthropic: empty content (allowed only for a final assistant prefill).
    pub const EMPTY_CONTENT: &str = "empty_content";
    /// Strict: user and assistant must alternate.
    pub const NOT_ALTERNATING: &str = "not_alternating";
    /// Strict: system/developer messages only at the start.
    pub const SYSTEM_NOT_FIRST: &str = "system_not_first";
    /// A content block without a field the provider requires: its `type`, a text block's
    /// `text`, a `tool_use`'s `id`/`name`/`input`, a `tool_result`'s `tool_use_id`, ...
    pub const MALFORMED_BLOCK: &str = "malformed_block";
    /// Responses: an output item whose call is not in the input.
    pub const ORPHAN_OUTPUT: &str = "orphan_output";
    /// Responses: a call item with no output before the conversation goes on.
    pub const MISSING_OUTPUT: &str = "missing_output";
    /// Responses: two call items with one `call_id`.
    pub const DUPLICATE_CALL_ID: &str = "duplicate_call_id";
    /// Responses: a reasoning item not followed by the item it belongs to.
    pub const REASONING_WITHOUT_ITEM: &str = "reasoning_without_item";
    /// Responses under `store=false`: an `item_reference`.
    pub const ITEM_REFERENCE_STATELESS: &str = "item_reference_stateless";
    /// Responses under `store=false`: a reasoning item without its encrypted content.
    pub const REASONING_NOT_STORED: &str = "reasoning_not_stored";
    /// Anthropic: a compaction block that is not the first block of the conversation.
    pub const COMPACTION_BLOCK_MISPLACED: &str = "compaction_block_misplaced";
    /// Anthropic: more than one compaction block with content.
    pub const COMPACTION_BLOCK_AMBIGUOUS: &str = "compaction_block_ambiguous";
}

/// One way in which a request would be rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Index of the offending message (`None` for the request as a whole).
    pub index: Option<usize>,
    /// Stable rule name (see [`rule`]).
    pub rule: &'static str,
    /// Readable explanation.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "message {i}: {} ({})", self.message, self.rule),
            None => write!(f, "{} ({})", self.message, self.rule),
        }
    }
}

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
    if format == Format::Responses {
        return crate::formats::responses::validate(messages, profile);
    }
    let mut out = Vec::new();
    let mut push = |index: usize, rule: &'static str, message: String| {
        out.push(Problem {
            index: Some(index),
            rule,
            message,
        })
    };
    let n = messages.len();
    let anthropic = format == Format::Anthropic;
    // Anthropic's rules that Gemini shares: the user first, no empty content.
    let user_parts = format.results_in_user_messages();

    // Roles and block placement.
    for (i, m) in messages.iter().enumerate() {
        let role_ok = match format {
            Format::Anthropic | Format::Gemini => matches!(m.role, Role::User | Role::Assistant),
            Format::OpenAi | Format::Responses => m.role != Role::Other,
        };
        if !role_ok {
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
        compaction_blocks(messages, &mut push);
    }
    pair_calls_and_results(messages, &mut push);
    if format == Format::Gemini {
        crate::formats::gemini::check(messages, &mut push);
    }

    if profile == Profile::Strict {
        check_strict(messages, &mut push);
    }
    out.sort_by_key(|p| p.index);
    out
}

/// Anthropic's compaction blocks: only as the first block of the conversation, only one with
/// content (see `crate::formats::anthropic_compaction`).
fn compaction_blocks(messages: &[Message<'_>], push: &mut impl FnMut(usize, &'static str, String)) {
    let first = messages.iter().position(|m| !m.role.is_instruction());
    let mut with_content = 0;
    for (i, k) in crate::formats::anthropic_compaction::blocks(messages) {
        if Some(i) != first || k != 0 || messages[i].role != Role::Assistant {
            push(
                i,
                rule::COMPACTION_BLOCK_MISPLACED,
                format!("content[{k}]: a compaction block must be the first block of the conversation, in an assistant message"),
            );
        }
        if messages[i].blocks[k]
            .texts
            .iter()
            .any(|t| !t.text().is_blank())
        {
            with_content += 1;
            if with_content == 2 {
                push(
                    i,
                    rule::COMPACTION_BLOCK_AMBIGUOUS,
                    format!("content[{k}]: a second compaction block with content"),
                );
            }
        }
    }
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
        assert!(rules(&msgs, Format::OpenAi, Profile::OpenAi).is_empty());
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
            rules(&msgs, Format::OpenAi, Profile::OpenAi),
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
            rules(&msgs, Format::OpenAi, Profile::OpenAi),
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
            rules(&msgs, Format::Anthropic, Profile::Anthropic),
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
        let problems = validate(&msgs, Format::OpenAi, Profile::OpenAi);
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

//! Gemini `contents` in the core: pairing calls and responses that carry no id, and the
//! validity rules Gemini adds to the common ones (DESIGN, Formats).
//!
//! Design note — ids. `function_call.id` / `function_response.id` are optional in the Gemini
//! API (the Developer API usually omits them). A response without an id answers a call of the
//! model content right before it: the first unanswered call with its name (then its order). So
//! after reading a whole list, id-less calls get a synthetic id (`gemini#<message>.<call>`) and
//! each id-less response the id of the call it answers; everything downstream (validation,
//! repair, tool blocks) then pairs by id as for the other formats. Synthetic ids never reach
//! the wire: the writer omits them. A response with no call to answer gets an id of its own,
//! and validation reports it as an orphan.
//!
//! Rules (each with the index of the content the API would reject, see [`rule`]): on top of the
//! common ones — roles only `user`/`model`, the user first, no empty `parts`, every call
//! answered, no response without its call — Gemini wants a function-call turn right after a
//! user turn (text or responses), all responses of a call turn in the one user content right
//! after it, and a part's `thought_signature` where the model put it: in a model content, on
//! its first function call when it made calls (the API's 400s: "Please ensure that function
//! call turn comes immediately after a user turn or after a function response turn", "...
//! function response turn comes immediately after a function call turn", "... the number of
//! function response parts is equal to the number of function call parts").

pub mod read;

use crate::message::{BlockKind, Message, Role};
use std::collections::HashMap;

/// The prefix of the ids given to calls and responses that came without one.
pub const SYNTHETIC_ID_PREFIX: &str = "gemini#";

/// Whether `id` was made by [`pair_ids`] (and must not be written back).
pub fn is_synthetic(id: &str) -> bool {
    id.starts_with(SYNTHETIC_ID_PREFIX)
}

/// The rules Gemini adds, by stable name.
pub mod rule {
    /// A function-call content right after another model content (or first).
    pub const CALL_NOT_AFTER_USER: &str = "function_call_not_after_user";
    /// A function response that is not in the user content right after its call's content.
    pub const RESPONSE_NOT_NEXT: &str = "function_response_not_next";
    /// A part's `thought_signature` away from where the model put it.
    pub const THOUGHT_SIGNATURE_SEPARATED: &str = "thought_signature_separated";
}

/// Give id-less calls and responses the ids that pair them (see the design note).
pub fn pair_ids(messages: &mut [Message<'_>]) {
    let mut prev_calls: Vec<(Option<String>, String, bool)> = Vec::new();
    for (i, msg) in messages.iter_mut().enumerate() {
        let m = &*msg;
        let needs_call_ids = m.calls().any(|c| c.id.is_none());
        let needs_result_ids = m.results().any(|r| r.id.is_none());
        if needs_call_ids || needs_result_ids {
            // The ids this content answers explicitly are not free for id-less responses.
            let explicit: Vec<String> = m.results().filter_map(|r| r.id.clone()).collect();
            for c in prev_calls.iter_mut() {
                if c.0.as_ref().is_some_and(|id| explicit.contains(id)) {
                    c.2 = true;
                }
            }
            let blocks = msg.blocks_mut();
            let mut n_call = 0;
            for (k, b) in blocks.iter_mut().enumerate() {
                match b.kind {
                    BlockKind::ToolCall => {
                        if b.id.is_none() {
                            b.id = Some(format!("{SYNTHETIC_ID_PREFIX}{i}.{n_call}"));
                        }
                        n_call += 1;
                    }
                    BlockKind::ToolResult if b.id.is_none() => {
                        let name = b.name.as_deref().unwrap_or_default();
                        let hit = prev_calls
                            .iter_mut()
                            .find(|c| !c.2 && c.1 == name)
                            .map(|c| {
                                c.2 = true;
                                c.0.clone()
                            });
                        b.id = Some(match hit.flatten() {
                            Some(id) => id,
                            None => format!("{SYNTHETIC_ID_PREFIX}{i}.r{k}"),
                        });
                    }
                    _ => {}
                }
            }
        }
        prev_calls = msg
            .calls()
            .map(|c| (c.id.clone(), c.name.clone().unwrap_or_default(), false))
            .collect();
    }
}

/// Check the rules Gemini adds (see the design note); `push(index, rule, text)`.
pub fn check(messages: &[Message<'_>], push: &mut dyn FnMut(usize, &'static str, String)) {
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Assistant && m.has_calls() {
            if i > 0 && messages[i - 1].role != Role::User {
                push(
                    i,
                    rule::CALL_NOT_AFTER_USER,
                    format!(
                        "a function call turn must come right after a user turn or a function \
                         response turn, not after a {} content",
                        gemini_role(messages[i - 1].role)
                    ),
                );
            }
            for c in m.calls() {
                if let Some(id) = c.id.as_deref() {
                    call_at.entry(id).or_insert(i);
                }
            }
        }
        for r in m.results() {
            let Some(&c) = r.id.as_deref().and_then(|id| call_at.get(id)) else {
                continue;
            };
            // Results the common rules accept (a run of result-only user contents after the
            // call) that Gemini does not: only the content right after the call may hold them.
            let in_run = c + 1 < i
                && messages[c + 1..i]
                    .iter()
                    .all(|x| x.role == Role::User && x.is_result_only());
            if in_run {
                push(
                    i,
                    rule::RESPONSE_NOT_NEXT,
                    format!(
                        "function response {} must be in the user content right after its call \
                         (content {})",
                        shown(r.id.as_deref()),
                        c + 1
                    ),
                );
            }
        }
        let signed: Vec<usize> = (0..m.blocks.len())
            .filter(|&k| m.blocks[k].signed)
            .collect();
        if signed.is_empty() {
            continue;
        }
        if m.role != Role::Assistant {
            push(
                i,
                rule::THOUGHT_SIGNATURE_SEPARATED,
                format!(
                    "parts[{}] carries a thought_signature in a {} content; only the model's \
                     own parts may",
                    signed[0],
                    gemini_role(m.role)
                ),
            );
            continue;
        }
        let first_call = m.blocks.iter().position(|b| b.kind == BlockKind::ToolCall);
        let signed_call = signed
            .iter()
            .copied()
            .find(|&k| m.blocks[k].kind == BlockKind::ToolCall);
        if let (Some(first), Some(k)) = (first_call, signed_call) {
            if !m.blocks[first].signed {
                push(
                    i,
                    rule::THOUGHT_SIGNATURE_SEPARATED,
                    format!(
                        "parts[{k}] carries the turn's thought_signature but the first function \
                         call (parts[{first}]) does not: the parts were separated"
                    ),
                );
            }
        }
    }
}

/// A role as Gemini names it.
pub fn gemini_role(role: Role) -> &'static str {
    match role {
        Role::Assistant => "model",
        r => r.name(),
    }
}

fn shown(id: Option<&str>) -> String {
    match id {
        Some(id) if is_synthetic(id) => "(without id)".to_owned(),
        Some(id) => format!("{id:?}"),
        None => "(without id)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Block;

    fn call<'a>(name: &str) -> Block<'a> {
        Block::tool_call(None, name, "{}")
    }

    fn response<'a>(name: &str) -> Block<'a> {
        let mut b = Block::tool_result(None, "{}");
        b.name = Some(name.to_owned());
        b
    }

    #[test]
    fn id_less_responses_pair_by_name_then_order() {
        let mut msgs = vec![
            Message::text(Role::User, "go"),
            Message::new(Role::Assistant, vec![call("a"), call("b"), call("a")]),
            Message::new(
                Role::User,
                vec![response("b"), response("a"), response("a")],
            ),
        ];
        pair_ids(&mut msgs);
        let calls: Vec<_> = msgs[1].calls().map(|c| c.id.clone().unwrap()).collect();
        let res: Vec<_> = msgs[2].results().map(|r| r.id.clone().unwrap()).collect();
        assert_eq!(
            res,
            vec![calls[1].clone(), calls[0].clone(), calls[2].clone()]
        );
        let problems = crate::validate::validate(
            &msgs,
            crate::message::Format::Gemini,
            crate::validate::Profile::Format(crate::message::Format::Gemini),
        );
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_response_two_contents_late_is_an_orphan() {
        let mut msgs = vec![
            Message::text(Role::User, "go"),
            Message::new(Role::Assistant, vec![call("a")]),
            Message::text(Role::User, "wait"),
            Message::new(Role::User, vec![response("a")]),
        ];
        pair_ids(&mut msgs);
        let rules: Vec<_> = crate::validate::validate(
            &msgs,
            crate::message::Format::Gemini,
            crate::validate::Profile::Format(crate::message::Format::Gemini),
        )
        .into_iter()
        .map(|p| p.rule)
        .collect();
        assert!(rules.contains(&"orphan_tool_result"), "{rules:?}");
        assert!(rules.contains(&"missing_tool_result"), "{rules:?}");
    }

    #[test]
    fn gemini_rules() {
        let mut signed = Block::tool_call(Some("2"), "a", "{}");
        signed.signed = true;
        let mut late = response("a");
        late.id = Some("2".to_owned());
        let mut msgs = vec![
            Message::text(Role::User, "go"),
            Message::text(Role::Assistant, "thinking aloud"),
            Message::new(Role::Assistant, vec![call("b"), signed]),
            Message::new(Role::User, vec![response("b")]),
            Message::new(Role::User, vec![late]),
        ];
        pair_ids(&mut msgs);
        let mut got = Vec::new();
        check(&msgs, &mut |i, r, _| got.push((i, r)));
        assert_eq!(
            got,
            vec![
                (2, rule::CALL_NOT_AFTER_USER),
                (2, rule::THOUGHT_SIGNATURE_SEPARATED),
                (4, rule::RESPONSE_NOT_NEXT),
            ]
        );
    }
}

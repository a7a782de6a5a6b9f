//! Reading a long conversation in blocks on the pool (`formats/value/read.rs`) and the warm path
//! of `check` with a state (only the messages the cache does not know are read): the same counts,
//! format and errors as reading one message after another, judged against the short path (under
//! 512 messages everything is read on the calling thread) and against each other.

use crate::{Compactor, ConversationState, Error, Format, Options};
use serde_json::{json, Value};

/// `n` Chat Completions messages: tool calls and results, English and Chinese.
fn chat(n: usize) -> Vec<Value> {
    let mut m =
        vec![json!({"role": "user", "content": "把 data/ 下的表汇总。Summarise the tables."})];
    let mut i = 0;
    while m.len() < n {
        let id = format!("c{i}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "cat", "arguments": format!("{{\"path\": \"t{i}.csv\"}}")}}]}));
        let row = if i % 2 == 0 {
            "表格的一行 "
        } else {
            "a row of the table "
        };
        m.push(json!({"role": "tool", "tool_call_id": id, "content": row.repeat(5 + i % 13)}));
        i += 1;
    }
    m.truncate(n);
    m
}

/// Each message's tokens, one at a time (every prefix of one message, counted on its own, is
/// read on the calling thread): what the blocks must add up to.
fn one_by_one(c: &Compactor, messages: &[Value], opts: &Options<'_>) -> Vec<usize> {
    let empty = c.check(&[], opts).unwrap().current_tokens;
    messages
        .iter()
        .map(|m| {
            c.check(std::slice::from_ref(m), opts)
                .unwrap()
                .current_tokens
                - empty
        })
        .collect()
}

#[test]
fn blocks_count_what_one_message_at_a_time_counts() {
    let c = Compactor::default();
    let messages = chat(1_500);
    let opts = Options::new().format(Format::OpenAi);
    let total: usize = one_by_one(&c, &messages, &opts).iter().sum();
    let check = c.check(&messages, &Options::new()).unwrap();
    let empty = c.check(&[], &opts).unwrap().current_tokens;
    assert_eq!(check.current_tokens, total + empty);
    assert_eq!((check.message_count, check.format), (1_500, Format::OpenAi));
}

#[test]
fn a_hint_in_a_late_block_decides_the_format() {
    // Anthropic only shows in message 1,300's block (a tool_use block): the format is detected
    // from every block's hints, as reading in order would.
    let mut messages: Vec<Value> = (0..1_400)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("turn {i}")}))
        .collect();
    messages[1_301] = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]});
    messages[1_302] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]});
    let c = Compactor::default();
    assert_eq!(
        c.check(&messages, &Options::new()).unwrap().format,
        Format::Anthropic
    );
    let state = ConversationState::new();
    let opts = Options::new().state(&state);
    for _ in 0..2 {
        // Cold, then warm (the format from the cached messages' hints).
        assert_eq!(c.check(&messages, &opts).unwrap().format, Format::Anthropic);
    }
}

#[test]
fn the_error_is_the_first_bad_message_in_order() {
    let c = Compactor::default();
    let mut messages = chat(2_000);
    messages[1_777] = json!({"role": "user", "content": 5});
    messages[901] = json!({"role": "user", "content": [{"type": "text", "text": 7}]});
    for opts in [Options::new(), Options::new().format(Format::OpenAi)] {
        let err = c.check(&messages, &opts).unwrap_err();
        let Error::Message(e) = &err else {
            panic!("{err}")
        };
        assert_eq!(
            (e.index(), e.field()),
            (Some(901), "content[0].text"),
            "{err}"
        );
        let err = c.plan(messages.clone(), &opts).unwrap_err();
        assert!(err.to_string().starts_with("message 901,"), "{err}");
    }
    let state = ConversationState::new();
    let err = c
        .check(&messages, &Options::new().state(&state))
        .unwrap_err();
    assert!(err.to_string().starts_with("message 901,"), "{err}");
}

#[test]
fn a_warm_check_recounts_what_changed_and_agrees_with_a_cold_one() {
    let c = Compactor::default();
    let system = json!("You are careful. 你很细心。");
    let tools = vec![
        json!({"type": "function", "function": {"name": "cat", "parameters": {"type": "object"}}}),
    ];
    let mut messages = chat(1_200);
    let state = ConversationState::new();
    let cold = |m: &[Value]| {
        c.check(m, &Options::new().system(&system).tools(&tools))
            .unwrap()
    };
    let warm = |m: &[Value]| {
        c.check(
            m,
            &Options::new().system(&system).tools(&tools).state(&state),
        )
        .unwrap()
    };
    assert_eq!(warm(&messages), cold(&messages));
    assert_eq!(state.cached_messages(), 1_200);
    assert_eq!(warm(&messages), cold(&messages), "all from the cache");
    // Edited in place (same length, other words; then longer), and appended to.
    messages[600]["content"] = json!("b row of the table ".repeat(11));
    messages[7]["content"] = json!("表格的一行 ".repeat(400));
    messages.push(json!({"role": "user", "content": "继续。Go on."}));
    let (w, k) = (warm(&messages), cold(&messages));
    assert_eq!(w, k);
    assert!(k.current_tokens > cold(&chat(1_200)).current_tokens);
}

//! Unit tests of the last block's cut (`last_block.rs`) and of the ladder that ends with it.

use super::*;
use crate::message::{Block, Conversation, Format, Message};
use crate::tokens::counter::{message_tokens, Framing, Tokenizer};

fn count() -> impl Fn(Text<'_>) -> usize {
    |t: Text<'_>| Tokenizer::Approx.count(t)
}

fn slots_of<'a>(conv: &Conversation<'a>) -> Vec<Slot<'a>> {
    (0..conv.messages.len())
        .map(|i| {
            let t = message_tokens(Tokenizer::Approx, &conv.messages[i], Framing::default());
            Slot::keep(conv, i, t, false)
        })
        .collect()
}

fn args(path: &str, body: &str) -> String {
    serde_json::json!({"command": "create", "path": path, "file_text": body}).to_string()
}

#[test]
fn level_frees_what_is_needed_above_the_floors() {
    // Sizes 1000 and 500, floors 100 and 400: freeing 600 caps both at 450 (550 + 50).
    assert_eq!(level(&[(1000, 100), (500, 400)], 600), 450);
    // Freeing 700 takes the small one to its floor: 1000 - 400 + 100 = 700.
    assert_eq!(level(&[(1000, 100), (500, 400)], 700), 400);
    // Freeing 1000 takes both to their floors (900 + 100 = 1000): the cap is at most 100.
    assert!(level(&[(1000, 100), (500, 400)], 1000) <= 100);
    // Not possible at all: 0 (everything to its floor).
    assert_eq!(level(&[(1000, 100), (500, 400)], 5000), 0);
    assert_eq!(level(&[], 10), 0);
}

#[test]
fn arguments_of_a_call_that_ran_are_cut_before_its_result() {
    let body = "line of html <div class=\"todo\">item</div>\n".repeat(120);
    let a = args("/workspace/todo/index.html", &body);
    let result = "File created successfully at /workspace/todo/index.html\n".repeat(10);
    let conv = Conversation::new(
        Format::OpenAi,
        vec![
            Message::text(Role::User, "make a todo app"),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("c1"), "str_replace_editor", a.as_str())],
            ),
            Message::new(Role::Tool, vec![Block::tool_result(Some("c1"), result.as_str())]),
        ],
    );
    let c = count();
    let mut slots = slots_of(&conv);
    let (args_before, result_before) = (slots[1].tokens, slots[2].tokens);
    let excess = args_before / 2;
    let cfg = PlanConfig::default();
    let (saved, record) = shorten_last_block(&mut slots, 1, excess, &cfg, &c as &dyn Count);
    assert!(saved >= excess, "saved {saved} < {excess}");
    assert_eq!(slots[2].tokens, result_before, "the result stays whole");
    assert_eq!(record.len(), 1);
    assert_eq!(record[0].index, 1);
    assert_eq!(record[0].action, Change::Shortened);
    assert!(record[0].detail.contains("arguments of str_replace_editor"), "{}", record[0].detail);
    // Still valid JSON with the same keys, the cut marked, the path kept.
    let cut = slots[1].view.blocks[0].texts[0].text().to_utf8().into_owned();
    let v: serde_json::Value = serde_json::from_str(&cut).expect("valid JSON");
    assert_eq!(v["path"], "/workspace/todo/index.html");
    assert!(is_cut(v["file_text"].as_str().unwrap()));
}

#[test]
fn results_and_arguments_go_to_their_floors_when_needed() {
    let body = "fn main() { println!(\"hello\"); }\n".repeat(200);
    let a = args("src/main.rs", &body);
    let out = "test result: ok. 1 passed; 0 failed\n".repeat(200);
    let conv = Conversation::new(
        Format::OpenAi,
        vec![
            Message::text(Role::User, "fix it"),
            Message::new(Role::Assistant, vec![Block::tool_call(Some("c1"), "editor", a.as_str())]),
            Message::new(Role::Tool, vec![Block::tool_result(Some("c1"), out.as_str())]),
        ],
    );
    let c = count();
    let mut slots = slots_of(&conv);
    let before = slots[1].tokens + slots[2].tokens;
    let (saved, record) = shorten_last_block(&mut slots, 1, before, &PlanConfig::default(), &c as &dyn Count);
    let _ = saved;
    assert_eq!(record.len(), 2);
    assert!(slots[1].tokens + slots[2].tokens < 120, "{} {}", slots[1].tokens, slots[2].tokens);
}


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
                vec![Block::tool_call(
                    Some("c1"),
                    "str_replace_editor",
                    a.as_str(),
                )],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("c1"), result.as_str())],
            ),
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
    assert!(
        record[0].detail.contains("arguments of str_replace_editor"),
        "{}",
        record[0].detail
    );
    // Still valid JSON with the same keys, the cut marked, the path kept.
    let cut = slots[1].view.blocks[0].texts[0]
        .text()
        .to_utf8()
        .into_owned();
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
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("c1"), "editor", a.as_str())],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("c1"), out.as_str())],
            ),
        ],
    );
    let c = count();
    let mut slots = slots_of(&conv);
    let before = slots[1].tokens + slots[2].tokens;
    let (saved, record) = shorten_last_block(
        &mut slots,
        1,
        before,
        &PlanConfig::default(),
        &c as &dyn Count,
    );
    let _ = saved;
    assert_eq!(record.len(), 2);
    assert!(
        slots[1].tokens + slots[2].tokens < 120,
        "{} {}",
        slots[1].tokens,
        slots[2].tokens
    );
}

fn item<'a>(role: Role, mut b: Block<'a>) -> Message<'a> {
    b.origin = crate::message::Origin::Item;
    Message::new(role, vec![b])
}

#[test]
fn thinking_pending_calls_reasoning_and_signed_parts_are_never_cut() {
    let long = "x".repeat(4000);
    let long_args = args("src/a.py", &long);
    // Anthropic: thinking and a call of the pending loop; the thinking stays as it is.
    let conv = Conversation::new(
        Format::Anthropic,
        vec![
            Message::text(Role::User, "go"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::thinking(long.as_str()),
                    Block::tool_call(Some("c1"), "editor", long_args.as_str()),
                ],
            ),
            Message::new(
                Role::User,
                vec![Block::tool_result(Some("c1"), long.as_str())],
            ),
            // A call still waiting for its result: its arguments are what will run.
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("c2"), "editor", long_args.as_str())],
            ),
        ],
    );
    let c = count();
    let mut slots = slots_of(&conv);
    let thinking = slots[1].view.blocks[0].texts[0]
        .text()
        .to_utf8()
        .into_owned();
    let pending = slots[3].tokens;
    shorten_last_block(
        &mut slots,
        1,
        100_000,
        &PlanConfig::default(),
        &c as &dyn Count,
    );
    assert_eq!(slots[1].view.blocks[0].texts[0].text().to_utf8(), thinking);
    assert!(
        is_cut(&slots[1].view.blocks[1].texts[0].text().to_utf8()),
        "the call that ran is cut"
    );
    assert!(slots[2].tokens < 100, "its result is cut");
    assert_eq!(slots[3].tokens, pending, "the pending call is whole");

    // Responses: the item after a reasoning item goes back as the model wrote it.
    let mut rs = Block::new(BlockKind::Reasoning);
    rs.opaque = true;
    let conv = Conversation::new(
        Format::Responses,
        vec![
            Message::text(Role::User, "go"),
            item(Role::Assistant, rs),
            item(
                Role::Assistant,
                Block::tool_call(Some("c1"), "editor", long_args.as_str()),
            ),
            item(Role::Tool, Block::tool_result(Some("c1"), long.as_str())),
        ],
    );
    let mut slots = slots_of(&conv);
    let call = slots[2].tokens;
    let (_, record) = shorten_last_block(
        &mut slots,
        1,
        100_000,
        &PlanConfig::default(),
        &c as &dyn Count,
    );
    assert_eq!(slots[2].tokens, call);
    assert_eq!(record.len(), 1, "only the output: {record:?}");
    assert_eq!(record[0].index, 3);

    // Gemini: a part with a thought_signature is never edited.
    let mut signed = Block::tool_call(Some("c1"), "editor", long_args.as_str());
    signed.signed = true;
    let conv = Conversation::new(
        Format::Gemini,
        vec![
            Message::text(Role::User, "go"),
            Message::new(Role::Assistant, vec![signed]),
            Message::new(Role::User, vec![Block::tool_result(Some("c1"), "ok")]),
        ],
    );
    let mut slots = slots_of(&conv);
    let call = slots[1].tokens;
    shorten_last_block(
        &mut slots,
        1,
        100_000,
        &PlanConfig::default(),
        &c as &dyn Count,
    );
    assert_eq!(slots[1].tokens, call);
}

#[test]
fn arguments_an_earlier_compaction_cut_are_cut_again() {
    let body = format!(
        "{}…[5000 chars omitted]…{}",
        "head of the file\n".repeat(40),
        "tail\n".repeat(40)
    );
    let a = args("docs/plan.md", &body);
    let conv = Conversation::new(
        Format::OpenAi,
        vec![
            Message::text(Role::User, "go"),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("c1"), "Write", a.as_str())],
            ),
            Message::new(Role::Tool, vec![Block::tool_result(Some("c1"), "written")]),
        ],
    );
    let c = count();
    let mut slots = slots_of(&conv);
    let before = slots[1].tokens;
    let (saved, record) = shorten_last_block(
        &mut slots,
        1,
        before / 2,
        &PlanConfig::default(),
        &c as &dyn Count,
    );
    assert!(saved >= before / 2, "{saved} of {before}");
    assert_eq!(record.len(), 1);
    let v: serde_json::Value =
        serde_json::from_str(&slots[1].view.blocks[0].texts[0].text().to_utf8())
            .expect("valid JSON");
    assert_eq!(v["path"], "docs/plan.md");
}

#[test]
fn assistant_text_is_cut_last_keeping_its_facts() {
    let text = format!(
        "{}see /etc/app/config.yaml and fix the KeyError {}",
        "我先看一下入口文件，然后检查配置。".repeat(30),
        "接下来运行测试。".repeat(30)
    );
    let out = "ok ".repeat(400);
    let conv = Conversation::new(
        Format::OpenAi,
        vec![
            Message::text(Role::User, "go"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::text(text.as_str()),
                    Block::tool_call(Some("c1"), "bash", "{\"cmd\": \"ls\"}"),
                ],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("c1"), out.as_str())],
            ),
        ],
    );
    let c = count();
    // A little: only the result is cut.
    let mut slots = slots_of(&conv);
    let text_tokens = block_tokens(
        &slots[1].view.blocks[0],
        Framing::default(),
        &c as &dyn Count,
    );
    shorten_last_block(&mut slots, 1, 50, &PlanConfig::default(), &c as &dyn Count);
    assert_eq!(
        block_tokens(
            &slots[1].view.blocks[0],
            Framing::default(),
            &c as &dyn Count
        ),
        text_tokens,
        "the text stays while the result can give"
    );
    // Everything: the text is cut too, its facts kept after the marker.
    let mut slots = slots_of(&conv);
    let (_, record) = shorten_last_block(
        &mut slots,
        1,
        100_000,
        &PlanConfig::default(),
        &c as &dyn Count,
    );
    let cut = slots[1].view.blocks[0].texts[0]
        .text()
        .to_utf8()
        .into_owned();
    assert!(is_cut(&cut), "{cut}");
    for f in ["/etc/app/config.yaml", "KeyError"] {
        assert!(cut.contains(f), "{f} missing from {cut}");
    }
    assert!(
        record
            .iter()
            .any(|r| r.detail.starts_with("assistant text")),
        "{record:?}"
    );
}

/// `plan` + `apply` with the rule summary (the whole ladder), in `Mode::Auto`.
fn ladder<'a>(
    conv: &Conversation<'a>,
    tokens: &[usize],
    cfg: &PlanConfig,
) -> crate::planner::Outcome<'a> {
    let c = count();
    let pinned = vec![false; conv.messages.len()];
    let p = crate::planner::plan(
        conv,
        tokens,
        0,
        &pinned,
        cfg,
        crate::planner::Mode::Auto,
        false,
        1.0,
        None,
        &c as &dyn Count,
    )
    .unwrap();
    p.apply(None, false, &c as &dyn Count)
}

/// The ladder end to end (`plan` + `apply`): a task, an old block to summarise and a last block
/// whose call wrote a long file. Without the argument cut the context is over; with it, it fits.
#[test]
fn the_ladder_fits_a_last_block_with_long_arguments() {
    let html = "<div class=\"todo-item\">buy milk</div>\n".repeat(150);
    let a = args("/workspace/todo/index.html", &html);
    let old = "ls output line\n".repeat(200);
    let conv = Conversation::new(
        Format::OpenAi,
        vec![
            Message::text(Role::User, "I want a VueJS todo app in /workspace/todo"),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("c0"), "bash", "{\"cmd\": \"ls\"}")],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("c0"), old.as_str())],
            ),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(
                    Some("c1"),
                    "str_replace_editor",
                    a.as_str(),
                )],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("c1"), "File created.")],
            ),
        ],
    );
    let tokens: Vec<usize> = conv
        .messages
        .iter()
        .map(|m| message_tokens(Tokenizer::Approx, m, Framing::default()))
        .collect();
    let cfg = PlanConfig::for_budget(1125);
    assert!(
        tokens[3] > cfg.soft,
        "the last block alone is over the soft threshold"
    );
    let o = ladder(&conv, &tokens, &cfg);
    assert!(!o.over_budget, "{:?}", o.over_budget_reason);
    assert!(o.tokens_after <= cfg.soft);
    let e = o
        .record
        .iter()
        .find(|r| r.index == 3)
        .expect("the call is named");
    assert_eq!(e.action, Change::Shortened);
    assert!(
        e.detail.contains("arguments of str_replace_editor"),
        "{}",
        e.detail
    );
    let views: Vec<Message<'_>> = o.slots.iter().map(|s| s.view.clone()).collect();
    assert!(crate::validate::validate(
        &views,
        Format::OpenAi,
        crate::validate::Profile::Format(Format::OpenAi)
    )
    .is_empty());
}

/// When even the smallest legal context is over, the reason names what did not fit: here the
/// images of the user's latest message.
#[test]
fn the_reason_names_an_image_that_does_not_fit() {
    let mut img = Block::new(BlockKind::Image);
    img.images = 1;
    let mut latest = Message::new(Role::User, vec![Block::text("what is wrong here?"), img]);
    latest.blocks_mut()[1].images = 1;
    let filler = "earlier talk about the bug ".repeat(200);
    let conv = Conversation::new(
        Format::OpenAi,
        vec![
            Message::text(Role::User, "fix the layout bug"),
            Message::text(Role::Assistant, filler.as_str()),
            Message::text(Role::User, filler.as_str()),
            Message::text(Role::Assistant, filler.as_str()),
            latest,
        ],
    );
    let framing = Framing {
        image_tokens: 3000,
        ..Framing::default()
    };
    let tokens: Vec<usize> = conv
        .messages
        .iter()
        .map(|m| message_tokens(Tokenizer::Approx, m, framing))
        .collect();
    // The user's words held to a small budget: over budget either way, the ladder keeps the
    // ledger within its budgets (the reason is about the image, not the words).
    let cfg = PlanConfig {
        framing,
        user_messages_budget_tokens: 562,
        ..PlanConfig::for_budget(1125)
    };
    let o = ladder(&conv, &tokens, &cfg);
    assert!(o.over_budget);
    let why = o.over_budget_reason.unwrap();
    assert!(
        why.contains("images") && why.contains("an image cannot be shortened"),
        "{why}"
    );
}

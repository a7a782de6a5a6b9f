//! Unit tests of the planner on views built in Rust (no Python).

use super::draft::Count;
use super::micro::head_and_tail;
use super::*;
use crate::message::{Block, Conversation, Format, Message, Role};
use crate::structure::analyze;
use crate::text::Text;
use crate::tokens::counter::{message_tokens, Tokenizer};
use crate::validate::validate;

fn count() -> impl Fn(Text<'_>) -> usize {
    |t: Text<'_>| Tokenizer::Approx.count(t)
}

fn tokens(conv: &Conversation<'_>) -> Vec<usize> {
    conv.messages
        .iter()
        .map(|m| message_tokens(Tokenizer::Approx, m, Framing::default()))
        .collect()
}

const BIG: &str = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ";

fn agent_run(blocks: usize) -> Conversation<'static> {
    let mut msgs = vec![
        Message::text(Role::System, "system prompt"),
        Message::text(Role::User, "fix the bug in src/lib.rs"),
    ];
    let ids: Vec<String> = (0..blocks).map(|i| format!("c{i}")).collect();
    let ids: &'static [String] = Box::leak(ids.into_boxed_slice());
    let out: &'static str = Box::leak(BIG.repeat(40).into_boxed_str());
    for id in ids {
        msgs.push(Message::new(
            Role::Assistant,
            vec![Block::tool_call(
                Some(id),
                "bash",
                "{\"cmd\": \"cargo test\"}",
            )],
        ));
        msgs.push(Message::new(
            Role::Tool,
            vec![Block::tool_result(Some(id), out)],
        ));
    }
    msgs.push(Message::text(Role::Assistant, "done"));
    Conversation::new(Format::OpenAi, msgs)
}

fn run(
    conv: &Conversation<'static>,
    cfg: &PlanConfig,
    mode: Mode,
    summary: Option<&str>,
) -> Outcome<'static> {
    let c = count();
    let t = tokens(conv);
    let pinned = vec![false; conv.messages.len()];
    let p = plan(
        conv,
        &t,
        0,
        &pinned,
        cfg,
        mode,
        false,
        1.0,
        None,
        &c as &dyn Count,
    )
    .unwrap();
    p.apply(summary, false, &c as &dyn Count)
}

fn out_views(o: &Outcome<'static>) -> Vec<Message<'static>> {
    o.slots.iter().map(|s| s.view.clone()).collect()
}

#[test]
fn tail_start_moves_back_to_a_legal_cut() {
    let conv = agent_run(5);
    let c = count();
    let slots: Vec<Slot<'_>> = (0..conv.messages.len())
        .map(|i| Slot::keep(&conv, i, 10, false))
        .collect();
    let _ = &c;
    // 13 messages; a tail of 2 would start inside the last tool block (index 11 is a result).
    let cfg = PlanConfig {
        keep_recent_messages: 2,
        ..PlanConfig::default()
    };
    let (head_end, tail_start) = head_and_tail(&slots, &cfg);
    assert_eq!(head_end, 2, "system + the task");
    assert_eq!(tail_start, 10, "the tail starts at the last block's call");
    let cuts = analyze(&conv.messages).cut_points;
    assert!(cuts.contains(&tail_start) && cuts.contains(&head_end));
}

#[test]
fn micro_clears_old_results_only() {
    let conv = agent_run(8);
    let cfg = PlanConfig {
        keep_recent_tool_results: 3,
        keep_recent_messages: 2,
        clear_at_least_tokens: 0,
        ..PlanConfig::for_budget(1_000_000)
    };
    let o = run(&conv, &cfg, Mode::Micro, None);
    assert_eq!(o.strategy.as_str(), "micro");
    let cleared: Vec<usize> = o
        .record
        .iter()
        .filter(|r| r.action.as_str() == "cleared")
        .map(|r| r.index)
        .collect();
    assert_eq!(cleared, vec![3, 5, 7, 9, 11], "8 results, the last 3 kept");
    assert!(validate(
        &out_views(&o),
        Format::OpenAi,
        crate::validate::Profile::Format(Format::OpenAi)
    )
    .is_empty());
    assert!(o.slots[0].out.is_keep() && o.slots[1].out.is_keep());
}

#[test]
fn summary_replaces_the_middle_and_fits() {
    let conv = agent_run(30);
    let total: usize = tokens(&conv).iter().sum();
    let cfg = PlanConfig {
        keep_recent_messages: 4,
        micro_threshold: usize::MAX,
        selective_rules: vec![],
        ..PlanConfig::for_budget(total / 2)
    };
    let c = count();
    let t = tokens(&conv);
    let pinned = vec![false; conv.messages.len()];
    let p = plan(
        &conv,
        &t,
        0,
        &pinned,
        &cfg,
        Mode::Auto,
        false,
        1.0,
        None,
        &c as &dyn Count,
    )
    .unwrap();
    let req = p.request(&c as &dyn Count).expect("a summary is needed");
    assert!(req.replaced_count > 40);
    assert!(req.user_prompt.contains("bash"));
    assert!(req.must_keep.iter().any(|f| f.contains("src/lib.rs")) || req.must_keep.is_empty());
    let o = p.apply(
        Some("<summary>Ran cargo test many times.</summary>"),
        false,
        &c as &dyn Count,
    );
    assert_eq!(o.strategy.as_str(), "summary");
    assert!(
        o.tokens_after <= cfg.soft,
        "{} > {}",
        o.tokens_after,
        cfg.soft
    );
    let views = out_views(&o);
    assert!(validate(
        &views,
        Format::OpenAi,
        crate::validate::Profile::Format(Format::OpenAi)
    )
    .is_empty());
    assert!(is_summary_text(&o.summary.clone().unwrap()));
    // Head kept, tail kept, summary right after the head.
    assert!(o.slots[0].out.is_keep() && o.slots[1].out.is_keep());
    assert!(!o.slots[2].out.is_keep());
    assert!(o.slots.last().unwrap().out.is_keep());
}

#[test]
fn rule_summary_when_no_text_and_incremental_second_time() {
    let conv = agent_run(30);
    let total: usize = tokens(&conv).iter().sum();
    let cfg = PlanConfig {
        keep_recent_messages: 4,
        ..PlanConfig::for_budget(total / 2)
    };
    let o = run(&conv, &cfg, Mode::Force, None);
    assert!(matches!(o.strategy.as_str(), "rule_summary" | "selective"));
}

#[test]
fn repair_inserts_synthetic_results() {
    let msgs = vec![
        Message::text(Role::User, "go"),
        Message::new(
            Role::Assistant,
            vec![Block::tool_call(Some("a"), "f", "{}")],
        ),
        Message::text(Role::User, "and?"),
    ];
    let conv = Conversation::new(Format::OpenAi, msgs);
    let o = run(&conv, &PlanConfig::default(), Mode::Auto, None);
    assert_eq!(o.repairs.len(), 1);
    assert!(validate(
        &out_views(&o),
        Format::OpenAi,
        crate::validate::Profile::Format(Format::OpenAi)
    )
    .is_empty());
    assert_eq!(o.slots.len(), 4);
}

#[test]
fn selective_drops_thinking_but_not_in_the_pending_loop() {
    let long: &'static str = Box::leak(BIG.repeat(60).into_boxed_str());
    let mut msgs = vec![Message::text(Role::User, "q0")];
    for i in 0..4 {
        msgs.push(Message::new(
            Role::Assistant,
            vec![Block::thinking(long), Block::text("answer")],
        ));
        msgs.push(Message::text(
            Role::User,
            if i == 3 { "last" } else { "more" },
        ));
    }
    msgs.push(Message::new(
        Role::Assistant,
        vec![
            Block::thinking(long),
            Block::tool_call(Some("t"), "f", "{}"),
        ],
    ));
    let conv = Conversation::new(Format::Anthropic, msgs);
    let total: usize = tokens(&conv).iter().sum();
    let cfg = PlanConfig {
        keep_recent_messages: 1,
        clear_at_least_tokens: 0,
        ..PlanConfig::for_budget(total * 7 / 10)
    };
    let o = run(&conv, &cfg, Mode::Auto, None);
    assert_eq!(o.strategy.as_str(), "selective");
    assert!(o
        .record
        .iter()
        .any(|r| r.action.as_str() == "thinking_dropped"));
    assert!(
        o.slots.last().unwrap().view.starts_with_thinking(),
        "the pending loop keeps its thinking"
    );
    assert!(validate(
        &out_views(&o),
        Format::Anthropic,
        crate::validate::Profile::Format(Format::Anthropic)
    )
    .is_empty());
}

#[test]
fn leading_instructions_stay_before_a_summary_replacing_an_earlier_one() {
    let long: &'static str = Box::leak(BIG.repeat(30).into_boxed_str());
    let old: &'static str =
        Box::leak(format!("{SUMMARY_MARKER} Earlier.\n\nOld summary.").into_boxed_str());
    let msgs = vec![
        Message::text(Role::System, old),
        Message::text(Role::System, "be brief"),
        Message::text(Role::Developer, "use tabs"),
        Message::text(Role::User, long),
        Message::text(Role::Assistant, long),
    ];
    let conv = Conversation::new(Format::OpenAi, msgs);
    for in_system in [false, true] {
        let cfg = PlanConfig {
            keep_first_messages: 0,
            keep_recent_messages: 0,
            summary_in_system: in_system,
            ..PlanConfig::for_budget(200)
        };
        let o = run(&conv, &cfg, Mode::Force, None);
        let sources: Vec<Option<usize>> = o.slots.iter().map(|s| s.source()).collect();
        assert_eq!(&sources[..2], &[Some(1), Some(2)], "{sources:?}");
        assert!(o.slots[0].out.is_keep() && o.slots[1].out.is_keep());
        assert_eq!(o.slots.len(), 3);
        assert!(is_summary_text(
            &o.slots[2].view.blocks[0].texts[0].text().to_utf8()
        ));
        let views = out_views(&o);
        assert!(validate(
            &views,
            Format::OpenAi,
            crate::validate::Profile::Format(Format::OpenAi)
        )
        .is_empty());
    }
}

#[test]
fn a_system_prompt_summary_is_counted_as_the_boundary_joins_it() {
    let long: &'static str = Box::leak(BIG.repeat(30).into_boxed_str());
    let msgs = vec![
        Message::text(Role::User, long),
        Message::text(Role::Assistant, long),
    ];
    let conv = Conversation::new(Format::Anthropic, msgs);
    let c = count();
    let t = tokens(&conv);
    let overhead = Framing::default().message_overhead_tokens;
    let cfg = PlanConfig {
        keep_first_messages: 0,
        keep_recent_messages: 0,
        summary_in_system: true,
        ..PlanConfig::for_budget(600)
    };
    let system = "be brief";
    let sys = overhead + c(Text::Utf8(system));
    for prompt in [
        SystemPrompt::Absent,
        SystemPrompt::Text(system.to_owned()),
        SystemPrompt::Blocks { empty: false },
        SystemPrompt::Blocks { empty: true },
    ] {
        let (sys, tools) = match prompt {
            SystemPrompt::Text(_) | SystemPrompt::Blocks { empty: false } => (sys, 7),
            _ => (0, 7),
        };
        let mut p = plan(
            &conv,
            &t,
            sys + tools,
            &[false, false],
            &cfg,
            Mode::Force,
            false,
            1.0,
            None,
            &c as &dyn Count,
        )
        .unwrap();
        p.set_system_prompt(prompt.clone(), sys);
        let o = p.apply(Some("<summary>Short.</summary>"), false, &c as &dyn Count);
        let summary = o
            .system_summary
            .clone()
            .expect("the summary goes to the system prompt");
        let returned = match &prompt {
            SystemPrompt::Absent => overhead + c(Text::Utf8(&summary)),
            SystemPrompt::Text(s) => overhead + c(Text::Utf8(&join_system_text(s, &summary))),
            SystemPrompt::Blocks { empty } => {
                sys + c(Text::Utf8(&summary)) + if *empty { overhead } else { 0 }
            }
        };
        let messages: usize = o.slots.iter().map(|s| s.tokens).sum();
        assert_eq!(o.tokens_after, messages + tools + returned, "{prompt:?}");
    }
}

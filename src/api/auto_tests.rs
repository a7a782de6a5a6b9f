//! `target_ratio = "auto"` through the Rust API: chosen per conversation from the state's observed
//! growth (the core's chooser, which Python calls too), reported in the result.

use crate::config::TargetRatio;
use crate::{Compactor, Config, ConversationState, Options, Urgency};
use serde_json::{json, Value};

fn conversation(calls: usize) -> Vec<Value> {
    let mut m = vec![
        json!({"role": "user", "content": "Summarise every table under data/ into report.md."}),
    ];
    for i in 0..calls {
        let id = format!("c{i}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\": \"cat f{i}\"}}")}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": "a data row of the table ".repeat(60)}));
    }
    m
}

fn auto() -> Compactor {
    Compactor::new(Config {
        max_context_tokens: 12_000,
        target_ratio: TargetRatio::Auto,
        ..Config::default()
    })
    .unwrap()
}

fn grown(c: &Compactor, messages: &[Value]) -> ConversationState {
    let state = ConversationState::new();
    for n in (3..messages.len()).step_by(2) {
        c.check(&messages[..n], &Options::new().state(&state))
            .unwrap();
    }
    state
}

#[test]
fn with_a_state_the_target_is_chosen_bounded_and_deterministic() {
    let c = auto();
    let messages = conversation(50);
    let (a, b) = (grown(&c, &messages), grown(&c, &messages));
    let r = c
        .compact(messages.clone(), &Options::new().state(&a))
        .unwrap();
    let again = c
        .compact(messages.clone(), &Options::new().state(&b))
        .unwrap();
    let ratio = r.target_ratio.unwrap();
    assert!((0.2..=0.7).contains(&ratio), "{ratio}");
    assert_ne!(ratio, 0.5, "chosen, not the fallback");
    assert_eq!(r.messages, again.messages, "deterministic");
    assert_eq!(again.target_ratio, Some(ratio));
    assert!(r.tokens_after <= c.check(&messages, &Options::new()).unwrap().threshold);
}

#[test]
fn without_a_state_half_the_budget_and_micro_aims_at_nothing() {
    let c = auto();
    let r = c.compact(conversation(50), &Options::new()).unwrap();
    assert_eq!(r.target_ratio, Some(0.5));
    let fixed = Compactor::with_window(12_000)
        .compact(conversation(50), &Options::new())
        .unwrap();
    assert_eq!(fixed.target_ratio, Some(0.5));
    assert_eq!(
        c.micro_compact(conversation(50), &Options::new())
            .unwrap()
            .target_ratio,
        None
    );
}

#[test]
fn the_due_point_lowers_the_threshold_check_compares_with() {
    let c = Compactor::new(Config {
        max_context_tokens: 40_000,
        target_ratio: TargetRatio::Auto,
        ..Config::default()
    })
    .unwrap();
    let all = conversation(200);
    let (before, more) = all.split_at(261);
    let state = grown(&c, before);
    assert_eq!(state.due_at(), None, "no due point before a compaction");
    let opts = Options::new().state(&state);
    let chosen = c.auto_target(before, &opts, false).unwrap();
    let r = c.compact(before.to_vec(), &opts).unwrap();
    assert_eq!(r.target_ratio, Some(chosen.ratio));
    let soft = c.config().soft_threshold();
    let due = state
        .due_at()
        .expect("a due point below the soft threshold");
    assert!(
        r.tokens_after < due && due < soft,
        "{} {due} {soft}",
        r.tokens_after
    );
    let mut messages = r.messages.clone();
    let mut early = 0;
    for pair in more.chunks(2) {
        messages.extend(pair.iter().cloned());
        let check = c.check(&messages, &opts).unwrap();
        assert_eq!(check.threshold, due);
        if check.current_tokens >= soft {
            break;
        }
        let want = if check.current_tokens >= due {
            early += 1;
            Urgency::Soft
        } else {
            Urgency::None
        };
        assert_eq!(check.urgency, want, "{} tokens", check.current_tokens);
        // Without the state, the configured soft threshold.
        let cold = c.check(&messages, &Options::new()).unwrap();
        assert_eq!((cold.threshold, cold.should_compact), (soft, false));
    }
    assert!(early > 0, "due before the soft threshold");
}

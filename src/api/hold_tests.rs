//! No compaction loops in the Rust API: after a compaction that could not get under the soft
//! threshold, `check` and `compact` with the same state hold the next one until the context grew
//! by `retry_growth_tokens`, with the Python API's figures on the same conversation
//! (`tests/test_no_loops.py`'s airline case: 4,860 tokens, held until 5,860).

use crate::{Compactor, Config, ConversationState, Options, Strategy, Urgency};
use serde_json::{json, Value};

fn system() -> Value {
    let rules: Vec<String> = (0..300)
        .map(|i| format!("Rule {i}: refunds of fare class {} need a reason.", i % 7))
        .collect();
    Value::String(format!("Airline policy. {}", rules.join(" ")))
}

fn turn(i: usize, words: usize) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!("Question {i}: {}", "please check the booking again ".repeat(words))}),
        json!({"role": "assistant", "content": format!("Answer {i}: the booking ABC{i} is confirmed.")}),
    ]
}

fn compactor() -> Compactor {
    let config: Config = serde_json::from_value(json!({
        "max_context_tokens": 7000, "reserve_tokens": 1000,
        "soft_threshold_tokens": 4000, "retry_growth_tokens": 1000,
    }))
    .unwrap();
    Compactor::new(config).unwrap()
}

#[test]
fn an_over_budget_compaction_holds_the_next_until_the_context_grew() {
    let (c, state, system) = (compactor(), ConversationState::new(), system());
    let mut msgs =
        vec![json!({"role": "user", "content": "Change my flight to Friday, keep the seat."})];
    for i in 0..12 {
        msgs.extend(turn(i, 8));
    }
    let opts = Options::new().system(&system).state(&state);
    let check = c.check(&msgs, &opts).unwrap();
    assert_eq!((check.urgency, check.current_tokens), (Urgency::Soft, 4860));
    let r = c.compact(msgs, &opts).unwrap();
    assert!(r.over_budget);
    assert_eq!((r.tokens_after, state.hold_until()), (4860, Some(5860)));
    let mut msgs = r.messages;
    msgs.extend(turn(100, 2));
    let check = c.check(&msgs, &opts).unwrap();
    assert_eq!(
        (check.urgency, check.current_tokens, check.held_until),
        (Urgency::None, 4897, Some(5860))
    );
    // Without the state: due as before.
    let fresh = Options::new().system(&system);
    assert_eq!(c.check(&msgs, &fresh).unwrap().urgency, Urgency::Soft);
    let r = c.compact(msgs.clone(), &opts).unwrap();
    assert_eq!(r.strategy, Strategy::None);
    assert!(
        r.reason.as_deref().unwrap_or("").starts_with("held:"),
        "{:?}",
        r.reason
    );
    // Grown past the hold: due again.
    let mut msgs = r.messages;
    let mut i = 200;
    while c.check(&msgs, &fresh).unwrap().current_tokens < 5860 {
        msgs.extend(turn(i, 4));
        i += 1;
    }
    let check = c.check(&msgs, &opts).unwrap();
    assert_eq!((check.urgency, check.held_until), (Urgency::Soft, None));
}

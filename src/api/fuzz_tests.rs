//! No panic on any JSON: arbitrary values as messages, system prompts and tools, and corpus
//! messages with one node replaced by an arbitrary value, through every entry point. Each gives
//! a result or a typed error; a `MessageError` names a message that exists.
//!
//! Brief under `cargo test` (32 cases a property); `make fuzz-rust` runs thousands
//! (`PROPTEST_CASES`).

use crate::{validate, Compactor, Error, Options, SummarizerFailure};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        // Words the readers look for, and anything.
        prop::sample::select(vec![
            "user",
            "assistant",
            "system",
            "tool",
            "developer",
            "model",
            "function",
            "text",
            "tool_use",
            "tool_result",
            "thinking",
            "redacted_thinking",
            "image",
            "image_url",
            "input_text",
            "output_text",
            "function_call",
            "function_call_output",
            "reasoning",
            "compaction",
            "message",
            "input_image",
            "data:image/png;base64,iVBORw0KGgo=",
            "",
            "上下文",
            "<summary>x</summary>",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
        ".{0,40}".prop_map(Value::String),
    ]
}

const KEYS: &[&str] = &[
    "role",
    "content",
    "type",
    "text",
    "tool_calls",
    "tool_call_id",
    "id",
    "function",
    "name",
    "arguments",
    "input",
    "tool_use_id",
    "is_error",
    "thinking",
    "data",
    "source",
    "image_url",
    "url",
    "parts",
    "function_call",
    "function_response",
    "response",
    "args",
    "call_id",
    "output",
    "summary",
    "encrypted_content",
    "refusal",
    "custom",
    "thought",
    "thought_signature",
    "inline_data",
    "mime_type",
];

fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Every entry point on `messages`: no panic, and an error names a message that exists.
fn exercise(messages: Vec<Value>, system: Option<&Value>, tools: &[Value]) {
    let n = messages.len();
    let named = |e: &Error| {
        if let Error::Message(m) = e {
            assert!(m.index().is_none_or(|i| i < n), "{e}");
        }
    };
    let mut opts = Options::new().tools(tools);
    if let Some(s) = system {
        opts = opts.system(s);
    }
    let small = Compactor::with_window(1_600);
    if let Err(e) = small.check(&messages, &opts) {
        named(&e);
    }
    if let Err(e) = validate(&messages, &opts) {
        named(&e);
    }
    for force in [false, true] {
        let o = opts.clone().force(force);
        if let Err(e) = small.compact(messages.clone(), &o) {
            named(&e);
        }
        let r = small.compact_with(messages.clone(), &o, |req| {
            if req.chunk % 2 == 0 {
                Ok("<summary>fixed</summary>".to_owned())
            } else {
                Err(SummarizerFailure::transient("flaky"))
            }
        });
        if let Err(e) = r {
            named(&e);
        }
    }
}

fn corpus() -> Vec<Vec<Value>> {
    let dir = std::env::var("CORPUS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus")
        });
    let Ok(entries) = std::fs::read_dir(dir.join("openai")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<Value>)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                serde_json::from_str(&text).ok()?,
            ))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    // The smaller transcripts: each case compacts one whole conversation.
    out.into_iter().map(|(_, m)| m).collect()
}

/// Replace the `k`-th node (in a walk of the value) by `with`.
fn replace_node(v: &mut Value, k: &mut usize, with: &Value) -> bool {
    if *k == 0 {
        *v = with.clone();
        return true;
    }
    *k -= 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|x| replace_node(x, k, with)),
        Value::Object(o) => o.values_mut().any(|x| replace_node(x, k, with)),
        _ => false,
    }
}

/// 32 cases a property, or `PROPTEST_CASES`.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_json_never_panics(
        messages in prop::collection::vec(json(), 0..8),
        system in prop::option::of(json()),
        tools in prop::collection::vec(json(), 0..2),
    ) {
        exercise(messages, system.as_ref(), &tools);
    }

    #[test]
    fn mutated_corpus_messages_never_panic(pick in any::<usize>(), node in any::<usize>(), with in json()) {
        let corpus = corpus();
        prop_assume!(!corpus.is_empty());
        // A window of up to 24 messages of one transcript (debug builds are slow on whole ones).
        let whole = &corpus[pick % corpus.len()];
        let start = (pick / 3) % whole.len().max(1);
        let mut messages = whole[start..whole.len().min(start + 24)].to_vec();
        let i = (pick / 7) % messages.len().max(1);
        if let Some(m) = messages.get_mut(i) {
            let mut k = node % 12;
            replace_node(m, &mut k, &with);
        }
        exercise(messages, None, &[]);
    }
}

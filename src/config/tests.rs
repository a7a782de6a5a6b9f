use super::raw::Raw;
use super::*;

fn doc(pairs: &[(&str, Raw)]) -> Raw {
    Raw::Map(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

fn err(pairs: &[(&str, Raw)]) -> ConfigError {
    Config::from_raw(&doc(pairs)).expect_err("a bad config")
}

#[test]
fn the_defaults_and_derived_values_are_designs() {
    let c = Config::default();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(
        (
            c.budget(),
            c.soft_threshold(),
            c.hard_threshold(),
            c.target_tokens()
        ),
        (120_000, 96_000, 120_000, 60_000)
    );
    let c = Config {
        max_context_tokens: 200_000,
        keep_recent_messages: 10,
        ..Config::default()
    };
    assert_eq!(
        (
            c.budget(),
            c.soft_threshold(),
            c.hard_threshold(),
            c.target_tokens()
        ),
        (192_000, 153_600, 192_000, 96_000)
    );
    let small = Config {
        max_context_tokens: 8_000,
        ..Config::default()
    };
    assert_eq!((small.reserve(), small.budget()), (2_000, 6_000));
    assert_eq!(
        Config::preset("development").unwrap().soft_threshold(),
        5_000
    );
}

#[test]
fn presets_follow_seed_000_and_overrides_win() {
    let dev = Config::preset("development").unwrap();
    assert_eq!(
        (
            dev.soft_threshold(),
            dev.hard_threshold(),
            dev.reserve_tokens
        ),
        (5_000, 8_000, Some(2_000))
    );
    assert_eq!((dev.keep_recent_messages, dev.summary_max_tokens), (4, 400));
    let prod = Config::from_raw(&doc(&[
        ("preset", Raw::Str("production".into())),
        ("keep_recent_messages", Raw::Int(8)),
    ]))
    .unwrap();
    assert_eq!(
        (
            prod.soft_threshold(),
            prod.hard_threshold(),
            prod.keep_recent_messages
        ),
        (15_000, 20_000, 8)
    );
    let large = Config::preset("large_context").unwrap();
    assert_eq!(
        (large.hard_threshold(), large.keep_recent_messages),
        (30_000, 10)
    );
    let e = Config::preset("huge").unwrap_err();
    assert_eq!(e.field(), "preset");
    assert_eq!(
        e.message(),
        "preset: unknown preset 'huge'; expected one of ('development', 'production', 'large_context')"
    );
}

#[test]
fn bad_values_name_the_field_with_pythons_message() {
    type Case<'a> = (Vec<(&'a str, Raw)>, &'a str, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (vec![("max_context_tokens", Raw::Int(0))], "max_context_tokens", "max_context_tokens: must be >= 1, got 0"),
        (vec![("max_context_tokens", Raw::Str("big".into()))], "max_context_tokens", "max_context_tokens: expected an int, got 'big'"),
        (vec![("reserve_tokens", Raw::Int(200_000))], "reserve_tokens", "reserve_tokens: must be below max_context_tokens (128000), got 200000"),
        (vec![("trigger_ratio", Raw::Float(1.5))], "trigger_ratio", "trigger_ratio: must be in (0, 1], got 1.5"),
        (vec![("trigger_ratio", Raw::Float(f64::NAN))], "trigger_ratio", "trigger_ratio: expected a number, got nan"),
        (vec![("target_ratio", Raw::Int(0))], "target_ratio", "target_ratio: must be in (0, 1], got 0"),
        (vec![("soft_threshold_tokens", Raw::Int(130_000))], "soft_threshold_tokens", "soft_threshold_tokens: the soft threshold (130000) is above the hard threshold (120000)"),
        (vec![("hard_threshold_tokens", Raw::Int(500_000)), ("soft_threshold_tokens", Raw::Int(10))], "hard_threshold_tokens", "hard_threshold_tokens: 500000 is above max_context_tokens (128000)"),
        (vec![("keep_recent_messages", Raw::Bool(true))], "keep_recent_messages", "keep_recent_messages: expected an int, got True"),
        (vec![("summary_role", Raw::Str("assistant".into()))], "summary_role", "summary_role: expected one of ('user', 'system', 'developer'), got 'assistant'"),
        (vec![("profile", Raw::Str("cohere".into()))], "profile", "profile: expected one of (None, 'openai', 'anthropic', 'responses', 'gemini', 'strict', 'responses_stateless'), got 'cohere'"),
        (vec![("summarizer_timeout_s", Raw::Int(0))], "summarizer_timeout_s", "summarizer_timeout_s: expected a number > 0, got 0"),
        (vec![("tokenizer", Raw::Str("gpt2".into()))], "tokenizer", "tokenizer: expected 'approx', 'o200k_base', 'cl100k_base' or a callable, got 'gpt2'"),
        (vec![("protected_tools", Raw::Str("bash".into()))], "protected_tools", "protected_tools: expected a sequence of tool names, got 'bash'"),
        (vec![("repair", Raw::Str("yes".into()))], "repair", "repair: expected a bool, got 'yes'"),
        (vec![("no_such_field", Raw::Int(1))], "no_such_field", "no_such_field: unknown configuration field"),
        (vec![("cooldown_calls", Raw::BigInt("18446744073709551616".into()))], "cooldown_calls", "cooldown_calls: must be <= 1000000000000, got 18446744073709551616"),
        (vec![("image_model", Raw::Str("gpt-2".into()))], "image_model", ""),
        (vec![("selective_rules", Raw::List(vec![doc(&[("item", Raw::Str("memes".into())), ("action", Raw::Str("drop".into())), ("priority", Raw::Int(1))])], false))], "selective_rules", "selective_rules: unknown item 'memes'; expected one of ('tool_results', 'thinking', 'images', 'assistant_text', 'user_text')"),
        (vec![("selective_rules", Raw::List(vec![doc(&[("item", Raw::Str("images".into()))])], false))], "selective_rules", "selective_rules: SelectiveRule.__init__() missing 2 required positional arguments: 'action' and 'priority'"),
    ];
    for (pairs, field, message) in cases {
        let e = err(&pairs);
        assert_eq!(e.field(), field, "{pairs:?}");
        if !message.is_empty() {
            assert_eq!(e.message(), message);
        }
    }
    let e = Config::from_raw(&Raw::List(vec![], false)).unwrap_err();
    assert_eq!(
        (e.field(), e.message()),
        ("config", "config: expected a mapping, got list")
    );
}

#[test]
fn the_first_bad_field_in_pythons_order_is_the_error() {
    // cooldown_calls is checked before summary_role, whatever order the document has.
    let e = err(&[
        ("summary_role", Raw::Str("x".into())),
        ("cooldown_calls", Raw::Int(-1)),
    ]);
    assert_eq!(e.field(), "cooldown_calls");
    // Unknown keys come before values.
    let e = err(&[("cooldown_calls", Raw::Int(-1)), ("nope", Raw::Int(1))]);
    assert_eq!(e.field(), "nope");
}

#[test]
fn a_config_round_trips_through_json() {
    let c = Config::from_raw(&doc(&[
        ("preset", Raw::Str("production".into())),
        (
            "protected_tools",
            Raw::List(vec![Raw::Str("memory".into())], false),
        ),
        ("tokenizer", Raw::Str("o200k_base".into())),
        ("profile", Raw::Str("anthropic".into())),
    ]))
    .unwrap();
    let json = serde_json::to_string(&c).unwrap();
    let back: Config = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
    let e = serde_json::from_str::<Config>(r#"{"trigger_ratio": 2}"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("trigger_ratio: must be in (0, 1], got 2"),
        "{e}"
    );
}

#[test]
fn field_names_are_the_serialised_ones() {
    let serde_json::Value::Object(m) = serde_json::to_value(Config::default()).unwrap() else {
        panic!("a map")
    };
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    let mut fields = FIELDS.to_vec();
    fields.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, fields);
}

#[test]
fn plan_config_carries_the_thresholds() {
    let p = Config::preset("production").unwrap().plan_config();
    assert_eq!((p.soft, p.hard, p.target), (15_000, 20_000, 10_000));
    assert_eq!(p.selective_rules.len(), 5);
}

/// Numbers compared as numbers (Python writes `1` where serde writes `1.0`).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The documents of `tests/data/configs/` give what Python's `CompactionConfig.from_dict` gave
/// for them before the rules moved here (`expected.json`, written by Python 0.2's own checks;
/// `tests/test_config_files.py` holds Python to the same file).
#[test]
fn one_config_file_configures_both_apis() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/configs");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let serde_json::Value::Object(expected) = expected else {
        panic!("expected.json is a mapping")
    };
    assert!(expected.len() >= 10);
    for (name, want) in &expected {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let raw: Raw = if name.ends_with(".toml") {
            toml::from_str(&text).unwrap()
        } else {
            serde_json::from_str(&text).unwrap()
        };
        match (
            Config::from_raw(&raw),
            want.get("config"),
            want.get("error"),
        ) {
            (Ok(c), Some(config), None) => {
                let got = serde_json::to_value(&c).unwrap();
                assert!(same(&got, config), "{name}: {got} != {config}");
                // Through serde's own entry point too.
                let again: Config = if name.ends_with(".toml") {
                    toml::from_str(&text).unwrap()
                } else {
                    serde_json::from_str(&text).unwrap()
                };
                assert_eq!(again, c, "{name}");
            }
            (Err(e), None, Some(error)) => {
                assert_eq!(e.field(), error["field"], "{name}");
                assert_eq!(e.message(), error["message"], "{name}");
                let via_serde = if name.ends_with(".toml") {
                    toml::from_str::<Config>(&text)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                } else {
                    serde_json::from_str::<Config>(&text)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                };
                let msg = via_serde.expect_err(name);
                assert!(msg.contains(e.message()), "{name}: {msg}");
            }
            (got, _, _) => panic!("{name}: {got:?} but expected {want}"),
        }
    }
}

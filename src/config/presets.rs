//! Seed 000's presets: `development`, `production`, `large_context`.
//!
//! `max_context_tokens` is the hard threshold plus the reserve, so the hard threshold is the
//! budget. A preset is a partial configuration: the fields it sets, over the defaults; a
//! configuration document's `preset` key starts from one, and its other keys override it.

use super::raw::Raw;

/// The preset names, in the order they are listed.
pub const NAMES: [&str; 3] = ["development", "production", "large_context"];

/// The fields a preset sets, in order (`None` for an unknown name).
pub fn fields(name: &str) -> Option<Vec<(&'static str, Raw)>> {
    let [window, soft, hard, reserve, recent, summary]: [i128; 6] = match name {
        "development" => [10_000, 5_000, 8_000, 2_000, 4, 400],
        "production" => [24_000, 15_000, 20_000, 4_000, 6, 800],
        "large_context" => [36_000, 25_000, 30_000, 6_000, 10, 1_200],
        _ => return None,
    };
    Some(vec![
        ("max_context_tokens", Raw::Int(window)),
        ("soft_threshold_tokens", Raw::Int(soft)),
        ("hard_threshold_tokens", Raw::Int(hard)),
        ("reserve_tokens", Raw::Int(reserve)),
        ("keep_recent_messages", Raw::Int(recent)),
        ("summary_max_tokens", Raw::Int(summary)),
    ])
}

/// The error of an unknown preset name (`repr` is the name as Python's `repr` shows it).
pub fn unknown(repr: &str) -> super::ConfigError {
    let names: Vec<Raw> = NAMES.iter().map(|n| Raw::Str((*n).into())).collect();
    super::ConfigError::new(
        "preset",
        format!(
            "unknown preset {repr}; expected one of {}",
            Raw::List(names, true).repr()
        ),
    )
}

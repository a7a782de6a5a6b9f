//! The separate system prompt with a `summary_role = "system"` summary (see the binding's
//! `python/plan.rs`, which this mirrors): what the planner counts, our earlier summary found in
//! it, and the prompt returned with the new summary in place of the old.

use crate::message::Conversation;
use crate::planner::{self, SystemPrompt};
use serde_json::{Map, Value};

/// A system string holding our summary: (the client's part, ours).
fn split_text(text: &str) -> Option<(&str, &str)> {
    let marker = planner::SUMMARY_MARKER;
    if text.trim_start().starts_with(marker) {
        return Some(("", text.trim_start()));
    }
    let at = text.rfind(&format!("\n\n{marker}"))?;
    Some((&text[..at], &text[at + 2..]))
}

/// How `apply` will return the system prompt with a summary in it.
pub(crate) fn prompt(system: Option<&Value>, conv: &Conversation<'_>) -> SystemPrompt {
    match system {
        None => SystemPrompt::Absent,
        Some(Value::String(text)) => match split_text(text) {
            Some(("", _)) => SystemPrompt::Absent,
            Some((client, _)) => SystemPrompt::Text(client.to_owned()),
            None => SystemPrompt::Text(text.clone()),
        },
        Some(_) => SystemPrompt::Blocks {
            empty: conv.system.is_empty(),
        },
    }
}

fn block_text(b: &Value) -> Option<&str> {
    let o = b.as_object()?;
    if o.get("type")?.as_str()? != "text" {
        return None;
    }
    o.get("text")?.as_str()
}

/// Our earlier summary in a system prompt: its text and, for a block list, the block's index.
pub(crate) fn summary_of(system: &Value) -> Option<(String, Option<usize>)> {
    match system {
        Value::String(text) => split_text(text).map(|(_, ours)| (ours.to_owned(), None)),
        Value::Array(blocks) => blocks.iter().enumerate().rev().find_map(|(i, b)| {
            block_text(b)
                .filter(|t| planner::is_summary_text(t))
                .map(|t| (t.to_owned(), Some(i)))
        }),
        _ => None,
    }
}

fn text_block(text: &str) -> Value {
    let mut d = Map::new();
    d.insert("type".into(), "text".into());
    d.insert("text".into(), text.into());
    Value::Object(d)
}

/// The system prompt returned with `summary` (None: the summary is a message) in place of our
/// earlier one: the client's own text and blocks unchanged, ours replaced where it was, or
/// added at the end.
pub(crate) fn with_summary(system: &Value, summary: Option<&str>) -> Value {
    if let Value::String(st) = system {
        let client = split_text(st).map_or(st.as_str(), |(c, _)| c);
        return match summary {
            Some(t) if client.is_empty() => t.into(),
            Some(t) => planner::join_system_text(client, t).into(),
            None => client.into(),
        };
    }
    let Value::Array(blocks) = system else {
        return system.clone();
    };
    let ours = summary_of(system).and_then(|(_, i)| i);
    if ours.is_none() && summary.is_none() {
        return system.clone();
    }
    let mut out = Vec::with_capacity(blocks.len() + 1);
    let mut placed = false;
    for (i, b) in blocks.iter().enumerate() {
        if Some(i) != ours {
            out.push(b.clone());
            continue;
        }
        if let Some(text) = summary {
            let mut blk = match b {
                Value::Object(o) => o.clone(),
                _ => {
                    let mut d = Map::new();
                    d.insert("type".into(), "text".into());
                    d
                }
            };
            blk.insert("text".into(), text.into());
            out.push(Value::Object(blk));
            placed = true;
        }
    }
    if let (Some(text), false) = (summary, placed) {
        out.push(text_block(text));
    }
    Value::Array(out)
}

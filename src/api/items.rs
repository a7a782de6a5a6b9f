//! Placing a provider's compaction items (DESIGN: "Provider compaction output"), the Rust API's
//! side of Python's `_provider_items.place_items`: same rule, same record, same figures (a parity
//! test runs both on the same case).
//!
//! The plan is applied with the rule summary, which fixes the span (a legal cut), and the one
//! summary message is then swapped for the provider's items:
//!
//! - OpenAI (`responses.compact`): the returned user messages and the one `compaction` item sit
//!   where the summary was; the kept head and tail stay as they are.
//! - Anthropic (the `compaction` beta): the block must open the conversation, so the assistant
//!   message holding it comes first and the kept head is dropped (recorded); the task is re-sent
//!   right after it unless the block's readable `content` holds the task's opening words.
//!
//! The ledger follows the items as a user message of ours (it starts with the summary marker),
//! with the must-keep facts the items do not show in its preserved details. A copy of our ledger
//! message the provider returned is dropped. The result must pass [`validate`](super::validate),
//! otherwise the compaction falls back to the rule summary with `fallback_reason` set.

use super::options::Options;
use super::result::{CompactResult, MessageOrigin, RecordEntry};
use super::Strategy;
use crate::summary::ledger::SENTINEL;
use crate::summary::SUMMARY_MARKER;
use crate::tokens::counter::{message_tokens, Framing, Tokenizer};
use serde_json::Value;

/// Who wrote a reply's compaction items ([`Reply::items`](super::Reply::items)): it decides
/// where they go and is the result's `summary_source`.
///
/// ```
/// use context_compactor::Provider;
/// assert_eq!(Provider::Anthropic.as_str(), "provider:anthropic");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI's `responses.compact`: its user messages and one `compaction` item, placed where
    /// the summary was.
    OpenAi,
    /// Anthropic's `compaction` beta: an assistant message holding the `compaction` block,
    /// which opens the conversation.
    Anthropic,
}

impl Provider {
    /// `"provider:openai"` or `"provider:anthropic"` (the result's `summary_source`).
    ///
    /// ```
    /// assert_eq!(context_compactor::Provider::OpenAi.as_str(), "provider:openai");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "provider:openai",
            Provider::Anthropic => "provider:anthropic",
        }
    }
}

/// A field of an object, `None` otherwise.
fn get<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    v.as_object().and_then(|o| o.get(name))
}

/// The readable text of a message or item (strings and text/content parts).
fn text(message: &Value) -> String {
    match get(message, "content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut out: Vec<&str> = Vec::new();
            for p in parts {
                if let Value::String(s) = p {
                    out.push(s);
                    continue;
                }
                for key in ["text", "content"] {
                    if let Some(Value::String(s)) = get(p, key) {
                        out.push(s);
                        break;
                    }
                }
            }
            out.join("\n")
        }
        _ => String::new(),
    }
}

/// Whether a message or item is a summary the library wrote (our ledger message).
pub(crate) fn ours(message: &Value) -> bool {
    matches!(
        get(message, "role").and_then(Value::as_str),
        Some("user" | "system" | "developer")
    ) && text(message).trim_start().starts_with(SUMMARY_MARKER)
}

/// Whitespace runs as one space (Python's `" ".join(s.split())`).
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The task's opening words: its first 60 characters, whitespace normalised (CJK-safe).
fn opening(s: &str) -> String {
    squash(s).chars().take(60).collect()
}

const HEADERS: [&str; 2] = ["\nArtifact trail:", "\n文件变更记录："];

/// The first of `HEADERS` in `ledger` from `start`, else its end.
fn next_header(ledger: &str, start: usize) -> usize {
    HEADERS
        .iter()
        .filter_map(|h| ledger[start..].find(h).map(|i| i + start))
        .min()
        .unwrap_or(ledger.len())
}

/// The ledger message that follows a provider's items: the marker, then the rule result's ledger
/// with the must-keep facts the items do not show added to its preserved details.
fn ledger_message(summary: &str, missing: &[String], language: &str) -> Option<String> {
    let mut ledger = match summary.find(SENTINEL) {
        Some(at) => summary[at..].to_owned(),
        None => SENTINEL.to_owned(),
    };
    let present: Vec<&String> = missing
        .iter()
        .filter(|f| !ledger.contains(f.as_str()))
        .collect();
    if !present.is_empty() {
        let header = if ledger.contains("\n保留的细节：") || language == "zh" {
            "保留的细节："
        } else {
            "Preserved details:"
        };
        let lines: String = present.iter().map(|f| format!("\n- {f}")).collect();
        let marked = format!("\n{header}");
        if let Some(at) = ledger.find(&marked) {
            let end = next_header(&ledger, at + marked.len());
            ledger.insert_str(end, &lines);
        } else {
            let end = next_header(&ledger, 0);
            ledger.insert_str(end, &format!("{marked}{lines}"));
        }
    }
    if ledger.trim() == SENTINEL {
        return None;
    }
    let intro = if language == "zh" {
        "此前的对话已由服务商压缩。"
    } else {
        "The earlier part of this conversation was compacted by the provider."
    };
    Some(format!("{SUMMARY_MARKER} {intro}\n\n{ledger}"))
}

/// Tokens of the messages alone (as Python's `measure(...).messages` with its default framing).
fn messages_tokens(
    messages: &[Value],
    system: Option<&Value>,
    tokenizer: Tokenizer,
) -> Result<usize, String> {
    let mut opts = Options::new();
    if let Some(s) = system {
        opts = opts.system(s);
    }
    let conv = super::options::read(messages, &opts, false).map_err(|e| e.to_string())?;
    let framing = Framing::default();
    Ok(conv
        .messages
        .iter()
        .map(|m| message_tokens(tokenizer, m, framing))
        .sum())
}

/// `rule` (the plan applied with the rule summary) with `items` in place of its summary message,
/// or why they cannot be placed (Python's `BadReply` text).
pub(crate) fn place(
    rule: CompactResult,
    provider: Provider,
    reply_text: &str,
    items: &[Value],
    truncated: bool,
    tokenizer: Tokenizer,
) -> Result<CompactResult, String> {
    let source = provider.as_str();
    let items: Vec<Value> = items.iter().filter(|m| !ours(m)).cloned().collect();
    if items.is_empty() {
        return Err(format!("{source} returned no items"));
    }
    let slots: Vec<usize> = (rule.origins.iter().enumerate())
        .filter(|(_, o)| **o == MessageOrigin::Summary)
        .map(|(k, _)| k)
        .collect();
    let [at] = slots[..] else {
        return Err(format!(
            "no single summary slot to place the items of {source} in"
        ));
    };
    let was = messages_tokens(&rule.messages, rule.system.as_ref(), tokenizer)?;
    let mut rule = rule;
    let tail: Vec<Value> = rule.messages.split_off(at + 1);
    rule.messages.pop();
    let head = std::mem::take(&mut rule.messages);
    let tail_o = rule.origins.split_off(at + 1);
    rule.origins.pop();
    let head_o = std::mem::take(&mut rule.origins);
    let visible = items.iter().map(text).collect::<Vec<_>>().join("\n");
    let mut record = std::mem::take(&mut rule.record);
    let (mut new, mut origins): (Vec<Value>, Vec<MessageOrigin>);
    if provider == Provider::Anthropic {
        let task_at = head
            .iter()
            .position(|m| get(m, "role").and_then(Value::as_str) == Some("user"));
        new = items.clone();
        origins = vec![MessageOrigin::Summary; items.len()];
        let resend = task_at.is_some_and(|t| !squash(&visible).contains(&opening(&text(&head[t]))));
        for (k, o) in head_o.iter().enumerate() {
            if resend && Some(k) == task_at {
                continue;
            }
            if let MessageOrigin::Kept(i) | MessageOrigin::Edited(i) = *o {
                record.push(RecordEntry {
                    index: i,
                    action: "dropped",
                    detail: "before the provider's compaction block".into(),
                });
            }
        }
        if let (true, Some(t)) = (resend, task_at) {
            new.push(head[t].clone());
            origins.push(head_o[t]);
        }
    } else {
        origins = head_o;
        origins.extend(std::iter::repeat_n(MessageOrigin::Summary, items.len()));
        new = head.clone();
        new.extend(items);
    }
    let missing: Vec<String> = (rule.must_keep.iter())
        .filter(|f| !visible.contains(f.as_str()))
        .cloned()
        .collect();
    let summary = rule.summary.clone().unwrap_or_default();
    if let Some(l) = ledger_message(&summary, &missing, rule.language) {
        new.push(serde_json::json!({"role": "user", "content": l}));
        origins.push(MessageOrigin::Inserted);
    }
    new.extend(tail.iter().cloned());
    origins.extend(tail_o);
    let mut opts = Options::new();
    if let Some(s) = rule.system.as_ref() {
        opts = opts.system(s);
    }
    let problems = super::validate(&new, &opts).map_err(|e| e.to_string())?;
    if let Some(p) = problems.first() {
        return Err(format!(
            "the items of {source} do not make a valid request: {} at message {}: {}",
            p.rule,
            p.index.map_or("None".to_owned(), |i| i.to_string()),
            p.message
        ));
    }
    // The rule result's count (system, tools, overheads) with its messages swapped.
    let now = messages_tokens(&new, rule.system.as_ref(), tokenizer)?;
    let tokens_after = (rule.tokens_after + now).saturating_sub(was);
    let retained = origins.iter().filter(|o| o.source().is_some()).count();
    Ok(CompactResult {
        summary: if !reply_text.is_empty() {
            Some(reply_text.to_owned())
        } else if !visible.is_empty() {
            Some(visible)
        } else {
            None
        },
        summary_source: Some(source),
        strategy: Strategy::Summary,
        tokens_after,
        retained_count: retained,
        compacted_count: rule.original_count.saturating_sub(retained),
        origins,
        record,
        must_keep_missing: Vec::new(),
        summary_truncated: truncated,
        messages: new,
        ..rule
    })
}

#[cfg(test)]
mod tests {
    use crate::{Compactor, ConversationState, Options, Provider, Reply, SummarizerFailure};
    use serde_json::{json, Value};

    const TASK: &str = "Port src/parser.py to Rust; see https://example.com/spec.html";

    fn responses() -> Vec<Value> {
        let mut m = vec![json!({"type": "message", "role": "user", "content": TASK})];
        for i in 0..30 {
            m.push(json!({"type": "message", "role": "assistant", "content": format!("step {i}: read lib/mod_{i}.rs {}", "and more ".repeat(12))}));
            m.push(json!({"type": "message", "role": "user", "content": format!("go on {i}")}));
        }
        m
    }

    fn anthropic() -> Vec<Value> {
        let mut m = vec![json!({"role": "user", "content": TASK})];
        for i in 0..30 {
            m.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("第 {i} 步：{}", "读了一个文件。".repeat(12))}]}));
            m.push(json!({"role": "user", "content": "继续"}));
        }
        m
    }

    fn item() -> Value {
        json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"})
    }

    fn block(content: &str) -> Value {
        json!({"role": "assistant", "content": [{"type": "compaction", "content": content, "encrypted_content": "x", "signature": "s"}]})
    }

    fn run(
        messages: Vec<Value>,
        reply: Reply,
        state: Option<&ConversationState>,
    ) -> crate::CompactResult {
        let mut opts = Options::new().force(true);
        if let Some(s) = state {
            opts = opts.state(s);
        }
        Compactor::with_window(3_000)
            .compact_with(messages, &opts, |_| {
                Ok::<_, SummarizerFailure>(reply.clone())
            })
            .unwrap()
    }

    #[test]
    fn openai_items_sit_where_the_summary_was_and_the_ledger_follows() {
        let input = responses();
        let r = run(
            input.clone(),
            Reply::new("").items(Provider::OpenAi, vec![item()]),
            None,
        );
        assert_eq!(r.summary_source, Some("provider:openai"));
        assert_eq!(r.messages[0], input[0], "the task kept as it was");
        let at = r
            .messages
            .iter()
            .position(|m| m["type"] == "compaction")
            .unwrap();
        assert_eq!(r.messages[at], item());
        assert_eq!(r.origins[at], crate::MessageOrigin::Summary);
        let ledger = r.messages[at + 1]["content"].as_str().unwrap();
        assert!(ledger.starts_with(crate::summary::SUMMARY_MARKER));
        assert!(!r.must_keep.is_empty());
        for fact in &r.must_keep {
            assert!(ledger.contains(fact.as_str()), "{fact} not in {ledger}");
        }
        assert_eq!(r.origins[at + 1], crate::MessageOrigin::Inserted);
        assert_eq!(r.messages.last(), input.last(), "the recent tail kept");
        assert!(r.fallback_reason.is_none() && r.must_keep_missing.is_empty());
        assert!(r.tokens_after < r.tokens_before);
        assert_eq!(r.retained_count + r.compacted_count, r.original_count);
    }

    #[test]
    fn the_anthropic_block_opens_and_the_task_follows_unless_it_holds_it() {
        let r = run(
            anthropic(),
            Reply::new("进展").items(Provider::Anthropic, vec![block("进展")]),
            None,
        );
        assert_eq!(r.messages[0]["content"][0]["type"], "compaction");
        assert_eq!(r.messages[1]["content"], TASK, "re-sent");
        assert_eq!(r.summary.as_deref(), Some("进展"));
        let held = format!("The user asked: {TASK}. Done: most of it.");
        let r = run(
            anthropic(),
            Reply::new(&*held).items(Provider::Anthropic, vec![block(&held)]),
            None,
        );
        assert!(
            r.messages.iter().all(|m| m["content"] != TASK),
            "not re-sent"
        );
        let dropped = r.record.iter().find(|e| e.index == 0).unwrap();
        assert_eq!(
            (dropped.action, dropped.detail.as_str()),
            ("dropped", "before the provider's compaction block")
        );
    }

    #[test]
    fn our_ledger_copy_is_dropped_and_no_items_fall_back_with_a_cooldown() {
        let ours = json!({"type": "message", "role": "user", "content": format!("{} old", crate::summary::SUMMARY_MARKER)});
        let r = run(
            responses(),
            Reply::new("").items(Provider::OpenAi, vec![ours.clone(), item()]),
            None,
        );
        assert!(!r.messages.contains(&ours));
        let state = ConversationState::new();
        let r = run(
            responses(),
            Reply::new("").items(Provider::OpenAi, vec![ours]),
            Some(&state),
        );
        assert_eq!(
            r.fallback_reason.as_deref(),
            Some("BadReply: provider:openai returned no items")
        );
        assert_eq!(r.summary_source, Some("rule"));
        assert!(state.cooldown_remaining() > 0, "the cool-down started");
    }

    #[test]
    fn items_that_make_an_invalid_request_give_the_rule_summary() {
        let stray = json!({"type": "function_call_output", "call_id": "nowhere", "output": "x"});
        let r = run(
            responses(),
            Reply::new("").items(Provider::OpenAi, vec![stray.clone()]),
            None,
        );
        let why = r.fallback_reason.unwrap();
        assert!(
            why.starts_with("BadReply: the items of provider:openai do not make a valid request"),
            "{why}"
        );
        assert!(!r.messages.contains(&stray));
        // The same through a plan applied by hand.
        let plan = Compactor::with_window(3_000)
            .plan(responses(), &Options::new().force(true))
            .unwrap();
        let r = plan
            .apply(Some(Reply::new("").items(Provider::OpenAi, vec![stray])))
            .unwrap();
        assert!(r.fallback_reason.unwrap().starts_with("BadReply: "));
        let plan = Compactor::with_window(3_000)
            .plan(responses(), &Options::new().force(true))
            .unwrap();
        let r = plan
            .apply(Some(Reply::new("").items(Provider::OpenAi, vec![item()])))
            .unwrap();
        assert_eq!(r.summary_source, Some("provider:openai"));
    }

    #[test]
    fn a_ledger_without_details_gets_them_in_its_language() {
        let missing = ["src/a.rs".to_owned(), "https://x.y/z".to_owned()];
        let m = super::ledger_message("", &missing, "zh").unwrap();
        assert!(
            m.contains("保留的细节：\n- src/a.rs\n- https://x.y/z"),
            "{m}"
        );
        assert!(m.contains("此前的对话已由服务商压缩。"));
        assert_eq!(
            super::ledger_message("", &[], "en"),
            None,
            "nothing to carry"
        );
        let with = format!(
            "narrative\n{}\nPreserved details:\n- a\nArtifact trail:\n- b",
            super::SENTINEL
        );
        let m = super::ledger_message(&with, &missing, "en").unwrap();
        assert!(
            m.contains("Preserved details:\n- a\n- src/a.rs\n- https://x.y/z\nArtifact trail:"),
            "{m}"
        );
        assert!(!m.contains("narrative"));
    }
}

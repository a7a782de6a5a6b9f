//! Runs the Rust API over a batch of jobs for `tests/test_rust_parity.py`, which compares the
//! output with the Python API's on the same messages.
//!
//! Input (argv[1], JSON): a list of jobs `{"messages", "system"?, "tools"?, "format"?,
//! "max_context_tokens", "summary"?, "items"?, "provider"?, "force"?}` (`summary`: a fixed text
//! every summarizer call returns; `items`: a provider's compaction items every call returns, with
//! `provider` `"provider:openai"` or `"provider:anthropic"`; absent: the rule summary;
//! `target_ratio`: `"auto"` or a ratio; `grow`: the prefix lengths checked with one
//! `ConversationState` before the compaction, which then uses it; `more`: messages appended to
//! the compacted ones, and `more_grow` the numbers of them checked with that state after the
//! compaction, each check reported in `after`). Output (stdout, JSON): one result per job, or
//! `{"error": text}`; with a state also `auto` (what `target_ratio = "auto"` chooses before the
//! compaction) and `due_at` (the state's after it).

use context_compactor::{
    Compactor, Config, ConversationState, Format, Options, Provider, Reply, SummarizerFailure,
};
use serde_json::{json, Value};

fn run(job: &Value) -> Value {
    let messages = job["messages"].as_array().cloned().unwrap_or_default();
    let tools = job["tools"].as_array().cloned().unwrap_or_default();
    let system = job.get("system").filter(|s| !s.is_null());
    let window = job["max_context_tokens"].as_u64().unwrap_or(128_000) as usize;
    let mut config = json!({"max_context_tokens": window});
    if let Some(t) = job.get("target_ratio").filter(|t| !t.is_null()) {
        config["target_ratio"] = t.clone();
    }
    let compactor = match serde_json::from_value::<Config>(config).map(Compactor::new) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return json!({"error": e.to_string()}),
        Err(e) => return json!({"error": e.to_string()}),
    };
    let state = ConversationState::new();
    let grow: Vec<usize> = job["grow"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|n| n.as_u64())
                .map(|n| n as usize)
                .collect()
        })
        .unwrap_or_default();
    let mut opts = Options::new()
        .tools(&tools)
        .force(job["force"].as_bool().unwrap_or(false));
    if let Some(s) = system {
        opts = opts.system(s);
    }
    if let Some(f) = job["format"].as_str().and_then(Format::parse) {
        opts = opts.format(f);
    }
    if job.get("grow").is_some_and(|g| !g.is_null()) {
        for &n in &grow {
            if let Err(e) = compactor.check(
                &messages[..n.min(messages.len())],
                &opts.clone().state(&state),
            ) {
                return json!({"error": e.to_string()});
            }
        }
        opts = opts.state(&state);
    }
    let check = match compactor.check(&messages, &opts) {
        Ok(c) => c,
        Err(e) => return json!({"error": e.to_string()}),
    };
    let provider = match job["provider"].as_str() {
        Some("provider:anthropic") => Provider::Anthropic,
        _ => Provider::OpenAi,
    };
    let stateful = job.get("grow").is_some_and(|g| !g.is_null());
    let summarizer = job["summary"].is_string() || job["items"].is_array();
    let auto = if stateful {
        match compactor.auto_target(&messages, &opts, summarizer) {
            Ok(a) => serde_json::to_value(a).unwrap_or(Value::Null),
            Err(e) => return json!({"error": e.to_string()}),
        }
    } else {
        Value::Null
    };
    let mut span: Option<Vec<usize>> = None;
    let result = match (job["summary"].as_str(), job["items"].as_array()) {
        (text, Some(items)) => compactor.compact_with(messages, &opts, |request| {
            span.get_or_insert_with(|| request.span.clone());
            let reply = Reply::new(text.unwrap_or_default()).items(provider, items.clone());
            Ok::<_, SummarizerFailure>(reply)
        }),
        (None, None) => compactor.compact(messages, &opts),
        (Some(text), None) => {
            compactor.compact_with(messages, &opts, |_| Ok::<_, SummarizerFailure>(text))
        }
    };
    let r = match result {
        Err(e) => return json!({"error": e.to_string()}),
        Ok(r) => r,
    };
    // The conversation goes on from the compacted messages: each check with the state (the
    // due point `"auto"` set lowers its threshold).
    let more = job["more"].as_array().cloned().unwrap_or_default();
    let mut after = Vec::new();
    for k in job["more_grow"].as_array().into_iter().flatten() {
        let k = k.as_u64().unwrap_or(0) as usize;
        let mut grown = r.messages.clone();
        grown.extend(more.iter().take(k).cloned());
        match compactor.check(&grown, &opts) {
            Ok(c) => after.push(json!({
                "urgency": c.urgency, "threshold": c.threshold, "current_tokens": c.current_tokens,
                "held_until": c.held_until,
            })),
            Err(e) => return json!({"error": e.to_string()}),
        }
    }
    json!({
            "check": {"urgency": check.urgency, "current_tokens": check.current_tokens, "format": check.format},
            "messages": r.messages,
            "system": r.system,
            "summary": r.summary,
            "strategy": r.strategy.as_str(),
            "summary_source": r.summary_source,
            "tokens_before": r.tokens_before,
            "tokens_after": r.tokens_after,
            "over_budget": r.over_budget,
            "retained_count": r.retained_count,
            "origins": r.origins.iter().map(|o| json!([o.as_str(), o.source()])).collect::<Vec<_>>(),
            "record": r.record.iter().map(|e| json!({"index": e.index, "action": e.action, "detail": e.detail})).collect::<Vec<_>>(),
            "repairs": r.repairs,
            "fallback_reason": r.fallback_reason,
            "compacted_count": r.compacted_count,
            "target_ratio": r.target_ratio,
            "span": span,
            "auto": auto,
            "due_at": state.due_at(),
            "after": after,
    })
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: parity JOBS.json");
    let text = std::fs::read_to_string(&path).expect("readable jobs file");
    let jobs: Vec<Value> = serde_json::from_str(&text).expect("a JSON list of jobs");
    let out: Vec<Value> = jobs.iter().map(run).collect();
    println!("{}", serde_json::to_string(&out).expect("JSON"));
}

//! Seed 000's four Tauri commands over the Rust API: plain functions over serde types, shaped as
//! `#[tauri::command]`s (add the attribute in a Tauri app; this example has no Tauri dependency).
//!
//! Per-conversation state lives in a map from `conversation_id` to a [`ConversationState`], as a
//! Tauri app keeps it in managed state (`app.manage(Compactors::default())`, then
//! `State<'_, Compactors>` in each command): counts, calibration and the cool-down carry over
//! from one call to the next. With `memory_flush_enabled`, the `on_before_compact` hook hands the
//! messages about to be replaced to the memory store first and reports how many memories it
//! stored (`flushed_memories`).
//!
//! Run it on a transcript: `cargo run --example tauri_commands -- conversation.json`.

use context_compactor::{Compactor, Config, ConversationState, Options, Urgency};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Seed 000's `CompactionConfig` (every field optional: the production preset fills the rest).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct CompactionConfig {
    pub soft_threshold_tokens: Option<usize>,
    pub hard_threshold_tokens: Option<usize>,
    pub reserve_tokens: Option<usize>,
    pub memory_flush_enabled: Option<bool>,
    pub keep_recent_messages: Option<usize>,
    pub summary_max_tokens: Option<usize>,
    pub use_llm: Option<bool>,
    pub llm_fallback_to_rules: Option<bool>,
}

/// Seed 000's `CompactionCheck`.
#[derive(Clone, Debug, Serialize)]
pub struct CompactionCheck {
    pub should_compact: bool,
    pub current_tokens: usize,
    pub threshold: usize,
    pub urgency: Urgency,
}

/// Seed 000's `CompactionResult`.
#[derive(Clone, Debug, Serialize)]
pub struct CompactionResult {
    pub compacted_messages: Vec<Value>,
    pub summary: String,
    pub original_count: usize,
    pub retained_count: usize,
    pub flushed_memories: usize,
    pub tokens_before_compaction: usize,
    pub tokens_after_compaction: usize,
}

/// The app's memory store (here: a list of remembered user sentences per agent).
#[derive(Default)]
pub struct MemoryStore {
    pub memories: Mutex<HashMap<String, Vec<String>>>,
}

impl MemoryStore {
    /// Remember what the user said in `messages`; how many memories were stored.
    fn flush(&self, agent_id: &str, messages: impl Iterator<Item = Value>) -> usize {
        let said: Vec<String> = messages
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str().map(str::to_owned))
            .filter(|t| !t.trim().is_empty())
            .collect();
        let n = said.len();
        let mut memories = self.memories.lock().unwrap_or_else(|e| e.into_inner());
        memories
            .entry(agent_id.to_owned())
            .or_default()
            .extend(said);
        n
    }
}

/// The managed state: one `ConversationState` per conversation, and the memory store.
#[derive(Default)]
pub struct Compactors {
    states: Mutex<HashMap<String, ConversationState>>,
    memory: Arc<MemoryStore>,
}

impl Compactors {
    fn state(&self, conversation_id: &str) -> ConversationState {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        states
            .entry(conversation_id.to_owned())
            .or_default()
            .clone()
    }
}

/// Seed 000's config on top of the production preset (`max_context_tokens` = hard + reserve).
fn config_of(c: Option<&CompactionConfig>) -> Result<Config, String> {
    let mut config = Config::preset("production").map_err(|e| e.to_string())?;
    let Some(c) = c else {
        return Ok(config);
    };
    if let Some(v) = c.soft_threshold_tokens {
        config.soft_threshold_tokens = Some(v);
    }
    if let Some(v) = c.hard_threshold_tokens {
        config.hard_threshold_tokens = Some(v);
    }
    if let Some(v) = c.reserve_tokens {
        config.reserve_tokens = Some(v);
    }
    if let Some(v) = c.keep_recent_messages {
        config.keep_recent_messages = v;
    }
    if let Some(v) = c.summary_max_tokens {
        config.summary_max_tokens = v;
    }
    let hard = config
        .hard_threshold_tokens
        .unwrap_or(config.max_context_tokens);
    config.max_context_tokens =
        hard.max(config.soft_threshold_tokens.unwrap_or(0)) + config.reserve();
    Ok(config)
}

/// `compactor_estimate_tokens(text)`.
pub fn compactor_estimate_tokens(text: String) -> usize {
    context_compactor::estimate_tokens(&text)
}

/// `compactor_estimate_messages_tokens(messages)`.
pub fn compactor_estimate_messages_tokens(messages: Vec<Value>) -> Result<usize, String> {
    let check = Compactor::default()
        .check(&messages, &Options::new())
        .map_err(|e| e.to_string())?;
    Ok(check.current_tokens)
}

/// `compactor_check_threshold(messages, config)`.
pub fn compactor_check_threshold(
    messages: Vec<Value>,
    config: Option<CompactionConfig>,
) -> Result<CompactionCheck, String> {
    let compactor = Compactor::new(config_of(config.as_ref())?).map_err(|e| e.to_string())?;
    let check = compactor
        .check(&messages, &Options::new())
        .map_err(|e| e.to_string())?;
    Ok(CompactionCheck {
        should_compact: check.should_compact,
        current_tokens: check.current_tokens,
        threshold: check.threshold,
        urgency: check.urgency,
    })
}

/// `compactor_compact(messages, agent_id, conversation_id, config)`, with the app's state.
pub fn compactor_compact(
    app: &Compactors,
    messages: Vec<Value>,
    agent_id: String,
    conversation_id: Option<String>,
    config: Option<CompactionConfig>,
) -> Result<CompactionResult, String> {
    let mut compactor = Compactor::new(config_of(config.as_ref())?).map_err(|e| e.to_string())?;
    if config
        .as_ref()
        .and_then(|c| c.memory_flush_enabled)
        .unwrap_or(true)
    {
        let memory = app.memory.clone();
        compactor = compactor.on_before_compact(move |preview| {
            let n = memory.flush(&agent_id, preview.replaced_messages().cloned());
            preview.flushed(n);
        });
    }
    let state = app.state(conversation_id.as_deref().unwrap_or("default"));
    let result = compactor
        .compact(messages, &Options::new().state(&state).force(true))
        .map_err(|e| e.to_string())?;
    Ok(CompactionResult {
        summary: result.summary.clone().unwrap_or_default(),
        original_count: result.original_count,
        retained_count: result.retained_count,
        flushed_memories: result.flushed_memories,
        tokens_before_compaction: result.tokens_before,
        tokens_after_compaction: result.tokens_after,
        compacted_messages: result.messages,
    })
}

fn main() -> Result<(), String> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: tauri_commands CONVERSATION.json")?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let messages: Vec<Value> = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let app = Compactors::default();
    let config = CompactionConfig {
        soft_threshold_tokens: Some(5_000),
        hard_threshold_tokens: Some(8_000),
        reserve_tokens: Some(2_000),
        keep_recent_messages: Some(4),
        summary_max_tokens: Some(400),
        memory_flush_enabled: Some(true),
        ..CompactionConfig::default()
    };
    let first = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let out = serde_json::json!({
        "estimate_tokens": compactor_estimate_tokens(first.to_owned()),
        "estimate_messages_tokens": compactor_estimate_messages_tokens(messages.clone())?,
        "check": compactor_check_threshold(messages.clone(), Some(config.clone()))?,
        "compact": compactor_compact(&app, messages, "agent-1".into(), Some("conv-1".into()), Some(config))?,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    Ok(())
}

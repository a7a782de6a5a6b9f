//! `ConversationState`: what one conversation remembers between calls (cached counts, the
//! calibration learned from the provider's usage, the cool-down after a summarizer failure, the
//! last summary), shared behind a lock so that a host can keep it in a map and use it from any
//! thread.

use crate::fingerprint::{hash_bytes, mix};
use crate::state::{State, Usage};
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard};

/// What one conversation remembers between calls: pass it in [`Options::state`](crate::Options::state)
/// to `check`, `plan` and `compact` for O(new messages) counting, calibration from the
/// provider's usage ([`observe_usage`](ConversationState::observe_usage)) and the cool-down
/// after a summarizer failure (`cooldown_calls`).
///
/// Cloning it gives a handle to the *same* state (it is an `Arc`): keep one per conversation,
/// in a map from the conversation's id (a Tauri app's managed state). `Send + Sync`.
///
/// ```
/// use context_compactor::{Compactor, ConversationState, Options};
/// use serde_json::json;
///
/// let state = ConversationState::new();
/// let messages = vec![json!({"role": "user", "content": "hello"})];
/// let compactor = Compactor::default();
/// let check = compactor.check(&messages, &Options::new().state(&state)).unwrap();
/// assert_eq!(state.cached_messages(), 1);
/// assert_eq!(check.calibration, 1.0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ConversationState {
    inner: Arc<Mutex<State>>,
}

impl ConversationState {
    /// A new, empty state.
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().compactions(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counts inconsistent in a way that
        // matters (a cache miss at worst): go on with the data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Learn from the prompt size the provider reported for the request last checked with this
    /// state (`usage.prompt_tokens`; Anthropic's is `input_tokens + cache_read_input_tokens +
    /// cache_creation_input_tokens`). Returns whether it was learned from: usage measured
    /// before the latest compaction, or on a tiny prompt, is ignored.
    ///
    /// ```
    /// use context_compactor::{Compactor, ConversationState, Options};
    /// use serde_json::json;
    ///
    /// let state = ConversationState::new();
    /// let messages = vec![json!({"role": "user", "content": "word ".repeat(400)})];
    /// let check = Compactor::default().check(&messages, &Options::new().state(&state)).unwrap();
    /// assert!(state.observe_usage(check.raw_tokens * 2));
    /// assert!(state.calibration() > 1.5);
    /// ```
    pub fn observe_usage(&self, prompt_tokens: usize) -> bool {
        let usage = Usage { prompt_tokens };
        self.lock().observe(usage, None).is_ok()
    }

    /// The learned ratio of real to counted tokens (1.0 until usage is observed).
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().calibration(), 1.0);
    /// ```
    pub fn calibration(&self) -> f64 {
        self.lock().ratio()
    }

    /// Messages whose counts are cached.
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().cached_messages(), 0);
    /// ```
    pub fn cached_messages(&self) -> usize {
        self.lock().cached()
    }

    /// Compactions applied with this state.
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().compactions(), 0);
    /// ```
    pub fn compactions(&self) -> u64 {
        self.lock().compactions()
    }

    /// Calls left that skip the summarizer after its failure (the rule summary is used).
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().cooldown_remaining(), 0);
    /// ```
    pub fn cooldown_remaining(&self) -> u32 {
        self.lock().cooldown_remaining
    }

    /// The summary of the latest compaction with this state.
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().last_summary(), None);
    /// ```
    pub fn last_summary(&self) -> Option<String> {
        self.lock().last_summary.clone()
    }

    /// Forget everything (a new conversation under the same id).
    ///
    /// ```
    /// let state = context_compactor::ConversationState::new();
    /// state.reset();
    /// assert_eq!(state.cached_messages(), 0);
    /// ```
    pub fn reset(&self) {
        self.lock().reset();
    }
}

/// A content fingerprint of a JSON message (the count cache's key, see `crate::state`): equal
/// messages have equal fingerprints; object keys are hashed in order.
pub(crate) fn fingerprint(v: &Value) -> u64 {
    fn walk(v: &Value, fp: u64, depth: usize) -> u64 {
        if depth > 128 {
            return mix(fp, 0xdead);
        }
        match v {
            Value::Null => mix(fp, 1),
            Value::Bool(b) => mix(fp, 2 + u64::from(*b)),
            Value::Number(n) => mix(mix(fp, 4), hash_bytes(n.to_string().as_bytes())),
            Value::String(s) => mix(mix(fp, 5), hash_bytes(s.as_bytes())),
            Value::Array(a) => {
                let mut fp = mix(fp, 6 + ((a.len() as u64) << 8));
                for x in a {
                    fp = walk(x, fp, depth + 1);
                }
                fp
            }
            Value::Object(o) => {
                let mut fp = mix(fp, 7 + ((o.len() as u64) << 8));
                for (k, x) in o {
                    fp = mix(fp, hash_bytes(k.as_bytes()));
                    fp = walk(x, fp, depth + 1);
                }
                fp
            }
        }
    }
    // 0 means "no fingerprint" to the cache.
    walk(v, 0x5EED, 0).max(1)
}

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

    /// [`observe_usage`](Self::observe_usage) from the provider's usage report as JSON: OpenAI's
    /// `{"prompt_tokens": ...}` (Chat Completions), or `{"input_tokens": ...}` (Responses;
    /// Anthropic, whose `cache_read_input_tokens` and `cache_creation_input_tokens` are added),
    /// or a bare number. A report of another shape is a [`MessageError`](crate::MessageError)
    /// naming the field `usage`.
    ///
    /// ```
    /// use context_compactor::{Compactor, ConversationState, Options};
    /// use serde_json::json;
    ///
    /// let state = ConversationState::new();
    /// let messages = vec![json!({"role": "user", "content": "word ".repeat(400)})];
    /// let check = Compactor::default().check(&messages, &Options::new().state(&state)).unwrap();
    /// let n = check.raw_tokens;
    /// let usage = json!({"input_tokens": n / 2, "cache_read_input_tokens": n, "cache_creation_input_tokens": n / 2});
    /// assert!(state.observe_usage_report(&usage).unwrap());
    /// assert!(state.calibration() > 1.9);
    /// assert!(state.observe_usage_report(&json!({"tokens": 3})).is_err());
    /// ```
    pub fn observe_usage_report(&self, usage: &Value) -> Result<bool, crate::Error> {
        let usage = parse_usage(usage)?;
        Ok(self.lock().observe(usage, None).is_ok())
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

    /// After a compaction that could not get under the soft threshold (`over_budget`, or short
    /// of the target with little room under it): the context size below which no compaction is
    /// due again, unless the hard threshold is crossed (`retry_growth_tokens`). `None`: no hold.
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().hold_until(), None);
    /// ```
    pub fn hold_until(&self) -> Option<usize> {
        self.lock().hold_until
    }

    /// With `target_ratio = "auto"`: the context size from which the next compaction is due,
    /// set after a compaction that got under the soft threshold (from `T + sqrt(2 (w/r) (T − F)
    /// g)`: the tokens after it, the fixed part, the write and read prices and the growth per
    /// call), when that is below the soft threshold; [`Compactor::check`](crate::Compactor::check)
    /// lowers its threshold to it. `None`: the soft threshold applies.
    ///
    /// ```
    /// assert_eq!(context_compactor::ConversationState::new().due_at(), None);
    /// ```
    pub fn due_at(&self) -> Option<usize> {
        self.lock().due_at
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

/// A provider's usage report: OpenAI's `prompt_tokens`, else `input_tokens` plus Anthropic's
/// cache reads and writes, or a bare number (as the Python API reads a usage object or dict).
pub(super) fn parse_usage(usage: &Value) -> Result<Usage, crate::formats::value::ReadError> {
    let bad = |reason: String| crate::formats::value::ReadError {
        index: None,
        field: "usage".into(),
        reason,
    };
    let count = |v: &Value, name: &str| -> Result<usize, crate::formats::value::ReadError> {
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| match v {
                Value::Number(_) => bad("token counts must be >= 0".into()),
                _ => bad(format!("{name} must be an int")),
            })
    };
    if let Value::Number(_) = usage {
        return count(usage, "usage").map(|prompt_tokens| Usage { prompt_tokens });
    }
    let get = |name: &str| match usage.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => count(v, name).map(Some),
    };
    if let Some(prompt_tokens) = get("prompt_tokens")? {
        return Ok(Usage { prompt_tokens });
    }
    if let Some(input) = get("input_tokens")? {
        let read = get("cache_read_input_tokens")?.unwrap_or(0);
        let created = get("cache_creation_input_tokens")?.unwrap_or(0);
        return Ok(Usage {
            prompt_tokens: input.saturating_add(read).saturating_add(created),
        });
    }
    Err(bad(
        "expected an int, or a usage with prompt_tokens (OpenAI) or input_tokens (Anthropic)"
            .into(),
    ))
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
            Value::String(s) => hash_str(mix(fp, 5), s.as_bytes()),
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
                    fp = hash_str(fp, k.as_bytes());
                    fp = walk(x, fp, depth + 1);
                }
                fp
            }
        }
    }
    // 0 means "no fingerprint" to the cache.
    walk(v, 0x5EED, 0).max(1)
}

/// Mix the bytes of a string into `fp`, then its length. A warm `check` with a state
/// fingerprints every message (the cache hit is decided before any reading), so this is most of
/// its cost: the byte-wise SipHash of `hash_bytes` ran at ~1.5 GB/s. A long string goes through
/// four independent lanes of xxHash64's round (a multiply and a rotation per 8 bytes, the lanes'
/// multiplies overlapping), folded with [`mix`]; the rest, eight bytes at a time, through [`mix`].
/// (Python's walk reuses the hash CPython caches inside each string; a JSON value caches none.)
fn hash_str(mut fp: u64, b: &[u8]) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    fn word(b: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(w)
    }
    fn round(acc: u64, w: u64) -> u64 {
        acc.wrapping_add(w.wrapping_mul(P2))
            .rotate_left(31)
            .wrapping_mul(P1)
    }
    let mut blocks = b.chunks_exact(32);
    if b.len() >= 32 {
        let mut lanes = [
            fp.wrapping_add(P1).wrapping_add(P2),
            fp.wrapping_add(P2),
            fp,
            fp.wrapping_sub(P1),
        ];
        for block in &mut blocks {
            for (lane, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                *lane = round(*lane, word(w));
            }
        }
        fp = lanes.iter().fold(fp, |fp, &lane| mix(fp, lane));
    }
    for w in blocks.remainder().chunks(8) {
        fp = mix(fp, word(w));
    }
    mix(fp, b.len() as u64)
}

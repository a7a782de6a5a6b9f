//! [`ConversationState::observe_usage_on`]: a usage report matched with the messages it was
//! measured on (read as `check` reads them; its own module, as it needs both the state and the
//! reader of [`Options`](crate::Options), which refers to the state).

use super::state::ConversationState;
use serde_json::Value;

impl ConversationState {
    /// [`observe_usage_report`](Self::observe_usage_report) for the request made of these
    /// `messages` (with the system prompt, tools and format of `opts`; its `state` is not read)
    /// rather than the last one checked: a report that arrives after the next `check`, or one
    /// measured before the latest compaction (then ignored: `Ok(false)`), is matched with the
    /// messages it was measured on. They are counted with the tokenizer of this state's last
    /// `check` (the default one before any).
    ///
    /// ```
    /// use context_compactor::{Compactor, ConversationState, Options};
    /// use serde_json::json;
    ///
    /// let state = ConversationState::new();
    /// let sent = vec![json!({"role": "user", "content": "word ".repeat(400)})];
    /// let raw = Compactor::default().check(&sent, &Options::new().state(&state)).unwrap().raw_tokens;
    /// let mut next = sent.clone();
    /// next.push(json!({"role": "assistant", "content": "more ".repeat(400)}));
    /// Compactor::default().check(&next, &Options::new().state(&state)).unwrap();
    /// // The report of the first request, after the second check.
    /// let usage = json!({"prompt_tokens": raw * 3 / 2});
    /// assert!(state.observe_usage_on(&usage, &sent, &Options::new()).unwrap());
    /// assert!((state.calibration() - 1.5).abs() < 0.01);
    /// ```
    pub fn observe_usage_on(
        &self,
        usage: &Value,
        messages: &[Value],
        opts: &crate::Options<'_>,
    ) -> Result<bool, crate::Error> {
        use crate::state::CounterKey;
        use crate::tokens::counter::Tokenizer;
        use crate::tokens::counter::{system_tokens, tools_tokens, Framing};
        let usage = super::state::parse_usage(usage)?;
        let mut conv = super::options::read(messages, opts, false)?;
        for (m, v) in conv.messages.iter_mut().zip(messages) {
            m.fingerprint = super::state::fingerprint(v);
        }
        let (key, framing) = self
            .lock()
            .counter_key()
            .unwrap_or((CounterKey::Builtin(Tokenizer::Approx), Framing::default()));
        let CounterKey::Builtin(t) = key else {
            return Ok(false); // never with the Rust API: its counters are the built-in ones
        };
        let fps: Vec<u64> = conv.messages.iter().map(|m| m.fingerprint).collect();
        let mut st = self.lock();
        let raw = st.measure(t, framing, &conv.messages).iter().sum::<usize>()
            + system_tokens(t, &conv.system, framing)
            + tools_tokens(t, &conv.tools);
        Ok(st.observe(usage, Some((raw, &fps))).is_ok())
    }
}

//! `Compactor`: the immutable, thread-safe entry point of the Rust API, and `Check`.

use super::error::{ConfigError, Error, InvalidConversation};
use super::hooks::{AfterHook, BeforeHook};
use super::options::{read, read_counted, Options};
use super::plan::Plan;
use super::settings::Settings;
use super::state::{fingerprint, ConversationState};
use super::system;
use crate::config::auto_target::{auto_target, AutoTarget};
use crate::config::{Config, TargetRatio};
use crate::formats::value::Reader;
use crate::message::{Conversation, FormatHints};
use crate::planner::{self, Mode};
use crate::state::CounterKey;
use crate::text::Text;
use crate::tokens::counter::{message_tokens, system_tokens, tools_tokens};
use crate::Format;
use serde_json::Value;
use std::sync::Arc;

/// How close a conversation is to its window.
///
/// ```
/// use context_compactor::Urgency;
/// assert!(Urgency::Hard > Urgency::Soft);
/// assert_eq!(Urgency::Soft.as_str(), "soft");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Urgency {
    /// Below the soft threshold.
    None,
    /// From the soft threshold: compact now or at the end of the turn.
    Soft,
    /// From the hard threshold: compact before sending.
    Hard,
}

impl Urgency {
    /// `"none"`, `"soft"` or `"hard"`.
    ///
    /// ```
    /// assert_eq!(context_compactor::Urgency::None.as_str(), "none");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::None => "none",
            Urgency::Soft => "soft",
            Urgency::Hard => "hard",
        }
    }
}

/// Where a conversation stands against its window ([`Compactor::check`]).
///
/// ```
/// use context_compactor::{Compactor, Options, Urgency};
/// let check = Compactor::default()
///     .check(&[serde_json::json!({"role": "user", "content": "hello"})], &Options::new())
///     .unwrap();
/// assert_eq!(check.urgency, Urgency::None);
/// assert!(!check.should_compact);
/// assert_eq!(check.threshold, 96_000);
/// ```
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Check {
    /// `urgency != Urgency::None`.
    pub should_compact: bool,
    /// How close the conversation is to its window.
    pub urgency: Urgency,
    /// The request's tokens (calibrated when the state learned a ratio).
    pub current_tokens: usize,
    /// The soft threshold; with `target_ratio = "auto"` and a state, the due point the last
    /// compaction set when it is lower ([`ConversationState::due_at`]).
    pub threshold: usize,
    /// The hard threshold.
    pub hard_threshold: usize,
    /// `max_context_tokens - reserve` (over it is over the window).
    pub budget: usize,
    /// Where a compaction would aim.
    pub target_tokens: usize,
    /// The count before calibration.
    pub raw_tokens: usize,
    /// The ratio applied (1.0 without a state or before any usage was observed).
    pub calibration: f64,
    /// Number of messages.
    pub message_count: usize,
    /// Whether automatic micro-compaction would run.
    pub micro_due: bool,
    /// The detected (or given) format.
    pub format: Format,
    /// With a state: the context size the next compaction waits for, when it is held back (the
    /// last one could not get under the soft threshold, `retry_growth_tokens`); `urgency` is
    /// then `None` although the soft threshold is crossed. `None` otherwise.
    pub held_until: Option<usize>,
}

impl Check {
    /// `current_tokens / budget`.
    ///
    /// ```
    /// # use context_compactor::{Compactor, Options};
    /// # let check = Compactor::default().check(&[serde_json::json!({"role": "user", "content": "hi"})], &Options::new()).unwrap();
    /// assert!(check.usage_ratio() < 0.01);
    /// ```
    pub fn usage_ratio(&self) -> f64 {
        if self.budget == 0 {
            0.0
        } else {
            self.current_tokens as f64 / self.budget as f64
        }
    }
}

/// Keeps a conversation inside the model's window. Immutable and `Send + Sync`: share one
/// (behind an `Arc`, or clone it: clones share the configuration) across threads; what a
/// conversation remembers between calls lives in a [`ConversationState`].
///
/// ```
/// use context_compactor::{Compactor, Options};
/// use serde_json::json;
///
/// let compactor = Compactor::default();
/// let messages = vec![json!({"role": "user", "content": "hello"})];
/// let check = compactor.check(&messages, &Options::new()).unwrap();
/// if check.should_compact {
///     let result = compactor.compact(messages, &Options::new()).unwrap();
///     # let _ = result;
/// }
/// ```
#[derive(Clone, Default)]
pub struct Compactor {
    pub(crate) settings: Arc<Settings>,
    pub(crate) before: Option<Arc<BeforeHook>>,
    pub(crate) after: Option<Arc<AfterHook>>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = &self.settings.plan;
        f.debug_struct("Compactor")
            .field("budget", &self.settings.budget)
            .field("soft", &p.soft)
            .field("hard", &p.hard)
            .field("tokenizer", &self.settings.tokenizer.name())
            .field("on_before_compact", &self.before.is_some())
            .field("on_compacted", &self.after.is_some())
            .finish()
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Compactor>();
    send_sync::<ConversationState>();
    send_sync::<Plan>();
};

impl Compactor {
    /// A compactor with `config` (checked first: a bad value is [`Error::Config`] naming the
    /// field). Start from [`Config::default`], a preset, or a TOML/JSON document read with serde.
    ///
    /// ```
    /// use context_compactor::{Compactor, Config};
    ///
    /// let compactor = Compactor::new(Config::preset("development")?)?;
    /// let config: Config = serde_json::from_value(serde_json::json!({
    ///     "preset": "production", "keep_recent_messages": 8
    /// }))?;
    /// let compactor = Compactor::new(config)?;
    /// assert_eq!(compactor.config().keep_recent_messages, 8);
    ///
    /// let bad = Config { max_context_tokens: 0, ..Config::default() };
    /// let err = Compactor::new(bad).unwrap_err();
    /// assert!(err.to_string().starts_with("max_context_tokens:"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(config: Config) -> Result<Self, Error> {
        config.validate()?;
        Ok(Compactor {
            settings: Arc::new(Settings::of(config)),
            before: None,
            after: None,
        })
    }

    /// The configuration.
    ///
    /// ```
    /// assert_eq!(context_compactor::Compactor::default().config().max_context_tokens, 128_000);
    /// ```
    pub fn config(&self) -> &Config {
        &self.settings.config
    }

    /// A compactor with the default configuration for a window of `max_context_tokens`.
    #[doc(hidden)]
    pub fn with_window(max_context_tokens: usize) -> Self {
        Compactor::new(Config {
            max_context_tokens,
            ..Config::default()
        })
        .unwrap_or_default()
    }

    /// Call `hook` with a [`Preview`](crate::Preview) before each compaction (after planning,
    /// before the summarizer): it may veto it, give the summary itself, or report memories it
    /// flushed (a memory store's extraction of the messages about to be replaced).
    ///
    /// ```
    /// use context_compactor::Compactor;
    /// let compactor = Compactor::default().on_before_compact(|preview| {
    ///     let old = preview.replaced_messages().count();
    ///     preview.flushed(old);
    /// });
    /// # let _ = compactor;
    /// ```
    pub fn on_before_compact(
        mut self,
        hook: impl Fn(&mut super::hooks::Preview<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.before = Some(Arc::new(hook));
        self
    }

    /// Call `hook` with each result after a compaction.
    ///
    /// ```
    /// use context_compactor::Compactor;
    /// let compactor = Compactor::default().on_compacted(|result| {
    ///     eprintln!("compacted: {} -> {} tokens", result.tokens_before, result.tokens_after);
    /// });
    /// # let _ = compactor;
    /// ```
    pub fn on_compacted(
        mut self,
        hook: impl Fn(&super::CompactResult) + Send + Sync + 'static,
    ) -> Self {
        self.after = Some(Arc::new(hook));
        self
    }

    /// Count the request and compare it with the thresholds. Never an error for provider-invalid
    /// (but well-typed) input. With a state, only messages not counted before are counted, and
    /// the calibration it learned is applied.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let messages = [serde_json::json!({"role": "user", "content": "你好，世界"})];
    /// let check = Compactor::default().check(&messages, &Options::new()).unwrap();
    /// assert!(check.current_tokens > 0);
    /// ```
    pub fn check(&self, messages: &[Value], opts: &Options<'_>) -> Result<Check, Error> {
        let (conv, per, sys, tls) = self.measure(messages, opts, false, false)?;
        let total = per.iter().sum::<usize>() + sys + tls;
        let (current, calibration, hold_until, due_at) = match opts.state {
            Some(s) => {
                let mut st = s.lock();
                st.record_total(total, sys + tls);
                let current = st.calibrate(total);
                st.note_size(current);
                (current, st.ratio(), st.hold_until, st.due_at)
            }
            None => (total, 1.0, None, None),
        };
        let p = &self.settings.plan;
        // `target_ratio = "auto"` may have set an earlier due point after the last compaction
        // (`ConversationState::due_at`): the soft threshold is lowered to it, as in Python.
        let soft = due_at.map_or(p.soft, |d| d.min(p.soft));
        let mut held_until = None;
        let urgency = if current >= p.hard {
            Urgency::Hard
        } else if current >= soft {
            match hold_until {
                // The last compaction could not get under the soft threshold: another now would
                // end the same way (no compaction loops; `retry_growth_tokens`).
                Some(h) if current < h => {
                    held_until = Some(h);
                    Urgency::None
                }
                _ => Urgency::Soft,
            }
        } else {
            Urgency::None
        };
        Ok(Check {
            should_compact: urgency != Urgency::None,
            urgency,
            current_tokens: current,
            threshold: soft,
            hard_threshold: p.hard,
            budget: self.settings.budget,
            target_tokens: p.target,
            raw_tokens: total,
            calibration,
            message_count: per.len(),
            micro_due: current >= p.micro_threshold,
            format: conv.format,
            held_until,
        })
    }

    /// The target `target_ratio = "auto"` chooses for these messages now (whatever the
    /// configured `target_ratio`; Python's `ContextCompactor.auto_target`): the one that
    /// minimises the predicted billed input per model call over a compaction cycle, from the
    /// growth per call the state observed (its [`check`](Self::check)s), the price table of the
    /// conversation's format and whether a summarizer will be called (`summarizer`: as
    /// [`compact_with`](Self::compact_with) does, `false` for [`compact`](Self::compact)'s rule
    /// summary), bounded to 0.2-0.7 of the budget and never below what keeps the recent tail, the
    /// task, the ledger and the summary. Without an observed growth: half the budget.
    ///
    /// A compaction with `"auto"` reports the ratio in [`CompactResult::target_ratio`](crate::CompactResult::target_ratio) and, with
    /// a state, sets the next due point ([`ConversationState::due_at`]) from this choice; the
    /// state is read, not changed.
    ///
    /// ```
    /// use context_compactor::{Compactor, Config, ConversationState, Options};
    /// use serde_json::json;
    ///
    /// let config: Config = serde_json::from_value(json!({
    ///     "max_context_tokens": 12_000, "target_ratio": "auto"
    /// }))?;
    /// let compactor = Compactor::new(config)?;
    /// let mut messages = vec![json!({"role": "user", "content": "Summarise every table."})];
    /// for i in 0..40 {
    ///     messages.push(json!({"role": "assistant", "content": format!("table {i}: {}", "a row ".repeat(60))}));
    ///     messages.push(json!({"role": "user", "content": "go on"}));
    /// }
    /// // Without an observed growth: half the budget.
    /// let first = compactor.auto_target(&messages, &Options::new(), false)?;
    /// assert_eq!((first.ratio, first.growth), (0.5, None));
    ///
    /// // A state that saw the conversation grow call by call: a target chosen for it.
    /// let state = ConversationState::new();
    /// for n in (3..messages.len()).step_by(2) {
    ///     compactor.check(&messages[..n], &Options::new().state(&state))?;
    /// }
    /// let opts = Options::new().state(&state);
    /// let chosen = compactor.auto_target(&messages, &opts, false)?;
    /// assert!(chosen.growth.is_some() && (0.2..=0.7).contains(&chosen.ratio));
    ///
    /// let result = compactor.compact(messages, &opts)?;
    /// assert_eq!(result.target_ratio, Some(chosen.ratio));
    /// // The next compaction is due earlier than the soft threshold (or at it: `None`).
    /// assert!(state.due_at().is_none_or(|d| d < compactor.config().soft_threshold()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn auto_target(
        &self,
        messages: &[Value],
        opts: &Options<'_>,
        summarizer: bool,
    ) -> Result<AutoTarget, Error> {
        let (conv, tokens, sys, tls) = self.measure(messages, opts, false, true)?;
        Ok(self.auto_target_of(&conv, &tokens, sys + tls, opts.state, summarizer))
    }

    /// Read the messages and count them: the view, each message's tokens, the system prompt's
    /// and the tools'. Without a state, each message is counted as it is read (in blocks on the
    /// pool for a long conversation); with one, through its cache. `keep`: whether the view
    /// keeps the messages (`false`, for a count, may drop them as they are counted).
    fn measure<'a>(
        &self,
        messages: &'a [Value],
        opts: &Options<'a>,
        refuse_misfit: bool,
        keep: bool,
    ) -> Result<(Conversation<'a>, Vec<usize>, usize, usize), Error> {
        let t = self.settings.tokenizer;
        let framing = self.settings.plan.framing;
        if opts.state.is_none() {
            let (conv, per) = read_counted(messages, opts, refuse_misfit, (t, framing), keep)?;
            let sys = system_tokens(t, &conv.system, framing);
            let tls = tools_tokens(t, &conv.tools);
            return Ok((conv, per, sys, tls));
        }
        let state = opts.state.unwrap_or_else(|| unreachable!("handled above"));
        if !keep {
            return self.measure_cached(messages, opts, state);
        }
        let mut conv = read(messages, opts, refuse_misfit)?;
        let (per, sys, tls) = self.count(&mut conv, messages, state);
        Ok((conv, per, sys, tls))
    }

    /// The warm path of a count with a state (Python's `measure_cached`): each message is
    /// fingerprinted without being read, and only those the state's cache does not know are read
    /// and counted; the format is detected from the cached messages' hints and the read ones'.
    /// The view holds the system prompt and the tools, no messages.
    fn measure_cached<'a>(
        &self,
        messages: &'a [Value],
        opts: &Options<'a>,
        state: &ConversationState,
    ) -> Result<(Conversation<'a>, Vec<usize>, usize, usize), Error> {
        let t = self.settings.tokenizer;
        let framing = self.settings.plan.framing;
        let weight = if messages.len() >= 512 {
            crate::parallel::PARALLEL_MIN_BYTES
        } else {
            0
        };
        let fps = crate::parallel::map(messages, weight, fingerprint);
        let key = CounterKey::Builtin(t);
        let cached = state.lock().lookup(key, framing, &fps);
        let missing: Vec<usize> = (0..messages.len())
            .filter(|&i| cached[i].is_none())
            .collect();
        let (fresh, bits, mut hints) =
            Reader::count_some(messages, &missing, opts.format, (t, framing))
                .map_err(Error::from)?;
        let stored: Vec<(u64, usize, u8)> = (missing.iter().zip(&fresh).zip(&bits))
            .map(|((&i, &n), &b)| (fps[i], n, b))
            .collect();
        state.lock().store(key, framing, &stored, messages.len());
        let mut per = Vec::with_capacity(messages.len());
        for c in &cached {
            if let Some((_, b)) = *c {
                hints.merge(FormatHints::from_bits(b));
            }
            per.push(c.map_or(0, |(n, _)| n));
        }
        for (&i, n) in missing.iter().zip(fresh) {
            per[i] = n;
        }
        let format = opts.format.unwrap_or_else(|| hints.detect());
        let extras = Options {
            format: Some(format),
            ..opts.clone()
        };
        let conv = read(&[], &extras, false)?;
        let sys = system_tokens(t, &conv.system, framing);
        let tls = tools_tokens(t, &conv.tools);
        Ok((conv, per, sys, tls))
    }

    /// Each message's tokens, and the system prompt's and the tools', through the state's cache.
    pub(crate) fn count(
        &self,
        conv: &mut Conversation<'_>,
        messages: &[Value],
        state: &ConversationState,
    ) -> (Vec<usize>, usize, usize) {
        let t = self.settings.tokenizer;
        let framing = self.settings.plan.framing;
        let sys = system_tokens(t, &conv.system, framing);
        let tls = tools_tokens(t, &conv.tools);
        let msgs = &mut conv.messages;
        for (m, v) in msgs.iter_mut().zip(messages) {
            m.fingerprint = fingerprint(v);
        }
        let key = CounterKey::Builtin(t);
        let fps: Vec<u64> = msgs.iter().map(|m| m.fingerprint).collect();
        let cached = state.lock().lookup(key, framing, &fps);
        let missing: Vec<usize> = (0..msgs.len()).filter(|&i| cached[i].is_none()).collect();
        let msgs = &*msgs;
        let weight = text_bytes(msgs);
        let fresh =
            crate::parallel::map(&missing, weight, |&i| message_tokens(t, &msgs[i], framing));
        let stored: Vec<(u64, usize, u8)> = missing
            .iter()
            .zip(&fresh)
            .map(|(&i, &n)| (fps[i], n, FormatHints::of(&msgs[i]).bits()))
            .collect();
        state.lock().store(key, framing, &stored, msgs.len());
        let mut per: Vec<usize> = cached
            .into_iter()
            .map(|c| c.map_or(0, |(n, _)| n))
            .collect();
        for (&i, n) in missing.iter().zip(fresh) {
            per[i] = n;
        }
        (per, sys, tls)
    }

    /// Plan a compaction without calling any LLM (bring your own call): repairs invalid input,
    /// runs micro-compaction and the selective rules, chooses a legal cut, and returns the
    /// [`Plan`] whose `request()` is what to summarise. The messages are moved into the plan
    /// (and kept ones moved on into the result).
    ///
    /// ```
    /// use context_compactor::{Compactor, Options, Reply};
    /// let messages = vec![serde_json::json!({"role": "user", "content": "hi"})];
    /// let plan = Compactor::default().plan(messages, &Options::new()).unwrap();
    /// let reply = plan.request().map(|r| Reply::from(format!("<summary>{} messages</summary>", r.replaced_count)));
    /// let result = plan.apply(reply).unwrap();
    /// assert!(!result.compacted());
    /// ```
    pub fn plan(&self, messages: Vec<Value>, opts: &Options<'_>) -> Result<Plan, Error> {
        self.plan_for(messages, opts, false)
    }

    /// [`plan`](Self::plan), `llm`: a summarizer will be called (`target_ratio = "auto"` weighs
    /// its cost, as Python's does when the compactor has one).
    pub(crate) fn plan_for(
        &self,
        messages: Vec<Value>,
        opts: &Options<'_>,
        llm: bool,
    ) -> Result<Plan, Error> {
        let mode = if opts.force { Mode::Force } else { Mode::Auto };
        self.plan_mode(messages, opts, mode, llm)
    }

    /// What `target_ratio = "auto"` chooses for the conversation now.
    fn auto_target_of(
        &self,
        conv: &Conversation<'_>,
        tokens: &[usize],
        fixed: usize,
        state: Option<&ConversationState>,
        llm: bool,
    ) -> AutoTarget {
        let (scale, growth) = match state {
            Some(s) => {
                let g = s.lock();
                let scale = if g.observations() > 0 { g.ratio() } else { 1.0 };
                (scale, g.growth_per_call())
            }
            None => (1.0, None),
        };
        let t = self.settings.tokenizer;
        auto_target(
            &self.settings.config,
            &conv.messages,
            tokens,
            fixed,
            scale,
            growth,
            conv.format == Format::Anthropic,
            llm,
            &move |x: Text<'_>| t.count(x),
        )
    }

    /// Micro-compaction only, whatever the thresholds: tool results older than the last
    /// `keep_recent_tool_results` become placeholders and older long arguments are cut. No LLM.
    ///
    /// ```
    /// use context_compactor::{Compactor, Options};
    /// let messages = vec![serde_json::json!({"role": "user", "content": "hi"})];
    /// let result = Compactor::default().micro_compact(messages, &Options::new()).unwrap();
    /// assert_eq!(result.messages.len(), 1);
    /// ```
    pub fn micro_compact(
        &self,
        messages: Vec<Value>,
        opts: &Options<'_>,
    ) -> Result<super::CompactResult, Error> {
        self.plan_mode(messages, opts, Mode::Micro, false)?
            .apply(None)
    }

    fn plan_mode(
        &self,
        messages: Vec<Value>,
        opts: &Options<'_>,
        mode: Mode,
        summarizer: bool,
    ) -> Result<Plan, Error> {
        let mut cfg = self.settings.plan.clone();
        let n = messages.len();
        let mut pinned = vec![false; n];
        for &i in opts.pinned {
            match pinned.get_mut(i) {
                Some(p) => *p = true,
                None => {
                    return Err(ConfigError::new(
                        "pinned",
                        format!("index {i} is out of range for {n} messages"),
                    )
                    .into())
                }
            }
        }
        // SAFETY (for `Plan::from_parts` below): `conv` and `planned` borrow only the string
        // contents of `messages`, whose heap buffers stay where they are when the vector moves.
        let msgs: &[Value] = &messages;
        let msgs: &'static [Value] =
            unsafe { std::mem::transmute::<&[Value], &'static [Value]>(msgs) };
        let (conv, tokens, sys, tls) = self.measure(msgs, opts, true, true)?;
        let mut target_ratio =
            (mode != Mode::Micro).then(|| self.settings.config.target_ratio.ratio());
        let mut chosen = None;
        if self.settings.config.target_ratio == TargetRatio::Auto && mode != Mode::Micro {
            // Chosen per conversation from the state's observed growth (before this call's).
            let auto = self.auto_target_of(&conv, &tokens, sys + tls, opts.state, summarizer);
            let mut config = self.settings.config.clone();
            config.target_ratio = TargetRatio::Ratio(auto.ratio);
            cfg = config.plan_config();
            target_ratio = Some(auto.ratio);
            chosen = Some(auto);
        }
        let (ratio, cooldown) = match opts.state {
            Some(s) => {
                let mut g = s.lock();
                g.record_total(tokens.iter().sum::<usize>() + sys + tls, sys + tls);
                let ratio = if g.observations() > 0 { g.ratio() } else { 1.0 };
                let cooldown = mode != Mode::Micro && g.cooldown_remaining > 0;
                if cooldown {
                    g.cooldown_remaining -= 1;
                }
                // The context's size at this call (the growth per call), and the hold an earlier
                // compaction left (`retry_growth_tokens`).
                let raw = tokens.iter().sum::<usize>() + sys + tls;
                let now = if ratio == 1.0 {
                    raw
                } else {
                    (raw as f64 * ratio).ceil() as usize
                };
                g.note_size(now);
                cfg.held_until = g.hold_until;
                cfg.due_at = g.due_at;
                (ratio, cooldown)
            }
            None => (1.0, false),
        };
        let t = self.settings.tokenizer;
        let count = move |x: Text<'_>| t.count(x);
        let mut planned = planner::plan(
            &conv,
            &tokens,
            sys + tls,
            &pinned,
            &cfg,
            mode,
            cooldown,
            ratio,
            opts.instructions.map(str::to_owned),
            &count,
        )
        .map_err(|e| match e {
            planner::PlanError::Invalid(problems) => Error::Invalid(InvalidConversation {
                text: planner::PlanError::Invalid(problems.clone()).to_string(),
                problems: problems
                    .into_iter()
                    .map(super::problem::Problem::of)
                    .collect(),
            }),
        })?;
        let system = opts.system.filter(|s| !s.is_null()).cloned();
        planned.set_system_prompt(system::prompt(system.as_ref(), &conv), sys);
        if let Some((text, block)) = system.as_ref().and_then(system::summary_of) {
            let tokens = if block.is_some() {
                t.count(Text::Utf8(&text))
            } else {
                0
            };
            planned.set_system_summary(&text, tokens);
        }
        // SAFETY: see above; `msgs` is not used after this.
        Ok(unsafe {
            Plan::from_parts(
                planned,
                conv,
                messages,
                system,
                opts.state.cloned(),
                self.settings.clone(),
            )
        }
        .aiming_at(target_ratio, chosen))
    }
}

/// Bytes of text of the messages, to size parallel work.
fn text_bytes(messages: &[crate::message::Message<'_>]) -> usize {
    messages
        .iter()
        .flat_map(|m| m.blocks.iter())
        .flat_map(|b| b.texts.iter())
        .map(|p| p.text().to_utf8().len())
        .sum()
}

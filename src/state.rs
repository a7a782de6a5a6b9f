//! What a conversation remembers between calls: cached counts, calibration, cool-down.
//!
//! Design note — the cache key. Agent loops call `check()` on every step with the same list
//! plus one new message, so counting should cost O(new messages). Keying the cache on the
//! message object (`id(msg)`) goes stale when a dict is edited in place, and CPython reuses
//! ids of freed objects, so an old count could be served for a different message. The key is
//! instead a 64-bit fingerprint of the message's *content*, computed by the Python boundary
//! (`src/python/fingerprint.rs`) from the message as plain data: its keys and values, and for
//! every string its CPython hash and length (`str.__hash__` is computed once per string object
//! and then cached by CPython, so re-fingerprinting an unchanged message costs a few
//! dict lookups and no text scan). An in-place edit changes the content and so the key; a
//! reused id with different content gives a different key; equal content gives the same count,
//! which is correct. Collisions need two different messages with equal 64-bit fingerprints
//! (≈ n²/2⁶⁵, 3·10⁻¹² for 10k messages). Entries not seen for a few calls are evicted, so
//! the cache holds about one conversation.
//!
//! Calibration: providers report the real prompt size after each call. The ratio real /
//! counted is learned as a moving average, bounded to [`MIN_RATIO`, `MAX_RATIO`] so one odd
//! report (a cached-prompt discount misread, a different model) cannot make the compactor
//! ignore a full window. Usage measured on messages that a later compaction removed is stale
//! and ignored.

use crate::message::Message;
use crate::tokens::counter::{message_tokens, Framing, Tokenizer};
use std::collections::{HashMap, HashSet};

/// Lowest learned ratio of real to counted tokens.
pub const MIN_RATIO: f64 = 0.5;
/// Highest learned ratio of real to counted tokens.
pub const MAX_RATIO: f64 = 2.0;
/// Weight of a new observation in the moving average.
pub const EMA_WEIGHT: f64 = 0.5;
/// Observations on prompts smaller than this are too noisy to learn from.
pub const MIN_OBSERVED_TOKENS: usize = 64;
/// Cache entries unused for this many measurements are evicted.
const EVICT_AFTER: u32 = 4;

/// Which counter produced a cached count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterKey {
    Builtin(Tokenizer),
    /// A caller's counter, by an identity the caller chooses (the boundary uses `id(callable)`).
    External(u64),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    tokens: usize,
    /// Format hints of the message (`FormatHints::bits`), so detection needs no re-read.
    hints: u8,
    last_used: u32,
}

/// Parsed provider usage: the prompt size the provider measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: usize,
}

/// Why an observation was not learned from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Measured on a context that a later compaction replaced.
    Stale,
    /// Nothing counted to compare with.
    NoMeasurement,
    /// The prompt was too small to learn from.
    TooSmall,
}

/// The mutable state of one conversation. The Python class wraps it in a lock.
/// Fingerprints are already well-mixed 64-bit values: hashing them again is wasted time.
#[derive(Clone, Copy, Debug, Default)]
pub struct FingerprintHasher(u64);

impl std::hash::Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A `last_seq` entry whose count is not known (yet).
const UNCOUNTED: usize = usize::MAX;

type FpMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<FingerprintHasher>>;

#[derive(Debug)]
pub struct State {
    key: Option<(CounterKey, Framing)>,
    cache: FpMap<Entry>,
    /// The previous measurement's fingerprints and counts, in order: an agent's next request
    /// is the previous one plus a message or two, so position `i` is checked against it first
    /// (a sequential scan) and the map is only probed where they differ. On 100k messages
    /// this saves ~100k random probes (a few MB of map, cache misses each).
    last_seq: Vec<(u64, usize, u8)>,
    generation: u32,
    /// Messages counted (cache misses) by the last measurement.
    pub last_counted: usize,
    /// Raw total of the last measurement, and the compaction epoch it was taken in.
    last_total: Option<(usize, u64)>,
    last_extras: usize,
    epoch: u64,
    removed: HashSet<u64>,
    ratio: f64,
    observations: u32,
    /// Calls left that may only micro-compact (after a summarizer failure).
    pub cooldown_remaining: u32,
    /// The last summary text this conversation was compacted with.
    pub last_summary: Option<String>,
    /// After a compaction that ended over the soft threshold (`over_budget`, a refusal above it
    /// included) or short of the target with little room under it: no compaction is due again
    /// below this many (calibrated) tokens, unless the hard threshold is crossed. Without it an
    /// agent compacted again at every call.
    pub hold_until: Option<usize>,
    /// With `target_ratio = "auto"`: the (calibrated) context size from which the next
    /// compaction is due, below the soft threshold, chosen when the last one ended (the cycle's
    /// length that bills the least per call); `None`: the soft threshold. Any due compaction
    /// clears it.
    pub due_at: Option<usize>,
    /// The context's (calibrated) size at each of the last measurements since the latest
    /// compaction, oldest first: the growth per call ([`State::growth_per_call`]).
    sizes: Vec<usize>,
}

/// Measurements kept for the growth per call.
const GROWTH_WINDOW: usize = 8;

impl Default for State {
    fn default() -> Self {
        State {
            key: None,
            cache: FpMap::default(),
            last_seq: Vec::new(),
            generation: 0,
            last_counted: 0,
            last_total: None,
            last_extras: 0,
            epoch: 0,
            removed: HashSet::new(),
            ratio: 1.0,
            observations: 0,
            cooldown_remaining: 0,
            last_summary: None,
            hold_until: None,
            due_at: None,
            sizes: Vec::new(),
        }
    }
}

impl State {
    /// First half of a measurement: the cached count of each fingerprint (`None` to count).
    /// Counting happens outside the state (it may call a Python counter, which must not run
    /// under the state's lock); [`State::store`] records the new counts.
    pub fn lookup(
        &mut self,
        key: CounterKey,
        framing: Framing,
        fps: &[u64],
    ) -> Vec<Option<(usize, u8)>> {
        if self.key != Some((key, framing)) {
            self.cache.clear();
            self.last_seq.clear();
            self.key = Some((key, framing));
        }
        self.generation = self.generation.wrapping_add(1);
        let gen = self.generation;
        let out: Vec<Option<(usize, u8)>> = fps
            .iter()
            .enumerate()
            .map(|(i, fp)| {
                if *fp == 0 {
                    return None;
                }
                if let Some(&(last, tokens, hints)) = self.last_seq.get(i) {
                    if last == *fp && tokens != UNCOUNTED {
                        return Some((tokens, hints));
                    }
                }
                self.cache.get_mut(fp).map(|e| {
                    e.last_used = gen;
                    (e.tokens, e.hints)
                })
            })
            .collect();
        // The sequence of this measurement; `store` fills in what gets counted.
        self.last_seq = fps
            .iter()
            .zip(&out)
            .map(|(&fp, c)| c.map_or((fp, UNCOUNTED, 0), |(n, h)| (fp, n, h)))
            .collect();
        out
    }

    /// Second half of a measurement: remember the counts of the messages just counted.
    /// Ignored when another measurement with a different counter came in between.
    pub fn store(
        &mut self,
        key: CounterKey,
        framing: Framing,
        counted: &[(u64, usize, u8)],
        total_messages: usize,
    ) {
        self.last_counted = counted.len();
        if self.key != Some((key, framing)) {
            return;
        }
        let gen = self.generation;
        // Fill the counted messages into the sequence (by fingerprint: few of them).
        let fresh: FpMap<(usize, u8)> = counted
            .iter()
            .filter(|c| c.0 != 0)
            .map(|&(fp, n, h)| (fp, (n, h)))
            .collect();
        if !fresh.is_empty() {
            for e in &mut self.last_seq {
                if e.1 == UNCOUNTED {
                    if let Some(&(n, h)) = fresh.get(&e.0) {
                        (e.1, e.2) = (n, h);
                    }
                }
            }
        }
        for &(fp, tokens, hints) in counted {
            if fp != 0 {
                self.cache.insert(
                    fp,
                    Entry {
                        tokens,
                        hints,
                        last_used: gen,
                    },
                );
            }
        }
        if self.cache.len() > 2 * total_messages + 64 {
            // Messages served from the sequence did not touch their entries: they stay too.
            let current: FpMap<()> = self.last_seq.iter().map(|e| (e.0, ())).collect();
            self.cache.retain(|fp, e| {
                gen.wrapping_sub(e.last_used) < EVICT_AFTER || current.contains_key(fp)
            });
        }
    }

    /// Count each message with a built-in tokenizer, reusing cached counts (both halves).
    pub fn measure(
        &mut self,
        tok: Tokenizer,
        framing: Framing,
        messages: &[Message<'_>],
    ) -> Vec<usize> {
        let key = CounterKey::Builtin(tok);
        let fps: Vec<u64> = messages.iter().map(|m| m.fingerprint).collect();
        let cached = self.lookup(key, framing, &fps);
        let mut counted = Vec::new();
        let out = messages
            .iter()
            .zip(cached)
            .map(|(m, c)| match c {
                Some((n, _)) => n,
                None => {
                    let n = message_tokens(tok, m, framing);
                    counted.push((m.fingerprint, n, 0));
                    n
                }
            })
            .collect();
        self.store(key, framing, &counted, messages.len());
        out
    }

    /// Remember the raw total of a full measurement (messages + system + tools), and how
    /// much of it the system prompt and tool definitions were.
    pub fn record_total(&mut self, total: usize, extras: usize) {
        self.last_total = Some((total, self.epoch));
        self.last_extras = extras;
    }

    /// Tokens of the system prompt and tools at the last measurement.
    pub fn last_extras(&self) -> usize {
        self.last_extras
    }

    /// The counter and framing of the cached counts.
    pub fn counter_key(&self) -> Option<(CounterKey, Framing)> {
        self.key
    }

    /// Number of cached message counts.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// The learned ratio of real to counted tokens (1.0 until usage is observed).
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    pub fn observations(&self) -> u32 {
        self.observations
    }

    /// Scale a raw count by the learned ratio, rounding up.
    pub fn calibrate(&self, raw: usize) -> usize {
        if self.observations == 0 {
            raw
        } else {
            (raw as f64 * self.ratio).ceil() as usize
        }
    }

    /// Learn from a provider's usage. `counted` is our raw count of the same prompt and
    /// `fingerprints` its messages' fingerprints (when the caller passed the messages);
    /// without them the last measurement is used, if no compaction happened since.
    pub fn observe(
        &mut self,
        usage: Usage,
        counted: Option<(usize, &[u64])>,
    ) -> Result<f64, Ignored> {
        let raw = match counted {
            Some((raw, fps)) => {
                if fps.iter().any(|fp| self.removed.contains(fp)) {
                    return Err(Ignored::Stale);
                }
                raw
            }
            None => match self.last_total {
                Some((raw, epoch)) if epoch == self.epoch => raw,
                Some(_) => return Err(Ignored::Stale),
                None => return Err(Ignored::NoMeasurement),
            },
        };
        if raw < MIN_OBSERVED_TOKENS || usage.prompt_tokens < MIN_OBSERVED_TOKENS {
            return Err(Ignored::TooSmall);
        }
        let obs = (usage.prompt_tokens as f64 / raw as f64).clamp(MIN_RATIO, MAX_RATIO);
        self.ratio = if self.observations == 0 {
            obs
        } else {
            (1.0 - EMA_WEIGHT) * self.ratio + EMA_WEIGHT * obs
        }
        .clamp(MIN_RATIO, MAX_RATIO);
        self.observations += 1;
        Ok(self.ratio)
    }

    /// A compaction replaced the messages with these fingerprints: usage measured on a
    /// context that still holds any of them is stale from now on.
    pub fn note_compaction(
        &mut self,
        removed: impl IntoIterator<Item = u64>,
        summary: Option<String>,
    ) {
        self.epoch += 1;
        self.removed
            .extend(removed.into_iter().filter(|&fp| fp != 0));
        if summary.is_some() {
            self.last_summary = summary;
        }
    }

    /// A compaction that was due ended: `stuck` when it is still over the soft threshold
    /// (`over_budget`), then no compaction is due again until the context reaches
    /// `tokens_after + growth` ([`State::held`]); else the hold is lifted.
    pub fn note_outcome(&mut self, stuck: bool, tokens_after: usize, growth: usize) {
        self.hold_until = (stuck && growth > 0).then(|| tokens_after.saturating_add(growth));
        self.due_at = None;
        self.sizes.clear();
        self.sizes.push(tokens_after);
    }

    /// Whether a compaction of a context of `tokens` (calibrated) is held back: an earlier one
    /// could not get under the soft threshold and the context has not grown enough since, nor
    /// reached `hard`.
    pub fn held(&self, tokens: usize, hard: usize) -> bool {
        tokens < hard && self.hold_until.is_some_and(|h| tokens < h)
    }

    /// Remember the (calibrated) size of the context at a check: the growth per call is read
    /// from the last few. A size below the previous one (messages removed by the caller) starts
    /// the window again.
    pub fn note_size(&mut self, tokens: usize) {
        if self.sizes.last().is_some_and(|&last| tokens < last) {
            self.sizes.clear();
        }
        if self.sizes.last() == Some(&tokens) {
            return; // the same context measured twice (check, then compact)
        }
        if self.sizes.len() == GROWTH_WINDOW {
            self.sizes.remove(0);
        }
        self.sizes.push(tokens);
    }

    /// The mean growth of the context per call over the last measurements (calibrated tokens),
    /// `None` before two measurements.
    pub fn growth_per_call(&self) -> Option<f64> {
        let (first, last) = (self.sizes.first()?, self.sizes.last()?);
        let n = self.sizes.len();
        (n >= 2).then(|| (last - first) as f64 / (n - 1) as f64)
    }

    /// Number of compactions noted.
    pub fn compactions(&self) -> u64 {
        self.epoch
    }

    /// Forget everything.
    pub fn reset(&mut self) {
        *self = State::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn msgs(texts: &[&'static str]) -> Vec<Message<'static>> {
        texts
            .iter()
            .map(|t| {
                let mut m = Message::text(Role::User, t);
                m.fingerprint = crate::fingerprint::fingerprint_of(&m);
                m
            })
            .collect()
    }

    #[test]
    fn the_previous_sequence_and_the_map_agree() {
        let mut s = State::default();
        let f = Framing::default();
        let texts = ["a", "bb", "ccc", "dddd", "eeeee"];
        let a = msgs(&texts);
        let first = s.measure(Tokenizer::Approx, f, &a);
        // Same list: every count from the sequence, none counted.
        assert_eq!(s.measure(Tokenizer::Approx, f, &a), first);
        assert_eq!(s.last_counted, 0);
        // A message removed in the middle: positions shift, the map serves them.
        let b = msgs(&["a", "bb", "dddd", "eeeee"]);
        let second = s.measure(Tokenizer::Approx, f, &b);
        assert_eq!(s.last_counted, 0);
        assert_eq!(second, [first[0], first[1], first[3], first[4]]);
        // A new message in the middle: only it is counted, and the next call knows it.
        let c = msgs(&["a", "bb", "new one", "dddd", "eeeee"]);
        let third = s.measure(Tokenizer::Approx, f, &c);
        assert_eq!(s.last_counted, 1);
        assert_eq!(s.measure(Tokenizer::Approx, f, &c), third);
        assert_eq!(s.last_counted, 0);
        // Messages served from the sequence survive eviction while they are in it.
        for round in 0..(EVICT_AFTER + 5) {
            let noise: Vec<String> = (0..20).map(|k| format!("noise {round} {k}")).collect();
            let noise: Vec<&'static str> = noise.into_iter().map(|t| &*t.leak()).collect();
            s.measure(Tokenizer::Approx, f, &msgs(&noise));
            s.measure(Tokenizer::Approx, f, &c);
            assert_eq!(s.last_counted, 0, "round {round}");
        }
    }

    #[test]
    fn counts_only_new_messages() {
        let mut s = State::default();
        let f = Framing::default();
        let a = msgs(&["one", "two", "three"]);
        let first = s.measure(Tokenizer::Approx, f, &a);
        assert_eq!(s.last_counted, 3);
        let b = msgs(&["one", "two", "three", "four"]);
        let second = s.measure(Tokenizer::Approx, f, &b);
        assert_eq!(s.last_counted, 1);
        assert_eq!(&second[..3], &first[..]);
        // Edited content is a different key.
        let c = msgs(&["one", "TWO, edited at length", "three", "four"]);
        s.measure(Tokenizer::Approx, f, &c);
        assert_eq!(s.last_counted, 1);
        // Another tokenizer starts over.
        s.measure(
            Tokenizer::Exact(crate::tokens::exact::Encoding::O200kBase),
            f,
            &c,
        );
        assert_eq!(s.last_counted, 4);
    }

    #[test]
    fn the_hold_and_the_growth_per_call() {
        let mut s = State::default();
        assert_eq!(s.growth_per_call(), None);
        for t in [1000, 1000, 1300, 1600] {
            s.note_size(t); // the same size twice is one call
        }
        assert_eq!(s.growth_per_call(), Some(300.0));
        s.note_outcome(true, 900, 500);
        assert_eq!(s.hold_until, Some(1400));
        assert!(s.held(1399, 5000) && !s.held(1400, 5000) && !s.held(1399, 1399));
        assert_eq!(s.growth_per_call(), None); // a new cycle
        s.due_at = Some(1200); // target_ratio = "auto"'s next due point: any due compaction clears it
        s.note_outcome(false, 800, 500);
        assert_eq!((s.hold_until, s.due_at), (None, None));
        s.note_outcome(true, 800, 0); // retry_growth_tokens = 0: no hold
        assert_eq!(s.hold_until, None);
        // A smaller context (messages removed) starts the window again.
        for t in [2000, 2500, 1000, 1100] {
            s.note_size(t);
        }
        assert_eq!(s.growth_per_call(), Some(100.0));
    }

    #[test]
    fn calibration_is_bounded_and_skips_stale_usage() {
        let mut s = State::default();
        assert_eq!(
            s.observe(
                Usage {
                    prompt_tokens: 1000
                },
                None
            ),
            Err(Ignored::NoMeasurement)
        );
        s.record_total(1000, 0);
        assert_eq!(s.observe(Usage { prompt_tokens: 900 }, None), Ok(0.9));
        assert_eq!(s.calibrate(1000), 900);
        // A wild report moves the average but stays inside the bounds.
        let r = s
            .observe(
                Usage {
                    prompt_tokens: 100_000,
                },
                None,
            )
            .unwrap();
        assert!(r <= MAX_RATIO && r > 0.9);
        s.note_compaction([42], None);
        assert_eq!(
            s.observe(Usage { prompt_tokens: 500 }, None),
            Err(Ignored::Stale)
        );
        assert_eq!(
            s.observe(Usage { prompt_tokens: 500 }, Some((1000, &[7, 42]))),
            Err(Ignored::Stale)
        );
        assert!(s
            .observe(Usage { prompt_tokens: 500 }, Some((1000, &[7])))
            .is_ok());
        assert_eq!(
            s.observe(Usage { prompt_tokens: 10 }, Some((20, &[7]))),
            Err(Ignored::TooSmall)
        );
    }
}

//! The resolved configuration the Rust API runs with.

use crate::planner::PlanConfig;
use crate::tokens::counter::Tokenizer;

/// What to do when the summarizer fails (`on_summarizer_error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // `FallbackAll` and `Raise` come from the core's `Config` once it lands.
pub(crate) enum ErrorPolicy {
    /// Transient failures fall back to the rule summary; permanent ones are raised.
    Fallback,
    /// Every failure falls back.
    FallbackAll,
    /// Every failure is raised.
    Raise,
}

/// The resolved configuration the API runs with (thresholds in tokens).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) plan: PlanConfig,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) budget: usize,
    pub(crate) cooldown_calls: u32,
    pub(crate) on_error: ErrorPolicy,
}

impl Default for Settings {
    fn default() -> Self {
        // `max_context_tokens = 128000`, the reserve 8000.
        Settings::for_budget(120_000)
    }
}

impl Settings {
    pub(crate) fn for_budget(budget: usize) -> Self {
        let mut plan = PlanConfig::for_budget(budget);
        // `summary_token_limit`: the cap at most a tenth of the target, never under 256.
        plan.summary_cap = plan.summary_max_tokens.min((plan.target / 10).max(256));
        Settings {
            plan,
            tokenizer: Tokenizer::Approx,
            budget,
            cooldown_calls: 3,
            on_error: ErrorPolicy::Fallback,
        }
    }
}

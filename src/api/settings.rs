//! The resolved configuration the Rust API runs with: the core's [`Config`] worked out once
//! (thresholds in tokens, the planner's configuration, the tokenizer).

use crate::config::{Config, OnSummarizerError};
use crate::planner::PlanConfig;
use crate::tokens::counter::Tokenizer;

/// A [`Config`] resolved for the planner and the driver.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) plan: PlanConfig,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) budget: usize,
    pub(crate) cooldown_calls: usize,
    pub(crate) on_error: OnSummarizerError,
}

impl Settings {
    /// `config` resolved (it must be valid: [`Config::validate`]).
    pub(crate) fn of(config: Config) -> Self {
        Settings {
            plan: config.plan_config(),
            tokenizer: Tokenizer::parse(config.tokenizer.name()).unwrap_or(Tokenizer::Approx),
            budget: config.budget(),
            cooldown_calls: config.cooldown_calls,
            on_error: config.on_summarizer_error,
            config,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::of(Config::default())
    }
}

//! Token accounting: a fast estimate that errs high, and exact BPE counts.

pub mod counter;
pub mod estimate;
pub mod exact;

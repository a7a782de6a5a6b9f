//! context-compactor: a pure-Rust core (formats, validation, token accounting, planning)
//! with the Python boundary isolated in `python/` behind the `python` feature.

pub mod cut;
pub mod fingerprint;
pub mod formats;
pub mod image;
pub mod inspect;
pub mod json;
pub mod message;
pub mod parallel;
pub mod planner;
pub mod recall;
pub mod state;
pub mod structure;
pub mod summary;
pub mod text;
pub mod tokens;
pub mod validate;

#[cfg(test)]
mod testing;

#[cfg(feature = "python")]
mod python;

//! The planner's text functions: the conversation's language, must-keep facts, the
//! summarizer's transcript and prompts, reading and capping a reply ([`reply`]), and the two
//! summaries built without an LLM. Pure Rust, no pyo3, no regex. Cutting text lives in
//! [`crate::cut`], JSON string scanning and writing in [`crate::json`].
//!
//! Design note.
//!
//! * **Facts by a hand-written scanner** ([`facts`]): one pass per text, tokens split at
//!   whitespace, quotes, brackets and CJK characters, then classified. A regex set would be
//!   slower and much harder to keep precise on real transcripts (paths glued to Chinese
//!   prose, `path:line:col`, trailing `。`, diff prefixes, sed expressions). Measured on the
//!   22 corpus conversations (whole conversations; `cargo test --release --lib
//!   corpus_figures -- --nocapture`, `FACTS_ALL=1` lists them): 292 facts over 1,484
//!   messages — 227 paths, 42 URLs, 23 error names; per conversation 0–63, median 6.5 (0 for
//!   the two synthetic Chinese tool-call demos and tau-bench, whose facts are ids, not paths;
//!   63 for the 353-message astroid run). Error names agree exactly with a reference regex
//!   (`[A-Z]\w*(Error|Exception|Warning)`) over the same text. By eye about 98% of the paths
//!   are real: the leftovers are web routes (`/api/sessions`, `/cgi-bin/file.pl`), imports
//!   without an extension (`./PullRequestViewer`, `src/project/__init__`) and one path glued
//!   to a word in the source itself (`/usr/bin/perlprint`). Rejected on purpose: slash
//!   commands (`/compact`), `a/b` lists and MIME types, branch names, sed expressions,
//!   pseudo-devices (`/dev/null`), `$VAR` paths, paths after a closing bracket
//!   (`$(pwd)/x`), product names (`Node.js`). Kept since (issue 12, to match the independent
//!   definition in `tests/_oracle.py`): placeholders the text names (`/path/to/working/dir`,
//!   `newfile.py`), brace expansions as written (`docs/{zh,en}/x.md`), the directory before a
//!   glob, paths after a glued flag (`-I/opt/x`), a `:` (`main:src/x.py`) or tree-drawing
//!   dashes, routes of four segments or more. Known gap: a path segment in Chinese
//!   (`/srv/文档/a.md`) ends the path at the CJK character.
//! * **Language by message vote** ([`language`]): every Chinese corpus conversation scores
//!   0.45–1.00, every English one 0.00, where a character share would put `cc_29` at 0.02.
//! * **Rule summary by priority** ([`rule`]): seed 000's sections plus files, commands and
//!   errors; each line has a priority (first and latest request, latest conclusions, files
//!   by how often they were named, recent commands and errors), the least important go first
//!   when `max_chars` is short, and a heading says "(k of n)". Tool output is read only for
//!   failing lines (and the error names in them): a `cat` of code that defines
//!   `class FooError` is not an error seen.
//! * **Speed**, release build, on a 2-core machine shared with other builds: over the whole
//!   corpus (1.44 M chars) language 1.4 ms, facts 5.7 ms, transcript 3.0 ms, rule summary
//!   9–14 ms, truncation summary 0.7 ms. A 100,912-message span (98 M chars, the corpus
//!   repeated; `BIG=1`): language 0.1–0.3 s, facts 0.5–0.9 s, transcript 0.4 s, chunking
//!   0.1 s, rule summary 1.1 s, truncation summary 2.5 ms — linear, no quadratic step (the
//!   truncation summary reads only the messages it shows).

pub mod artifacts;
pub mod continuation;
pub mod facts;
pub mod instruction;
pub mod language;
pub mod ledger;
pub mod prompts;
pub mod reply;
pub mod rule;
pub(crate) mod todos;
pub(crate) mod tools;
pub mod transcript;
pub mod truncation;

pub use facts::{fact_present, must_keep_facts, FactKind};
pub use language::{detect_language, Label, Language};
pub use prompts::{summary_prompts, with_task_context};
pub use reply::{cap_to_tokens, extract_summary, looks_like_error};
pub use rule::{rule_summary, rule_summary_chained};
pub use transcript::{chunk_transcript, fit_entries, render_transcript};
pub use truncation::truncation_summary;

#[cfg(test)]
mod corpus_tests;

/// Stable first line of every summary message (here, not in the planner, so the ledger that
/// reads earlier summaries depends on no planner module; `planner::SUMMARY_MARKER` re-exports it).
pub const SUMMARY_MARKER: &str = "[context-compactor summary]";

//! Must-keep facts (DESIGN, Definitions): file paths, URLs and exception/error names found in
//! the user's and the assistant's text and in tool-call arguments of a replaced span — never
//! in tool output or thinking. The planner appends the ones an LLM summary left out.
//!
//! One hand-written scanner, one pass per text, no regex: URLs are found first (at each
//! `://`), then the rest is split into tokens at whitespace, quotes, brackets, `= , ; | & !`,
//! and at CJK characters and punctuation (Chinese prose runs straight into paths:
//! `修改了src/lib.rs文件`); a brace expansion's group (`{zh,en}`) stays inside its token. Each
//! token is cleaned (markdown `*`, a leading `@` mention, a glued flag `-I/opt/x` and leading
//! dashes, a leading `.../`, a glob from its first `*` on, trailing `. , : ; ? *`, a `#anchor`
//! or `?query`, a trailing `/`), split at `:` (`src/x.py:12:5`, `main:src/x.py`,
//! `PATH=/a/bin:/b/bin`; not a drive's colon) and each piece classified. A token an ellipsis
//! `…` touches is a fragment of text cut earlier, not a fact. The facts are strings as written
//! (the compactor checks their presence by substring).
//!
//! * **Paths**: absolute (`/srv/app/x.py`; a single segment only for well-known roots such as
//!   `/tmp`, `/testbed`, or with a file extension), home (`~/.config/x`), `./` and `../`
//!   relative, Windows (`C:\x\y`, `C:/x`, `\\host\share`); relative with a slash when the
//!   last segment has a known file extension, the first segment is a well-known directory
//!   (`src`, `tests`, `docs`, …) or a dot-directory (`.github`), it has four segments or more
//!   (`repos/o/r/pulls/1290/comments`; digits allowed there), or it is written as a directory
//!   with its trailing slash (`astropy/modeling/`, not a sed `s/old/new/`); a git diff's
//!   `a/`/`b/` prefix is dropped. A brace expansion (`docs/{zh,en}/x.md`) is a path, written
//!   as it stands, when its first expansion is. Placeholders the text names
//!   (`/path/to/working/dir`, `newfile.py`) are paths like any other: a task's instructions
//!   say them. Pseudo-devices (`/dev/null`, `/dev/stdout`: shell redirections) are not. Bare
//!   file names count when their extension is a known one (`tax.py`,
//!   `Cargo.toml`, `README.md`), plus well-known names (`Makefile`, `Dockerfile`) and
//!   dotfiles (`.env`, `.gitignore`; not a dot-directory alone, `.venv`: a directory, not a
//!   file), but not method calls (`response.json(`), code
//!   receivers (`console.log`, `self.lock`), or product names (`Node.js`). Rejected: dates
//!   and fractions (`2024/08/13`, `1/2`), versions (`v1.2.3`), `e.g.`, MIME types and branch
//!   names (`text/html`, `fix/web-storm`: two segments without an extension), `$VAR`
//!   paths, slash commands (`/compact`), and text inside a URL.
//! * **URLs**: `http`, `https`, `ftp`, `ftps`, `sftp`, `file`, `ws`, `wss`; stop at whitespace,
//!   quotes, `<>`, a backslash or a non-ASCII character; trailing `. , ; : ! ? *` and
//!   unbalanced `) ] }` are dropped.
//! * **Error names**: identifiers starting with a capital and ending in `Error`, `Exception`
//!   or `Warning` (with a dotted qualifier when written: `java.lang.NullPointerException`),
//!   `KeyboardInterrupt`, `SystemExit`, `StopIteration`, `GeneratorExit`, common errno names
//!   (`ENOENT`, `ECONNREFUSED`, …) and rustc codes (`E0425`). Bare `Error`, `isError`,
//!   `CONNECTION_ERROR` are not names.
//!
//! Facts are deduplicated in order of first appearance; then a path that is a `/`-suffix of
//! another path (`tax.py`, `billing/tax.py` next to `/srv/billing/tax.py`), and an error name
//! that is a `.`-suffix of a qualified one, are dropped: the longer fact contains them, so a
//! summary that keeps it keeps them.
//!
//! Measured on the 22 corpus conversations (whole conversations, `cargo test … corpus_figures
//! -- --nocapture`): see the module note in `mod.rs` for the figures and the false positives
//! that remain.

mod error_names;
mod paths;
mod scan;
#[cfg(test)]
mod tests;

pub use error_names::is_error_name;
pub use scan::scan_text;

use crate::json::json_strings;
use crate::message::{BlockKind, Message, Role};
use rustc_hash::FxHashSet as HashSet;

/// What a fact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FactKind {
    Path,
    Url,
    Error,
}

/// Which kinds a scan collects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactKinds {
    pub paths: bool,
    pub urls: bool,
    pub errors: bool,
}

impl FactKinds {
    pub const ALL: FactKinds = FactKinds {
        paths: true,
        urls: true,
        errors: true,
    };
    pub const PATHS: FactKinds = FactKinds {
        paths: true,
        urls: false,
        errors: false,
    };
    pub const ERRORS: FactKinds = FactKinds {
        paths: false,
        urls: false,
        errors: true,
    };
}

/// An ordered, deduplicated set of facts.
#[derive(Clone, Debug, Default)]
pub struct FactSet {
    seen: HashSet<String>,
    facts: Vec<(FactKind, String)>,
}

impl FactSet {
    pub fn new() -> Self {
        FactSet::default()
    }

    /// Adds one fact (ignored when already present).
    pub fn insert(&mut self, kind: FactKind, fact: &str) {
        if !self.seen.contains(fact) {
            self.seen.insert(fact.to_owned());
            self.facts.push((kind, fact.to_owned()));
        }
    }

    /// Scans plain text.
    pub fn scan(&mut self, text: &str, kinds: FactKinds) {
        scan_text(text, kinds, &mut |k, f| self.insert(k, f));
    }

    /// Scans tool-call arguments: the decoded string values of valid JSON (keys are not
    /// facts), else the raw text.
    pub fn scan_args(&mut self, args: &str, kinds: FactKinds) {
        match json_strings(args) {
            Some(spans) => {
                for s in spans.iter().filter(|s| !s.is_key) {
                    let v = s.decode(args);
                    scan_text(&v, kinds, &mut |k, f| self.insert(k, f));
                }
            }
            None => scan_text(args, kinds, &mut |k, f| self.insert(k, f)),
        }
    }

    /// Scans a message's must-keep sources: the text of user and assistant messages and the
    /// arguments of their tool calls. Tool results, thinking and other roles are skipped.
    pub fn scan_message(&mut self, m: &Message<'_>) {
        if !matches!(m.role, Role::User | Role::Assistant) {
            return;
        }
        for b in m.blocks.iter() {
            match b.kind {
                BlockKind::Text | BlockKind::Refusal => {
                    for p in &b.texts {
                        self.scan(&p.text().to_utf8(), FactKinds::ALL);
                    }
                }
                BlockKind::ToolCall => {
                    for p in &b.texts {
                        self.scan_args(&p.text().to_utf8(), FactKinds::ALL);
                    }
                }
                _ => {}
            }
        }
    }

    /// Number of facts collected (before suffix deduplication).
    pub fn len(&self) -> usize {
        self.facts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    /// The facts in order of first appearance, without the ones a longer fact contains (a
    /// path's `/`-suffix, an error name's `.`-suffix).
    pub fn finish(self) -> Vec<(FactKind, String)> {
        let keep: Vec<bool> = {
            let mut dominated: HashSet<&str> = HashSet::default();
            for (k, f) in &self.facts {
                let seps: &[char] = match k {
                    FactKind::Path => &['/', '\\'],
                    FactKind::Error => &['.'],
                    FactKind::Url => &[],
                };
                for (i, c) in f.char_indices() {
                    if seps.contains(&c) && i + 1 < f.len() {
                        dominated.insert(&f[i + 1..]);
                    }
                }
            }
            self.facts
                .iter()
                .map(|(k, f)| *k == FactKind::Url || !dominated.contains(f.as_str()))
                .collect()
        };
        self.facts
            .into_iter()
            .zip(keep)
            .filter_map(|(f, k)| k.then_some(f))
            .collect()
    }
}

/// The must-keep facts of a span (DESIGN, Definitions): paths, URLs and error names in user
/// and assistant text and tool-call arguments, deduplicated, in order of first appearance.
pub fn must_keep_facts(messages: &[Message<'_>]) -> Vec<String> {
    must_keep_facts_typed(messages)
        .into_iter()
        .map(|(_, f)| f)
        .collect()
}

/// [`must_keep_facts`] with each fact's kind.
pub fn must_keep_facts_typed(messages: &[Message<'_>]) -> Vec<(FactKind, String)> {
    // Each message is scanned on its own (on the pool when there is enough text: scanning is
    // most of a rule summary of a long run), then merged in order: first occurrences stay
    // first, so the set and its order are those of one scan over all the messages.
    let weight: usize = messages
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .flat_map(|m| m.blocks.iter())
        .flat_map(|b| b.texts.iter())
        .map(|p| p.text().char_len())
        .sum();
    let per_message = crate::parallel::map(messages, weight, |m| {
        let mut one = FactSet::new();
        one.scan_message(m);
        one.facts
    });
    let mut set = FactSet::new();
    for (kind, fact) in per_message.into_iter().flatten() {
        set.insert(kind, &fact);
    }
    set.finish()
}

/// Whether `haystack` (a summary) keeps `fact`: a plain substring test, also accepting a
/// path of two segments or more without its leading `./`, a URL without its trailing `/`, and a Windows path written
/// with `/` or with doubled backslashes. Case-sensitive: paths are.
pub fn fact_present(haystack: &str, fact: &str) -> bool {
    if fact.is_empty() || haystack.contains(fact) {
        return true;
    }
    // `./src/pkg` is `src/pkg`; but `./Viewer` is not kept by `src/Viewer.tsx`: a single name
    // without its `./` is a word that other paths contain.
    if let Some(f) = fact.strip_prefix("./") {
        if f.contains('/') && haystack.contains(f) {
            return true;
        }
    }
    if fact.contains("://") {
        let f = fact.trim_end_matches('/');
        if f.len() < fact.len() && haystack.contains(f) {
            return true;
        }
    }
    if fact.contains('\\') {
        let single = fact.replace("\\\\", "\\");
        return haystack.contains(&single)
            || haystack.contains(&single.replace('\\', "/"))
            || haystack.contains(&single.replace('\\', "\\\\"));
    }
    false
}

//! Must-keep facts (DESIGN, Definitions): file paths, URLs and exception/error names found in
//! the user's and the assistant's text and in tool-call arguments of a replaced span — never
//! in tool output or thinking. The planner appends the ones an LLM summary left out.
//!
//! One hand-written scanner, one pass per text, no regex: URLs are found first (at each
//! `://`), then the rest is split into tokens at whitespace, quotes, brackets, `= , ; | & !`,
//! and at CJK characters and punctuation (Chinese prose runs straight into paths:
//! `修改了src/lib.rs文件`). Each token is cleaned (markdown `*`, a leading `@` mention, trailing
//! `. , : ; ? *`, a `:line:col` or `::test` suffix, a `#anchor` or `?query`, a trailing `/`)
//! and classified:
//!
//! * **Paths**: absolute (`/srv/app/x.py`; a single segment only for well-known roots such as
//!   `/tmp`, `/testbed`, or with a file extension), home (`~/.config/x`), `./` and `../`
//!   relative, Windows (`C:\x\y`, `C:/x`, `\\host\share`); relative with a slash when the
//!   last segment has a known file extension, the first segment is a well-known directory
//!   (`src`, `tests`, `docs`, …) or a dot-directory (`.github`), or it is written as a
//!   directory with its trailing slash (`astropy/modeling/`, not a sed `s/old/new/`); a git
//!   diff's `a/`/`b/` prefix is dropped. Placeholders (`/path/to/x`, `filename.py`) are not
//!   facts. Bare file names count when their extension is a known one (`tax.py`,
//!   `Cargo.toml`, `README.md`), plus well-known names (`Makefile`, `Dockerfile`) and
//!   dotfiles (`.env`, `.gitignore`), but not method calls (`response.json(`), code
//!   receivers (`console.log`, `self.lock`), or product names (`Node.js`). Rejected: dates
//!   and fractions (`2024/08/13`, `1/2`), versions (`v1.2.3`), `e.g.`, MIME types and branch
//!   names (`text/html`, `fix/web-storm`: two segments without an extension), globs, `$VAR`
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

use super::text::json_strings;
use crate::message::{BlockKind, Message, Role};
use std::collections::HashSet;

/// What a fact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FactKind {
    Path,
    Url,
    Error,
}

/// Which kinds a scan collects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kinds {
    pub paths: bool,
    pub urls: bool,
    pub errors: bool,
}

impl Kinds {
    pub const ALL: Kinds = Kinds {
        paths: true,
        urls: true,
        errors: true,
    };
    pub const PATHS: Kinds = Kinds {
        paths: true,
        urls: false,
        errors: false,
    };
    pub const ERRORS: Kinds = Kinds {
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
    pub fn scan(&mut self, text: &str, kinds: Kinds) {
        scan_text(text, kinds, &mut |k, f| self.insert(k, f));
    }

    /// Scans tool-call arguments: the decoded string values of valid JSON (keys are not
    /// facts), else the raw text.
    pub fn scan_args(&mut self, args: &str, kinds: Kinds) {
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
                        self.scan(&p.text().to_utf8(), Kinds::ALL);
                    }
                }
                BlockKind::ToolCall => {
                    for p in &b.texts {
                        self.scan_args(&p.text().to_utf8(), Kinds::ALL);
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
            let mut dominated: HashSet<&str> = HashSet::new();
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
/// path without its leading `./`, a URL without its trailing `/`, and a Windows path written
/// with `/` or with doubled backslashes. Case-sensitive: paths are.
pub fn fact_present(haystack: &str, fact: &str) -> bool {
    if fact.is_empty() || haystack.contains(fact) {
        return true;
    }
    if let Some(f) = fact.strip_prefix("./") {
        if !f.is_empty() && haystack.contains(f) {
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

// ---------------------------------------------------------------------------------------
// The scanner.

#[rustfmt::skip]
const URL_SCHEMES: &[&str] = &[
    "http", "https", "ftp", "ftps", "sftp", "file", "ws", "wss",
];

/// A URL whose `://` is at byte `at`: its byte range.
fn url_at(text: &str, at: usize) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let mut s = at;
    while s > 0 && (b[s - 1].is_ascii_alphanumeric() || matches!(b[s - 1], b'+' | b'.' | b'-')) {
        s -= 1;
    }
    let scheme = &text[s..at];
    if !URL_SCHEMES.iter().any(|k| k.eq_ignore_ascii_case(scheme)) {
        return None;
    }
    let mut e = at + 3;
    while e < b.len() {
        let c = b[e];
        if c <= b' ' || c >= 0x7F || matches!(c, b'<' | b'>' | b'"' | b'\'' | b'`' | b'\\') {
            break;
        }
        e += 1;
    }
    // Trailing punctuation and unbalanced closing brackets.
    loop {
        let u = &text[s..e];
        let Some(&last) = u.as_bytes().last() else {
            break;
        };
        let unbalanced =
            |open: char, close: char| u.matches(close).count() > u.matches(open).count();
        let drop = match last {
            b'.' | b',' | b';' | b':' | b'!' | b'?' | b'*' => true,
            b')' => unbalanced('(', ')'),
            b']' => unbalanced('[', ']'),
            b'}' => unbalanced('{', '}'),
            _ => false,
        };
        if !drop {
            break;
        }
        e -= 1;
    }
    let rest = &text[at + 3..e];
    let ok = if scheme.eq_ignore_ascii_case("file") {
        rest.bytes().any(|c| c.is_ascii_alphanumeric())
    } else {
        rest.as_bytes()
            .first()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'[')
    };
    ok.then_some((s, e))
}

/// CJK ideographs, kana, hangul, and full-width forms: token boundaries.
fn is_cjk_like(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x9FFF | 0xA960..=0xA97F | 0xAC00..=0xD7FF | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F | 0xFF00..=0xFFEF | 0x20000..=0x2FA1F)
}

/// [`is_delim`] of each ASCII byte, looked up by the scanner's inner loops (most text is ASCII:
/// one load instead of a chain of tests per byte).
static ASCII_DELIM: [bool; 128] = {
    let mut t = [false; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = ascii_delim(b as u8 as char);
        b += 1;
    }
    t
};

const fn ascii_delim(c: char) -> bool {
    c.is_ascii_whitespace()
        || c.is_ascii_control()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | '<'
                | '>'
                | '|'
                | ';'
                | ','
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '='
                | '&'
                | '!'
        )
}

#[inline]
fn is_delim(c: char) -> bool {
    if c.is_ascii() {
        ASCII_DELIM[c as usize]
    } else {
        !c.is_alphanumeric() || is_cjk_like(c)
    }
}

/// Bytes from `pos` while they are ASCII and not delimiters (the fast part of a token).
#[inline]
fn ascii_word_end(b: &[u8], mut pos: usize, stop: usize) -> usize {
    while pos < stop && b[pos] < 0x80 && !ASCII_DELIM[b[pos] as usize] {
        pos += 1;
    }
    pos
}

#[inline]
fn char_at(text: &str, i: usize) -> char {
    let b = text.as_bytes()[i];
    if b < 0x80 {
        b as char
    } else {
        text[i..].chars().next().unwrap_or(' ')
    }
}

/// Scans `text` and reports each fact found (duplicates included).
pub fn scan_text(text: &str, kinds: Kinds, out: &mut impl FnMut(FactKind, &str)) {
    let mut urls: Vec<(usize, usize)> = Vec::new();
    if text.contains("://") {
        for (i, _) in text.match_indices("://") {
            if urls.last().is_some_and(|&(_, e)| i < e) {
                continue;
            }
            if let Some(r) = url_at(text, i) {
                // A URL that starts inside an earlier token's reach is still a URL.
                urls.push(r);
            }
        }
    }
    if !kinds.paths && !kinds.errors {
        if kinds.urls {
            for &(s, e) in &urls {
                out(FactKind::Url, &text[s..e]);
            }
        }
        return;
    }
    let len = text.len();
    let mut pos = 0;
    let mut ui = 0;
    while pos < len {
        if ui < urls.len() && pos >= urls[ui].0 {
            // Reported where it stands, so facts come in order of appearance.
            if kinds.urls {
                out(FactKind::Url, &text[urls[ui].0..urls[ui].1]);
            }
            pos = pos.max(urls[ui].1);
            ui += 1;
            continue;
        }
        let c = char_at(text, pos);
        if is_delim(c) {
            pos += c.len_utf8();
            continue;
        }
        let start = pos;
        let stop = if ui < urls.len() { urls[ui].0 } else { len };
        while pos < stop {
            pos = ascii_word_end(text.as_bytes(), pos, stop);
            if pos >= stop {
                break;
            }
            let c = char_at(text, pos);
            if is_delim(c) {
                break;
            }
            pos += c.len_utf8();
        }
        token(text, start, pos, kinds, out);
    }
    if kinds.urls {
        for &(s, e) in &urls[ui..] {
            out(FactKind::Url, &text[s..e]);
        }
    }
}

fn token(text: &str, start: usize, end: usize, kinds: Kinds, out: &mut impl FnMut(FactKind, &str)) {
    let tok = &text[start..end];
    if tok.len() > 1024 {
        return;
    }
    let b = tok.as_bytes();
    // Fast rejections for the common case, a plain word: a path needs `/`, `\`, `.` or `~`
    // (or is a known capitalised name), an error name needs a capital letter.
    let pathy = b.iter().any(|&c| matches!(c, b'/' | b'\\' | b'.' | b'~'));
    let capital = b.iter().any(u8::is_ascii_uppercase);
    // `docs/{zh,en}/x.md`, `$(pwd)/x`: the part after a closing bracket is a fragment.
    let fragment = b.first() == Some(&b'/')
        && start > 0
        && matches!(text.as_bytes()[start - 1], b'}' | b')' | b']');
    if kinds.paths
        && !fragment
        && (pathy || (capital && KNOWN_NAMES.contains(&trim_end_punct(tok))))
    {
        let next = text[end..].chars().next();
        if let Some(p) = clean_path(tok, next) {
            out(FactKind::Path, p);
            return;
        }
    }
    if kinds.errors && capital {
        let prev = text[..start].chars().next_back();
        error_names(tok, prev, out);
    }
}

fn trim_end_punct(t: &str) -> &str {
    t.trim_end_matches(['.', ',', ':', ';', '?', '*'])
}

fn is_drive(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/')
}

/// The path a token names, if it names one.
fn clean_path(tok: &str, next: Option<char>) -> Option<&str> {
    let mut t = tok.trim_start_matches('*');
    if let Some(r) = t.strip_prefix('@') {
        if !r.starts_with('/') {
            t = r;
        }
    }
    t = trim_end_punct(t);
    let from = if is_drive(t) { 2 } else { 0 };
    if let Some(i) = t[from..].find(':') {
        t = &t[..from + i];
    }
    if let Some(i) = t.find(['#', '?']) {
        t = &t[..i];
    }
    t = trim_end_punct(t);
    let mut dir = false;
    if t.len() > 1 {
        let trimmed = t.trim_end_matches(['/', '\\']);
        if !trimmed.is_empty() && trimmed.len() > from {
            dir = trimmed.len() < t.len();
            t = trimmed;
        }
    }
    if !is_path(t, next, dir) || is_placeholder(t) {
        return None;
    }
    // A git diff's `a/` / `b/` prefix.
    if let Some(r) = t.strip_prefix("a/").or_else(|| t.strip_prefix("b/")) {
        if r.contains('/') && is_path(r, next, dir) {
            return Some(r);
        }
    }
    Some(t)
}

/// Placeholders from instructions and docs (`/path/to/file`, `filename.py`) and devices
/// (`/dev/null`).
fn is_placeholder(t: &str) -> bool {
    const STEMS: &[&str] = &[
        "filename",
        "file_name",
        "newfile",
        "yourfile",
        "your_file",
        "myfile",
        "path_to_file",
    ];
    if t.starts_with("/dev/") && !t[5..].contains('/') {
        // `2>/dev/null`: a device, not a file anyone works on.
        return true;
    }
    let t = t.trim_start_matches(['.', '/', '~']);
    if t.starts_with("path/to/") || t.starts_with("to/your/") || t.starts_with("your/") {
        return true;
    }
    let name = t.rsplit(['/', '\\']).next().unwrap_or(t);
    let stem = name.split('.').next().unwrap_or(name);
    STEMS.iter().any(|s| s.eq_ignore_ascii_case(stem))
}

fn has_letter(s: &str) -> bool {
    s.chars().any(char::is_alphabetic)
}

fn path_chars_ok(t: &str) -> bool {
    t.chars().all(|c| {
        c.is_alphanumeric()
            || matches!(
                c,
                '_' | '-' | '.' | '/' | '~' | '+' | '@' | '%' | '\\' | ':'
            )
    })
}

/// A file extension we recognise (lower case, without the dot).
#[rustfmt::skip]
const EXTENSIONS: &[&str] = &[
    // code
    "py", "pyi", "pyx", "pxd", "ipynb", "rs", "go", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts",
    "cts", "java", "kt", "kts", "scala", "sc", "swift", "mm", "c", "h", "cc", "cpp", "cxx", "hpp",
    "hh", "hxx", "cs", "fs", "fsx", "vb", "rb", "php", "pl", "pm", "lua", "jl", "dart", "exs",
    "erl", "hrl", "clj", "cljs", "edn", "hs", "lhs", "ml", "mli", "zig", "nim", "sol", "vue",
    "svelte", "astro", "elm", "pony", "groovy", "gradle", "sbt", "f90", "f95", "asm", "cu", "cuh",
    "metal", "wgsl", "glsl", "hlsl", "vhd", "sv", "tcl", "awk", "sed", "coffee", "cr", "d.ts",
    // shell and build
    "sh", "bash", "zsh", "fish", "ps1", "psm1", "bat", "cmd", "mk", "cmake", "ninja", "bzl",
    "bazel", "nix", "dockerfile", "containerfile", "gemspec", "podspec", "cabal", "mod", "sum",
    "lock", "tf", "tfvars", "hcl", "just",
    // data and config
    "sql", "graphql", "gql", "proto", "thrift", "avsc", "json", "jsonl", "json5", "jsonc", "ndjson",
    "geojson", "yaml", "yml", "toml", "ini", "cfg", "conf", "properties", "xml", "xsd", "xsl",
    "xslt", "plist", "csv", "tsv", "parquet", "arrow", "avro", "feather", "orc", "db", "sqlite",
    "sqlite3", "pkl", "pickle", "npy", "npz", "h5", "hdf5", "pt", "pth", "ckpt", "onnx",
    "safetensors", "gguf", "tfrecord", "fits", "dcm", "nc", "mat", "rds", "env", "editorconfig",
    "gitignore", "dockerignore", "service", "desktop", "reg",
    // docs and markup
    "html", "htm", "xhtml", "css", "scss", "sass", "less", "styl", "md", "mdx", "markdown", "rst",
    "txt", "adoc", "tex", "bib", "log", "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt",
    "ods", "rtf", "epub", "j2", "jinja", "jinja2", "tmpl", "tpl", "mustache", "hbs", "ejs", "erb",
    "twig", "liquid", "patch", "diff", "po", "pot", "srt", "vtt",
    // media and archives
    "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "tif", "tiff", "avif", "heic", "mp3",
    "mp4", "wav", "flac", "ogg", "webm", "mov", "avi", "mkv", "ttf", "otf", "woff", "woff2", "zip",
    "tar", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "whl", "jar", "war", "so", "dylib", "dll",
    "exe", "wasm", "pyc", "deb", "rpm", "dmg", "apk", "iso", "img",
    // keys and certificates
    "pem", "crt", "cer", "csr", "p12", "pfx", "gpg", "asc",
];

/// Extensions too common as code member names to make a bare word a file name.
#[rustfmt::skip]
const BARE_UNSAFE_EXTENSIONS: &[&str] = &[
    "env", "mod", "sum", "service", "desktop", "so", "lock", "db", "img",
];

/// Receivers and modules that make `x.json` / `x.log` a member access, not a file.
#[rustfmt::skip]
const CODE_RECEIVERS: &[&str] = &[
    "self", "this", "cls", "super", "console", "window", "document", "process", "response", "resp",
    "res", "req", "request", "math", "np", "pd", "os", "sys", "re", "logger", "logging", "json",
    "module", "exports", "e", "err", "ctx", "event", "el", "it", "obj", "r", "s", "t", "x", "y",
    "f", "fs", "lock", "mutex", "promise", "torch", "tf", "jnp", "plt", "django",
];

/// Names that end like a file but are products.
#[rustfmt::skip]
const PRODUCT_NAMES: &[&str] = &[
    "node.js", "next.js", "nuxt.js", "vue.js", "react.js", "chart.js", "three.js", "d3.js",
    "express.js", "angular.js", "ember.js", "backbone.js", "socket.io", "p5.js", "pdf.js",
    "deno.js", "nest.js", "solid.js", "alpine.js", "htmx.js", "asp.net", "ado.net",
];

/// Extensionless file names that are files wherever they are named.
#[rustfmt::skip]
const KNOWN_NAMES: &[&str] = &[
    "Makefile", "Dockerfile", "Containerfile", "Gemfile", "Rakefile", "Procfile", "Jenkinsfile",
    "Vagrantfile", "Justfile", "Brewfile", "Pipfile", "CMakeLists.txt", "GNUmakefile", "Caddyfile",
    "Tiltfile", "BUILD.bazel", "WORKSPACE",
];

#[rustfmt::skip]
const DOTFILES: &[&str] = &[
    "env", "gitignore", "gitattributes", "gitmodules", "dockerignore", "editorconfig", "bashrc",
    "bash_profile", "zshrc", "profile", "vimrc", "npmrc", "yarnrc", "nvmrc", "prettierrc",
    "eslintrc", "babelrc", "pylintrc", "flake8", "coveragerc", "envrc", "tool-versions",
    "python-version", "node-version", "ruby-version", "gitlab-ci.yml", "pre-commit-config.yaml",
    "clang-format", "clang-tidy", "rustfmt.toml", "mailmap", "env.local", "env.example",
    "env.production", "env.development", "htaccess", "netrc", "pypirc", "condarc", "terraformrc",
    "ssh", "config", "git", "github", "vscode", "idea", "cargo", "venv",
];

/// Single-segment absolute paths that are real roots.
#[rustfmt::skip]
const ROOTS: &[&str] = &[
    "tmp", "etc", "usr", "var", "home", "opt", "srv", "root", "bin", "sbin", "lib", "lib64", "dev",
    "proc", "sys", "mnt", "media", "data", "workspace", "workspaces", "testbed", "app", "code",
    "repo", "src", "Users", "Volumes", "private", "nix", "run", "boot", "tests", "build", "output",
    "scratch", "content", "kaggle", "github", "builds",
];

/// First segments that make a relative path with a slash a path.
#[rustfmt::skip]
const KNOWN_DIRS: &[&str] = &[
    "src", "lib", "libs", "test", "tests", "spec", "specs", "doc", "docs", "scripts", "script",
    "bin", "build", "dist", "out", "target", "app", "apps", "pkg", "pkgs", "packages", "crates",
    "cmd", "internal", "web", "www", "public", "static", "assets", "config", "configs", "conf",
    "examples", "example", "benches", "bench", "benchmarks", "python", "include", "vendor",
    "node_modules", "tools", "utils", "components", "pages", "api", "server", "client", "frontend",
    "backend", "migrations", "templates", "fixtures", "data", "resources", "res", "deploy",
    "docker", "k8s", "infra", "terraform", "notebooks", "models", "modules", "plugins",
    "extensions", "site", "website", "ci", "hooks", "tmp", "var", "etc", "usr", "home", "testbed",
    "workspace", "site-packages", "venv", "env", "logs", "output", "outputs", "third_party",
    "external", "common", "core", "shared", "features", "views", "controllers", "services",
    "handlers", "routes", "store", "stores", "styles", "images", "img", "media", "locales", "i18n",
    "proto", "schemas", "sql", "db", "cli", "ui",
];

fn ext_of(seg: &str) -> Option<&str> {
    let i = seg.rfind('.')?;
    (i > 0 && i + 1 < seg.len()).then(|| &seg[i + 1..])
}

fn known_ext(seg: &str) -> bool {
    ext_of(seg)
        .is_some_and(|e| e.len() <= 12 && EXTENSIONS.iter().any(|k| k.eq_ignore_ascii_case(e)))
}

fn word_like(seg: &str) -> bool {
    !seg.is_empty()
        && seg
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && has_letter(seg)
}

/// Whether a cleaned token is a path; `dir` says it was written with a trailing slash.
fn is_path(t: &str, next: Option<char>, dir: bool) -> bool {
    if t.len() < 2 || !path_chars_ok(t) || t.starts_with('-') {
        return false;
    }
    if is_drive(t) {
        let rest = &t[3..];
        return !rest.contains(':') && has_letter(rest);
    }
    if let Some(r) = t.strip_prefix("\\\\") {
        return r.split('\\').filter(|s| !s.is_empty()).count() >= 2 && !r.contains(':');
    }
    if t.contains(':') {
        return false;
    }
    if t.contains('\\') {
        // A relative Windows path (`src\pkg\mod.py`, also with doubled backslashes as
        // written in code): word-like segments ending in a known extension.
        let segs: Vec<&str> = t.split('\\').filter(|s| !s.is_empty()).collect();
        return segs.len() >= 2
            && !t.contains('/')
            && segs.iter().all(|s| word_like(s) || *s == "..")
            && known_ext(segs[segs.len() - 1]);
    }
    if let Some(r) = t.strip_prefix('~') {
        return r.starts_with('/') && has_letter(r);
    }
    if t.starts_with("//") {
        return false;
    }
    if let Some(r) = t.strip_prefix('/') {
        if r.contains("//") || !has_letter(r) {
            return false;
        }
        let mut segs = r.split('/');
        let first = segs.next().unwrap_or("");
        return match segs.next() {
            Some(_) => r.split('/').all(|s| !s.is_empty()),
            None => ROOTS.contains(&first) || known_ext(first),
        };
    }
    if let Some(r) = t.strip_prefix("./").or_else(|| t.strip_prefix("../")) {
        let r = r.trim_start_matches("../");
        return has_letter(r) && !r.contains("//");
    }
    if t.contains('/') {
        let segs: Vec<&str> = t.split('/').collect();
        if segs.iter().any(|s| s.is_empty()) || !segs.iter().all(|s| has_letter(s) || *s == "..") {
            // Dates and fractions (`2024/08/13`, `1/2`), `a//b`.
            return false;
        }
        let first = segs[0];
        let last = segs[segs.len() - 1];
        // A directory written with its trailing slash (`astropy/modeling/`), but not a sed
        // expression (`s/old/new/`).
        let sed = first.trim_start_matches(|c: char| c.is_ascii_digit());
        let dir_ok = dir && segs.iter().all(|s| word_like(s)) && !matches!(sed, "s" | "y");
        return known_ext(last)
            || KNOWN_DIRS.contains(&first)
            || (first.len() > 1 && first.starts_with('.') && has_letter(first))
            || dir_ok;
    }
    // A bare name.
    if KNOWN_NAMES.contains(&t) {
        return true;
    }
    if let Some(r) = t.strip_prefix('.') {
        return DOTFILES.contains(&r);
    }
    if next == Some('(') || !has_letter(t) {
        return false;
    }
    let Some(ext) = ext_of(t) else {
        return false;
    };
    let stem = &t[..t.len() - ext.len() - 1];
    let lower_ext = ext.to_ascii_lowercase();
    let first_stem = stem.split('.').next().unwrap_or(stem);
    known_ext(t)
        && (ext.len() >= 2 || stem.len() >= 3)
        && !BARE_UNSAFE_EXTENSIONS.contains(&lower_ext.as_str())
        && stem
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        && !CODE_RECEIVERS
            .iter()
            .any(|r| r.eq_ignore_ascii_case(first_stem))
        && !PRODUCT_NAMES.iter().any(|p| p.eq_ignore_ascii_case(t))
        && !t.contains(['/', '~', '@', '%', '+'])
}

#[rustfmt::skip]
const ERROR_SUFFIXES: &[&str] = &[
    "Error", "Exception", "Warning",
];
#[rustfmt::skip]
const ERROR_NAMES: &[&str] = &[
    "KeyboardInterrupt", "SystemExit", "StopIteration", "StopAsyncIteration", "GeneratorExit",
];
#[rustfmt::skip]
const ERRNO_NAMES: &[&str] = &[
    "ENOENT", "EACCES", "EPERM", "EEXIST", "EISDIR", "ENOTDIR", "ENOTEMPTY", "ECONNREFUSED",
    "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EADDRINUSE", "EADDRNOTAVAIL", "EPIPE", "ENOSPC",
    "EMFILE", "ENOMEM", "EAGAIN", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EBADF",
    "EBUSY", "EINVAL", "EROFS", "ELOOP", "ENAMETOOLONG",
];

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Whether `name` (one identifier) names an exception or error type.
pub fn is_error_name(name: &str) -> bool {
    if !name.as_bytes().first().is_some_and(u8::is_ascii_uppercase) || !is_ident(name) {
        return false;
    }
    ERROR_NAMES.contains(&name)
        || ERROR_SUFFIXES
            .iter()
            .any(|s| name.len() > s.len() && name.ends_with(s))
}

fn is_rustc_code(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 5 && b[0] == b'E' && b[1..].iter().all(u8::is_ascii_digit)
}

/// Error names inside one token (runs of `[A-Za-z0-9_.]`).
fn error_names(tok: &str, prev: Option<char>, out: &mut impl FnMut(FactKind, &str)) {
    let trimmed = tok.trim_end_matches([':', '.', ',']);
    if ERRNO_NAMES.contains(&trimmed)
        || (is_rustc_code(trimmed) && (prev == Some('[') || trimmed.len() == tok.len()))
    {
        out(FactKind::Error, trimmed);
        return;
    }
    let b = tok.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
            i += 1;
            continue;
        }
        let s = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
            i += 1;
        }
        // A run glued to other word characters (`x-FooError`, `café`) is still checked as is.
        let run = tok[s..i].trim_matches('.');
        if run.len() > 120 || run.is_empty() {
            continue;
        }
        let last = run.rsplit('.').next().unwrap_or(run);
        if is_error_name(last) && run.split('.').all(is_ident) {
            out(FactKind::Error, run);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Message, Role};

    fn facts(text: &str) -> Vec<String> {
        let mut s = FactSet::new();
        s.scan(text, Kinds::ALL);
        s.finish().into_iter().map(|(_, f)| f).collect()
    }

    fn paths(text: &str) -> Vec<String> {
        let mut s = FactSet::new();
        s.scan(text, Kinds::PATHS);
        s.finish().into_iter().map(|(_, f)| f).collect()
    }

    #[test]
    fn ascii_delimiters_table() {
        let listed = "\"'`<>|;,()[]{}=&!";
        for b in 0u8..128 {
            let c = b as char;
            let expected = c.is_ascii_whitespace() || c.is_ascii_control() || listed.contains(c);
            assert_eq!(is_delim(c), expected, "{c:?}");
        }
        // A token runs through non-ASCII letters; CJK characters end it.
        assert_eq!(paths("see src/café/main.rs, then"), ["src/café/main.rs"]);
        assert_eq!(paths("改了src/main.rs文件"), ["src/main.rs"]);
    }

    #[test]
    fn absolute_home_relative_windows() {
        assert_eq!(paths("edit /srv/app/x.py now"), ["/srv/app/x.py"]);
        assert_eq!(paths("see ~/.config/x and ~ alone"), ["~/.config/x"]);
        assert_eq!(
            paths("run ./tests/test_x.py then ../lib/a.rs"),
            ["./tests/test_x.py", "../lib/a.rs"]
        );
        assert_eq!(
            paths("in src/lib.rs and billing/tax.py"),
            ["src/lib.rs", "billing/tax.py"]
        );
        assert_eq!(
            paths(r"open C:\Users\me\file.txt or C:/x/y"),
            [r"C:\Users\me\file.txt", "C:/x/y"]
        );
        assert_eq!(
            paths(r"share \\server\share\x.doc"),
            [r"\\server\share\x.doc"]
        );
        assert_eq!(
            paths(r"got 'src\\project\\__init__.py' and src\b\c.rs"),
            [r"src\\project\\__init__.py", r"src\b\c.rs"]
        );
        assert!(paths(r"print('a\nb') and \d+\.py").is_empty());
        assert_eq!(paths("cd /testbed && ls /tmp"), ["/testbed", "/tmp"]);
        assert_eq!(
            paths("the .github/workflows/ci.yml and @.agent/skills/ dir"),
            [".github/workflows/ci.yml", ".agent/skills"]
        );
        assert_eq!(paths("astropy/modeling/ holds them"), ["astropy/modeling"]);
    }

    #[test]
    fn cleaning() {
        assert_eq!(paths("at src/lib.rs:12:5, then"), ["src/lib.rs"]);
        assert_eq!(
            paths("pytest tests/test_x.py::TestA::test_b -q"),
            ["tests/test_x.py"]
        );
        assert_eq!(paths("(see `src/main.rs`)."), ["src/main.rs"]);
        assert_eq!(
            paths("**README.md** and docs/index.md#usage"),
            ["README.md", "docs/index.md"]
        );
        assert_eq!(
            paths("--config=conf/app.toml PATH=/usr/local/bin:/bin"),
            ["conf/app.toml", "/usr/local/bin"]
        );
        assert_eq!(paths("--- a/src/x.py\n+++ b/src/x.py"), ["src/x.py"]);
        assert_eq!(paths("\"file_path\": \"/a/b/c.tsx\","), ["/a/b/c.tsx"]);
        // Chinese prose and full-width punctuation around paths.
        assert_eq!(
            paths("修改了src/lib.rs文件，然后运行tests/a_test.py。"),
            ["src/lib.rs", "tests/a_test.py"]
        );
        assert_eq!(
            paths("文件：`web/src/features/chat/x.tsx`（已更新）"),
            ["web/src/features/chat/x.tsx"]
        );
    }

    #[test]
    fn bare_names() {
        assert_eq!(
            paths("Fix tax.py, Cargo.toml and README.md."),
            ["tax.py", "Cargo.toml", "README.md"]
        );
        assert_eq!(
            paths("app.tsx, data.csv and config.yaml"),
            ["app.tsx", "data.csv", "config.yaml"]
        );
        assert_eq!(paths("add a Makefile and .env"), ["Makefile", ".env"]);
        for junk in [
            "e.g. this",
            "i.e. that",
            "v1.2.3",
            "version 1.5",
            "console.log(x)",
            "response.json()",
            "self.lock",
            "Node.js rocks",
            "example.com",
            "3.14",
            "files ending in .py",
            "U.S.A",
            "obj.data",
            "np.array",
        ] {
            assert!(paths(junk).is_empty(), "{junk}: {:?}", paths(junk));
        }
    }

    #[test]
    fn rejected_junk() {
        for junk in [
            "1/2 of it",
            "on 2024/08/13",
            "and/or",
            "text/html",
            "fix/web-websocket-reconnect-storm",
            "origin/main",
            "/compact",
            "/clear",
            "//comment",
            "src/**/*.ts",
            "$HOME/x/y",
            "a//b",
            "-Isrc/include",
            "km/h",
            "@/hooks/types",
            "</div>",
            "x.shape/y",
            "input/output",
            "/",
            "./",
            "..",
            "~",
            "done/in_progress/pending",
            "Auth/CORS/GZip",
            "s/old_string/new_string/g",
            "s/a/b/",
            "10s/old/new/",
            "/path/to/working/dir",
            "path/to/file1",
            "filename.py",
            "astropy/modeling/tests",
        ] {
            assert!(paths(junk).is_empty(), "{junk}: {:?}", paths(junk));
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            facts("see https://example.com/a_(b)."),
            ["https://example.com/a_(b)"]
        );
        assert_eq!(
            facts("[docs](https://x.io/p?q=1&r=2), more"),
            ["https://x.io/p?q=1&r=2"]
        );
        assert_eq!(
            facts("访问https://github.com/a/b获取。"),
            ["https://github.com/a/b"]
        );
        assert_eq!(
            facts("<http://localhost:5173/src/hooks/x.ts>"),
            ["http://localhost:5173/src/hooks/x.ts"]
        );
        assert_eq!(
            facts("file:///tmp/x.txt and ftp://h/f"),
            ["file:///tmp/x.txt", "ftp://h/f"]
        );
        // No double counting as paths; a bare scheme is nothing.
        assert_eq!(facts("https:// and mailto:x@y.z"), Vec::<String>::new());
        assert_eq!(
            facts("'https://a.b/c' \"http://d.e\""),
            ["https://a.b/c", "http://d.e"]
        );
    }

    #[test]
    fn error_names_found() {
        assert_eq!(
            facts("raised ZeroDivisionError: division by zero; then KeyError('x')"),
            ["ZeroDivisionError", "KeyError"]
        );
        assert_eq!(
            facts("java.lang.NullPointerException at Foo"),
            ["java.lang.NullPointerException"]
        );
        // The bare name is contained in the qualified one.
        assert_eq!(
            facts("HTTPError, then requests.exceptions.HTTPError"),
            ["requests.exceptions.HTTPError"]
        );
        assert_eq!(facts("error[E0425]: cannot find value"), ["E0425"]);
        assert_eq!(facts("Error: ENOENT: no such file"), ["ENOENT"]);
        assert_eq!(
            facts("DeprecationWarning and KeyboardInterrupt"),
            ["DeprecationWarning", "KeyboardInterrupt"]
        );
        for junk in [
            "Error alone",
            "isError onError",
            "CONNECTION_ERROR",
            "std::io::Error",
            "errors",
        ] {
            assert!(facts(junk).is_empty(), "{junk}: {:?}", facts(junk));
        }
        // Chinese prose around names.
        assert_eq!(
            facts("出现了KeyError错误，以及“ValueError”。"),
            ["KeyError", "ValueError"]
        );
    }

    #[test]
    fn sources_and_dedup() {
        let msgs = vec![
            Message::text(
                Role::User,
                "Fix billing/tax.py, it raises ZeroDivisionError. See https://x.org/i/1.",
            ),
            Message::new(
                Role::Assistant,
                vec![
                    Block::thinking("maybe /secret/thinking.py"),
                    Block::text("Reading tax.py."),
                    Block::tool_call(
                        Some("c1"),
                        "bash",
                        "{\"command\": \"cat /srv/billing/tax.py\\nls src/\"}",
                    ),
                ],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(
                    Some("c1"),
                    "/from/tool/output.py KeyError",
                )],
            ),
            Message::text(Role::System, "/etc/system.conf"),
            Message::text(Role::User, "修改 src/lib.rs，谢谢"),
        ];
        assert_eq!(
            must_keep_facts(&msgs),
            [
                "ZeroDivisionError",
                "https://x.org/i/1",
                "/srv/billing/tax.py",
                "src/lib.rs"
            ]
        );
        assert!(must_keep_facts(&[]).is_empty());
    }

    #[test]
    fn args_not_json_and_keys() {
        let mut s = FactSet::new();
        s.scan_args("{\"/not/a/fact.py\": \"value src/a.rs\"}", Kinds::ALL);
        s.scan_args("cat /raw/args.txt", Kinds::ALL);
        let f: Vec<String> = s.finish().into_iter().map(|(_, f)| f).collect();
        assert_eq!(f, ["src/a.rs", "/raw/args.txt"]);
    }

    #[test]
    fn presence() {
        let summary = "Edited `src/lib.rs` (see https://x.org/a) and C:/w/x.txt; KeyError fixed.";
        assert!(fact_present(summary, "src/lib.rs"));
        assert!(fact_present(summary, "./src/lib.rs"));
        assert!(fact_present(summary, "https://x.org/a/"));
        assert!(fact_present(summary, r"C:\w\x.txt"));
        assert!(fact_present(summary, "KeyError"));
        assert!(!fact_present(summary, "ValueError"));
        assert!(!fact_present(summary, "/srv/lib.rs"));
        assert!(fact_present(r"path C:\\w\\y.txt", r"C:\w\y.txt"));
        assert!(fact_present(r"see src/p/m.py", r"src\\p\\m.py"));
        assert!(fact_present(r"see src\p\m.py", r"src\\p\\m.py"));
    }

    #[test]
    fn wide_text_sources() {
        let s = "见 /srv/app/中文.py 🙂 和 KeyError";
        let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let m = [Message::new(
            Role::User,
            vec![Block::text(crate::message::Piece::Borrowed(
                crate::text::Text::Ucs4(&ucs4),
            ))],
        )];
        // A path segment in Chinese is a boundary: the ASCII part before it is kept.
        assert_eq!(must_keep_facts(&m), ["/srv/app", "KeyError"]);
    }
}

//! Whether a token names a file path: cleaning (`clean_path`), placeholders, the path rules
//! (`is_path`) and the word lists they use.

pub(super) fn trim_end_punct(t: &str) -> &str {
    t.trim_end_matches(['.', ',', ':', ';', '?', '*'])
}

fn is_drive(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/')
}

/// Reports the paths a token names (most name none or one; `PATH=/a/bin:/b/bin` or a git
/// `rev:path` name several, split at `:`). Returns whether it reported any.
pub(super) fn paths_in(tok: &str, next: Option<char>, out: &mut impl FnMut(&str)) -> bool {
    let mut t = tok.trim_start_matches('*');
    if let Some(r) = t.strip_prefix('@') {
        if !r.starts_with('/') {
            t = r;
        }
    }
    // A glob ends the path at its directory (`/x/projects/app/**/*` names `/x/projects/app`).
    if let Some(i) = t.find('*') {
        t = &t[..i];
    }
    // A flag glued to a path (`-I/opt/include`), dashes of a tree drawing (`|----file.py`).
    let b = t.as_bytes();
    if b.len() > 2 && b[0] == b'-' && b[1].is_ascii_alphabetic() && b[2] == b'/' {
        t = &t[2..];
    }
    t = t.trim_start_matches('-');
    while let Some(r) = t.strip_prefix(".../") {
        t = r;
    }
    t = trim_end_punct(t);
    if is_drive(t) {
        let end = t[2..].find(':').map_or(t.len(), |i| i + 2);
        return match one_path(&t[..end], next, 2) {
            Some(p) => {
                out(p);
                true
            }
            None => false,
        };
    }
    let mut found = false;
    let mut pieces = t.split(':').peekable();
    while let Some(piece) = pieces.next() {
        let after = if pieces.peek().is_some() {
            Some(':')
        } else {
            next
        };
        if let Some(p) = one_path(piece, after, 0) {
            out(p);
            found = true;
        }
    }
    found
}

/// The path one `:`-free piece of a token names (`from`: the length of a drive prefix).
fn one_path(mut t: &str, next: Option<char>, from: usize) -> Option<&str> {
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
    if !is_path(t, next, dir) || is_device(t) {
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

/// A brace expansion (`docs/{zh,en}/guide.md`): the token as written when its first expansion
/// (`docs/zh/guide.md`) is a path. The expansions themselves are not in the text, so the
/// written form is the fact a summary must keep.
pub(super) fn braced_path(tok: &str, next: Option<char>) -> Option<&str> {
    let t = trim_end_punct(tok.trim_start_matches('*'));
    let t = if t.len() > 1 {
        t.trim_end_matches('/')
    } else {
        t
    };
    let mut first = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}')?;
        first.push_str(&rest[..open]);
        let group = &rest[open + 1..close];
        first.push_str(group.split(',').next().unwrap_or(""));
        rest = &rest[close + 1..];
    }
    first.push_str(rest);
    let mut whole = false;
    paths_in(&first, next, &mut |p| whole |= p.len() == first.len());
    whole.then_some(t)
}

/// Pseudo-devices named in shell redirections (`2>/dev/null`): constants of the system, not
/// files anyone works on. A real device (`/dev/sda1`) is a path like any other.
fn is_device(t: &str) -> bool {
    #[rustfmt::skip]
    const DEVICES: &[&str] = &[
        "null", "zero", "full", "random", "urandom", "tty", "stdin", "stdout", "stderr",
    ];
    t.strip_prefix("/dev/")
        .is_some_and(|d| DEVICES.contains(&d))
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
    "hh", "hxx", "cs", "fs", "fsx", "vb", "rb", "php", "pl", "pm", "lua", "jl", "dart", "ex", "exs",
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
pub(super) const KNOWN_NAMES: &[&str] = &[
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
    // Not the dot-directories (`.venv`, `.git`, `.github`, `.ssh`, …): alone they name a
    // directory, not a file; as a first segment (`.github/workflows/ci.yml`) they start a path.
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

fn word_like_or_num(seg: &str) -> bool {
    word_like(seg) || (!seg.is_empty() && seg.bytes().all(|c| c.is_ascii_digit()))
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
        if segs.iter().any(|s| s.is_empty()) {
            return false;
        }
        let first = segs[0];
        let sed = matches!(
            first.trim_start_matches(|c: char| c.is_ascii_digit()),
            "s" | "y"
        );
        if !segs.iter().all(|s| has_letter(s) || *s == "..") {
            // Dates and fractions (`2024/08/13`, `1/2`); but four segments or more with a
            // number among them are a route (`repos/o/r/pulls/1290/comments`).
            return segs.len() >= 4
                && has_letter(t)
                && !sed
                && segs.iter().all(|s| word_like_or_num(s));
        }
        let last = segs[segs.len() - 1];
        // A directory written with its trailing slash (`astropy/modeling/`), but not a sed
        // expression (`s/old/new/`).
        let dir_ok = dir && segs.iter().all(|s| word_like(s)) && !sed;
        return segs.len() >= 4 && !sed
            || known_ext(last)
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

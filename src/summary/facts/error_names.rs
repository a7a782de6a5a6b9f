//! Exception and error names: `…Error`/`…Exception`/`…Warning` identifiers (with their dotted
//! qualifier), a few well-known exception names, errno names and rustc codes.

use super::FactKind;

#[rustfmt::skip]
const ERROR_SUFFIXES: &[&str] = &[
    "Error", "Exception", "Warning",
];
#[rustfmt::skip]
pub(super) const ERROR_NAMES: &[&str] = &[
    "KeyboardInterrupt", "SystemExit", "StopIteration", "StopAsyncIteration", "GeneratorExit",
];
#[rustfmt::skip]
pub(super) const ERRNO_NAMES: &[&str] = &[
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
pub(super) fn error_names(tok: &str, prev: Option<char>, out: &mut impl FnMut(FactKind, &str)) {
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

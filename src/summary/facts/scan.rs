//! The scanner: URLs first (at each `://`), then tokens split at the delimiter table and at
//! CJK characters, each token handed to the path and error-name classifiers.

use super::error_names::error_names;
use super::paths::{braced_path, paths_in, trim_end_punct, KNOWN_NAMES};
use super::{FactKind, FactKinds};

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
pub(super) fn is_delim(c: char) -> bool {
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

/// Whether `text` can hold an error name at all ([`error_names`] reports an errno name or a rustc
/// code, both `E` and a capital or a digit, or an identifier ending in `Error`, `Exception` or
/// `Warning`, or one of the well-known names): a scan for error names only skips the text that
/// cannot (the rule summary scans every user and assistant message this way).
fn may_hold_error_name(text: &str) -> bool {
    text.as_bytes()
        .windows(2)
        .any(|w| w[0] == b'E' && (w[1].is_ascii_uppercase() || w[1].is_ascii_digit()))
        || [
            "Error",
            "Exception",
            "Warning",
            "KeyboardInterrupt",
            "SystemExit",
            "Iteration",
            "GeneratorExit",
        ]
        .iter()
        .any(|n| text.contains(n))
}

/// Scans `text` and reports each fact found (duplicates included).
pub fn scan_text(text: &str, kinds: FactKinds, out: &mut impl FnMut(FactKind, &str)) {
    if !kinds.paths && !kinds.urls && !may_hold_error_name(text) {
        return;
    }
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
                url(text, s, e, out);
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
                url(text, urls[ui].0, urls[ui].1, out);
            }
            pos = pos.max(urls[ui].1);
            ui += 1;
            continue;
        }
        let c = char_at(text, pos);
        let stop = if ui < urls.len() { urls[ui].0 } else { len };
        let bytes = text.as_bytes();
        if is_delim(c) && !(c == '{' && kinds.paths && brace_group_end(bytes, pos, stop).is_some())
        {
            pos += c.len_utf8();
            continue;
        }
        let start = pos;
        let mut braced = false;
        while pos < stop {
            pos = ascii_word_end(bytes, pos, stop);
            if pos >= stop {
                break;
            }
            let c = char_at(text, pos);
            if is_delim(c) {
                // A brace expansion (`docs/{zh,en}/x.md`) stays inside its token.
                match (c == '{' && kinds.paths)
                    .then(|| brace_group_end(bytes, pos, stop))
                    .flatten()
                {
                    Some(e) => {
                        braced = true;
                        pos = e;
                        continue;
                    }
                    None => break,
                }
            }
            pos += c.len_utf8();
        }
        token(text, start, pos, braced, kinds, out);
    }
    if kinds.urls {
        for &(s, e) in &urls[ui..] {
            url(text, s, e, out);
        }
    }
}

/// The end (after `}`) of a brace expansion's group opening at `open`: at most 128 bytes of
/// path characters with a comma among them (`{zh,en}`), else `None` (`{x}`, code, JSON).
fn brace_group_end(b: &[u8], open: usize, stop: usize) -> Option<usize> {
    let mut comma = false;
    for (i, &c) in b[open + 1..stop.min(open + 130)].iter().enumerate() {
        match c {
            b'}' => return (comma && i > 1).then_some(open + i + 2),
            b',' => comma = true,
            c if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'/' | b'~') => {}
            _ => return None,
        }
    }
    None
}

fn url(text: &str, s: usize, e: usize, out: &mut impl FnMut(FactKind, &str)) {
    if !touches_ellipsis(text, s, e) {
        out(FactKind::Url, &text[s..e]);
    }
}

/// Whether the token at `start..end` touches an ellipsis: a fragment of a text cut earlier
/// (the cut marker, a rule summary's shortened line), not a fact.
fn touches_ellipsis(text: &str, start: usize, end: usize) -> bool {
    text[..start].ends_with('…') || text[end..].starts_with('…')
}

fn token(
    text: &str,
    start: usize,
    end: usize,
    braced: bool,
    kinds: FactKinds,
    out: &mut impl FnMut(FactKind, &str),
) {
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
        if touches_ellipsis(text, start, end) {
            return;
        }
        let next = text[end..].chars().next();
        if braced {
            if let Some(p) = braced_path(tok, next) {
                out(FactKind::Path, p);
                return;
            }
        } else if paths_in(tok, next, &mut |p| out(FactKind::Path, p)) {
            return;
        }
    }
    if kinds.errors && capital {
        let prev = text[..start].chars().next_back();
        error_names(tok, prev, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::error_names::{ERRNO_NAMES, ERROR_NAMES};
    use super::*;

    /// The prefilter of a scan for error names never skips a text the scan finds one in.
    #[test]
    fn error_prefilter_keeps_every_name() {
        let mut texts: Vec<String> = ERRNO_NAMES
            .iter()
            .chain(ERROR_NAMES)
            .map(|n| format!("it failed with {n}: boom"))
            .collect();
        texts.extend(
            [
                "error[E0425]: cannot find value",
                "raise ValueError('x')",
                "java.lang.IllegalStateException: no",
                "DeprecationWarning: old",
                "We saw nothing wrong. Everything is fine.",
                "no error here at all",
                "错误：FileNotFoundError 文件不存在",
            ]
            .map(String::from),
        );
        for t in &texts {
            let mut found = Vec::new();
            scan_text(t, FactKinds::ERRORS, &mut |_, f| found.push(f.to_owned()));
            if !found.is_empty() {
                assert!(may_hold_error_name(t), "{t}: {found:?}");
            }
        }
        assert!(!may_hold_error_name("no error here at all"));
        assert!(!may_hold_error_name(
            "We saw nothing wrong. Everything is fine."
        ));
    }
}

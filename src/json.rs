//! JSON strings: finding the string literals of a JSON text (`json_strings`) and writing one
//! ([`push_json_string`], the crate's one writer of JSON string literals).
//!
//! Design note. The writer is hand-written, not `serde_json`, for three reasons: a count must
//! equal the recount of what is returned, and `serde_json` escapes `\b` and `\f` as short
//! escapes where the Python boundary's writer (which counts an Anthropic `tool_use.input`
//! object's strings) writes `\u0008`/`\u000c`, so both go through this one function; the source
//! is often a PEP 393 [`Text`] in place, not a `&str`; and [`crate::cut`] measures cuts by the
//! same escape table (`json_escaped_chars`). The scanner finds literals by bytes after a
//! no-allocation validity check (`serde::de::IgnoredAny`), so a cut keeps keys, their order and
//! numbers byte for byte (`serde_json::Value` reorders keys without `preserve_order`).

use crate::text::Text;
use std::borrow::Cow;
use std::fmt::Write as _;

/// A float as Python's `repr` writes it (shortest round-trip digits; exponent form below 1e-4
/// and from 1e16), and `json.dumps` too for a finite one (a `serde_json::Number` always is): the
/// config's messages and the Rust API's reader of JSON numbers share it.
pub(crate) fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    // `{:e}` gives the shortest digits that round-trip, as Python's repr does.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (a, b) = digits.split_at(point as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{body}")
    } else {
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{esign}{:02}", exp.abs())
    }
}

/// A string literal inside a JSON text: byte range including the quotes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JsonStr {
    pub start: usize,
    pub end: usize,
    pub is_key: bool,
    pub escaped: bool,
}

impl JsonStr {
    /// The decoded value (borrowed when it has no escapes).
    pub fn decode<'a>(&self, json: &'a str) -> Cow<'a, str> {
        let raw = &json[self.start..self.end];
        if !self.escaped {
            return Cow::Borrowed(&raw[1..raw.len() - 1]);
        }
        serde_json::from_str::<String>(raw)
            .map_or(Cow::Borrowed(&raw[1..raw.len() - 1]), Cow::Owned)
    }
}

/// Whether `s` is one valid JSON value (checked without building it).
pub(crate) fn is_json(s: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok()
}

/// The string literals of a JSON text, or `None` when it is not valid JSON.
pub(crate) fn json_strings(json: &str) -> Option<Vec<JsonStr>> {
    if !is_json(json) {
        return None;
    }
    let b = json.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        let mut escaped = false;
        i += 1;
        while i < b.len() && b[i] != b'"' {
            if b[i] == b'\\' {
                escaped = true;
                i += 1;
            }
            i += 1;
        }
        let end = (i + 1).min(b.len());
        let mut j = end;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        out.push(JsonStr {
            start,
            end,
            is_key: j < b.len() && b[j] == b':',
            escaped,
        });
        i = end;
    }
    Some(out)
}

/// `s` as a JSON string literal, written the way the Python boundary writes the strings of an
/// Anthropic `tool_use.input` when it counts them (both go through [`push_json_string`]): `"`, `\\`, `\n`, `\r`, `\t` as short escapes, every other
/// control character as `\u00xx`, everything else as it is. Cut arguments are written this
/// way so the count of the cut text is the count of the request returned (the boundary parses
/// the cut arguments back into an object, and a recount writes them again); `serde_json`
/// writes `\b` and `\f`, which would count fewer characters than the recount sees.
pub fn json_string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_string(Text::Utf8(s), &mut out);
    out
}

/// Append `t` as a JSON string literal, escaped as [`json_string_literal`] says: the one writer
/// of the crate, shared with the Python boundary (which writes an Anthropic `tool_use.input`
/// object's strings this way to count them), so a cut and its recount always agree.
pub fn push_json_string(t: Text<'_>, out: &mut String) {
    // Object arguments (an Anthropic `tool_use.input`, a LangChain call's `args`, a Gemini
    // call's `args`: 1.4 MB per 10k corpus messages) are written whole when read. Blocks of
    // [`CHUNK`] code units that need no escape are copied at once (the test is a branch-free
    // loop the compiler vectorises); a block with an escape, or, in the fixed-width layouts, a
    // non-ASCII code point, is written code point by code point.
    match t {
        Text::Utf8(s) => push_utf8(s, out),
        Text::Latin1(b) => push_units(b, out),
        Text::Ucs2(w) => push_units(w, out),
        Text::Ucs4(w) => push_units(w, out),
    }
}

/// Code units tested at once by [`push_json_string`].
const CHUNK: usize = 16;

/// Whether code point (or UTF-8 byte) `c` is written as it is inside a JSON string literal.
#[inline(always)]
fn plain(c: u32) -> bool {
    (c >= 0x20) & (c != u32::from(b'"')) & (c != u32::from(b'\\'))
}

/// Append `c`, escaped when it must be.
#[inline(always)]
fn push_char(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    }
}

/// UTF-8: the runs between the bytes that need escaping are copied (bytes >= 0x80 never do).
fn push_utf8(s: &str, out: &mut String) {
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push('"');
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        if i + CHUNK <= b.len()
            && b[i..i + CHUNK]
                .iter()
                .fold(true, |a, &x| a & plain(u32::from(x)))
        {
            i += CHUNK;
            continue;
        }
        let end = b.len().min(i + CHUNK);
        while i < end {
            let x = b[i];
            if !plain(u32::from(x)) {
                // An ASCII byte: `start..i` ends on a character boundary.
                out.push_str(&s[start..i]);
                push_char(char::from(x), out);
                start = i + 1;
            }
            i += 1;
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Latin-1, UCS-2, UCS-4: all-ASCII blocks without escapes are narrowed and copied; other code
/// points are read as [`Text::chars`] reads them (a surrogate pair joined, a lone surrogate as
/// U+FFFD).
fn push_units<U: Copy + Into<u32>>(w: &[U], out: &mut String) {
    out.reserve(w.len() + 2);
    out.push('"');
    let mut buf = [0u8; CHUNK];
    let mut i = 0;
    while i < w.len() {
        if i + CHUNK <= w.len() {
            let block = &w[i..i + CHUNK];
            let ascii = block.iter().fold(true, |a, &u| {
                let c: u32 = u.into();
                a & (c < 0x80) & plain(c)
            });
            if ascii {
                for (d, &u) in buf.iter_mut().zip(block) {
                    *d = Into::<u32>::into(u) as u8;
                }
                if let Ok(s) = std::str::from_utf8(&buf) {
                    out.push_str(s);
                }
                i += CHUNK;
                continue;
            }
        }
        let end = w.len().min(i + CHUNK);
        while i < end {
            let next = w.get(i + 1).map(|&u| u.into());
            let (c, pair) = crate::text::join_surrogates(w[i].into(), next);
            push_char(c, out);
            i += 1 + usize::from(pair);
        }
    }
    out.push('"');
}

/// Chars [`json_string_literal`] spends on `c` (`crate::cut`'s `CutSizer` measures cuts with it).
pub(crate) fn json_escaped_chars(c: char) -> u32 {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cut::cut_json_args;

    #[test]
    fn the_utf8_fast_path_writes_what_the_char_loop_writes() {
        let v = "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{1f}j\u{7f}中🙂 end";
        let mut fast = String::new();
        push_json_string(Text::Utf8(v), &mut fast);
        let latin: Vec<u32> = v.chars().map(|c| c as u32).collect();
        let mut slow = String::new();
        push_json_string(Text::Ucs4(&latin), &mut slow);
        assert_eq!(fast, slow);
    }

    /// The writer before the block fast paths: one code point at a time.
    fn reference(t: Text<'_>) -> String {
        let mut out = String::from("\"");
        for c in t.chars() {
            push_char(c, &mut out);
        }
        out.push('"');
        out
    }

    #[test]
    fn every_layout_writes_what_the_char_loop_writes_at_every_block_boundary() {
        // Escapes, controls, non-ASCII and surrogates placed at every offset around a block's
        // edges, in strings long enough to hold several blocks, in every layout.
        let specials: [u32; 11] = [
            0x22, 0x5C, 0x0A, 0x0D, 0x09, 0x08, 0x01, 0x7F, 0x4E2D, 0x1F642, 0xE9,
        ];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 47, 100] {
            for _ in 0..40 {
                let mut units: Vec<u32> = (0..len)
                    .map(|k| u32::from(b'a') + (k % 26) as u32)
                    .collect();
                for _ in 0..3 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if len > 0 {
                        let at = (seed as usize) % len;
                        units[at] = specials[(seed >> 32) as usize % specials.len()];
                    }
                }
                let utf8: String = units.iter().filter_map(|&c| char::from_u32(c)).collect();
                let mut out = String::new();
                push_json_string(Text::Utf8(&utf8), &mut out);
                assert_eq!(out, reference(Text::Utf8(&utf8)));
                let ucs4 = units.clone();
                let mut out = String::new();
                push_json_string(Text::Ucs4(&ucs4), &mut out);
                assert_eq!(out, reference(Text::Ucs4(&ucs4)));
                // UCS-2 with surrogates (pairs, reversed pairs and lone ones) instead of astral
                // code points, and Latin-1 with the others replaced.
                let ucs2: Vec<u16> = units
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| match c {
                        0x1F642 => [0xD83D, 0xDE42, 0xDC00][k % 3],
                        c => u16::try_from(c).unwrap_or(0xD800),
                    })
                    .collect();
                let mut out = String::new();
                push_json_string(Text::Ucs2(&ucs2), &mut out);
                assert_eq!(out, reference(Text::Ucs2(&ucs2)));
                let latin1: Vec<u8> = units
                    .iter()
                    .map(|&c| u8::try_from(c).unwrap_or(0xE9))
                    .collect();
                let mut out = String::new();
                push_json_string(Text::Latin1(&latin1), &mut out);
                assert_eq!(out, reference(Text::Latin1(&latin1)));
            }
        }
        // A surrogate pair split by a block boundary is still one character.
        let mut pair: Vec<u16> = vec![u16::from(b'x'); 15];
        pair.extend([0xD83D, 0xDE42]);
        pair.extend(vec![u16::from(b'y'); 20]);
        let mut out = String::new();
        push_json_string(Text::Ucs2(&pair), &mut out);
        assert_eq!(out, format!("\"{}🙂{}\"", "x".repeat(15), "y".repeat(20)));
    }

    #[test]
    fn json_literals_are_written_like_the_boundary_writes_them() {
        let v = "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{1f}j\u{7f}中🙂";
        let lit = json_string_literal(v);
        assert_eq!(
            lit,
            "\"a\\\"b\\\\c\\nd\\re\\tf\\u0008g\\u000ch\\u0001i\\u001fj\u{7f}中🙂\""
        );
        assert_eq!(serde_json::from_str::<String>(&lit).unwrap(), v);
        let n: u32 = v.chars().map(json_escaped_chars).sum();
        assert_eq!(n as usize + 2, lit.chars().count());
        // Cut arguments with control characters keep the boundary's escapes.
        let args = format!(
            "{{\"content\":\"{}\\u0008\\u0008\"}}",
            "The user asked. ".repeat(10)
        );
        let cut = cut_json_args(&args, 60).unwrap();
        assert!(cut.ends_with("\\u0008\\u0008\"}"), "{cut}");
    }
}

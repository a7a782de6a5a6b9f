//! JSON strings: finding the string literals of a JSON text ([`json_strings`]) and writing one
//! ([`push_json_string`], the crate's one writer of JSON string literals).
//!
//! Design note. The writer is hand-written, not `serde_json`, for three reasons: a count must
//! equal the recount of what is returned, and `serde_json` escapes `\b` and `\f` as short
//! escapes where the Python boundary's writer (which counts an Anthropic `tool_use.input`
//! object's strings) writes `\u0008`/`\u000c`, so both go through this one function; the source
//! is often a PEP 393 [`Text`] in place, not a `&str`; and [`crate::cut`] measures cuts by the
//! same escape table ([`json_escaped_chars`]). The scanner finds literals by bytes after a
//! no-allocation validity check (`serde::de::IgnoredAny`), so a cut keeps keys, their order and
//! numbers byte for byte (`serde_json::Value` reorders keys without `preserve_order`).

use crate::text::Text;
use std::borrow::Cow;
use std::fmt::Write as _;

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
    // UTF-8 (an ASCII Python string, a Rust string): copy the runs between the bytes that need
    // escaping, the same output as the char loop below. Object arguments (an Anthropic
    // `tool_use.input`, a Gemini call's `args`: 1.4 MB per 10k corpus messages) are written
    // whole when read, and char by char that was half of reading Gemini contents.
    if let Text::Utf8(s) = t {
        out.reserve(s.len() + 2);
        out.push('"');
        let mut start = 0;
        for (i, &b) in s.as_bytes().iter().enumerate() {
            if b != b'"' && b != b'\\' && b >= 0x20 {
                continue;
            }
            out.push_str(&s[start..i]);
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                _ => {
                    let _ = write!(out, "\\u{:04x}", b);
                }
            }
            start = i + 1;
        }
        out.push_str(&s[start..]);
        out.push('"');
        return;
    }
    out.push('"');
    for c in t.chars() {
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

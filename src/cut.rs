//! Cutting text: the one cut marker (`…[N chars omitted]…`), head + tail cuts of plain text in
//! any string layout, one-line prefixes ([`shorten`]), and cuts of JSON tool arguments inside
//! their string values ([`cut_json_args`]), measured without building each trial (`CutSizer`).
//!
//! Design note. **One cut marker** (`…[N chars omitted]…`, [`cut_marker`]) for every cut in
//! the crate, so [`is_cut`] can tell cut text and nothing is cut twice (micro-compaction stays
//! idempotent and the cached prompt prefix stable). Cuts count code points, read only the
//! kept ends of a UCS-2/UCS-4 string, and snap to a line end near the cut. JSON arguments
//! are cut inside their string values ([`cut_json_args`]), found by a byte scanner after a
//! no-allocation validity check (`serde::de::IgnoredAny`), so keys, order and numbers are
//! kept byte for byte; `serde_json`'s `Value` would have reordered keys without the
//! `preserve_order` feature and allocated the whole tree.

use crate::json::{json_escaped_chars, json_string_literal, json_strings, JsonStr};
use crate::text::Text;
use std::borrow::Cow;

/// Prefix of every placeholder the compactor writes (micro-compaction's cleared output, the
/// last block's and the ladder's): text that starts with it, like cut text, is never cut again.
pub const PLACEHOLDER_PREFIX: &str = "[context-compactor:";

/// What a cut leaves between head and tail: `…[1234 chars omitted]…`. One marker everywhere,
/// so [`is_cut`] recognises anything this crate cut and nothing is cut twice.
pub fn cut_marker(omitted: usize) -> String {
    format!("…[{omitted} chars omitted]…")
}

const MARKER_TAIL: &str = " chars omitted]…";
const MARKER_HEAD: &str = "…[";
/// Characters of the marker besides the digits.
const MARKER_FIXED_CHARS: usize = 18;

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Whether `text` holds a cut marker of this crate (it was cut before).
pub fn is_cut(text: &str) -> bool {
    // The marker holds `…`: ASCII text (checked many bytes at a time) has none.
    if text.is_ascii() {
        return false;
    }
    text.match_indices(MARKER_TAIL).any(|(i, _)| {
        let before = &text[..i];
        let d = before.len() - before.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        d > 0 && before[..before.len() - d].ends_with(MARKER_HEAD)
    })
}

/// Head and tail split of a cut: `(head chars, tail chars)` for a text of `len` chars cut to
/// at most `max_chars` including the marker (never below one char each side).
fn split_budget(len: usize, max_chars: usize) -> (usize, usize) {
    let keep = max_chars
        .saturating_sub(MARKER_FIXED_CHARS + digits(len))
        .max(2);
    (keep - keep / 2, keep / 2)
}

/// Snaps a head to end after a newline, and a tail to start after one, when one is near the
/// cut (within a fifth of the side), so cut output keeps whole lines.
fn snap_lines(head: &mut String, tail: &mut String, min_head: usize) -> usize {
    let mut dropped = 0;
    let h = head.chars().count();
    if let Some(i) = head.rfind('\n') {
        let after = head[i + 1..].chars().count();
        if after > 0 && after * 5 <= h && h - after >= min_head {
            dropped += after;
            head.truncate(i + 1);
        }
    }
    let t = tail.chars().count();
    if let Some(i) = tail.find('\n') {
        let before = tail[..i].chars().count();
        if before > 0 && before * 5 <= t {
            dropped += before;
            tail.drain(..i);
        }
    }
    dropped
}

/// `text` cut to head + marker + tail within `max_chars` characters (code points), or `None`
/// when it is already that short, when it was cut before ([`is_cut`]), or when a cut would
/// not make it shorter. Cuts fall on character boundaries and, near the cut, on line ends.
/// The result is at most `max_chars` long whenever `max_chars` ≥ 30 (the marker's room).
pub fn head_tail(text: &str, max_chars: usize) -> Option<String> {
    let len = if text.is_ascii() {
        text.len()
    } else {
        text.chars().count()
    };
    if len <= max_chars || is_cut(text) {
        return None;
    }
    cut_parts(Text::Utf8(text), len, max_chars)
}

/// [`head_tail`] of a [`Text`] in any layout, reading only the head and the tail (no
/// transcoding of the middle, so a huge UCS-2 tool output costs only what is kept). Does not
/// look for an earlier cut: the transcript may cut a cut text again.
pub fn head_tail_text(text: Text<'_>, max_chars: usize) -> Option<String> {
    let len = text.char_len();
    if len <= max_chars {
        return None;
    }
    cut_parts(text, len, max_chars)
}

/// [`head_tail_text`] that keeps the text's opening first: the head gets the first
/// `opening` characters of what fits (all of it when less fits), and the rest is shared
/// between head and tail as usual. The task is cut this way (DESIGN, "The task"): its
/// opening states what to do.
pub fn head_tail_opening(text: Text<'_>, max_chars: usize, opening: usize) -> Option<String> {
    let len = text.char_len();
    if len <= max_chars {
        return None;
    }
    let (h, t) = split_budget(len, max_chars);
    let keep = h + t;
    let first = opening.min(keep);
    let rest = keep - first;
    let head = first + (rest - rest / 2);
    cut_parts_at(text, len, head, keep - head, first)
}

fn cut_parts(text: Text<'_>, len: usize, max_chars: usize) -> Option<String> {
    let (h, t) = split_budget(len, max_chars);
    cut_parts_at(text, len, h, t, 0)
}

/// `text` as its first `h` and last `t` characters around a cut marker. `opening`: the head is
/// snapped to a line end only where that keeps at least this many characters (the opening the
/// caller asked for stays whole).
fn cut_parts_at(text: Text<'_>, len: usize, h: usize, t: usize, opening: usize) -> Option<String> {
    if h + t >= len {
        return None;
    }
    let (mut head, mut tail): (String, String) = match text {
        Text::Utf8(s) => {
            let hb = s.char_indices().nth(h).map_or(s.len(), |(i, _)| i);
            let tb = if s.is_ascii() {
                s.len() - t
            } else {
                s.char_indices().nth(len - t).map_or(s.len(), |(i, _)| i)
            };
            (s[..hb].to_owned(), s[tb..].to_owned())
        }
        Text::Latin1(b) => (
            b[..h].iter().map(|&c| c as char).collect(),
            b[len - t..].iter().map(|&c| c as char).collect(),
        ),
        Text::Ucs2(w) => (
            Text::Ucs2(&w[..h]).chars().collect(),
            Text::Ucs2(&w[len - t..]).chars().collect(),
        ),
        Text::Ucs4(w) => (
            Text::Ucs4(&w[..h]).chars().collect(),
            Text::Ucs4(&w[len - t..]).chars().collect(),
        ),
    };
    let omitted = len - h - t + snap_lines(&mut head, &mut tail, opening);
    let marker = cut_marker(omitted);
    let mut out = String::with_capacity(head.len() + marker.len() + tail.len());
    out.push_str(&head);
    out.push_str(&marker);
    out.push_str(&tail);
    Some(out)
}

/// `text` shortened to at most `max_chars` characters with a trailing `…` (a plain
/// prefix, for one-line summary items). Borrowed when already short.
pub fn shorten(text: &str, max_chars: usize) -> Cow<'_, str> {
    if max_chars == 0 {
        return Cow::Borrowed("");
    }
    if text.len() <= max_chars || text.chars().nth(max_chars).is_none() {
        return Cow::Borrowed(text);
    }
    let keep = max_chars.saturating_sub(1);
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let mut s = text[..end].trim_end().to_owned();
    s.push('…');
    Cow::Owned(s)
}

/// The length of `json_string_literal(&head_tail(v, l)?)` for any `l`, without building it:
/// [`cut_json_args`] searches for the largest common cut length, and measuring each trial by
/// arithmetic on these tables (instead of cutting and encoding every value again) keeps the
/// search linear in the arguments' size. Mirrors `cut_parts` and `snap_lines` exactly (a test
/// checks both agree).
struct CutSizer {
    /// Chars of the value.
    n: usize,
    /// Char indices of its newlines.
    newlines: Vec<usize>,
    /// The chars that encode as more than one: (char index, extra encoded chars of this one
    /// and every such char before it). Sparse: most values have few.
    escapes: Vec<(usize, usize)>,
}

impl CutSizer {
    fn new(v: &str, n: usize) -> Self {
        let mut sizer = CutSizer {
            n,
            newlines: Vec::new(),
            escapes: Vec::new(),
        };
        let mut extra = 0;
        let mut visit = |i: usize, c: char| {
            if c == '\n' {
                sizer.newlines.push(i);
            }
            extra += json_escaped_chars(c) as usize - 1;
            sizer.escapes.push((i, extra));
        };
        if v.is_ascii() {
            for (i, &b) in v.as_bytes().iter().enumerate() {
                if b < 0x20 || b == b'"' || b == b'\\' {
                    visit(i, b as char);
                }
            }
        } else {
            for (i, c) in v.chars().enumerate() {
                if (c as u32) < 0x20 || c == '"' || c == '\\' {
                    visit(i, c);
                }
            }
        }
        sizer
    }

    /// Extra encoded chars of the first `x` chars.
    fn extra_before(&self, x: usize) -> usize {
        match self.escapes.partition_point(|&(i, _)| i < x) {
            0 => 0,
            k => self.escapes[k - 1].1,
        }
    }

    /// Encoded chars of chars `a..b` of the value.
    fn span(&self, a: usize, b: usize) -> usize {
        b - a + self.extra_before(b) - self.extra_before(a)
    }

    /// Chars of the JSON literal of the value cut to `l` chars; `None` when no cut is made.
    fn encoded_chars(&self, l: usize) -> Option<usize> {
        let n = self.n;
        if n <= l {
            return None;
        }
        let (h, t) = split_budget(n, l);
        if h + t >= n {
            return None;
        }
        let (mut head_end, mut tail_start) = (h, n - t);
        let mut dropped = 0;
        // The head ends after its last newline when that drops at most a fifth of it.
        let k = self.newlines.partition_point(|&x| x < h);
        if k > 0 {
            let after = h - (self.newlines[k - 1] + 1);
            if after > 0 && after * 5 <= h {
                dropped += after;
                head_end = h - after;
            }
        }
        // The tail starts at its first newline under the same condition.
        let k = self.newlines.partition_point(|&x| x < n - t);
        if let Some(&q) = self.newlines.get(k) {
            let before = q - (n - t);
            if before > 0 && before * 5 <= t {
                dropped += before;
                tail_start = q;
            }
        }
        let omitted = n - h - t + dropped;
        Some(
            2 + self.span(0, head_end)
                + MARKER_FIXED_CHARS
                + digits(omitted)
                + self.span(tail_start, n),
        )
    }
}

/// The argument keys that name the file a tool call reads or edits (the artifact trail and the
/// superseded-read pass look for the path under these; a cut of arguments leaves it whole).
pub(crate) const PATH_KEYS: &[&str] = &[
    "file_path",
    "path",
    "filename",
    "target_file",
    "notebook_path",
    "file",
];

/// Whether `v` is one file path (a value the artifact trail reads): no whitespace, at most
/// [`PATH_MAX_CHARS`] characters.
fn is_one_path(v: &str) -> bool {
    !v.is_empty() && v.chars().count() <= PATH_MAX_CHARS && !v.contains(char::is_whitespace)
}

/// The longest path value a cut of JSON arguments leaves whole.
const PATH_MAX_CHARS: usize = 260;

/// Shortest a string value is cut to inside JSON arguments (marker included).
const JSON_MIN_KEEP: usize = 40;

/// Tool-call arguments over `max_chars` cut to fit. Valid JSON stays valid JSON with the same
/// keys, numbers and structure: its longest string values are cut (head + marker + tail) to
/// one common length, the largest at which the whole fits, never below 40 characters; values
/// cut before are left alone, and so is the path under a path key (`file_path`, `path`, …).
/// Anything else is cut as plain text ([`head_tail`]). `None`
/// when the arguments already fit or nothing can be cut.
pub fn cut_json_args(args: &str, max_chars: usize) -> Option<String> {
    cut_json_args_with(args, max_chars, false)
}

/// [`cut_json_args`]; with `recut`, values cut before are cut again (the budget ladder's last
/// block, where a tail an earlier compaction cut must be cut further to fit).
pub fn cut_json_args_with(args: &str, max_chars: usize, recut: bool) -> Option<String> {
    let ascii = args.is_ascii();
    let total = if ascii {
        args.len()
    } else {
        args.chars().count()
    };
    if total <= max_chars {
        return None;
    }
    let Some(spans) = json_strings(args) else {
        return head_tail(args, max_chars);
    };
    // Candidates: (span, decoded value, its chars, its encoded chars, how its cuts measure).
    // The path a call works on (a value under a path key that is one path) stays whole: it is a
    // must-keep fact and what the artifact trail reads the call by.
    let path_values: Vec<bool> = (0..spans.len())
        .map(|i| {
            i > 0
                && spans[i - 1].is_key
                && PATH_KEYS.contains(&spans[i - 1].decode(args).as_ref())
                && is_one_path(&spans[i].decode(args))
        })
        .collect();
    let cands: Vec<(JsonStr, Cow<'_, str>, usize, usize, CutSizer)> = spans
        .into_iter()
        .zip(path_values)
        .filter(|(s, path)| !s.is_key && !path && s.end - s.start > JSON_MIN_KEEP)
        .filter_map(|(s, _)| {
            let v = s.decode(args);
            // An ASCII text may decode to non-ASCII (`\\u4e2d`): ask the value.
            let n = if v.is_ascii() {
                v.len()
            } else {
                v.chars().count()
            };
            (n > JSON_MIN_KEEP && (recut || !is_cut(&v))).then(|| {
                let enc = if ascii {
                    s.end - s.start
                } else {
                    args[s.start..s.end].chars().count()
                };
                let sizer = CutSizer::new(&v, n);
                (s, v, n, enc, sizer)
            })
        })
        .collect();
    if cands.is_empty() {
        return None;
    }
    let cut = |v: &str, l: usize| {
        if recut {
            head_tail_text(Text::Utf8(v), l)
        } else {
            head_tail(v, l)
        }
        .map(|c| json_string_literal(&c))
    };
    // Total chars with every candidate cut to `l` (measured, not built: see `CutSizer`).
    let size = |l: usize| -> usize {
        let mut t = total;
        for (_, _, n, enc, sizer) in &cands {
            if *n > l {
                if let Some(c) = sizer.encoded_chars(l) {
                    t = t - enc + c;
                }
            }
        }
        t
    };
    let longest = cands.iter().map(|c| c.2).max().unwrap_or(0);
    let (mut lo, mut hi) = (JSON_MIN_KEEP, longest);
    if size(lo) <= max_chars {
        // Largest `l` in [lo, hi) with size(l) ≤ max_chars.
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if size(mid) <= max_chars {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    let l = lo;
    let mut out = String::with_capacity(args.len().min(max_chars * 4 + 64));
    let mut at = 0;
    let mut changed = false;
    for (s, v, n, _, _) in &cands {
        if *n <= l {
            continue;
        }
        if let Some(c) = cut(v, l) {
            out.push_str(&args[at..s.start]);
            out.push_str(&c);
            at = s.end;
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    out.push_str(&args[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_cuts_once_and_marks() {
        assert_eq!(head_tail("short", 10), None);
        assert_eq!(head_tail("", 0), None);
        let s = "a".repeat(1000);
        let c = head_tail(&s, 100).unwrap();
        assert!(c.chars().count() <= 100, "{}", c.chars().count());
        assert!(c.starts_with("aaaa") && c.ends_with("aaaa"));
        assert!(is_cut(&c));
        assert!(c.contains("chars omitted"));
        // The omitted count is exact.
        let (head, rest) = c.split_once("…[").unwrap();
        let tail = rest.split_once("]…").unwrap().1;
        assert!(c.contains(&format!(
            "…[{} chars omitted]…",
            1000 - head.len() - tail.len()
        )));
        // Never cut twice.
        assert_eq!(head_tail(&c, 50), None);
        assert!(!is_cut("a…[x chars omitted]…"));
        assert!(!is_cut("plain text with chars omitted]…"));
    }

    #[test]
    fn cut_sizer_measures_what_head_tail_builds() {
        // Values of every kind the arguments hold: lines, quotes, backslashes, control
        // characters, CJK and emoji, at every cut length a search may try.
        let alphabet: Vec<char> = "ab \n\n\"\\\t\u{1}\u{7f}中🙂é".chars().collect();
        let mut rng = crate::testing::Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..300 {
            let len = 41 + case * 7 % 400;
            let v: String = (0..len).map(|_| rng.pick(&alphabet)).collect();
            let n = v.chars().count();
            let sizer = CutSizer::new(&v, n);
            for l in (1..n + 5).step_by(3) {
                let built = head_tail(&v, l).map(|c| json_string_literal(&c).chars().count());
                assert_eq!(sizer.encoded_chars(l), built, "{v:?} cut to {l}");
            }
        }
    }

    #[test]
    fn json_args_keep_the_path_a_call_works_on() {
        // An edit's long strings are cut; its path stays whole, even when the cut must go deep
        // (the budget ladder's recut), so the trail and the facts still read it.
        let path = format!(
            "/Users/someone/dev/{}/src/hooks/useSessionStream.ts",
            "deep/".repeat(8)
        );
        let args = serde_json::json!({
            "file_path": path,
            "old_string": "a".repeat(2_000),
            "new_string": "b".repeat(2_000),
        })
        .to_string();
        for recut in [false, true] {
            let cut = cut_json_args_with(&args, 200, recut).unwrap();
            let v: serde_json::Value = serde_json::from_str(&cut).unwrap();
            assert_eq!(v["file_path"], path.as_str(), "{cut}");
            assert!(is_cut(v["old_string"].as_str().unwrap()));
        }
        // A long text under a path key is not a path: it is cut like any value.
        let args = serde_json::json!({"path": "word ".repeat(400)}).to_string();
        assert!(cut_json_args(&args, 200).is_some());
    }

    #[test]
    fn json_args_ascii_escapes_of_cjk() {
        // ASCII arguments whose value decodes to Chinese: counted in chars of the value.
        let args = format!("{{\"text\": \"{}\"}}", "\\u4e2d\\u6587 ".repeat(300));
        assert!(args.is_ascii());
        let cut = cut_json_args(&args, 500).unwrap();
        assert!(cut.chars().count() <= 500, "{}", cut.chars().count());
        let v: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert!(v["text"].as_str().unwrap().starts_with("中文 中文"));
    }

    #[test]
    fn head_tail_cjk_emoji_and_lines() {
        let s = "中文🙂".repeat(300);
        let c = head_tail(&s, 80).unwrap();
        assert!(c.chars().count() <= 80);
        assert!(c.starts_with("中文🙂"));
        // Lines: the cut snaps to a line end when one is near.
        let lines: String = (0..200).map(|i| format!("line {i:03}\n")).collect();
        let c = head_tail(&lines, 200).unwrap();
        let (head, _) = c.split_once('…').unwrap();
        assert!(head.ends_with('\n'), "{head:?}");
        assert!(c.ends_with("line 199\n"));
    }

    #[test]
    fn head_tail_text_wide_layouts() {
        let s: String = "ab🙂".repeat(100);
        let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let c4 = head_tail_text(Text::Ucs4(&ucs4), 50).unwrap();
        assert_eq!(c4, head_tail(&s, 50).unwrap());
        assert!(c4.chars().count() <= 50);
        let bmp: String = "ab中".repeat(100);
        let ucs2: Vec<u16> = bmp.chars().map(|c| c as u16).collect();
        assert_eq!(head_tail_text(Text::Ucs2(&ucs2), 50), head_tail(&bmp, 50));
        // A lone surrogate becomes U+FFFD, never half a pair.
        let mut w: Vec<u16> = vec![0x61; 100];
        w[60] = 0xD83D;
        let c = head_tail_text(Text::Ucs2(&w), 30).unwrap();
        let (head, rest) = c.split_once("…[").unwrap();
        let tail = rest.split_once("]…").unwrap().1;
        assert!(head
            .chars()
            .chain(tail.chars())
            .all(|ch| ch == 'a' || ch == '\u{FFFD}'));
        let latin: Vec<u8> = vec![0xE9; 100];
        assert!(head_tail_text(Text::Latin1(&latin), 30)
            .unwrap()
            .starts_with('é'));
        assert_eq!(head_tail_text(Text::Utf8("abc"), 3), None);
    }

    #[test]
    fn shorten_is_a_prefix() {
        assert_eq!(shorten("abc", 5), "abc");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("中文中文中文", 3), "中文…");
    }

    #[test]
    fn json_args_stay_valid() {
        let big = "x".repeat(5000);
        let args = format!(
            "{{\"file_path\": \"/srv/app/x.py\", \"old_string\": \"{big}\", \"new_string\": \"{big}\\n中文\", \"n\": 3}}"
        );
        let cut = cut_json_args(&args, 500).unwrap();
        assert!(cut.chars().count() <= 500, "{}", cut.chars().count());
        let v: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(v["file_path"], "/srv/app/x.py");
        assert_eq!(v["n"], 3);
        assert!(is_cut(v["old_string"].as_str().unwrap()));
        assert!(v["new_string"].as_str().unwrap().ends_with("\n中文"));
        // Key order is kept.
        assert!(cut.find("file_path").unwrap() < cut.find("old_string").unwrap());
        // Idempotent: the cut fits, and cut values are not cut again.
        assert_eq!(cut_json_args(&cut, 500), None);
        assert_eq!(cut_json_args(&cut, 200), None);
        // Short args are left alone.
        assert_eq!(cut_json_args("{\"cmd\":\"ls\"}", 500), None);
    }

    #[test]
    fn json_args_escapes_and_limits() {
        let code = "line \"quoted\" \\ back\n".repeat(200);
        let args = serde_json::json!({"command": code, "k": [1, 2, {"deep": code}]}).to_string();
        let cut = cut_json_args(&args, 300).unwrap();
        let v: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert!(v["k"][2]["deep"].as_str().unwrap().contains("omitted"));
        assert!(cut.chars().count() <= 300);
        // Nothing left to cut: many short strings.
        let many = serde_json::to_string(&vec!["short string"; 100]).unwrap();
        assert_eq!(cut_json_args(&many, 100), None);
        // Not JSON: plain head + tail.
        let raw = format!("cd /srv && {}", "y".repeat(1000));
        let c = cut_json_args(&raw, 100).unwrap();
        assert!(c.starts_with("cd /srv") && is_cut(&c));
        // Minimum: values never go below the floor, even if the whole stays over.
        let args = serde_json::json!({"a": "z".repeat(1000)}).to_string();
        let c = cut_json_args(&args, 5).unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(&c).is_ok());
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn head_tail_bound_holds_from_30() {
        for len in [31usize, 99, 100, 101, 999, 1000, 12_345, 100_000] {
            let s = "é".repeat(len);
            for max in [30usize, 31, 50, 64, 99, 500] {
                if let Some(c) = head_tail(&s, max) {
                    assert!(
                        c.chars().count() <= max,
                        "len {len} max {max}: {}",
                        c.chars().count()
                    );
                    assert!(c.chars().count() < len);
                }
            }
        }
    }
}

//! Pre-tokenization: tiktoken's regexes for o200k_base and cl100k_base, hand-compiled.
//!
//! Design note. tiktoken splits text with `fancy_regex` before merging bytes; that regex is
//! most of its time. Both patterns are alternations that always match at the current
//! position (every character is a letter, number, whitespace or "other"), so the pieces
//! tile the text and each alternative reduces to a few scans over character classes.
//! The functions below follow the backtracking order of the patterns alternative by
//! alternative (first alternative that matches wins, greedy quantifiers give back from the
//! right), and the tests compare them with `fancy_regex` on the exact tiktoken patterns.
//! Unicode classes come from `data/unicode_classes.bin`, generated from `regex-syntax`
//! (the tables tiktoken's regex uses, Unicode 16.0) and checked by a test.
//!
//! o200k_base (tiktoken_ext/openai_public.py):
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//! ```
//! cl100k_base:
//! ```text
//! '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
//! ```

/// Character classes, one bit each (a character has at most one).
const UPPER: u8 = 1; // Lu, Lt
const LOWER: u8 = 2; // Ll
const OTHER_LETTER: u8 = 4; // Lm, Lo
const MARK: u8 = 8; // M
const NUMBER: u8 = 16; // N
const SPACE: u8 = 32; // \s (White_Space)

const LETTER: u8 = UPPER | LOWER | OTHER_LETTER;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
const CASED_UPPER: u8 = UPPER | OTHER_LETTER | MARK;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
const CASED_LOWER: u8 = LOWER | OTHER_LETTER | MARK;

/// Two-level table: one block number per 128 code points, then the blocks.
static UNICODE_CLASSES: &[u8] = include_bytes!("../data/unicode_classes.bin");
const BLOCK: usize = 128;
const BLOCKS: usize = 0x110000 / BLOCK;

static ASCII: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut c = 0;
    while c < 128 {
        t[c] = match c as u8 {
            b'A'..=b'Z' => UPPER,
            b'a'..=b'z' => LOWER,
            b'0'..=b'9' => NUMBER,
            b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' => SPACE,
            _ => 0,
        };
        c += 1;
    }
    t
};

#[inline]
fn class_of(c: u32) -> u8 {
    if c < 128 {
        return ASCII[c as usize];
    }
    let block = UNICODE_CLASSES[c as usize / BLOCK] as usize;
    UNICODE_CLASSES[BLOCKS + block * BLOCK + c as usize % BLOCK]
}

/// The text as bytes with a cursor helper; `s` is valid UTF-8.
struct Text<'a> {
    s: &'a [u8],
}

impl Text<'_> {
    /// The character at byte `i < len` and its length in bytes.
    #[inline(always)]
    fn char_at(&self, i: usize) -> (u32, usize) {
        let s = self.s;
        let b0 = s[i] as u32;
        if b0 < 0x80 {
            (b0, 1)
        } else if b0 < 0xE0 {
            (((b0 & 0x1F) << 6) | (s[i + 1] as u32 & 0x3F), 2)
        } else if b0 < 0xF0 {
            (
                ((b0 & 0x0F) << 12) | ((s[i + 1] as u32 & 0x3F) << 6) | (s[i + 2] as u32 & 0x3F),
                3,
            )
        } else {
            (
                ((b0 & 0x07) << 18)
                    | ((s[i + 1] as u32 & 0x3F) << 12)
                    | ((s[i + 2] as u32 & 0x3F) << 6)
                    | (s[i + 3] as u32 & 0x3F),
                4,
            )
        }
    }

    /// Class of the character at `i`, its code point and length; `None` at the end.
    #[inline(always)]
    fn at(&self, i: usize) -> Option<(u8, u32, usize)> {
        if i >= self.s.len() {
            return None;
        }
        let (c, n) = self.char_at(i);
        Some((class_of(c), c, n))
    }

    #[inline(always)]
    fn class(&self, i: usize) -> Option<u8> {
        self.at(i).map(|(k, _, _)| k)
    }

    /// End of the run of characters whose class is in `set`, from `i`.
    #[inline(always)]
    fn run(&self, mut i: usize, set: u8) -> usize {
        let s = self.s;
        while i < s.len() {
            let b = s[i];
            if b < 0x80 {
                if ASCII[b as usize] & set == 0 {
                    break;
                }
                i += 1;
            } else {
                let (c, n) = self.char_at(i);
                if class_of(c) & set == 0 {
                    break;
                }
                i += n;
            }
        }
        i
    }

    /// End of the run of "other" characters (`[^\s\p{L}\p{N}]`), from `i`.
    #[inline(always)]
    fn run_other(&self, mut i: usize) -> usize {
        while let Some((k, _, n)) = self.at(i) {
            if k & (SPACE | LETTER | NUMBER) != 0 {
                break;
            }
            i += n;
        }
        i
    }

    /// End of the run of bytes in `set` (ASCII only), from `i`.
    #[inline(always)]
    fn run_bytes(&self, mut i: usize, set: &[u8]) -> usize {
        while i < self.s.len() && set.contains(&self.s[i]) {
            i += 1;
        }
        i
    }

    /// End of up to three characters of class `N`, from `i` (which has one).
    #[inline(always)]
    fn numbers(&self, mut i: usize) -> usize {
        for _ in 0..3 {
            match self.at(i) {
                Some((k, _, n)) if k & NUMBER != 0 => i += n,
                _ => break,
            }
        }
        i
    }

    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`: its end, or `i`.
    #[inline(always)]
    fn contraction(&self, i: usize, two: &[u8], three: &[[u8; 2]]) -> usize {
        let s = self.s;
        if i >= s.len() || s[i] != b'\'' {
            return i;
        }
        let Some((_, c1, n1)) = self.at(i + 1) else {
            return i;
        };
        // Case-insensitive `s` also matches U+017F (long s); regex-syntax's folds of the
        // other letters are ASCII only (checked in the tests).
        let c1 = if c1 == 0x17F { b's' } else { lower_ascii(c1) };
        if two.contains(&c1) {
            return i + 1 + n1;
        }
        if let Some((_, c2, _)) = self.at(i + 1 + n1) {
            let c2 = lower_ascii(c2);
            if three.iter().any(|p| p[0] == c1 && p[1] == c2) {
                return i + 1 + n1 + 1;
            }
        }
        i
    }

    /// A whitespace run `[i, end)` and the start of the last newline in it and of its last
    /// character.
    #[inline(always)]
    fn spaces(&self, i: usize) -> (usize, Option<usize>, usize) {
        let mut j = i;
        let mut newline = None;
        let mut last = i;
        while let Some((k, c, n)) = self.at(j) {
            if k & SPACE == 0 {
                break;
            }
            if c == u32::from(b'\n') || c == u32::from(b'\r') {
                newline = Some(j);
            }
            last = j;
            j += n;
        }
        (j, newline, last)
    }
}

#[inline(always)]
fn lower_ascii(c: u32) -> u8 {
    if c < 128 {
        (c as u8).to_ascii_lowercase()
    } else {
        0
    }
}

/// `[^\r\n\p{L}\p{N}]`: may stand before a word.
#[inline(always)]
fn is_prefix(k: u8, c: u32) -> bool {
    k & (LETTER | NUMBER) == 0 && c != u32::from(b'\r') && c != u32::from(b'\n')
}

const O200K_TWO: &[u8] = b"stmd";
const O200K_THREE: &[[u8; 2]] = &[*b"re", *b"ve", *b"ll"];

/// o200k's first alternative from `q` (after an optional prefix):
/// `[U]*[W]+` then an optional contraction.
#[inline(always)]
fn o200k_lower_word(t: &Text, q: usize) -> Option<usize> {
    let r = t.run(q, CASED_UPPER);
    let end = match t.class(r) {
        Some(k) if k & CASED_LOWER != 0 => t.run(r, CASED_LOWER),
        _ => {
            // `[U]*` gives back characters from the right until `[W]+` can take one: the
            // last character of the run that is in both classes, alone (the one after it,
            // if any, is `Lu`/`Lt`).
            let mut j = q;
            let mut found = None;
            while j < r {
                let (k, _, n) = t.at(j)?;
                if k & CASED_LOWER != 0 {
                    found = Some(j + n);
                }
                j += n;
            }
            found?
        }
    };
    Some(t.contraction(end, O200K_TWO, O200K_THREE))
}

/// o200k's second alternative from `q`: `[U]+[W]*` then an optional contraction.
#[inline(always)]
fn o200k_upper_word(t: &Text, q: usize) -> Option<usize> {
    let r = t.run(q, CASED_UPPER);
    if r == q {
        return None;
    }
    let end = t.run(r, CASED_LOWER);
    Some(t.contraction(end, O200K_TWO, O200K_THREE))
}

/// End of the o200k piece that starts at `i < text.len()`.
#[inline]
fn o200k_next(t: &Text, i: usize) -> usize {
    let (k, c, n) = t.at(i).expect("i < len");
    if k & (NUMBER | SPACE) == 0 || (k & SPACE != 0 && c != 10 && c != 13) {
        let prefix = is_prefix(k, c);
        if k & (LETTER | MARK) != 0
            || (prefix && t.class(i + n).is_some_and(|k2| k2 & (LETTER | MARK) != 0))
        {
            if prefix {
                if let Some(e) = o200k_lower_word(t, i + n) {
                    return e;
                }
            }
            if let Some(e) = o200k_lower_word(t, i) {
                return e;
            }
            if prefix {
                if let Some(e) = o200k_upper_word(t, i + n) {
                    return e;
                }
            }
            if let Some(e) = o200k_upper_word(t, i) {
                return e;
            }
        }
    }
    if k & NUMBER != 0 {
        return t.numbers(i);
    }
    if k & SPACE == 0 {
        // ` ?[^\s\p{L}\p{N}]+[\r\n/]*` without the space (letters and numbers are handled).
        let e = t.run_other(i + n);
        return t.run_bytes(e, b"\r\n/");
    }
    if c == u32::from(b' ') {
        if let Some(k2) = t.class(i + 1) {
            if k2 & (SPACE | LETTER | NUMBER) == 0 {
                let e = t.run_other(i + 1);
                return t.run_bytes(e, b"\r\n/");
            }
        }
    }
    let (end, newline, last) = t.spaces(i);
    if let Some(nl) = newline {
        // `\s*[\r\n]+`: up to the last newline of the run.
        return nl + 1;
    }
    if end == t.s.len() || last == i {
        // `\s+(?!\S)` at the end, or `\s+` for a single character.
        return end;
    }
    // `\s+(?!\S)`: all but the last character, which goes with the next piece.
    last
}

const CL100K_TWO: &[u8] = b"sdmt";
const CL100K_THREE: &[[u8; 2]] = &[*b"ll", *b"ve", *b"re"];

/// End of the cl100k piece that starts at `i < text.len()`.
#[inline]
fn cl100k_next(t: &Text, i: usize) -> usize {
    let (k, c, n) = t.at(i).expect("i < len");
    if c == u32::from(b'\'') {
        let e = t.contraction(i, CL100K_TWO, CL100K_THREE);
        if e != i {
            return e;
        }
    }
    if k & LETTER != 0 {
        return t.run(i + n, LETTER);
    }
    if is_prefix(k, c) && t.class(i + n).is_some_and(|k2| k2 & LETTER != 0) {
        return t.run(i + n, LETTER);
    }
    if k & NUMBER != 0 {
        return t.numbers(i);
    }
    if k & SPACE == 0 {
        let e = t.run_other(i + n);
        return t.run_bytes(e, b"\r\n");
    }
    if c == u32::from(b' ') {
        if let Some(k2) = t.class(i + 1) {
            if k2 & (SPACE | LETTER | NUMBER) == 0 {
                let e = t.run_other(i + 1);
                return t.run_bytes(e, b"\r\n");
            }
        }
    }
    let (end, newline, last) = t.spaces(i);
    if end == t.s.len() {
        return end; // `\s++$`
    }
    if let Some(nl) = newline {
        return nl + 1; // `\s*[\r\n]`
    }
    if last != i {
        return last; // `\s+(?!\S)`
    }
    end // `\s`
}

/// Which pattern to split with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pattern {
    O200k,
    Cl100k,
}

/// Calls `f` with each piece of `text`, in order.
#[inline]
pub(super) fn for_each_piece(pattern: Pattern, text: &str, mut f: impl FnMut(&[u8])) {
    let t = Text { s: text.as_bytes() };
    let mut i = 0;
    match pattern {
        Pattern::O200k => {
            while i < t.s.len() {
                let e = o200k_next(&t, i);
                f(&t.s[i..e]);
                i = e;
            }
        }
        Pattern::Cl100k => {
            while i < t.s.len() {
                let e = cl100k_next(&t, i);
                f(&t.s[i..e]);
                i = e;
            }
        }
    }
}

#[cfg(test)]
pub(super) fn pieces(pattern: Pattern, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    for_each_piece(pattern, text, |p| {
        out.push(&text[i..i + p.len()]);
        i += p.len();
    });
    out
}

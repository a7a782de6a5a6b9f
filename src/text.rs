//! Borrowed text in whatever layout its owner keeps it.
//!
//! Design note: Python strings are stored in PEP 393 form: one byte per character when every
//! character is below U+0100 (ASCII strings are also valid UTF-8), two bytes below U+10000,
//! four otherwise. Asking CPython for UTF-8 (`PyUnicode_AsUTF8AndSize`) makes it build and
//! keep a UTF-8 copy inside every non-ASCII string for the string's lifetime; 39% of the
//! corpus's text fields are non-ASCII, so measuring a conversation that way would roughly
//! double the memory of its prose. The core therefore measures text in the owner's layout
//! and only transcodes (into a temporary, dropped at once) where an algorithm needs UTF-8
//! bytes, such as exact BPE or building a summary transcript.

use std::borrow::Cow;

/// A borrowed string in one of the layouts the core can read without copying.
#[derive(Clone, Copy, Debug)]
pub enum Text<'a> {
    /// UTF-8 (Rust strings, and Python strings that are pure ASCII).
    Utf8(&'a str),
    /// One byte per code point, U+0000..U+00FF (PEP 393 `PyUnicode_1BYTE_KIND`).
    Latin1(&'a [u8]),
    /// Two bytes per code point, the BMP (PEP 393 `PyUnicode_2BYTE_KIND`).
    Ucs2(&'a [u16]),
    /// Four bytes per code point (PEP 393 `PyUnicode_4BYTE_KIND`).
    Ucs4(&'a [u32]),
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Self {
        Text::Utf8(s)
    }
}

impl<'a> Text<'a> {
    /// Number of Unicode code points (Python's `len()`).
    pub fn char_len(&self) -> usize {
        match self {
            Text::Utf8(s) => {
                if s.is_ascii() {
                    s.len()
                } else {
                    s.chars().count()
                }
            }
            Text::Latin1(b) => b.len(),
            Text::Ucs2(w) => w.len(),
            Text::Ucs4(w) => w.len(),
        }
    }

    /// Number of bytes the text takes as UTF-8.
    pub fn utf8_len(&self) -> usize {
        match self {
            Text::Utf8(s) => s.len(),
            Text::Latin1(b) => b.iter().map(|&c| if c < 0x80 { 1 } else { 2 }).sum(),
            _ => self.chars().map(char::len_utf8).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Text::Utf8(s) => s.is_empty(),
            Text::Latin1(b) => b.is_empty(),
            Text::Ucs2(w) => w.is_empty(),
            Text::Ucs4(w) => w.is_empty(),
        }
    }

    /// The code points. Lone surrogates (possible in Python strings) become U+FFFD.
    pub fn chars(&self) -> Chars<'a> {
        match *self {
            Text::Utf8(s) => Chars::Utf8(s.chars()),
            Text::Latin1(b) => Chars::Latin1(b.iter()),
            Text::Ucs2(w) => Chars::Ucs2(w.iter()),
            Text::Ucs4(w) => Chars::Ucs4(w.iter()),
        }
    }

    /// The text as UTF-8, borrowed when it already is.
    pub fn to_utf8(&self) -> Cow<'a, str> {
        match *self {
            Text::Utf8(s) => Cow::Borrowed(s),
            _ => {
                let mut out = String::new();
                self.push_utf8(&mut out);
                Cow::Owned(out)
            }
        }
    }

    /// Append the text to `out` as UTF-8: the characters of [`Text::chars`], transcoded by one
    /// loop per layout into bytes reserved first, runs of ASCII narrowed at once (a summary
    /// reads every replaced message this way, several times; a `chars().collect()` dispatched
    /// on the layout per character and grew the string as it went).
    pub fn push_utf8(&self, out: &mut String) {
        let bytes = match *self {
            Text::Utf8(s) => return out.push_str(s),
            Text::Latin1(b) => {
                let mut v = Vec::with_capacity(b.len() + b.iter().filter(|&&c| c >= 0x80).count());
                wide_to_utf8(b, &mut v, |_, _| None);
                v
            }
            Text::Ucs2(w) => {
                // A hint (a lone surrogate takes 3 bytes, counted as 2): exact otherwise.
                let mut v = Vec::with_capacity(w.iter().map(|&c| utf8_units(u32::from(c))).sum());
                wide_to_utf8(w, &mut v, |w, i| w.get(i).map(|&x| u32::from(x)));
                v
            }
            Text::Ucs4(w) => {
                let mut v = Vec::with_capacity(w.iter().map(|&c| utf8_units(c)).sum());
                wide_to_utf8(w, &mut v, |w, i| w.get(i).copied());
                v
            }
        };
        // Valid by construction: `wide_to_utf8` writes ASCII bytes (units below 0x80) and
        // `char::encode_utf8` output only. Checking it again cost a third of the transcoding (a
        // summary's readers transcode every non-ASCII result of the span).
        debug_assert!(std::str::from_utf8(&bytes).is_ok());
        // SAFETY: see above: every byte sequence appended is a `char`'s UTF-8 encoding.
        let s = unsafe { String::from_utf8_unchecked(bytes) };
        if out.is_empty() {
            *out = s;
        } else {
            out.push_str(&s);
        }
    }

    /// Whether the text contains `needle`, an ASCII string, without transcoding it (a wide
    /// layout holds an ASCII character as one code unit of the same value).
    pub fn contains_ascii(&self, needle: &str) -> bool {
        debug_assert!(needle.is_ascii());
        fn find<T: Copy + Into<u32>>(w: &[T], n: &[u8]) -> bool {
            let Some((&first, rest)) = n.split_first() else {
                return true;
            };
            w.len() >= n.len()
                && w[..=w.len() - n.len()].iter().enumerate().any(|(i, &c)| {
                    c.into() == u32::from(first)
                        && rest
                            .iter()
                            .zip(&w[i + 1..])
                            .all(|(&b, &x)| x.into() == u32::from(b))
                })
        }
        match *self {
            Text::Utf8(s) => s.contains(needle),
            Text::Latin1(b) => find(b, needle.as_bytes()),
            Text::Ucs2(w) => find(w, needle.as_bytes()),
            Text::Ucs4(w) => find(w, needle.as_bytes()),
        }
    }

    /// Whether every code point is whitespace (or the text is empty).
    pub fn is_blank(&self) -> bool {
        self.chars().all(char::is_whitespace)
    }
}

/// The code units of `w` (Latin-1, UCS-2 or UCS-4) as UTF-8 bytes appended to `out`: each run
/// of ASCII narrowed in one pass, other units through [`join_surrogates`] (`next(w, i)`: the
/// unit at `i`, as a surrogate's partner; `None` for Latin-1, which has none).
fn wide_to_utf8<T: Copy + Into<u32>>(
    w: &[T],
    out: &mut Vec<u8>,
    next: impl Fn(&[T], usize) -> Option<u32>,
) {
    let mut i = 0;
    while i < w.len() {
        let run = w[i..]
            .iter()
            .position(|&c| c.into() >= 0x80)
            .unwrap_or(w.len() - i);
        out.extend(w[i..i + run].iter().map(|&c| c.into() as u8));
        i += run;
        if i == w.len() {
            break;
        }
        let c = w[i].into();
        i += 1;
        let (ch, pair) = join_surrogates(c, next(w, i));
        i += usize::from(pair);
        out.extend_from_slice(ch.encode_utf8(&mut [0u8; 4]).as_bytes());
    }
}

/// Transcoded texts kept for the length of one [`utf8_memo_scope`], by the text they came from
/// (its layout, address and length: within the scope the borrowed texts live and do not change),
/// within [`UTF8_MEMO_BYTES`].
struct Utf8Memo {
    kept: rustc_hash::FxHashMap<(u8, usize, usize), Box<str>>,
    left: usize,
}

/// The bytes of UTF-8 one [`utf8_memo_scope`] keeps (freed when it ends). A compaction of the
/// corpus's largest conversation transcodes 0.2 MB, of 1k messages 0.6 MB: each is kept whole;
/// past the bound (10k messages and more) texts are transcoded afresh, as outside a scope.
pub const UTF8_MEMO_BYTES: usize = 1 << 20;

thread_local! {
    static UTF8_MEMO: std::cell::RefCell<Option<Utf8Memo>> = const { std::cell::RefCell::new(None) };
}

/// `f()` with [`to_utf8_memo`] keeping what it transcodes on this thread until `f` returns
/// (nested calls share the outer scope). A compaction's `plan` and `apply` each run in one:
/// the micro pass, the trail, the continuation and the rule summary each read every result of
/// the span (a memo held by each block kept 71 MB more at 100k messages).
pub fn utf8_memo_scope<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            UTF8_MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
    if UTF8_MEMO.with(|m| m.borrow().is_some()) {
        return f();
    }
    UTF8_MEMO.with(|m| {
        *m.borrow_mut() = Some(Utf8Memo {
            kept: Default::default(),
            left: UTF8_MEMO_BYTES,
        })
    });
    let _reset = Reset;
    f()
}

/// [`Text::to_utf8`], a text in another layout transcoded once per [`utf8_memo_scope`] (a copy
/// of the kept UTF-8 after that: a copy costs a fraction of the transcoding).
pub fn to_utf8_memo(text: Text<'_>) -> Cow<'_, str> {
    let id = match text {
        Text::Utf8(s) => return Cow::Borrowed(s),
        Text::Latin1(b) => (1, b.as_ptr() as usize, b.len()),
        Text::Ucs2(w) => (2, w.as_ptr() as usize, w.len()),
        Text::Ucs4(w) => (4, w.as_ptr() as usize, w.len()),
    };
    UTF8_MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let Some(memo) = m.as_mut() else {
            return text.to_utf8();
        };
        if let Some(s) = memo.kept.get(&id) {
            return Cow::Owned(String::from(&**s));
        }
        let s = text.to_utf8().into_owned();
        if s.len() <= memo.left {
            memo.left -= s.len();
            memo.kept.insert(id, s.as_str().into());
        }
        Cow::Owned(s)
    })
}

/// UTF-8 bytes of one code unit of a wide layout: a surrogate counts 2 (a pair makes 4).
#[inline]
fn utf8_units(c: u32) -> usize {
    match c {
        0..=0x7F => 1,
        0x80..=0x7FF | 0xD800..=0xDFFF => 2,
        0x800..=0xFFFF => 3,
        _ => 4,
    }
}

/// Iterator over the code points of a [`Text`].
pub enum Chars<'a> {
    Utf8(std::str::Chars<'a>),
    Latin1(std::slice::Iter<'a, u8>),
    Ucs2(std::slice::Iter<'a, u16>),
    Ucs4(std::slice::Iter<'a, u32>),
}

/// A code point, joining a surrogate pair written as two code points (as Python strings may hold
/// them, e.g. `"\ud83d\ude80"`) into the character they encode — tiktoken does the same — and
/// replacing a lone surrogate with U+FFFD.
#[inline]
pub(crate) fn join_surrogates(w: u32, next: Option<u32>) -> (char, bool) {
    if (0xD800..0xDC00).contains(&w) {
        if let Some(lo) = next.filter(|lo| (0xDC00..0xE000).contains(lo)) {
            let c = 0x10000 + ((w - 0xD800) << 10) + (lo - 0xDC00);
            return (char::from_u32(c).unwrap_or('\u{FFFD}'), true);
        }
    }
    (char::from_u32(w).unwrap_or('\u{FFFD}'), false)
}

impl Iterator for Chars<'_> {
    type Item = char;

    #[inline]
    fn next(&mut self) -> Option<char> {
        match self {
            Chars::Utf8(c) => c.next(),
            Chars::Latin1(it) => it.next().map(|&b| b as char),
            Chars::Ucs2(it) => {
                let w = u32::from(*it.next()?);
                let lo = it.as_slice().first().map(|&x| u32::from(x));
                let (c, pair) = join_surrogates(w, lo);
                if pair {
                    it.next();
                }
                Some(c)
            }
            Chars::Ucs4(it) => {
                let w = *it.next()?;
                let (c, pair) = join_surrogates(w, it.as_slice().first().copied());
                if pair {
                    it.next();
                }
                Some(c)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Chars::Utf8(c) => c.size_hint(),
            Chars::Latin1(it) => it.size_hint(),
            Chars::Ucs2(it) => it.size_hint(),
            Chars::Ucs4(it) => it.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_agree() {
        let s = "héllo 世界 🙂";
        let latin: Vec<u8> = "héllo".chars().map(|c| c as u8).collect();
        let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
        assert_eq!(Text::Utf8(s).char_len(), 10);
        assert_eq!(Text::Ucs4(&ucs4).char_len(), 10);
        assert_eq!(Text::Ucs4(&ucs4).to_utf8(), s);
        assert_eq!(Text::Ucs4(&ucs4).utf8_len(), s.len());
        assert_eq!(Text::Latin1(&latin).to_utf8(), "héllo");
        assert_eq!(Text::Latin1(&latin).utf8_len(), 6);
    }

    /// The per-layout transcoder against the character iterator, on every kind of code unit:
    /// ASCII, Latin-1, BMP, astral, surrogate pairs, lone and reversed surrogates, at the ends.
    #[test]
    fn push_utf8_matches_chars() {
        let units: [u32; 14] = [
            0x61, 0x7F, 0x80, 0xE9, 0xFF, 0x100, 0x7FF, 0x800, 0x4E16, 0xFFFD, 0xD83D, 0xDE80,
            0xDC00, 0x1F642,
        ];
        let mut seed = 7u64;
        for len in 0..40 {
            for _ in 0..50 {
                let w: Vec<u32> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        units[(seed >> 33) as usize % units.len()]
                    })
                    .collect();
                let want: String = Text::Ucs4(&w).chars().collect();
                assert_eq!(Text::Ucs4(&w).to_utf8(), want);
                let w2: Vec<u16> = w
                    .iter()
                    .filter(|&&c| c <= 0xFFFF)
                    .map(|&c| c as u16)
                    .collect();
                let want2: String = Text::Ucs2(&w2).chars().collect();
                assert_eq!(Text::Ucs2(&w2).to_utf8(), want2);
                let w1: Vec<u8> = w.iter().filter(|&&c| c <= 0xFF).map(|&c| c as u8).collect();
                let want1: String = Text::Latin1(&w1).chars().collect();
                let mut got = String::from("x");
                Text::Latin1(&w1).push_utf8(&mut got);
                assert_eq!(got, format!("x{want1}"));
            }
        }
    }

    /// An ASCII needle is found in every layout, and only where it is.
    #[test]
    fn contains_ascii_in_every_layout() {
        for hay in [
            "(Open file: /x.py)",
            "naïve (Open file: a)",
            "→ (Open file: 文件)",
            "(Open file:",
            "🚀",
        ] {
            let l1: Option<Vec<u8>> = hay
                .chars()
                .map(|c| u8::try_from(u32::from(c)).ok())
                .collect();
            let u2: Vec<u16> = hay.encode_utf16().collect();
            let u4: Vec<u32> = hay.chars().map(u32::from).collect();
            for needle in ["(Open file: ", "", "a", "🚀"[..0].as_ref(), "file: /"] {
                let want = hay.contains(needle);
                assert_eq!(Text::Utf8(hay).contains_ascii(needle), want);
                if let Some(l1) = &l1 {
                    assert_eq!(
                        Text::Latin1(l1).contains_ascii(needle),
                        want,
                        "{hay} {needle}"
                    );
                }
                assert_eq!(
                    Text::Ucs2(&u2).contains_ascii(needle),
                    want,
                    "{hay} {needle}"
                );
                assert_eq!(
                    Text::Ucs4(&u4).contains_ascii(needle),
                    want,
                    "{hay} {needle}"
                );
            }
        }
    }

    /// Outside a scope every text is transcoded afresh; inside, each text once while the
    /// scope's bytes last; the same characters come back either way.
    #[test]
    fn utf8_memo_is_scoped_and_bounded() {
        let a: Vec<u16> = "naïve → café".encode_utf16().collect();
        let b: Vec<u32> = "другой текст 🚀".chars().map(u32::from).collect();
        let kept = || UTF8_MEMO.with(|m| m.borrow().as_ref().map(|m| m.kept.len()));
        assert_eq!(to_utf8_memo(Text::Ucs2(&a)), "naïve → café");
        assert_eq!(kept(), None);
        utf8_memo_scope(|| {
            assert_eq!(to_utf8_memo(Text::Ucs2(&a)), "naïve → café");
            assert_eq!(to_utf8_memo(Text::Ucs2(&a)), "naïve → café");
            assert_eq!(to_utf8_memo(Text::Ucs2(&a[..5])), "naïve");
            assert_eq!(to_utf8_memo(Text::Utf8("plain")), "plain");
            assert_eq!(kept(), Some(2));
            UTF8_MEMO.with(|m| m.borrow_mut().as_mut().unwrap().left = 3);
            assert_eq!(to_utf8_memo(Text::Ucs4(&b)), "другой текст 🚀");
            assert_eq!(to_utf8_memo(Text::Ucs4(&b)), "другой текст 🚀");
            // Nested: the outer scope's memo.
            utf8_memo_scope(|| assert_eq!(kept(), Some(2)));
            assert_eq!(kept(), Some(2));
        });
        assert_eq!(kept(), None);
    }

    #[test]
    fn lone_surrogate_is_replaced() {
        let w = [0x61u16, 0xD800, 0x62];
        assert_eq!(Text::Ucs2(&w).to_utf8(), "a\u{FFFD}b");
    }

    #[test]
    fn surrogate_pair_is_joined() {
        let w = [0x78u16, 0xD83D, 0xDE80, 0x79];
        assert_eq!(Text::Ucs2(&w).to_utf8(), "x\u{1F680}y");
        let w4 = [0x78u32, 0xD83D, 0xDE80, 0xDE80];
        assert_eq!(Text::Ucs4(&w4).to_utf8(), "x\u{1F680}\u{FFFD}");
    }
}

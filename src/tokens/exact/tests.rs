use super::long;
use super::split::{pieces, Pattern};
use super::*;
use crate::testing::Rng;

// Counts from Python tiktoken 0.14 (`len(enc.encode_ordinary(text))`).
const KNOWN: &[(&str, usize, usize)] = &[
    // (text, o200k_base, cl100k_base)
    ("", 0, 0),
    ("hello world", 2, 2),
    ("<|endoftext|>", 7, 7),
    ("Hello, world! How's it going?", 9, 9),
    ("   leading and trailing   ", 5, 5),
    ("def f(x):\n    return x ** 2\n", 11, 11),
    ("1234567890", 4, 4),
    ("上下文压缩：保持长对话在窗口内。", 13, 19),
    ("emoji 🚀🚀 and café\r\n\r\nnext", 9, 11),
];

#[test]
fn known_counts() {
    for &(text, o200k, cl100k) in KNOWN {
        assert_eq!(count(Encoding::O200kBase, text), o200k, "o200k {text:?}");
        assert_eq!(count(Encoding::Cl100kBase, text), cl100k, "cl100k {text:?}");
    }
}

#[test]
fn count_many_matches_count() {
    let long = "word ".repeat(40_000);
    let texts: Vec<&str> = KNOWN.iter().map(|k| k.0).chain([long.as_str()]).collect();
    for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let one: Vec<usize> = texts.iter().map(|t| count(enc, t)).collect();
        assert_eq!(count_many(enc, &texts), one);
        assert!(is_loaded(enc));
    }
}

#[test]
fn tables() {
    assert_eq!(Encoding::O200kBase.ranks().len(), 199_998);
    assert_eq!(Encoding::Cl100kBase.ranks().len(), 100_256);
    for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
        assert_eq!(Encoding::parse(enc.name()), Some(enc));
    }
    assert_eq!(Encoding::parse("p50k_base"), None);
}

/// Characters that exercise every branch of the patterns.
const ALPHABET: &[&str] = &[
    "a",
    "b",
    "s",
    "t",
    "l",
    "e",
    "r",
    "v",
    "d",
    "m",
    "S",
    "T",
    "L",
    "E",
    "D",
    "M",
    "R",
    "V",
    "A",
    "Z",
    "ſ",
    "K",
    "'",
    "’",
    " ",
    " ",
    " ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\u{b}",
    "\u{c}",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{3000}",
    "0",
    "7",
    "²",
    "Ⅻ",
    "٣",
    "/",
    ".",
    ",",
    "!",
    "-",
    "_",
    "(",
    "\"",
    "<|endoftext|>",
    "\u{301}",
    "\u{903}",
    "\u{20dd}",
    "é",
    "É",
    "ǅ",
    "ʰ",
    "ß",
    "中",
    "文",
    "。",
    "ー",
    "한",
    "ا",
    "🚀",
    "👍🏽",
    "\u{200d}",
    "\u{fe0f}",
    "\u{e000}",
    "\u{10ffff}",
    "\u{1f1e6}",
    "𝔸",
    "ǈ",
    "ᾈ",
    "\u{0}",
    "\u{7f}",
    "\u{ad}",
];

fn random_text(rng: &mut Rng, len: usize) -> String {
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len())])
        .collect()
}

// The exact patterns of tiktoken_ext/openai_public.py (tiktoken 0.14).
const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);
const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

fn regex_pieces<'a>(re: &fancy_regex::Regex, text: &'a str) -> Vec<&'a str> {
    re.find_iter(text)
        .map(|m| m.expect("regex runs").as_str())
        .collect()
}

#[test]
fn split_matches_tiktoken_regex() {
    let cases = [
        (
            Pattern::O200k,
            fancy_regex::Regex::new(O200K_PATTERN).expect("valid"),
        ),
        (
            Pattern::Cl100k,
            fancy_regex::Regex::new(CL100K_PATTERN).expect("valid"),
        ),
    ];
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let iterations = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    for i in 0..iterations {
        let text = random_text(&mut rng, 1 + i % 24);
        for (pattern, re) in &cases {
            assert_eq!(
                pieces(*pattern, &text),
                regex_pieces(re, &text),
                "{pattern:?} {text:?}"
            );
        }
    }
}

#[test]
fn small_and_large_merges_agree() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let words = [
        "the", "ing", " ", "aaaa", "zz", "ab", "🚀", "中文", "0", "=", "Qx", "\n",
    ];
    for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let r = enc.ranks();
        for len in 1..400 {
            let text: String = (0..len).map(|_| words[rng.below(words.len())]).collect();
            let p = &text.as_bytes()[..text.len().min(ranks::SMALL)];
            if p.len() >= 2 {
                assert_eq!(
                    r.merge_small(p),
                    r.merge_large(p),
                    "{:?}",
                    String::from_utf8_lossy(p)
                );
            }
        }
    }
}

#[test]
fn long_pieces() {
    // One piece each; tiktoken's counts.
    let letters = "a".repeat(10_000);
    assert_eq!(count(Encoding::O200kBase, &letters), 1250);
    assert_eq!(count(Encoding::Cl100kBase, &letters), 1250);
    let spaces = " ".repeat(10_000);
    assert_eq!(count(Encoding::O200kBase, &spaces), 79);
    assert_eq!(count(Encoding::Cl100kBase, &spaces), 79);
}

/// `data/unicode_classes.bin` is what regex-syntax (the Unicode tables of tiktoken's regex)
/// says; `REGENERATE=1 cargo test unicode_table` rewrites it.
#[test]
fn unicode_table() {
    use regex_syntax::hir::{Class, HirKind};
    fn ranges(pattern: &str) -> Vec<(u32, u32)> {
        match regex_syntax::parse(pattern).expect("valid").kind() {
            HirKind::Class(Class::Unicode(c)) => c
                .ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect(),
            other => panic!("{other:?}"),
        }
    }
    let mut class = vec![0u8; 0x110000];
    for (pattern, bit) in [
        (r"[\p{Lu}\p{Lt}]", 1u8),
        (r"\p{Ll}", 2),
        (r"[\p{Lm}\p{Lo}]", 4),
        (r"\p{M}", 8),
        (r"\p{N}", 16),
        (r"\s", 32),
    ] {
        for (a, b) in ranges(pattern) {
            for c in a..=b {
                assert_eq!(class[c as usize], 0, "classes overlap at U+{c:04X}");
                class[c as usize] = bit;
            }
        }
    }
    let mut blocks: Vec<&[u8]> = Vec::new();
    let mut out = Vec::new();
    for block in class.chunks(128) {
        let i = blocks.iter().position(|b| *b == block).unwrap_or_else(|| {
            blocks.push(block);
            blocks.len() - 1
        });
        out.push(u8::try_from(i).expect("< 256 distinct blocks"));
    }
    out.extend(blocks.concat());
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/tokens/data/unicode_classes.bin"
    );
    if std::env::var_os("REGENERATE").is_some() {
        std::fs::write(path, &out).expect("write");
    }
    assert!(
        std::fs::read(path).expect("read") == out,
        "stale {path}: run REGENERATE=1 cargo test unicode_table"
    );
    // The contractions' case folds that `split.rs` assumes.
    for (letter, folds) in [
        ("s", "Ssſ"),
        ("t", "Tt"),
        ("r", "Rr"),
        ("e", "Ee"),
        ("v", "Vv"),
        ("m", "Mm"),
    ] {
        let got: String = ranges(&format!("(?i:{letter})"))
            .iter()
            .flat_map(|&(a, b)| (a..=b).filter_map(char::from_u32))
            .collect();
        assert_eq!(got, folds);
    }
    for (letter, folds) in [("l", "Ll"), ("d", "Dd")] {
        let got: String = ranges(&format!("(?i:{letter})"))
            .iter()
            .flat_map(|&(a, b)| (a..=b).filter_map(char::from_u32))
            .collect();
        assert_eq!(got, folds);
    }
}

/// Windowed counting of very long pieces (`long.rs`) equals the heap merge of the whole
/// piece: runs of one character (1–4 bytes) or of a short unit, at lengths around the
/// window size, the switch-over length and powers of two; runs with a different end; and
/// long pieces that do not repeat (where every window is merged).
#[test]
fn windowed_long_pieces_equal_the_whole_merge() {
    let units = [
        "a", "A", " ", "\n", "-", "0", "é", "。", "中", "🚀", "ab", "abc", "aab", "\r\n", "的了",
    ];
    let lengths = [long::LONG + 1, (1 << 15) - 1, (1 << 15) + 1];
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let r = enc.ranks();
        let check = |p: &[u8]| {
            assert_eq!(
                long::count_windows(r, p),
                Some(r.merge_large(p)),
                "{enc:?} {}-byte piece starting {:?}",
                p.len(),
                String::from_utf8_lossy(&p[..12])
            );
        };
        for unit in units {
            for &len in &lengths {
                let run = unit.repeat(len / unit.len() + 1);
                let p = &run.as_bytes()[..len];
                check(p);
                // A different last character, and a different first one.
                let mut q = p.to_vec();
                q.push(b'b');
                check(&q);
                q.insert(0, b'x');
                check(&q);
            }
        }
        // No repetition: every window is merged, and the encodings meet at random places.
        let words = [
            "the", "ing", "aaaa", "zz", "ab", "中文", "=", "Qx", "e", "ol", "。", "--",
        ];
        for len in [long::LONG + 1, 40_000] {
            let text: String = (0..len)
                .map(|_| words[rng.below(words.len())])
                .collect::<String>();
            check(&text.as_bytes()[..len]);
        }
        // A long run, then another, then noise.
        let mixed = format!(
            "{}{}{}",
            "a".repeat(20_000),
            " ".repeat(9_000),
            "xyz".repeat(3_000)
        );
        check(mixed.as_bytes());
    }
}

//! Long base64 runs at their own rate.
//!
//! Design note. o200k spends 1.47 characters a token on base64 (random bytes and compressed
//! image data alike: 1.45-1.50 from 1 KB to 1 MB), where the rule's per-class weights see
//! letters, camelCase humps and digit runs and came out at 0.86 of exact: an image pasted as a
//! data URL, or a Python repr holding one, was under-counted by 14%. So a maximal run of at
//! least [`MIN_RUN`] base64 characters (`A-Z a-z 0-9 + / = - _`, both alphabets) holding an
//! upper-case letter, a lower-case letter and a digit counts `W_BASE64` per character instead
//! of the rule's weights, when that is more. The rate is 0.72 token a character, 1.05 times
//! o200k's, the margin the other groups have.
//!
//! The rule must give the same answer for a string in every layout and never more for a
//! prefix than for the whole, and stay as fast. So the bulk path only notes that a whole
//! 128-unit block was base64 alphabet (a check that runs only on blocks without a space or a
//! newline, rare outside such runs); only then does a second pass find the runs and add, for
//! each, `max(0, W_BASE64·len − the rule's weights of the run)`. The rule's weights of a run
//! depend only on the run and the class of the code point before it, so the correction does
//! not depend on where the blocks fell, and a run of [`MIN_RUN`] units always holds a whole
//! block in every layout (a block straddling its start covers at most 127 of its units, a
//! scalar stretch at most 16, and from there on at least 128 ASCII units remain, which the
//! bulk path takes as one 128-unit block), so every run that is corrected is seen. Shorter
//! runs keep the rule (0.86-0.94 of exact from 64 to 255 characters).
//!
//! Speed (`cargo bench --bench estimate_throughput`, the commit before and this one run in
//! turn, twice, on the shared 2-core machine): corpus text unchanged within the noise (ASCII
//! UTF-8 1.22/1.77 GB/s before, 1.15/1.83 after; same token counts); 1 MB of base64 0.8-1.1
//! GB/s before, 0.38-0.71 GB/s after (the second pass: run scan in 32-unit chunks, the rule
//! over the run again by the bulk path, wide layouts narrowed through a stack buffer).

use super::{as_bytes, ascii_class, Acc, OTHER, START};

/// Shortest run given the base64 rate (see the design note for why it is this long).
pub(super) const MIN_RUN: usize = 256;

/// Tokens a base64 character costs, in 1/1024 token (1.05 × o200k's 0.68).
pub(super) const W_BASE64: u64 = 737;

static ALPHABET: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'-' | b'_');
        b += 1;
    }
    t
};

/// Whether a byte (or a class byte, which is never in the alphabet when >= 0x80) is a base64
/// character.
#[inline(always)]
pub(super) fn in_alphabet(b: u8) -> bool {
    ALPHABET[b as usize]
}

#[inline(always)]
fn unit_in_alphabet(u: u32) -> bool {
    u < 0x80 && ALPHABET[u as usize]
}

/// Whether a unit is a base64 character, branch-free (so chunk tests vectorise).
#[inline(always)]
fn alpha(u: u32) -> bool {
    ((u | 0x20).wrapping_sub(u32::from(b'a')) < 26)
        | (u.wrapping_sub(u32::from(b'0')) < 10)
        | (u == u32::from(b'+'))
        | (u == u32::from(b'/'))
        | (u == u32::from(b'='))
        | (u == u32::from(b'-'))
        | (u == u32::from(b'_'))
}

/// Units of a chunk tested at once while a run goes on.
const CHUNK: usize = 32;

/// What the base64 rate adds to the rule's total for `units` (in 1/1024 token).
pub(super) fn extra<U: Copy + Into<u32> + 'static>(units: &[U]) -> u64 {
    let mut extra = 0;
    let mut i = 0;
    let n = units.len();
    while i < n {
        if !unit_in_alphabet(units[i].into()) {
            i += 1;
            continue;
        }
        let start = i;
        // Whole chunks first (a loop the compiler vectorises), then unit by unit.
        while i + CHUNK <= n
            && units[i..i + CHUNK]
                .iter()
                .fold(true, |a, &u| a & alpha(u.into()))
        {
            i += CHUNK;
        }
        while i < n && unit_in_alphabet(units[i].into()) {
            i += 1;
        }
        let len = i - start;
        if len >= MIN_RUN && mixed(&units[start..i]) {
            let rate = len as u64 * W_BASE64;
            extra += rate.saturating_sub(rule_weight(units, start, i));
        }
    }
    extra
}

/// Whether a run holds an upper-case letter, a lower-case letter and a digit (read only until
/// all three are seen: a few dozen units of real base64).
fn mixed<U: Copy + Into<u32>>(run: &[U]) -> bool {
    let (mut upper, mut lower, mut digit) = (false, false, false);
    for &u in run {
        let b = u.into() as u8;
        upper |= b.is_ascii_uppercase();
        lower |= b.is_ascii_lowercase();
        digit |= b.is_ascii_digit();
        if upper && lower && digit {
            return true;
        }
    }
    false
}

/// The rule's weights of the ASCII run `units[start..end]`, after the code point before it:
/// the same integers the whole-text pass added for these code points (the rule looks back at
/// most two code points, and only a space looks at the second; a run holds none, and every
/// non-ASCII class starts the same runs of letters, digits and punctuation as `OTHER`).
fn rule_weight<U: Copy + Into<u32> + 'static>(units: &[U], start: usize, end: usize) -> u64 {
    let state = match start.checked_sub(1).map(|k| units[k].into()) {
        None => START,
        Some(u) if u < 0x80 => ascii_class(u as u8),
        Some(_) => OTHER,
    };
    let mut acc = Acc {
        total: 0,
        state,
        maybe_base64: false,
    };
    match as_bytes(&units[start..end]) {
        // Bytes (UTF-8, Latin-1): the bulk path.
        Some(b) => acc.utf8(b),
        None => {
            // UCS-2/UCS-4: narrowed (the run is ASCII) a stack buffer at a time. The state
            // carries over, and each piece starts on the exact scalar path: the same integers.
            let mut buf = [0u8; 4096];
            for piece in units[start..end].chunks(buf.len()) {
                for (d, &u) in buf.iter_mut().zip(piece) {
                    *d = u.into() as u8;
                }
                acc.utf8(&buf[..piece.len()]);
            }
        }
    }
    acc.total
}

#[cfg(test)]
mod tests {
    use super::super::estimate;
    use super::*;
    use crate::testing::Rng;
    use crate::text::Text;

    fn random_base64(rng: &mut Rng, len: usize) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..len).map(|_| A[rng.below(64)] as char).collect()
    }

    fn layouts(s: &str) -> Vec<usize> {
        let mut out = vec![estimate(Text::Utf8(s))];
        if let Some(l1) = s
            .chars()
            .map(|c| u8::try_from(c as u32).ok())
            .collect::<Option<Vec<u8>>>()
        {
            out.push(estimate(Text::Latin1(&l1)));
        }
        if let Some(w) = s
            .chars()
            .map(|c| u16::try_from(c as u32).ok())
            .collect::<Option<Vec<u16>>>()
        {
            out.push(estimate(Text::Ucs2(&w)));
        }
        let w: Vec<u32> = s.chars().map(|c| c as u32).collect();
        out.push(estimate(Text::Ucs4(&w)));
        out
    }

    #[test]
    fn long_runs_get_the_rate_in_every_layout() {
        let mut rng = Rng(0x05ee_db64);
        for len in [MIN_RUN, 301, 1000, 5000, 40_000] {
            let run = random_base64(&mut rng, len);
            for (pre, post) in [
                ("", ""),
                ("data:image/png;base64,", "\"}"),
                ("图片：", " 完。"),
                ("é ", "\n"),
            ] {
                let s = format!("{pre}{run}{post}");
                let e = layouts(&s);
                assert!(e.windows(2).all(|p| p[0] == p[1]), "{len} {pre:?}: {e:?}");
                let floor = (len as u64 * W_BASE64).div_ceil(1024) as usize;
                assert!(e[0] >= floor, "{len} {pre:?}: {} < {floor}", e[0]);
            }
        }
    }

    #[test]
    fn runs_near_the_minimum_agree_in_every_layout() {
        // Whatever falls before and after a run (ASCII or not, any length), every layout
        // sees its whole block: the estimates agree, and a long enough run gets the rate.
        let mut rng = Rng(0xb10c);
        for len in MIN_RUN - 2..MIN_RUN + 3 {
            let run = random_base64(&mut rng, len);
            for k in (0..300).step_by(13) {
                let pre: String = (0..k).map(|i| if i % 5 == 0 { 'é' } else { '.' }).collect();
                for post in ["", "é", "中", " tail", &". ".repeat(k % 70)] {
                    let s = format!("{pre}{run}{post}");
                    let e = layouts(&s);
                    assert!(
                        e.windows(2).all(|p| p[0] == p[1]),
                        "{len} {k} {post:?}: {e:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn short_runs_and_text_keep_the_rule() {
        let mut rng = Rng(7);
        let short = random_base64(&mut rng, MIN_RUN - 1);
        assert_eq!(extra(short.as_bytes()), 0);
        // No digit or no upper case: not base64 (a long word, a lower-case hex run).
        assert_eq!(extra("a".repeat(5000).as_bytes()), 0);
        assert_eq!(extra("0123456789abcdef".repeat(40).as_bytes()), 0);
        let prose = "The quick brown fox jumps over the lazy dog. ".repeat(200);
        assert_eq!(extra(prose.as_bytes()), 0);
    }

    #[test]
    fn prefixes_never_estimate_more() {
        let mut rng = Rng(11);
        let s = format!("x = \"{}\"", random_base64(&mut rng, 900));
        let mut last = 0;
        for end in (0..=s.len()).step_by(7) {
            let e = estimate(Text::Utf8(&s[..end]));
            assert!(e >= last, "prefix {end}: {e} < {last}");
            last = e;
        }
    }
}

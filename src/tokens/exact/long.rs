//! Very long pieces (e.g. 50 MB of one repeated character) counted in overlapping windows.
//!
//! Design note. The split leaves some runs whole: a run of one letter, of CJK characters, of
//! punctuation, of spaces or of newlines is one piece however long (digits are cut into
//! groups of 1–3). The heap merge is O(n log n) but needs ~24 bytes per byte of piece and
//! its heap stops fitting in cache: 50 MB of "a" took 17 s and ~1.2 GB of buffers. So a piece longer
//! than [`LONG`] is merged in windows of [`WINDOW`] bytes, each on its own with the exact
//! heap merge, and the windows' encodings are stitched where they agree. This is exact by
//! two properties of BPE's lowest-rank-first merging (argued in the README of GitHub's
//! `bpe` crate, "Properties of BPE"): a run of tokens inside a valid encoding is itself the
//! encoding of its bytes (Corollary II), and two valid encodings that share a token at the
//! same place join into the valid encoding of the union (Corollary III). Window `k`'s
//! encoding is valid for its bytes; if it shares a token with window `k + 1` inside their
//! overlap, the tokens of `k` up to that token and those of `k + 1` after it are the
//! encoding of both windows together; chained to the end of the piece, that is the
//! piece's encoding, and the count is the sum of the parts.
//! Window `k + 1` starts at the last token boundary of window `k` at most [`STRIDE`] bytes
//! in (and after the token shared with `k - 1`). Starting it at a fixed offset failed: the
//! merges of a run follow its first byte (ties go to the leftmost pair), so in "x" + "a" * n
//! every window's 8-byte tokens were out of phase with the piece's and no two windows ever
//! shared a token. If two windows share none in their overlap (never seen in the tests: a
//! token is at most 128 bytes, the overlap at least 512), the whole piece goes to the heap
//! merge: slow but exact. Tests compare with the whole-piece heap merge on runs of many
//! characters and lengths (and mixtures such as `"ab" * n`, `"a" * n + "b"`, `"x" + "a" * n`)
//! and with tiktoken on 200 KB and 1 MB runs.
//!
//! Repeated text: a window whose bytes equal the previous window's has the same encoding,
//! so it is copied, not merged. In a run tiled by tokens of period `p` (8 bytes for "a",
//! 16 for "\n", 128 for " "), successive windows start at the same phase, so after the
//! first one or two every window of a run is a copy. Measured (release, 2 busy cores,
//! `make bench-runs`): 5 MB of one character took 0.4–8.9 s before (50 MB of "a": 17 s),
//! and 50 MB runs of 13 characters now take 0.03–0.2 s against 1.2 s for 50 MB of corpus
//! text. A long piece that never repeats is
//! merged window by window: 50 MB of random letters, 4.4 s (cl100k) to 7.8 s (o200k),
//! bound by the rank lookups; 1 MB of them, 0.29 s against tiktoken's 1.7 s.

use super::ranks::{Ranks, Scratch};

/// Pieces longer than this are counted in windows; shorter ones by one heap merge.
pub(super) const LONG: usize = 16 * 1024;
/// Most bytes between the starts of successive windows.
const STRIDE: usize = 3840;
/// Fewest bytes shared by successive windows, where their encodings must meet.
const OVERLAP: usize = 512;
/// Bytes per window.
const WINDOW: usize = STRIDE + OVERLAP;

/// Number of tokens of the piece `p` (longer than any token).
pub(super) fn count_long(ranks: &Ranks, p: &[u8]) -> usize {
    count_windows(ranks, p).unwrap_or_else(|| ranks.merge_large(p))
}

/// The windowed count, or `None` if two successive windows share no token.
pub(super) fn count_windows(ranks: &Ranks, p: &[u8]) -> Option<usize> {
    let n = p.len();
    debug_assert!(n > ranks.max_len() && n >= 2);
    let mut scratch = Scratch::default();
    // Token boundaries of a window, relative to its start: 0, ..., its length.
    let mut prev: Vec<u32> = Vec::new();
    let mut cur: Vec<u32> = Vec::new();
    let (mut s, mut e) = (0, WINDOW.min(n));
    encode(ranks, &p[s..e], &mut scratch, &mut prev);
    // Index in `prev` of the boundary from which its tokens are still to be counted.
    let mut from = 0;
    let mut count = 0;
    while e < n {
        // The next window starts at a token boundary of this one, about `STRIDE` on: the
        // merges of a run follow its first byte (ties go to the leftmost pair), so a window
        // started at an arbitrary byte may never agree with the one before.
        let q = from.max(prev.partition_point(|&x| x as usize <= STRIDE) - 1);
        debug_assert!(prev[q] > 0);
        let s2 = s + prev[q] as usize;
        let e2 = (s2 + WINDOW).min(n);
        if e2 - s2 == e - s && p[s2..e2] == p[s..e] {
            cur.clone_from(&prev);
        } else {
            encode(ranks, &p[s2..e2], &mut scratch, &mut cur);
        }
        let (i, j) = shared_token(&prev[q..], prev[q] as usize, &cur)?;
        count += q + i + 1 - from;
        from = j + 1;
        std::mem::swap(&mut prev, &mut cur);
        (s, e) = (s2, e2);
    }
    Some(count + prev.len() - 1 - from)
}

/// The heap merge of `w`, as its token boundaries in `bounds`.
fn encode(ranks: &Ranks, w: &[u8], scratch: &mut Scratch, bounds: &mut Vec<u32>) {
    ranks.merge_heap(w, scratch);
    bounds.clear();
    let mut i = 0;
    bounds.push(0);
    while i < w.len() {
        i = scratch.next[i] as usize;
        bounds.push(i as u32);
    }
}

/// The first token of `a` (boundaries relative to `s`, from `s` on) that is also one of
/// `b` (relative to `s` too): its index in each.
fn shared_token(a: &[u32], s: usize, b: &[u32]) -> Option<(usize, usize)> {
    let (mut i, mut j) = (0, 0);
    while i + 1 < a.len() && j + 1 < b.len() {
        let (x, y) = (a[i] as usize - s, b[j] as usize);
        if x < y {
            i += 1;
        } else if x > y {
            j += 1;
        } else {
            if a[i + 1] as usize - s == b[j + 1] as usize {
                return Some((i, j));
            }
            i += 1;
            j += 1;
        }
    }
    None
}

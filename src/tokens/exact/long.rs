//! Very long pieces (e.g. 50 MB of one repeated character) counted in overlapping windows.
//!
//! Design note. The split leaves some runs whole: a run of one letter, of CJK characters, of
//! punctuation, of spaces or of newlines is one piece however long (digits are cut into
//! groups of 1–3). The heap merge is O(n log n) but needs ~24 bytes per byte of piece and
//! its heap stops fitting in cache: 50 MB of "a" took 17 s and 1.2 GB. So a piece longer
//! than [`LONG`] is merged in windows of [`WINDOW`] bytes, [`STRIDE`] apart, each window on
//! its own with the exact heap merge, and the windows' encodings are stitched where they
//! agree. This is exact by two properties of BPE's lowest-rank-first merging (proved in
//! the README of GitHub's `bpe` crate, "Properties of BPE"): a run of tokens inside a
//! valid encoding is itself the encoding of its bytes (Corollary II), and two valid
//! encodings that share a token at the same place join into the valid encoding of the
//! union (Corollary III). Window `k`'s encoding is valid for its bytes; if it shares a
//! token with window `k + 1` inside their overlap, the tokens of `k` up to that token and
//! those of `k + 1` after it are the encoding of both windows together; chained to the end
//! of the piece, that is the piece's encoding, and the count is the sum of the parts.
//! The overlaps of successive pairs are disjoint (`STRIDE >= OVERLAP`), so the chain moves
//! forward. If two windows share no token in their overlap (never seen: a token is at most
//! 128 bytes, the overlap 512), the whole piece goes to the heap merge: slow but exact.
//! Tests compare with the whole-piece heap merge on runs of many characters and lengths
//! (and mixtures such as `"ab" * n`, `"a" * n + "b"`), and with tiktoken on 1 MB runs.
//!
//! Repeated text: a window whose bytes equal the previous window's has the same encoding,
//! so it is copied, not merged. `STRIDE` = 3840 = 2^8 · 15 is a multiple of every period up
//! to 6 bytes (one character of 1–4 bytes, two of up to 3) and of the token periods seen in
//! runs (8 for "a", 16 for "\n", 128 for " "), so every window of a run after the first is a
//! copy. Measured (release, o200k, 2 busy cores): 50 MB of "a" 17 s -> ~0.3 s, and a
//! non-repeating long piece (random letters) runs at the heap merge's ~25–40 ns/byte.

use super::ranks::{Ranks, Scratch};

/// Pieces longer than this are counted in windows; shorter ones by one heap merge.
pub(super) const LONG: usize = 16 * 1024;
/// Distance between the starts of successive windows.
const STRIDE: usize = 3840;
/// Bytes shared by successive windows, where their encodings must meet.
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

//! A BPE rank table and tiktoken's byte-pair merge, counting only.
//!
//! Design note. tiktoken keeps `HashMap<Vec<u8>, Rank>` and, per piece, merges the adjacent
//! pair of lowest rank (leftmost on ties) until no pair is a token, rescanning all pairs
//! after each merge. We do the same merges, so the counts are the same, with:
//! - Data compiled in: `data/<name>.ranks` is every token in rank order as a length byte
//!   and the bytes (1.6 MB for o200k, 0.7 MB for cl100k). Building the table on first use
//!   is one pass with no base64, no decompression and no allocation per token: 11 ms for
//!   o200k, 5 ms for cl100k in a release build.
//! - One memory access per probe: the merge of a piece is a chain of lookups whose cost is
//!   the cache misses, not the arithmetic (a first table of 8-byte slots pointing into the
//!   data took three dependent misses per hit and ran Chinese prose at ~15 MB/s). Each
//!   16-byte slot holds the token's first 8 bytes, its length, rank and data offset, so a
//!   key of up to 8 bytes (most of them) is settled inside the slot. Load factor < 0.4
//!   (8 MB for o200k). Two-byte keys, where every merge starts, use a direct 64 Ki table.
//! - Pieces up to [`SMALL`] bytes merge on stack arrays, scanning for the lowest rank with
//!   a branch-free lane-wise min that vectorizes; longer ones use a heap over
//!   `(rank, start)` that picks the same pair at every step in O(n log n) (tiktoken 0.14
//!   does the same from 100 bytes, `_byte_pair_merge_large`). Measured per piece on the
//!   corpus's multi-token pieces: the stack version wins up to 64–96 bytes (e.g. ≤ 8 bytes:
//!   128 vs 181 ns), the heap from 96–128 bytes (≤ 192 bytes: 3.6 vs 8.8 µs).
//! - Pieces over `long::LONG` (16 KB) are merged in overlapping windows (`long.rs`): the
//!   heap over a whole 50 MB run took 17 s and ~1.2 GB.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

type Rank = u32;
const NONE: Rank = Rank::MAX;

/// Longest piece merged on the stack; longer pieces use the heap.
pub(super) const SMALL: usize = 96;
const LANES: usize = 8;
const SMALL_PADDED: usize = SMALL.div_ceil(LANES) * LANES;

/// Buffers of [`Ranks::merge_heap`], kept between calls.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) next: Vec<u32>,
    prev: Vec<u32>,
    rank: Vec<Rank>,
    heap: BinaryHeap<Reverse<u64>>,
}

pub(super) struct Ranks {
    /// The `.ranks` data: `[len][bytes]` per token, in rank order.
    data: &'static [u8],
    /// Open addressing with linear probing, load factor < 0.4.
    slots: Vec<Slot>,
    mask: usize,
    /// Rank of each two-byte token, indexed by `b0 << 8 | b1`.
    pairs: Vec<Rank>,
    /// Length of the longest token.
    max_len: usize,
}

/// A token: its first 8 bytes (zero-padded, little-endian) and `len << 56 | rank << 32 |
/// offset of its bytes in data`; `meta == 0` for an empty slot. A key of up to 8 bytes is
/// compared without leaving the slot: one memory access per probe.
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Slot {
    head: u64,
    meta: u64,
}

/// Index of the first minimum of `ranks` (a whole number of lane groups), or `None` if all
/// are `i32::MAX` (no pair is a token).
#[inline(always)]
fn first_min(ranks: &[i32]) -> Option<usize> {
    let mut acc = [i32::MAX; LANES];
    for group in ranks.chunks_exact(LANES) {
        for (a, &r) in acc.iter_mut().zip(group) {
            *a = (*a).min(r);
        }
    }
    let best = acc.iter().fold(i32::MAX, |a, &r| a.min(r));
    if best == i32::MAX {
        return None;
    }
    ranks.iter().position(|&r| r == best)
}

/// A rank as a lane of [`first_min`]: [`NONE`] becomes `i32::MAX` (ranks are < 2^24).
#[inline(always)]
fn lane(rank: Rank) -> i32 {
    rank.min(i32::MAX as u32) as i32
}

/// Up to 8 bytes as a little-endian integer, zero-padded, without a `memcpy` call.
#[inline(always)]
fn load(b: &[u8]) -> u64 {
    let n = b.len();
    if n >= 8 {
        u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
    } else if n >= 4 {
        // Two overlapping 4-byte reads; the shared bytes are equal, so `|` keeps them.
        let lo = u64::from(u32::from_le_bytes(b[..4].try_into().expect("4 bytes")));
        let hi = u64::from(u32::from_le_bytes(b[n - 4..].try_into().expect("4 bytes")));
        lo | hi << ((n - 4) * 8)
    } else if n > 0 {
        u64::from(b[0]) | u64::from(b[n / 2]) << (n / 2 * 8) | u64::from(b[n - 1]) << ((n - 1) * 8)
    } else {
        0
    }
}

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// Hash of a key whose first 8 bytes are `head`.
#[inline(always)]
fn hash(key: &[u8], head: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    const SEED: u64 = 0x243F_6A88_85A3_08D3;
    let mut h = fold_mul(SEED ^ key.len() as u64 ^ head, K);
    if key.len() > 8 {
        for chunk in key[8..].chunks(8) {
            h = fold_mul(h ^ load(chunk), K);
        }
    }
    h
}

impl Ranks {
    /// Builds the table from `.ranks` data.
    pub(super) fn new(data: &'static [u8]) -> Ranks {
        let mut tokens = 0usize;
        let mut i = 0;
        while i < data.len() {
            tokens += 1;
            i += 1 + data[i] as usize;
        }
        assert_eq!(i, data.len(), "truncated rank data");
        assert!(data.len() < 1 << 32 && tokens < 1 << 24);
        let cap = (tokens * 5 / 2).next_power_of_two();
        let mask = cap - 1;
        let mut slots = vec![Slot::default(); cap];
        let mut pairs = vec![NONE; 1 << 16];
        let mut off = 0;
        let mut max_len = 0;
        for rank in 0..tokens {
            let len = data[off] as usize;
            max_len = max_len.max(len);
            let key = &data[off + 1..off + 1 + len];
            if len == 2 {
                pairs[(key[0] as usize) << 8 | key[1] as usize] = rank as Rank;
            }
            let head = load(key);
            let mut s = hash(key, head) as usize & mask;
            while slots[s].meta != 0 {
                s = (s + 1) & mask;
            }
            slots[s] = Slot {
                head,
                meta: (len as u64) << 56 | (rank as u64) << 32 | (off + 1) as u64,
            };
            off += 1 + len;
        }
        Ranks {
            data,
            slots,
            mask,
            pairs,
            max_len,
        }
    }

    /// Rank of `key` (non-empty), or [`NONE`].
    #[inline(always)]
    pub(super) fn rank(&self, key: &[u8]) -> Rank {
        let n = key.len();
        if n == 2 {
            return self.pairs[(key[0] as usize) << 8 | key[1] as usize];
        }
        let head = load(key);
        let mut s = hash(key, head) as usize & self.mask;
        loop {
            let slot = self.slots[s];
            if slot.meta == 0 {
                return NONE;
            }
            if slot.head == head && (slot.meta >> 56) as usize == n {
                let off = slot.meta as u32 as usize;
                if n <= 8 || self.data[off + 8..off + n] == key[8..] {
                    return (slot.meta >> 32) as u32 & 0xFF_FFFF;
                }
            }
            s = (s + 1) & self.mask;
        }
    }

    /// Number of tokens tiktoken encodes the piece `p` (non-empty, at most `long::LONG` bytes:
    /// the parent module sends longer ones to `long.rs`) into.
    #[inline]
    pub(super) fn count_piece(&self, p: &[u8]) -> usize {
        if p.len() == 1 || (p.len() <= self.max_len && self.rank(p) != NONE) {
            return 1;
        }
        if p.len() <= SMALL {
            self.merge_small(p)
        } else {
            self.merge_large(p)
        }
    }

    /// Length of the longest token.
    pub(super) fn max_len(&self) -> usize {
        self.max_len
    }

    /// tiktoken's `_byte_pair_merge` on stack arrays. Parts are named by their first byte:
    /// `rank[i]` is the rank of part `i` joined with the next one ([`NONE`] if that is no
    /// token, or if `i` starts no part), `next[i]` where the next part starts.
    pub(super) fn merge_small(&self, p: &[u8]) -> usize {
        let n = p.len();
        debug_assert!((2..=SMALL).contains(&n));
        // Ranks as i32 (they are < 2^31) padded with `i32::MAX` to whole lane groups, so the
        // scan vectorizes with baseline SSE2 (which has no unsigned 32-bit min).
        let mut rank = [i32::MAX; SMALL_PADDED];
        let mut next = [0u8; SMALL];
        let mut prev = [0u8; SMALL];
        for i in 0..n - 1 {
            rank[i] = lane(self.pairs[(p[i] as usize) << 8 | p[i + 1] as usize]);
            next[i] = (i + 1) as u8;
            prev[i + 1] = i as u8;
        }
        next[n - 1] = n as u8; // fits: SMALL < 256
        let live = (n - 1).div_ceil(LANES) * LANES;
        let mut parts = n;
        loop {
            // Lowest rank, leftmost on ties: tiktoken's order.
            let Some(i) = first_min(&rank[..live]) else {
                return parts;
            };
            let j = next[i] as usize;
            let k = next[j] as usize;
            rank[j] = i32::MAX;
            next[i] = k as u8;
            parts -= 1;
            rank[i] = if k < n {
                prev[k] = i as u8;
                lane(self.rank(&p[i..next[k] as usize]))
            } else {
                i32::MAX
            };
            if i > 0 {
                let h = prev[i] as usize;
                rank[h] = lane(self.rank(&p[h..k]));
            }
        }
    }

    /// The same merges with a heap and a linked list of parts: O(n log n).
    pub(super) fn merge_large(&self, p: &[u8]) -> usize {
        self.merge_heap(p, &mut Scratch::default())
    }

    /// [`Ranks::merge_large`] in reusable buffers; afterwards `scratch.next` links the
    /// final parts: `0`, `next[0]`, `next[next[0]]`, ... up to `p.len()`.
    pub(super) fn merge_heap(&self, p: &[u8], scratch: &mut Scratch) -> usize {
        let n = p.len();
        debug_assert!(n >= 2);
        // Parts are identified by their start byte; `next[i]` is the start of the following
        // part (`n` at the end), `prev[i]` the previous one, `rank[i]` the rank of part `i`
        // joined with its successor. A removed part has `next[i] == 0`. Heap entries are
        // `rank << 32 | start`, so the smallest is the lowest rank, leftmost.
        let Scratch {
            next,
            prev,
            rank,
            heap,
        } = scratch;
        next.clear();
        next.extend(1..=n as u32);
        prev.clear();
        prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
        rank.clear();
        rank.resize(n, NONE);
        let mut entries = std::mem::take(heap).into_vec();
        entries.clear();
        for i in 0..n - 1 {
            let r = self.pairs[(p[i] as usize) << 8 | p[i + 1] as usize];
            rank[i] = r;
            if r != NONE {
                entries.push(Reverse(u64::from(r) << 32 | i as u64));
            }
        }
        // Built in O(n) at once rather than by n pushes.
        let mut queue = BinaryHeap::from(entries);
        let mut parts = n;
        while let Some(Reverse(top)) = queue.pop() {
            let (r, i) = ((top >> 32) as Rank, top as u32 as usize);
            if next[i] == 0 || rank[i] != r {
                continue; // stale
            }
            let j = next[i] as usize;
            let k = next[j] as usize;
            next[i] = k as u32;
            next[j] = 0;
            parts -= 1;
            rank[i] = if k < n {
                prev[k] = i as u32;
                self.rank(&p[i..next[k] as usize])
            } else {
                NONE
            };
            if rank[i] != NONE {
                queue.push(Reverse(u64::from(rank[i]) << 32 | i as u64));
            }
            if i > 0 {
                let h = prev[i] as usize;
                rank[h] = self.rank(&p[h..k]);
                if rank[h] != NONE {
                    queue.push(Reverse(u64::from(rank[h]) << 32 | h as u64));
                }
            }
        }
        *heap = queue;
        parts
    }

    /// Number of tokens.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.meta != 0).count()
    }
}

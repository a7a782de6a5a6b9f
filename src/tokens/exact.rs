//! Exact BPE token counts for OpenAI's encodings (o200k_base, cl100k_base), offline.
//!
//! `count(enc, text)` equals Python tiktoken's `len(enc.encode_ordinary(text))`: special-token
//! text such as `<|endoftext|>` is counted as ordinary text.
//!
//! Design note: what was chosen, and the measurements that decided it. Release builds on
//! this machine (2 cores shared with other jobs, so speeds vary by ~±30% between runs); the
//! shared corpus: 2,789 message texts, tool names and tool arguments, 1.45 MB of UTF-8.
//! - `bpe-openai` (exact on the corpus; 17–19 MB/s for o200k, 31 MB/s for cl100k) compiles
//!   three encodings' prebuilt automata into the binary (~71 MB). Building them on first
//!   use with `bpe::BytePairEncoding::from_dictionary` instead took 1.2 s for o200k (0.45 s
//!   for cl100k): too slow for a first call. `tiktoken-rs` is tiktoken's own code (fancy-regex
//!   split, HashMap merge; 11–13 MB/s) and ships five rank files as base64 text.
//! - So this is tiktoken's algorithm, written for counting: the two split regexes compiled
//!   by hand into scans over a Unicode class table (`split.rs`, 300–650 MB/s; a test
//!   compares it with fancy-regex running tiktoken's exact patterns on random text), and
//!   the same byte-pair merges over our own cache-friendly table, with no token vector
//!   (`ranks.rs`). The rank data is compiled in (`data/*.ranks`, 2.3 MB for both, rebuilt
//!   byte for byte into OpenAI's files by `data/ranks.py`) and indexed on first use: 11 ms
//!   for o200k, 5 ms for cl100k (38 / 17 ms with the machine busy), nothing at import.
//! - Results: identical to tiktoken 0.14 on every corpus text and on 8,000 random strings
//!   per encoding (tests/test_exact.py). One text at a time, 78–95 MB/s for o200k and
//!   cl100k against tiktoken's 7–15 MB/s (6.5–12×); Chinese prose, where pieces are long
//!   runs of three-byte characters and merging dominates, 19–40 MB/s (2.3–3×). The
//!   extension grows by 2.5 MB (3.97 MB in all then; 4.2 MB since the allocator was added).
//! - Pathological pieces: the split leaves a run of one letter, CJK character, punctuation
//!   mark, space or newline whole, and one 50 MB piece took 17 s in the heap merge (50 MB of
//!   corpus text: ~1–2 s on this machine). Such pieces are merged in overlapping windows
//!   stitched where their encodings share a token (`long.rs`, exact by the argument there),
//!   and a window that repeats the previous one's bytes is copied: 50 MB runs of 13
//!   characters now take 0.03–0.5 s, 0.02–0.25× the corpus text in the same run
//!   (`make bench-runs`). A long piece that never repeats (random letters) is merged window
//!   by window at about the heap's speed.
//!
//! Threads: [`count_many`] counts on our own rayon pool from [`PARALLEL_MIN_BYTES`] of text
//! on, in tasks of ~`TASK_BYTES`. Measured (batches of consecutive corpus texts, best of
//! 40): handing a batch to the pool costs ~10 µs (a 1 KB batch ran at 0.55× sequential,
//! 4 KB at 0.8×, 16 KB at 0.92×); from 32 KB the hand-off is lost in the work (0.96–0.99×
//! while another job held the second core, 1.35× on a 1 MB batch when it was free). 64 KB
//! (~0.7 ms of work, ≥ 4 tasks) is where a free second core can pay and a busy one costs
//! < 3%. The pool is used only in the process that created it: after `fork()` the child has
//! its memory but not its threads (using it would wait forever), so a forked child counts
//! sequentially.

mod long;
mod ranks;
mod split;

use std::sync::OnceLock;

use rayon::prelude::*;

use ranks::Ranks;
use split::Pattern;

/// An exact encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    pub fn parse(name: &str) -> Option<Encoding> {
        match name {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn pattern(self) -> Pattern {
        match self {
            Encoding::O200kBase => Pattern::O200k,
            Encoding::Cl100kBase => Pattern::Cl100k,
        }
    }

    fn cell(self) -> &'static OnceLock<Ranks> {
        static O200K: OnceLock<Ranks> = OnceLock::new();
        static CL100K: OnceLock<Ranks> = OnceLock::new();
        match self {
            Encoding::O200kBase => &O200K,
            Encoding::Cl100kBase => &CL100K,
        }
    }

    fn ranks(self) -> &'static Ranks {
        self.cell().get_or_init(|| {
            Ranks::new(match self {
                Encoding::O200kBase => include_bytes!("data/o200k_base.ranks"),
                Encoding::Cl100kBase => include_bytes!("data/cl100k_base.ranks"),
            })
        })
    }
}

/// Whether the encoding's table has been built (it is on first use, not at import).
pub fn is_loaded(encoding: Encoding) -> bool {
    encoding.cell().get().is_some()
}

/// Builds the encoding's table now rather than on first use.
pub fn preload(encoding: Encoding) {
    encoding.ranks();
}

/// Number of tokens of `text` (tiktoken's `encode_ordinary`).
pub fn count(encoding: Encoding, text: &str) -> usize {
    count_with(encoding.ranks(), encoding.pattern(), text)
}

fn count_with(ranks: &Ranks, pattern: Pattern, text: &str) -> usize {
    let mut n = 0;
    split::for_each_piece(pattern, text, |piece| {
        n += if piece.len() <= long::LONG {
            ranks.count_piece(piece)
        } else {
            long::count_long(ranks, piece)
        }
    });
    n
}

/// Total text size from which [`count_many`] uses threads (see the design note).
pub const PARALLEL_MIN_BYTES: usize = 64 * 1024;
/// Average text per parallel task.
const TASK_BYTES: usize = 16 * 1024;

/// [`count`] of many texts, in parallel when they are large enough together.
pub fn count_many(encoding: Encoding, texts: &[&str]) -> Vec<usize> {
    let ranks = encoding.ranks();
    let pattern = encoding.pattern();
    let total: usize = texts.iter().map(|t| t.len()).sum();
    if texts.len() > 1 && total >= PARALLEL_MIN_BYTES {
        if let Some(pool) = pool() {
            // Tasks of ~`TASK_BYTES` of text on average: many tiny texts must not cost a
            // task each.
            let per_task = (TASK_BYTES * texts.len() / total).max(1);
            return pool.install(|| {
                texts
                    .par_iter()
                    .with_min_len(per_task)
                    .map(|t| count_with(ranks, pattern, t))
                    .collect()
            });
        }
    }
    texts
        .iter()
        .map(|t| count_with(ranks, pattern, t))
        .collect()
}

use crate::parallel::pool;

#[cfg(test)]
mod tests;

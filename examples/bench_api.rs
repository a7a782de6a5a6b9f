//! Times the Rust API's `check()` and `compact()` (rule summary) on one conversation, for
//! `benches/bench_rust.py`, which times the Python API on the same input in the same run.
//!
//! `bench_api MESSAGES.json WINDOW REPEAT`: prints `{"check_s": [...], "compact_s": [...],
//! "tokens_after": n}` (one sample per repeat; each compaction gets a fresh copy of the messages,
//! made outside the timing, as the Python side's list is).

use context_compactor::{Compactor, Options};
use serde_json::Value;
use std::time::Instant;

// The Python extension's allocator (`src/python/mod.rs`): the benchmark compares the APIs, built
// alike (`benches/bench_rust.py` builds this in the release profile, as maturin builds the
// extension: fat LTO, one codegen unit). With the `python` feature the library sets it already.
#[cfg(not(feature = "python"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: bench_api MESSAGES.json WINDOW REPEAT");
    let window: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(128_000);
    let repeat: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let text = std::fs::read_to_string(&path).expect("readable file");
    let messages: Vec<Value> = serde_json::from_str(&text).expect("a JSON list of messages");
    let compactor = Compactor::with_window(window);
    let opts = Options::new();
    let mut check_s = Vec::new();
    let mut compact_s = Vec::new();
    let mut tokens_after = 0;
    for _ in 0..repeat {
        let t = Instant::now();
        let check = compactor.check(&messages, &opts).expect("check");
        check_s.push(t.elapsed().as_secs_f64());
        std::hint::black_box(check);
        let copy = messages.clone();
        let t = Instant::now();
        let result = compactor.compact(copy, &opts).expect("compact");
        compact_s.push(t.elapsed().as_secs_f64());
        tokens_after = result.tokens_after;
        drop(result);
    }
    println!(
        "{}",
        serde_json::json!({"check_s": check_s, "compact_s": compact_s, "tokens_after": tokens_after})
    );
}

//! Throughput of the default token estimate, per text layout.
//!
//!     cargo bench --bench estimate_throughput
//!
//! Texts come from the shared corpus (`$CORPUS_DIR`, else `../shared/corpus`): every message
//! content and tool-call argument string of `openai/*.json`, joined. "ascii" keeps the
//! pure-ASCII ones; "all" is everything (39% of fields have non-ASCII: Chinese, arrows, box
//! drawing); "chinese" keeps the fields that are at least half CJK. Each text is measured in
//! every layout it fits (UTF-8, and the PEP 393 layouts Latin-1 / UCS-2 / UCS-4 that Python
//! would store it in or wider). Throughput is UTF-8 bytes per second of the same text.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use context_compactor::text::Text;
use context_compactor::tokens::estimate::estimate;

fn corpus_dir() -> PathBuf {
    match std::env::var_os("CORPUS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    }
}

fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                if matches!(
                    k.as_str(),
                    "content" | "text" | "arguments" | "function" | "tool_calls"
                ) {
                    strings(x, out);
                }
            }
        }
        _ => {}
    }
}

fn corpus_texts() -> Vec<String> {
    let dir = corpus_dir().join("openai");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus not found at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        strings(&v, &mut out);
    }
    out
}

/// Best of several timed rounds (the machine is shared), in UTF-8 bytes and code points per
/// second.
fn measure(name: &str, layout: &str, utf8_len: usize, text: Text<'_>) {
    let mut best = Duration::MAX;
    let mut result = 0;
    for _ in 0..25 {
        let start = Instant::now();
        let mut reps = 0;
        while reps < 3 || start.elapsed() < Duration::from_millis(40) {
            result = black_box(estimate(black_box(text)));
            reps += 1;
        }
        best = best.min(start.elapsed() / reps);
    }
    let secs = best.as_secs_f64();
    let gbps = utf8_len as f64 / secs / 1e9;
    let gchars = text.char_len() as f64 / secs / 1e9;
    println!("{name:8} {layout:7} {utf8_len:>9} B  {gbps:6.2} GB/s  {gchars:6.2} Gchar/s  ({result} tokens)");
}

fn main() {
    let texts = corpus_texts();
    let ascii: String = texts
        .iter()
        .filter(|t| t.is_ascii())
        .map(String::as_str)
        .collect();
    let all: String = texts.concat();
    let chinese: String = texts
        .iter()
        .filter(|t| {
            let cjk = t
                .chars()
                .filter(|&c| ('\u{2E80}'..='\u{9FFF}').contains(&c))
                .count();
            cjk * 2 >= t.chars().filter(|c| !c.is_whitespace()).count().max(1)
        })
        .map(String::as_str)
        .collect();
    println!(
        "estimate_tokens throughput (best of 25 rounds): UTF-8 bytes and code points of the same text per second"
    );
    // 1 MB of base64 (deterministic bytes): the run rate's second pass (`estimate/base64.rs`).
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let b64: String = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(x % 64) as usize]
                as char
        })
        .collect();
    for (name, s) in [
        ("ascii", &ascii),
        ("all", &all),
        ("chinese", &chinese),
        ("base64", &b64),
    ] {
        measure(name, "utf8", s.len(), Text::Utf8(s));
        if let Some(b) = s
            .chars()
            .map(|c| u8::try_from(c as u32).ok())
            .collect::<Option<Vec<u8>>>()
        {
            measure(name, "latin1", s.len(), Text::Latin1(&b));
        }
        if let Some(w) = s
            .chars()
            .map(|c| u16::try_from(c as u32).ok())
            .collect::<Option<Vec<u16>>>()
        {
            measure(name, "ucs2", s.len(), Text::Ucs2(&w));
        }
        let w: Vec<u32> = s.chars().map(|c| c as u32).collect();
        measure(name, "ucs4", s.len(), Text::Ucs4(&w));
    }
}

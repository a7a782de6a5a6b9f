//! The text functions over the real transcripts in `../shared/corpus/openai` (skipped when
//! the corpus is not there). `cargo test --release --lib corpus_figures -- --nocapture`
//! prints the figures quoted in the module note.

use super::*;
use crate::cut::cut_json_args;
use crate::message::{Block, BlockKind, Message, Role};
use std::path::PathBuf;
use std::time::Instant;

fn corpus_dir() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/openai");
    d.is_dir().then_some(d)
}

fn load() -> Vec<(String, serde_json::Value)> {
    let Some(dir) = corpus_dir() else {
        return Vec::new();
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// Views of an OpenAI message list, borrowing from the JSON.
fn views(v: &serde_json::Value) -> Vec<Message<'_>> {
    let mut out = Vec::new();
    for m in v.as_array().unwrap() {
        let role = Role::parse(m["role"].as_str().unwrap_or(""));
        let mut blocks = Vec::new();
        if matches!(role, Role::Tool | Role::Function) {
            let content = m["content"].as_str().unwrap_or("");
            blocks.push(Block::tool_result(m["tool_call_id"].as_str(), content));
            out.push(Message::new(role, blocks));
            continue;
        }
        match &m["content"] {
            serde_json::Value::String(s) if !s.is_empty() => blocks.push(Block::text(s.as_str())),
            serde_json::Value::Array(parts) => {
                for p in parts {
                    match p["type"].as_str() {
                        Some("text") => blocks.push(Block::text(p["text"].as_str().unwrap_or(""))),
                        Some("image_url") => blocks.push(Block::new(BlockKind::Image)),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if let Some(calls) = m["tool_calls"].as_array() {
            for c in calls {
                blocks.push(Block::tool_call(
                    c["id"].as_str(),
                    c["function"]["name"].as_str().unwrap_or(""),
                    c["function"]["arguments"].as_str().unwrap_or(""),
                ));
            }
        }
        out.push(Message::new(role, blocks));
    }
    out
}

fn is_chinese_file(name: &str) -> bool {
    name.starts_with("kimi-cli-claude-code") || name.starts_with("llamafactory-glaive-zh")
}

#[test]
fn corpus_language_facts_and_summaries() {
    for (name, v) in load() {
        let msgs = views(&v);
        let lang = detect_language(&msgs);
        let want = if is_chinese_file(&name) {
            Language::Zh
        } else {
            Language::En
        };
        assert_eq!(lang, want, "{name}");
        let facts = must_keep_facts(&msgs);
        let has_calls = msgs.iter().any(|m| m.has_calls());
        if has_calls && !name.starts_with("llamafactory") && !name.starts_with("tau-bench") {
            assert!(!facts.is_empty(), "{name}: no facts");
        }
        for f in &facts {
            assert!(!f.is_empty() && f.trim() == f, "{name}: {f:?}");
        }
        for max in [400, 2000, 6000] {
            let s = rule_summary(&msgs, lang, max);
            assert!(!s.is_empty() && s.chars().count() <= max, "{name} {max}");
            let t = truncation_summary(&msgs, lang, 100, max);
            assert!(t.chars().count() <= max, "{name} {max}");
        }
        let transcript = render_transcript(&msgs, 2000);
        assert_eq!(transcript.len(), msgs.len());
        let count = |s: &str| crate::tokens::estimate::estimate_str(s);
        let chunks = chunk_transcript(&transcript, count, 8000);
        assert_eq!(chunks.first().map(|c| c.start), Some(0), "{name}");
        assert_eq!(
            chunks.last().map(|c| c.end),
            Some(transcript.len()),
            "{name}"
        );
        assert!(chunks.windows(2).all(|w| w[0].end == w[1].start));
        // Every tool call's arguments cut to 500 chars stay valid JSON when they were.
        for m in &msgs {
            for c in m.calls() {
                let args = c.texts[0].text().to_utf8();
                if let Some(cut) = cut_json_args(&args, 500) {
                    if serde_json::from_str::<serde_json::Value>(&args).is_ok() {
                        assert!(
                            serde_json::from_str::<serde_json::Value>(&cut).is_ok(),
                            "{name}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn corpus_figures() {
    let files = load();
    if files.is_empty() {
        return;
    }
    let (mut total_facts, mut total_msgs) = (0usize, 0usize);
    let mut by_kind = [0usize; 3];
    let started = Instant::now();
    let mut chars = 0usize;
    for (name, v) in &files {
        let msgs = views(v);
        chars += msgs
            .iter()
            .flat_map(|m| m.blocks.iter())
            .map(|b| b.char_len())
            .sum::<usize>();
        let typed = facts::must_keep_facts_typed(&msgs);
        for (k, _) in &typed {
            by_kind[match k {
                FactKind::Path => 0,
                FactKind::Url => 1,
                FactKind::Error => 2,
            }] += 1;
        }
        total_facts += typed.len();
        total_msgs += msgs.len();
        let sample: Vec<&str> = typed.iter().map(|(_, f)| f.as_str()).take(12).collect();
        println!(
            "{name}: {} msgs, {} facts, lang {:?}\n    {}",
            msgs.len(),
            typed.len(),
            detect_language(&msgs),
            sample.join("  ")
        );
        if std::env::var_os("FACTS_ALL").is_some() {
            for (k, f) in &typed {
                println!("      {k:?} {f}");
            }
        }
    }
    if let Some(which) = std::env::var_os("RULE_SAMPLE") {
        for (name, v) in &files {
            if name.contains(which.to_str().unwrap_or("")) {
                let msgs = views(v);
                let lang = detect_language(&msgs);
                println!(
                    "--- rule summary of {name} (2400 chars)\n{}",
                    rule_summary(&msgs, lang, 2400)
                );
                println!(
                    "--- truncation summary (600 chars)\n{}",
                    truncation_summary(&msgs, lang, 100, 600)
                );
            }
        }
    }
    println!(
        "total: {total_facts} facts over {} files, {total_msgs} messages (paths {}, urls {}, errors {})",
        files.len(),
        by_kind[0],
        by_kind[1],
        by_kind[2]
    );
    let elapsed = started.elapsed();
    // Timing of the whole pipeline on the corpus.
    let t0 = Instant::now();
    let mut sink = 0usize;
    for _ in 0..5 {
        for (_, v) in &files {
            let msgs = views(v);
            let lang = detect_language(&msgs);
            sink += must_keep_facts(&msgs).len();
            sink += render_transcript(&msgs, 2000).len();
            sink += rule_summary(&msgs, lang, 6000).len();
        }
    }
    let per = t0.elapsed() / 5;
    let all: Vec<Vec<Message<'_>>> = files.iter().map(|(_, v)| views(v)).collect();
    let time = |label: &str, f: &dyn Fn(&[Message<'_>]) -> usize| {
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..5 {
            for m in &all {
                n += f(m);
            }
        }
        println!("  {label}: {:?} per pass ({n})", t.elapsed() / 5);
    };
    time("detect_language", &|m| detect_language(m) as usize);
    time("must_keep_facts", &|m| must_keep_facts(m).len());
    time("render_transcript", &|m| render_transcript(m, 2000).len());
    time("rule_summary", &|m| {
        rule_summary(m, Language::En, 6000).len()
    });
    time("truncation_summary", &|m| {
        truncation_summary(m, Language::En, 100, 6000).len()
    });
    println!(
        "first pass {:?}; language + facts + transcript + rule summary over the corpus ({} chars): {:?} per pass ({sink})",
        elapsed,
        chars,
        per
    );
    if std::env::var_os("BIG").is_some() {
        // ~100k messages: every corpus conversation repeated.
        let mut big: Vec<Message<'_>> = Vec::new();
        while big.len() < 100_000 {
            for m in &all {
                big.extend(m.iter().cloned());
            }
        }
        let chars: usize = big
            .iter()
            .flat_map(|m| m.blocks.iter())
            .map(|b| b.char_len())
            .sum();
        println!("big span: {} messages, {chars} chars", big.len());
        let t = Instant::now();
        let lang = detect_language(&big);
        println!("  detect_language {:?}", t.elapsed());
        let t = Instant::now();
        let n = must_keep_facts(&big).len();
        println!("  must_keep_facts {:?} ({n})", t.elapsed());
        let t = Instant::now();
        let tr = render_transcript(&big, 2000);
        println!("  render_transcript {:?}", t.elapsed());
        let t = Instant::now();
        let count = |s: &str| crate::tokens::estimate::estimate_str(s);
        let n = chunk_transcript(&tr, count, 100_000).len();
        println!("  chunk_transcript {:?} ({n} chunks)", t.elapsed());
        let t = Instant::now();
        let n = rule_summary(&big, lang, 6000).len();
        println!("  rule_summary {:?} ({n})", t.elapsed());
        let t = Instant::now();
        let n = truncation_summary(&big, lang, 100, 6000).len();
        println!("  truncation_summary {:?} ({n})", t.elapsed());
    }
}

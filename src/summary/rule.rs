//! Summaries built without an LLM: the rule summary (`apply(None)`, and the fallback when the
//! summarizer fails) and the truncation summary (the last resort).
//!
//! The rule summary follows seed 000 (topics, key conclusions, technical context, counts) and
//! adds what an agent needs to carry on: files touched, commands run, errors seen. Sections are
//! labelled in the conversation's language. Every line has a priority (the counts line; the
//! first and the latest request; the latest conclusions; edited files; recent commands and
//! errors); when the whole would pass `max_chars`, the least important lines go first and a
//! section's heading says how many of its lines are shown. Deterministic: same messages, same
//! text. One pass over the messages; tool output is read only for error lines and names.

use super::facts::{is_error_name, scan_text, FactKind, FactKinds, FactSet};
use super::language::{Label, Language};
use super::text::shorten;
use super::transcript::{call_names, result_name};
use crate::message::{Block, BlockKind, Message, Role};
use crate::text::Text;
use std::collections::{HashMap, HashSet, VecDeque};

const TOPIC_CHARS: usize = 120;
const CONCLUSION_CHARS: usize = 200;
const LINE_CHARS: usize = 160;
/// Error lines remembered from tool output (the latest ones).
const MAX_ERROR_LINES: usize = 64;

/// User messages that are harness wrappers, not the user's words (Claude Code and friends).
const HARNESS_PREFIXES: &[&str] = &[
    "<local-command-caveat>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<system-reminder>",
    "<task-notification>",
    "<user-prompt-submit-hook>",
    "[Request interrupted",
];

/// The text blocks of a message, joined by newlines.
fn prose(m: &Message<'_>) -> String {
    let mut s = String::new();
    for b in m.blocks.iter() {
        if matches!(b.kind, BlockKind::Text | BlockKind::Refusal) {
            for p in &b.texts {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(&p.text().to_utf8());
            }
        }
    }
    s
}

/// Removes `<tag>`-like markup from a line.
fn strip_tags(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let is_tag = after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/');
        match (is_tag, after.find('>')) {
            (true, Some(j)) => {
                out.push(' ');
                rest = &after[j + 1..];
            }
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Lines of prose: outside fenced code, tags removed, list and heading marks dropped,
/// whitespace collapsed, empty lines skipped.
fn prose_lines(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut fence = false;
    text.lines().filter_map(move |l| {
        let t = l.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            return None;
        }
        if fence {
            return None;
        }
        let t = strip_tags(t).replace("**", "");
        let t = t
            .trim()
            .trim_start_matches(['#', '>', '-', '*', '•'])
            .trim()
            .trim_matches('*')
            .trim();
        if t.is_empty() || t.chars().all(|c| matches!(c, '-' | '|' | ':' | '=' | ' ')) {
            return None;
        }
        Some(t.split_whitespace().collect::<Vec<_>>().join(" "))
    })
}

/// Byte end of the first sentence of `s` that is at least `min_chars` long, if any.
fn sentence_end(s: &str, min_chars: usize) -> Option<usize> {
    let mut it = s.char_indices().peekable();
    let mut n = 0;
    while let Some((i, c)) = it.next() {
        n += 1;
        let end = match c {
            '.' | '!' | '?' => it.peek().is_none_or(|&(_, d)| d.is_whitespace()),
            '。' | '！' | '？' => true,
            _ => false,
        };
        if end && n >= min_chars {
            return Some(i + c.len_utf8());
        }
    }
    None
}

/// The opening sentences of `s`: up to the first sentence end after `want` chars.
fn opening(s: &str, want: usize, max: usize) -> String {
    let s = match sentence_end(s, want) {
        Some(e) => &s[..e],
        None => s,
    };
    shorten(s.trim(), max).into_owned()
}

/// The first line of prose, joined with the next when it only introduces it ("Implement the
/// following plan:", "全部完成：").
fn lead(text: &str) -> Option<String> {
    let mut lines = prose_lines(text);
    let mut s = lines.next()?;
    if (s.ends_with(':') || s.ends_with('：')) && s.chars().count() < 80 {
        if let Some(next) = lines.next() {
            if s.ends_with(':') {
                s.push(' ');
            }
            s.push_str(&next);
        }
    }
    Some(s)
}

/// What a user message asks: the first sentence of its [`lead`], shortened. Harness wrappers
/// (`<command-name>`, `<system-reminder>`, …) ask nothing.
fn topic(text: &str) -> Option<String> {
    let t = text.trim_start();
    if HARNESS_PREFIXES.iter().any(|p| t.starts_with(p)) {
        return None;
    }
    Some(opening(&lead(text)?, 15, TOPIC_CHARS))
}

/// What an assistant message concludes: the opening sentences of its [`lead`] (a final
/// answer leads with its result: "All checks pass. The fix adds …").
fn conclusion(text: &str) -> Option<String> {
    Some(opening(&lead(text)?, 60, CONCLUSION_CHARS))
}

fn is_shell_tool(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "sh" | "zsh" | "cmd" | "run" | "exec" | "execute" | "powershell" | "pwsh"
    ) || ["bash", "shell", "terminal", "command", "_cmd", "exec_"]
        .iter()
        .any(|k| n.contains(k))
        || n.starts_with("run_")
        || n.starts_with("execute_")
}

fn is_edit_tool(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "edit", "write", "create", "replace", "patch", "insert", "apply", "save", "append",
        "modify", "rename", "delete", "move",
    ]
    .iter()
    .any(|k| n.contains(k))
}

/// The shell command of a call's arguments (`command`, `cmd`, `script`; a string or an argv
/// array, `bash -lc` dropped), or the raw arguments when they are not JSON.
fn shell_command(args: &str) -> Option<String> {
    let v: serde_json::Value = match serde_json::from_str(args) {
        Ok(v) => v,
        Err(_) => return (!args.trim().is_empty()).then(|| args.trim().to_owned()),
    };
    let field = match &v {
        serde_json::Value::Object(o) => ["command", "cmd", "script", "commands", "code"]
            .iter()
            .find_map(|k| o.get(*k))?,
        other => other,
    };
    match field {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(a) => {
            let parts: Vec<&str> = a.iter().filter_map(|x| x.as_str()).collect();
            let parts = match parts.as_slice() {
                [sh, flag, rest @ ..]
                    if matches!(*sh, "bash" | "sh" | "zsh" | "/bin/bash" | "/bin/sh")
                        && flag.starts_with('-') =>
                {
                    rest
                }
                p => p,
            };
            (!parts.is_empty()).then(|| parts.join(" "))
        }
        _ => None,
    }
}

/// Whether a call's arguments say it only reads (`"command": "view"`).
fn is_view_only(args: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(o)) => o
            .get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| matches!(c, "view" | "read" | "list" | "search" | "find")),
        _ => false,
    }
}

/// One line of a command for the summary: its lines joined with ` ⏎ `, shortened.
fn command_line(cmd: &str) -> Option<String> {
    let mut s = String::new();
    for l in cmd.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !s.is_empty() {
            s.push_str(" ⏎ ");
        }
        s.push_str(l);
        if s.len() > LINE_CHARS * 4 {
            break;
        }
    }
    (!s.is_empty()).then(|| shorten(&s, LINE_CHARS).into_owned())
}

/// A line of tool output that reports a failure, cleaned.
fn failing_line(line: &str) -> Option<&str> {
    const STARTS: &[&str] = &[
        "error:",
        "error[",
        "error ",
        "fatal:",
        "fatal error",
        "panic:",
        "failed",
        "fail:",
        "npm err!",
        "exception:",
        "exception in",
        "caused by:",
        "segmentation fault",
        "assertion failed",
        "uncaught",
    ];
    let mut t = line.trim();
    if let Some(r) = t.strip_prefix("E ") {
        t = r.trim_start();
    }
    let b = t.as_bytes();
    // Runs on every line of every tool output: no allocation, early exits.
    if b.len() < 5 || !b[0].is_ascii_alphabetic() {
        return None;
    }
    let starts = |p: &str| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    if STARTS.iter().any(|p| starts(p)) || (t.starts_with("thread ") && t.contains("panicked at")) {
        return Some(t);
    }
    // `ZeroDivisionError: division by zero`, `java.lang.IllegalStateException: …`.
    let name_end = b
        .iter()
        .take(121)
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.'))?;
    if b[name_end] != b':' {
        return None;
    }
    let name = &t[..name_end];
    let last = name.rsplit('.').next().unwrap_or(name);
    (is_error_name(last) && name.split('.').all(|s| !s.is_empty())).then_some(t)
}

/// One candidate line of the summary.
struct Item {
    section: usize,
    priority: u32,
    text: String,
}

/// Recency priority: `base` for the oldest of `n`, up to `base + span` for the newest.
fn recency(base: u32, span: u32, i: usize, n: usize) -> u32 {
    if n <= 1 {
        base + span
    } else {
        base + (span as usize * i / (n - 1)) as u32
    }
}

const SECTIONS: [Label; 6] = [
    Label::Topics,
    Label::Conclusions,
    Label::Technical,
    Label::Files,
    Label::Commands,
    Label::Errors,
];

/// The rule summary of `messages` in `lang`, at most `max_chars` characters (see the module
/// note for its sections and how it is bounded).
pub fn rule_summary(messages: &[Message<'_>], lang: Language, max_chars: usize) -> String {
    let names = call_names(messages);
    let mut topics: Vec<String> = Vec::new();
    let mut conclusions: Vec<String> = Vec::new();
    let mut last_assistant: Option<(usize, String)> = None;
    let mut code_langs: Vec<(String, usize)> = Vec::new();
    let mut tools: Vec<(String, usize)> = Vec::new();
    let mut files = FactSet::new();
    let mut edited: HashSet<String> = HashSet::new();
    let mut uses: HashMap<String, usize> = HashMap::new();
    let mut commands: Vec<String> = Vec::new();
    let mut error_names: Vec<(String, usize)> = Vec::new();
    let mut error_index: HashMap<String, usize> = HashMap::new();
    let mut error_lines: VecDeque<String> = VecDeque::new();
    let mut error_lines_seen: HashSet<String> = HashSet::new();
    let (mut n_user, mut n_assistant, mut n_results) = (0usize, 0usize, 0usize);

    let mut count_error =
        |name: &str, error_names: &mut Vec<(String, usize)>| match error_index.get(name) {
            Some(&i) => error_names[i].1 += 1,
            None => {
                error_index.insert(name.to_owned(), error_names.len());
                error_names.push((name.to_owned(), 1));
            }
        };
    let mut note_error_line = |line: &str, lines: &mut VecDeque<String>| {
        let l = shorten(line, LINE_CHARS).into_owned();
        if error_lines_seen.insert(l.clone()) {
            lines.push_back(l);
            if lines.len() > MAX_ERROR_LINES {
                lines.pop_front();
            }
        }
    };
    let bump = |list: &mut Vec<(String, usize)>, key: &str| match list
        .iter_mut()
        .find(|(k, _)| k == key)
    {
        Some(e) => e.1 += 1,
        None => list.push((key.to_owned(), 1)),
    };

    for (mi, m) in messages.iter().enumerate() {
        if m.is_user_text() {
            n_user += 1;
        } else if m.role == Role::Assistant {
            n_assistant += 1;
        }
        let text = if matches!(m.role, Role::User | Role::Assistant) {
            prose(m)
        } else {
            String::new()
        };
        if !text.is_empty() {
            scan_text(&text, FactKinds::ERRORS, &mut |_, f| {
                count_error(f, &mut error_names)
            });
            let mut fence = false;
            for l in text.lines() {
                if let Some(rest) = l.trim_start().strip_prefix("```") {
                    if !fence {
                        let lang_tag: String = rest
                            .trim()
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '#' | '_')
                            })
                            .collect::<String>()
                            .to_ascii_lowercase();
                        if !lang_tag.is_empty() && lang_tag.len() <= 20 {
                            bump(&mut code_langs, &lang_tag);
                        }
                    }
                    fence = !fence;
                }
            }
        }
        if m.is_user_text() {
            let t = topic(&text).or_else(|| {
                m.blocks
                    .iter()
                    .any(|b| b.kind == BlockKind::Image)
                    .then(|| "[image]".to_owned())
            });
            if let Some(t) = t {
                if !topics.contains(&t) {
                    topics.push(t);
                }
            }
        }
        if m.role == Role::Assistant && !text.trim().is_empty() {
            if let Some(c) = conclusion(&text) {
                if !m.has_calls() && !conclusions.contains(&c) {
                    conclusions.push(c.clone());
                }
                last_assistant = Some((mi, c));
            }
        }
        for b in m.blocks.iter() {
            match b.kind {
                BlockKind::ToolCall => {
                    let name = b.name.as_deref().unwrap_or("tool");
                    bump(&mut tools, name);
                    let args = joined(b);
                    let mut fs = FactSet::new();
                    fs.scan_args(&args, FactKinds::PATHS);
                    let edit = is_edit_tool(name) && !is_view_only(&args);
                    for (_, p) in fs.finish() {
                        if edit {
                            edited.insert(p.clone());
                        }
                        *uses.entry(p.clone()).or_insert(0) += 1;
                        files.insert(FactKind::Path, &p);
                    }
                    if is_shell_tool(name) {
                        if let Some(c) = shell_command(&args).as_deref().and_then(command_line) {
                            if commands.last() != Some(&c) {
                                commands.push(c);
                            }
                        }
                    }
                }
                BlockKind::ToolResult => {
                    n_results += 1;
                    let out = joined(b);
                    // Error names of tool output only from its failing lines: a listing of
                    // code that defines `class FooError` is not an error seen.
                    let mut any = false;
                    for l in out.lines() {
                        if let Some(t) = failing_line(l) {
                            scan_text(t, FactKinds::ERRORS, &mut |_, f| {
                                count_error(f, &mut error_names)
                            });
                            note_error_line(t, &mut error_lines);
                            any = true;
                        }
                    }
                    if b.is_error && !any {
                        if let Some(first) = out.lines().map(str::trim).find(|l| !l.is_empty()) {
                            let tool = result_name(b, &names).unwrap_or("tool");
                            note_error_line(&format!("{tool}: {first}"), &mut error_lines);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    // The latest assistant text is the current state even when it came with calls.
    if let Some((_, c)) = last_assistant {
        if conclusions.last() != Some(&c) {
            conclusions.retain(|x| *x != c);
            conclusions.push(c);
        }
    }

    // Candidate lines with priorities.
    let mut items: Vec<Item> = Vec::new();
    let n = topics.len();
    for (i, t) in topics.into_iter().enumerate() {
        let p = if i == 0 {
            900
        } else if i + 1 == n {
            850
        } else {
            recency(300, 200, i, n)
        };
        items.push(Item {
            section: 0,
            priority: p,
            text: t,
        });
    }
    let n = conclusions.len();
    for (i, c) in conclusions.into_iter().enumerate() {
        let p = if i + 1 == n {
            880
        } else {
            recency(400, 250, i, n)
        };
        items.push(Item {
            section: 1,
            priority: p,
            text: c,
        });
    }
    let list = |v: &[(String, usize)]| -> String {
        v.iter()
            .map(|(k, c)| {
                if *c > 1 {
                    format!("{k} ×{c}")
                } else {
                    k.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(lang.list_sep())
    };
    if !tools.is_empty() {
        let mut t = tools;
        t.sort_by_key(|x| std::cmp::Reverse(x.1));
        let line = format!("{}{}{}", lang.label(Label::Tools), lang.colon(), list(&t));
        items.push(Item {
            section: 2,
            priority: 720,
            text: shorten(&line, LINE_CHARS * 2).into_owned(),
        });
    }
    if !code_langs.is_empty() {
        let mut c = code_langs;
        c.sort_by_key(|x| std::cmp::Reverse(x.1));
        let line = format!("{}{}{}", lang.label(Label::Code), lang.colon(), list(&c));
        items.push(Item {
            section: 2,
            priority: 600,
            text: shorten(&line, LINE_CHARS).into_owned(),
        });
    }
    // Directories that hold another listed path say nothing the longer path does not.
    let files = files.finish();
    let sorted: std::collections::BTreeSet<&str> = files.iter().map(|(_, f)| f.as_str()).collect();
    let is_parent = |p: &str| {
        let dir = format!("{}/", p.trim_end_matches('/'));
        sorted
            .range::<str, _>((
                std::ops::Bound::Excluded(dir.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .next()
            .is_some_and(|q| q.starts_with(&dir))
            || sorted.contains(dir.as_str())
    };
    let parents: HashSet<String> = files
        .iter()
        .filter(|(_, f)| is_parent(f))
        .map(|(_, f)| f.clone())
        .collect();
    let files: Vec<String> = files
        .into_iter()
        .map(|(_, f)| f)
        .filter(|f| !parents.contains(f))
        .collect();
    let n = files.len();
    for (i, f) in files.into_iter().enumerate() {
        let is_edit = edited.contains(&f);
        let used: usize = std::iter::once(f.as_str())
            .chain(f.match_indices('/').map(|(j, _)| &f[j + 1..]))
            .filter_map(|k| uses.get(k))
            .sum();
        let text = if is_edit {
            match lang {
                Language::En => format!("{f} ({})", lang.label(Label::Edited)),
                Language::Zh => format!("{f}（{}）", lang.label(Label::Edited)),
            }
        } else {
            f
        };
        // How often the file was named (`used`, counting the shorter spellings it contains).
        let p = recency(if is_edit { 600 } else { 450 }, 40, i, n) + 12 * used.min(10) as u32;
        items.push(Item {
            section: 3,
            priority: p,
            text: shorten(&text, LINE_CHARS).into_owned(),
        });
    }
    let n = commands.len();
    for (i, c) in commands.into_iter().enumerate() {
        items.push(Item {
            section: 4,
            priority: recency(300, 250, i, n),
            text: c,
        });
    }
    if !error_names.is_empty() {
        // Bare names a qualified one contains are left out.
        let qualified: HashSet<&str> = error_names
            .iter()
            .filter_map(|(k, _)| k.rsplit_once('.').map(|(_, last)| last))
            .collect();
        let mut e: Vec<(String, usize)> = error_names
            .iter()
            .filter(|(k, _)| k.contains('.') || !qualified.contains(k.as_str()))
            .cloned()
            .collect();
        e.sort_by_key(|x| std::cmp::Reverse(x.1));
        items.push(Item {
            section: 5,
            priority: 700,
            text: shorten(&list(&e), LINE_CHARS * 2).into_owned(),
        });
    }
    let n = error_lines.len();
    for (i, l) in error_lines.into_iter().enumerate() {
        items.push(Item {
            section: 5,
            priority: recency(350, 250, i, n),
            text: l,
        });
    }
    let counts = lang.counts_line(messages.len(), n_user, n_assistant, n_results);
    assemble(items, &counts, lang, max_chars)
}

fn joined<'b>(b: &'b Block<'_>) -> std::borrow::Cow<'b, str> {
    match b.texts.as_slice() {
        [one] => one.text().to_utf8(),
        many => std::borrow::Cow::Owned(
            many.iter()
                .map(|p| p.text().to_utf8())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

/// Picks lines by priority within `max_chars` and renders the sections in order.
fn assemble(items: Vec<Item>, counts: &str, lang: Language, max_chars: usize) -> String {
    const HEADING_RESERVE: usize = 16;
    let chars = |s: &str| s.chars().count();
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[b].priority.cmp(&items[a].priority).then(a.cmp(&b)));
    let mut used = chars(counts);
    let mut picked = vec![false; items.len()];
    let mut opened = [false; SECTIONS.len()];
    for i in order {
        let it = &items[i];
        let mut cost = chars(&it.text) + 3;
        if !opened[it.section] {
            cost += chars(lang.label(SECTIONS[it.section])) + 2 + HEADING_RESERVE;
        }
        if used + cost <= max_chars {
            used += cost;
            picked[i] = true;
            opened[it.section] = true;
        }
    }
    let mut out = String::new();
    for (s, label) in SECTIONS.iter().enumerate() {
        let total = items.iter().filter(|it| it.section == s).count();
        let shown: Vec<&Item> = items
            .iter()
            .zip(&picked)
            .filter(|(it, &p)| p && it.section == s)
            .map(|(it, _)| it)
            .collect();
        if shown.is_empty() {
            continue;
        }
        out.push_str(lang.label(*label));
        if shown.len() < total {
            match lang {
                Language::En => out.push_str(&format!(" ({} of {total})", shown.len())),
                Language::Zh => {
                    out.push_str(&format!("（共 {total} 项，显示 {} 项）", shown.len()))
                }
            }
        }
        out.push_str(lang.colon().trim_end());
        out.push('\n');
        for it in shown {
            out.push_str("- ");
            out.push_str(&it.text);
            out.push('\n');
        }
    }
    out.push_str(counts);
    if chars(&out) > max_chars {
        // Only when `max_chars` is below the counts line itself.
        return shorten(&out, max_chars).into_owned();
    }
    out
}

fn role_label(lang: Language, m: &Message<'_>, names: &HashMap<&str, &str>) -> String {
    if m.is_result_only() {
        let name = m.results().next().and_then(|b| result_name(b, names));
        let base = match lang {
            Language::En => "tool result",
            Language::Zh => "工具结果",
        };
        return match name {
            Some(n) => format!("{base}: {n}"),
            None => base.to_owned(),
        };
    }
    let s = match (lang, m.role) {
        (Language::En, r) => r.name(),
        (Language::Zh, Role::User) => "用户",
        (Language::Zh, Role::Assistant) => "助手",
        (Language::Zh, Role::System | Role::Developer) => "系统",
        (Language::Zh, _) => "其他",
    };
    s.to_owned()
}

/// Collects up to `limit` chars with whitespace runs collapsed, noting whether more followed.
struct Snippet {
    out: String,
    n: usize,
    limit: usize,
    space: bool,
    more: bool,
}

impl Snippet {
    fn push_text(&mut self, t: Text<'_>) {
        for c in t.chars() {
            if !self.push(c) {
                return;
            }
        }
    }

    fn push_str(&mut self, s: &str) {
        self.push_text(Text::Utf8(s));
    }

    /// Pushes one char; false once the limit is passed.
    fn push(&mut self, c: char) -> bool {
        if self.more {
            return false;
        }
        if c.is_whitespace() {
            self.space = !self.out.is_empty();
            return true;
        }
        let need = 1 + usize::from(self.space);
        if self.n + need > self.limit {
            self.more = true;
            return false;
        }
        if self.space {
            self.out.push(' ');
            self.space = false;
        }
        self.out.push(c);
        self.n += need;
        true
    }
}

fn snippet(m: &Message<'_>, limit: usize) -> String {
    let mut s = Snippet {
        out: String::new(),
        n: 0,
        limit,
        space: false,
        more: false,
    };
    for b in m.blocks.iter() {
        match b.kind {
            BlockKind::Thinking | BlockKind::RedactedThinking => {}
            BlockKind::ToolCall => {
                s.space = !s.out.is_empty();
                s.push_str("→ ");
                s.push_str(b.name.as_deref().unwrap_or("tool"));
                s.push(' ');
                for p in &b.texts {
                    s.push_text(p.text());
                }
            }
            BlockKind::Image => {
                s.space = !s.out.is_empty();
                s.push_str("[image]");
            }
            _ => {
                s.space = !s.out.is_empty();
                for p in &b.texts {
                    s.push_text(p.text());
                }
            }
        }
        if s.more {
            break;
        }
    }
    if s.more {
        s.out.push('…');
    }
    s.out
}

/// The last-resort summary (seed 003): the first `per_message_chars` characters of each
/// message (whitespace collapsed, thinking left out), one line each, within `max_chars`.
/// When the lines do not all fit, the first third of the room goes to the oldest messages,
/// the rest to the newest, and a line in between says how many were left out.
pub fn truncation_summary(
    messages: &[Message<'_>],
    lang: Language,
    per_message_chars: usize,
    max_chars: usize,
) -> String {
    let names = call_names(messages);
    let header = match lang {
        Language::En => format!(
            "{} (first {per_message_chars} characters of each message):",
            lang.label(Label::Truncated)
        ),
        Language::Zh => format!(
            "{}（每条消息取前 {per_message_chars} 个字符）：",
            lang.label(Label::Truncated)
        ),
    };
    let line = |m: &Message<'_>| {
        let label = role_label(lang, m, &names);
        match snippet(m, per_message_chars) {
            s if s.is_empty() => format!("[{label}]"),
            s => format!("[{label}] {s}"),
        }
    };
    let chars = |s: &str| s.chars().count();
    const OMITTED_RESERVE: usize = 40;
    let budget = max_chars.saturating_sub(chars(&header) + 1);
    let (mut front, mut back) = (Vec::new(), Vec::new());
    let (mut i, mut j, mut used) = (0usize, messages.len(), 0usize);
    while i < j && used < budget / 3 {
        let l = line(&messages[i]);
        let c = chars(&l) + 1;
        if used + c > budget {
            break;
        }
        used += c;
        front.push(l);
        i += 1;
    }
    while j > i {
        let l = line(&messages[j - 1]);
        let c = chars(&l) + 1;
        let reserve = if j - 1 > i { OMITTED_RESERVE } else { 0 };
        if used + c + reserve > budget {
            break;
        }
        used += c;
        back.push(l);
        j -= 1;
    }
    let mut out = header;
    for l in front {
        out.push('\n');
        out.push_str(&l);
    }
    if j > i {
        out.push('\n');
        match lang {
            Language::En => out.push_str(&format!("… {} messages left out …", j - i)),
            Language::Zh => out.push_str(&format!("…省略 {} 条消息…", j - i)),
        }
    }
    for l in back.into_iter().rev() {
        out.push('\n');
        out.push_str(&l);
    }
    if chars(&out) > max_chars {
        return shorten(&out, max_chars).into_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Message, Role};

    fn sample<'a>(big: &'a str) -> Vec<Message<'a>> {
        let mut err = Block::tool_result(Some("c3"), "Traceback (most recent call last):\n  File \"tax.py\", line 3\nZeroDivisionError: division by zero");
        err.is_error = true;
        vec![
            Message::text(Role::User, "Please fix the failing test in billing/tax.py. It crashes on empty carts."),
            Message::new(
                Role::Assistant,
                vec![
                    Block::text("Let me run the tests."),
                    Block::tool_call(Some("c1"), "bash", "{\"command\": \"cd /srv/app && pytest tests/test_tax.py -q\"}"),
                ],
            ),
            Message::new(Role::Tool, vec![Block::tool_result(Some("c1"), big)]),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("c2"), "str_replace_editor", "{\"command\": \"view\", \"path\": \"/srv/app/billing/tax.py\"}")],
            ),
            Message::new(Role::Tool, vec![Block::tool_result(Some("c2"), "def tax(total, n): return total / n")]),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(
                    Some("c3"),
                    "str_replace_editor",
                    "{\"command\": \"str_replace\", \"path\": \"/srv/app/billing/tax.py\", \"old_str\": \"total / n\", \"new_str\": \"total / n if n else 0\"}",
                )],
            ),
            Message::new(Role::Tool, vec![err]),
            Message::text(
                Role::Assistant,
                "The fix guards the division by zero in `tax()`. All tests pass now.\n\n```python\nreturn total / n if n else 0\n```",
            ),
            Message::text(Role::User, "Thanks! Now add a changelog entry."),
        ]
    }

    #[test]
    fn english_rule_summary_has_every_section() {
        let big = format!("{}\nFAILED tests/test_tax.py::test_empty - ZeroDivisionError: division by zero\n1 failed", "collecting ...\n".repeat(50));
        let msgs = sample(&big);
        let s = rule_summary(&msgs, Language::En, 4000);
        println!("{s}");
        assert!(s.contains("Topics:\n- Please fix the failing test in billing/tax.py."));
        assert!(s.contains("- Thanks! Now add a changelog entry."));
        assert!(s.contains("Key conclusions:\n- The fix guards the division by zero in `tax()`. All tests pass now."));
        assert!(s.contains("tools: str_replace_editor ×2, bash"));
        assert!(s.contains("code: python"));
        assert!(s.contains("- /srv/app/billing/tax.py (edited)"));
        assert!(
            !s.contains("- /srv/app\n"),
            "a parent directory is not listed"
        );
        assert!(s.contains("Commands run:\n- cd /srv/app && pytest tests/test_tax.py -q"));
        assert!(s.contains("ZeroDivisionError ×"));
        assert!(s.contains(
            "- FAILED tests/test_tax.py::test_empty - ZeroDivisionError: division by zero"
        ));
        assert!(s.ends_with("9 messages replaced: 2 user, 4 assistant, 3 tool results"));
        assert_eq!(s, rule_summary(&msgs, Language::En, 4000), "deterministic");
    }

    #[test]
    fn bounded_and_drops_least_important_first() {
        let big = "ok".to_owned();
        let msgs = sample(&big);
        let full = rule_summary(&msgs, Language::En, 10_000);
        for max in [600, 300, 200, 120, 60, 10, 0] {
            let s = rule_summary(&msgs, Language::En, max);
            assert!(s.chars().count() <= max, "{max}: {}", s.chars().count());
            if max >= 120 {
                assert!(s.contains("messages replaced"), "{max}: {s}");
            }
            if max >= 200 {
                assert!(s.contains("Please fix the failing test"), "{max}: {s}");
            }
        }
        let small = rule_summary(&msgs, Language::En, 300);
        assert!(small.len() < full.len());
        for line in small.lines().filter(|l| l.starts_with("- ")) {
            assert!(full.contains(line), "{line}");
        }
        // A section cut short says so.
        let cmds: Vec<String> = (0..50)
            .map(|i| format!("{{\"command\": \"echo step {i}\"}}"))
            .collect();
        let many: Vec<Message<'_>> = cmds
            .iter()
            .map(|c| {
                Message::new(
                    Role::Assistant,
                    vec![Block::tool_call(None, "bash", c.as_str())],
                )
            })
            .collect();
        let s = rule_summary(&many, Language::En, 400);
        assert!(s.contains("Commands run ("), "{s}");
        assert!(
            s.contains("echo step 49") && !s.contains("echo step 0\n"),
            "{s}"
        );
        assert_eq!(
            rule_summary(&[], Language::En, 100),
            "0 messages replaced: 0 user, 0 assistant, 0 tool results"
        );
    }

    #[test]
    fn chinese_rule_summary() {
        let msgs = vec![
            Message::text(Role::User, "<command-name>/clear</command-name>"),
            Message::text(
                Role::User,
                "请修复 web/src/hooks/useSessionStream.ts 里的 TypeError。切换标签页后报错。",
            ),
            Message::new(
                Role::Assistant,
                vec![
                    Block::text("我先看一下代码。"),
                    Block::tool_call(
                        Some("a"),
                        "Read",
                        "{\"file_path\": \"/Users/me/kimi/web/src/hooks/useSessionStream.ts\"}",
                    ),
                ],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(
                    Some("a"),
                    "const x = ref.current.clear();",
                )],
            ),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(
                    Some("b"),
                    "Bash",
                    "{\"command\": \"make check\"}",
                )],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("b"), "All checks passed")],
            ),
            Message::text(
                Role::Assistant,
                "已修复：给三个 `.clear()` 调用加上了可选链。检查全部通过。",
            ),
        ];
        let s = rule_summary(&msgs, Language::Zh, 2000);
        println!("{s}");
        assert!(
            s.contains("讨论主题：\n- 请修复 web/src/hooks/useSessionStream.ts 里的 TypeError。")
        );
        assert!(!s.contains("/clear"));
        assert!(s.contains("关键结论：\n- 已修复：给三个 `.clear()` 调用加上了可选链。"));
        assert!(s.contains("工具：Read，Bash") || s.contains("工具：Bash，Read"));
        assert!(s.contains("涉及文件：\n- /Users/me/kimi/web/src/hooks/useSessionStream.ts"));
        assert!(s.contains("执行的命令：\n- make check"));
        assert!(s.contains("遇到的错误：\n- TypeError"));
        assert!(s.ends_with("已压缩 7 条消息，其中用户 2 条，助手 3 条，工具结果 2 条"));
    }

    #[test]
    fn truncation_keeps_first_and_last() {
        let texts: Vec<String> = (0..200)
            .map(|i| format!("message number {i} {}", "word ".repeat(50)))
            .collect();
        let msgs: Vec<Message<'_>> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Message::text(
                    if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    t.as_str(),
                )
            })
            .collect();
        let s = truncation_summary(&msgs, Language::En, 100, 3000);
        assert!(s.chars().count() <= 3000);
        assert!(s.starts_with("Earlier messages, truncated (first 100 characters of each message):\n[user] message number 0 word"));
        assert!(s.contains("messages left out"));
        assert!(s.contains("[assistant] message number 199 word"));
        let line = s.lines().nth(1).unwrap();
        assert!(
            line.ends_with('…') && line.chars().count() <= 100 + "[user] ".len() + 1,
            "{line}"
        );
        let all = truncation_summary(&msgs[..3], Language::Zh, 20, 10_000);
        assert!(all
            .starts_with("早期消息（截断）（每条消息取前 20 个字符）：\n[用户] message number 0"));
        assert!(!all.contains("省略"));
        assert!(
            truncation_summary(&msgs, Language::En, 100, 5)
                .chars()
                .count()
                <= 5
        );
    }

    #[test]
    fn truncation_of_tools_and_wide_text() {
        let s: String = "中文🙂 ".repeat(100);
        let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let msgs = vec![
            Message::new(
                Role::Assistant,
                vec![
                    Block::thinking("secret"),
                    Block::tool_call(Some("a"), "bash", "{\"command\":\"ls -la\"}"),
                ],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(
                    Some("a"),
                    crate::message::Piece::Borrowed(Text::Ucs4(&ucs4)),
                )],
            ),
        ];
        let t = truncation_summary(&msgs, Language::En, 30, 1000);
        assert!(
            t.contains("[assistant] → bash {\"command\":\"ls -la\"}"),
            "{t}"
        );
        assert!(!t.contains("secret"));
        assert!(t.contains("[tool result: bash] 中文🙂 中文🙂"));
    }

    #[test]
    fn helpers() {
        assert_eq!(
            topic("Implement the following plan:\n\n# Fix: scroll lost\n\nmore").unwrap(),
            "Implement the following plan: Fix: scroll lost"
        );
        assert_eq!(
            topic("<local-command-caveat>Caveat</local-command-caveat>"),
            None
        );
        assert_eq!(topic("<pr_description>\nConsider the following PR description:\nModeling's `separability_matrix` is wrong. More text.").unwrap(),
            "Consider the following PR description: Modeling's `separability_matrix` is wrong.");
        assert!(
            is_shell_tool("bash")
                && is_shell_tool("execute_bash")
                && is_shell_tool("Bash")
                && is_shell_tool("run_terminal_cmd")
                && is_shell_tool("shell")
        );
        assert!(
            !is_shell_tool("str_replace_editor")
                && !is_shell_tool("finish")
                && !is_shell_tool("Read")
        );
        assert_eq!(
            shell_command("{\"command\": [\"bash\", \"-lc\", \"ls -la\"]}").unwrap(),
            "ls -la"
        );
        assert_eq!(shell_command("ls -la").unwrap(), "ls -la");
        assert_eq!(
            command_line("cat <<EOF > x\nhello\nEOF").unwrap(),
            "cat <<EOF > x ⏎ hello ⏎ EOF"
        );
        assert_eq!(
            failing_line("E       AssertionError: assert 1 == 2"),
            Some("AssertionError: assert 1 == 2")
        );
        assert_eq!(
            failing_line("error[E0425]: cannot find value `x`"),
            Some("error[E0425]: cannot find value `x`")
        );
        assert_eq!(
            failing_line("thread 'main' panicked at src/main.rs:2:5:"),
            Some("thread 'main' panicked at src/main.rs:2:5:")
        );
        assert_eq!(failing_line("def raise_error(x):"), None);
        assert_eq!(failing_line("Traceback (most recent call last):"), None);
    }
}

//! The rule summary, built without an LLM (`apply(None)`, and the fallback when the summarizer
//! fails). The truncation summary, the last resort, is in `truncation.rs`.
//!
//! The rule summary follows seed 000 (topics, key conclusions, technical context, counts) and
//! adds what an agent needs to carry on: files touched, commands run, errors seen. Sections are
//! labelled in the conversation's language. Every line has a priority (the counts line; the
//! first and the latest request; the latest conclusions; edited files; recent commands and
//! errors); when the whole would pass `max_chars`, the least important lines go first and a
//! section's heading says how many of its lines are shown. Deterministic: same messages, same
//! text. One pass over the messages; tool output is read only for error lines and names.
//!
//! The file reads top down (about 930 lines, over 600 for one concern: the rule summary's scan
//! and its pick share `RuleScan`'s state; its tests are `rule/tests.rs`): what a message asks or concludes
//! (`topic`, `conclusion`), the pass (`RuleScan::visit`, tools and shell commands classified
//! by `tools.rs`), the candidate lines with their priorities (`RuleScan::items`), and the pick
//! within `max_chars` (`assemble`).

use super::artifacts::Trail;
use super::facts::{scan_text, FactKind, FactKinds, FactSet};
use super::instruction::{
    classify, is_marked_rule, user_instructions, InstructionKind, HARNESS_PREFIXES,
};
use super::language::{Label, Language};
use super::todos::Todos;
use super::tools::{
    command_line, failing_line, is_edit_tool, is_shell_tool, is_view_only, shell_command,
};
use super::transcript::{call_names, result_name};
use crate::cut::shorten;
use crate::message::{Block, BlockKind, Message, Role};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::VecDeque;

const TOPIC_CHARS: usize = 120;
const CONCLUSION_CHARS: usize = 200;
const LINE_CHARS: usize = 160;
/// Error lines remembered from tool output (the latest ones).
const MAX_ERROR_LINES: usize = 64;

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

const SECTIONS: [Label; 9] = [
    Label::Topics,
    Label::Constraints,
    Label::Todos,
    Label::Conclusions,
    Label::Technical,
    Label::ArtifactTrail,
    Label::Files,
    Label::Commands,
    Label::Errors,
];
// Indices into SECTIONS.
const S_TOPICS: usize = 0;
const S_CONSTRAINTS: usize = 1;
const S_TODOS: usize = 2;
const S_CONCLUSIONS: usize = 3;
const S_TECHNICAL: usize = 4;
const S_TRAIL: usize = 5;
const S_FILES: usize = 6;
const S_COMMANDS: usize = 7;
const S_ERRORS: usize = 8;

/// The rule summary of `messages` in `lang`, at most `max_chars` characters (see the module
/// note for its sections and how it is bounded).
pub fn rule_summary(messages: &[Message<'_>], lang: Language, max_chars: usize) -> String {
    rule_summary_chained(None, messages, lang, max_chars)
}

/// The rule summary of `messages` after an earlier summary (`previous`, the body of the summary
/// they follow): when that is a rule summary, its lines are read back by section and compete
/// with the new ones by priority (older ones rank lower), so a chain of compactions keeps one
/// summary of bounded size, newest first, instead of appending. The artifact trail and the
/// constraints of the earlier summary are merged, not ranked: they are kept whole while they fit.
/// An earlier summary that is not a rule summary (an LLM's) is kept in front of the new one.
pub fn rule_summary_chained(
    previous: Option<&str>,
    messages: &[Message<'_>],
    lang: Language,
    max_chars: usize,
) -> String {
    if messages.is_empty() {
        // Nothing new: the earlier summary stands (within the bound).
        if let Some(prev) = previous {
            return shorten(prev.trim(), max_chars).into_owned();
        }
    }
    let mut scan = RuleScan::new(messages);
    let mut prefix = None;
    if let Some(prev) = previous {
        let sections = parse_sections(prev);
        if sections.is_empty() {
            prefix = Some(prev.trim().to_owned());
        } else {
            scan.seed(sections);
        }
    }
    for m in messages {
        scan.visit(m);
    }
    let counts = lang.counts_line(
        messages.len(),
        scan.n_user,
        scan.n_assistant,
        scan.n_results,
    );
    match prefix {
        Some(prev) => {
            let own = assemble(scan.items(lang), &counts, lang, max_chars / 2);
            let room = max_chars.saturating_sub(own.chars().count() + 2);
            format!("{}\n\n{own}", shorten(&prev, room))
        }
        None => assemble(scan.items(lang), &counts, lang, max_chars),
    }
}

/// The sections of an earlier rule summary: (section index, its lines), for every heading of
/// [`SECTIONS`] in either language. Empty when the text has none (not a rule summary).
fn parse_sections(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(item) = line.strip_prefix("- ") {
            if let Some(sec) = current {
                if let Some(last) = out.last_mut().filter(|(s, _)| *s == sec) {
                    last.1.push(item.trim().to_owned());
                }
            }
            continue;
        }
        let heading = line.trim_end().trim_end_matches([':', '：']);
        current = SECTIONS.iter().position(|l| {
            [Language::En, Language::Zh].iter().any(|lang| {
                let label = lang.label(*l);
                heading == label
                    || heading
                        .strip_prefix(label)
                        .is_some_and(|r| r.starts_with(" (") || r.starts_with('（'))
            })
        });
        if let Some(sec) = current {
            out.push((sec, Vec::new()));
        }
    }
    out
}

/// What one pass over the messages gathers for the summary, in the order it was seen.
struct RuleScan<'m> {
    /// Tool names by call id, to name a result.
    names: HashMap<&'m str, &'m str>,
    /// What the user asked, one line per request (first seen first, no repeats).
    topics: Vec<String>,
    /// The conclusions of assistant messages without calls (no repeats).
    conclusions: Vec<String>,
    /// The conclusion of the latest assistant text, calls or not: the current state.
    latest: Option<String>,
    /// Languages of fenced code blocks, with counts.
    code_langs: Vec<(String, usize)>,
    /// Tools called, with counts.
    tools: Vec<(String, usize)>,
    /// Paths in call arguments.
    files: FactSet,
    /// Paths an editing call changed.
    edited: HashSet<String>,
    /// How often each path spelling was named in call arguments.
    uses: HashMap<String, usize>,
    /// Shell commands run (consecutive repeats once).
    commands: Vec<String>,
    /// Files created, edited, moved or deleted.
    trail: Trail,
    /// The user's imperative sentences, verbatim (no repeats).
    constraints: Vec<String>,
    /// The open items of the latest to-do list (`TodoWrite`, `update_plan`, `TaskCreate`…).
    todos: Todos,
    /// Lines of an earlier summary's sections with no structure of their own here (files).
    earlier_files: Vec<String>,
    /// An earlier summary's technical-context lines.
    earlier_technical: Vec<String>,
    /// Error names seen, with counts, in first-seen order (`error_index` finds them).
    error_names: Vec<(String, usize)>,
    error_index: HashMap<String, usize>,
    /// The latest failing lines of tool output (at most `MAX_ERROR_LINES`, no repeats ever).
    error_lines: VecDeque<String>,
    error_lines_seen: HashSet<String>,
    n_user: usize,
    n_assistant: usize,
    n_results: usize,
}

impl<'m> RuleScan<'m> {
    fn new(messages: &'m [Message<'_>]) -> Self {
        RuleScan {
            names: call_names(messages),
            topics: Vec::new(),
            conclusions: Vec::new(),
            latest: None,
            code_langs: Vec::new(),
            tools: Vec::new(),
            files: FactSet::new(),
            edited: HashSet::default(),
            uses: HashMap::default(),
            commands: Vec::new(),
            trail: Trail::new(),
            constraints: Vec::new(),
            todos: Todos::default(),
            earlier_files: Vec::new(),
            earlier_technical: Vec::new(),
            error_names: Vec::new(),
            error_index: HashMap::default(),
            error_lines: VecDeque::new(),
            error_lines_seen: HashSet::default(),
            n_user: 0,
            n_assistant: 0,
            n_results: 0,
        }
    }

    /// Takes in an earlier summary's sections: its lines come before this span's own.
    fn seed(&mut self, sections: Vec<(usize, Vec<String>)>) {
        for (sec, lines) in sections {
            match sec {
                S_TOPICS => self.topics.extend(lines),
                S_CONSTRAINTS => self.constraints.extend(lines),
                S_TODOS => self.todos.seed(lines),
                S_CONCLUSIONS => self.conclusions.extend(lines),
                S_TECHNICAL => self.earlier_technical.extend(lines),
                S_TRAIL => self.trail.absorb(&lines),
                // Files the earlier summary names as used existed: writing one now edits it.
                S_FILES => {
                    lines.iter().for_each(|l| self.trail.know(l));
                    self.earlier_files.extend(lines);
                }
                S_COMMANDS => {
                    lines.iter().for_each(|l| self.trail.know(l));
                    self.commands.extend(lines);
                }
                S_ERRORS => {
                    for l in lines {
                        if self.error_lines_seen.insert(l.clone()) {
                            self.error_lines.push_back(l);
                        }
                    }
                }
                _ => {}
            }
        }
        self.topics.dedup();
        self.conclusions.dedup();
    }

    /// Takes in one message: its prose (errors named, code languages, the user's request or
    /// the assistant's conclusion), then its tool calls and results in block order.
    fn visit(&mut self, m: &Message<'_>) {
        if m.is_user_text() {
            self.n_user += 1;
        } else if m.role == Role::Assistant {
            self.n_assistant += 1;
        }
        let text = if matches!(m.role, Role::User | Role::Assistant) {
            m.prose()
        } else {
            String::new()
        };
        if !text.is_empty() {
            scan_text(&text, FactKinds::ERRORS, &mut |_, f| self.count_error(f));
            self.code_languages(&text);
        }
        if m.is_user_text() && topic(&text).is_some() {
            for (_, c) in user_instructions(&text) {
                if !self.constraints.contains(&c) {
                    self.constraints.push(c);
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
                if !self.topics.contains(&t) {
                    self.topics.push(t);
                }
            }
        }
        if m.role == Role::Assistant && !text.trim().is_empty() {
            if let Some(c) = conclusion(&text) {
                if !m.has_calls() && !self.conclusions.contains(&c) {
                    self.conclusions.push(c.clone());
                }
                self.latest = Some(c);
            }
        }
        for b in m.blocks.iter() {
            match b.kind {
                BlockKind::ToolCall => self.call(b),
                BlockKind::ToolResult => self.result(b),
                _ => {}
            }
        }
    }

    /// The language tag of each opening code fence in `text`.
    fn code_languages(&mut self, text: &str) {
        let mut fence = false;
        for l in text.lines() {
            if let Some(rest) = l.trim_start().strip_prefix("```") {
                if !fence {
                    let tag: String = rest
                        .trim()
                        .chars()
                        .take_while(|c| {
                            c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '#' | '_')
                        })
                        .collect::<String>()
                        .to_ascii_lowercase();
                    if !tag.is_empty() && tag.len() <= 20 {
                        bump(&mut self.code_langs, &tag);
                    }
                }
                fence = !fence;
            }
        }
    }

    /// A tool call: its tool, the paths in its arguments (edited or read), its shell command.
    fn call(&mut self, b: &Block<'_>) {
        let name = b.name.as_deref().unwrap_or("tool");
        bump(&mut self.tools, name);
        let args = joined(b);
        self.trail.call(name, &args);
        self.todos.call(name, &args);
        let mut fs = FactSet::new();
        fs.scan_args(&args, FactKinds::PATHS);
        let edit = is_edit_tool(name) && !is_view_only(&args);
        for (_, p) in fs.finish() {
            if edit {
                self.edited.insert(p.clone());
            }
            *self.uses.entry(p.clone()).or_insert(0) += 1;
            self.files.insert(FactKind::Path, &p);
        }
        if is_shell_tool(name) {
            if let Some(c) = shell_command(&args)
                .as_deref()
                .and_then(|c| command_line(c, LINE_CHARS))
            {
                if self.commands.last() != Some(&c) {
                    self.commands.push(c);
                }
            }
        }
    }

    /// A tool result: its failing lines and the error names in them; an error result with no
    /// failing line gives its first line.
    fn result(&mut self, b: &Block<'_>) {
        self.n_results += 1;
        let out = joined(b);
        // Error names of tool output only from its failing lines: a listing of code that
        // defines `class FooError` is not an error seen.
        let mut any = false;
        for l in out.lines() {
            if let Some(t) = failing_line(l) {
                scan_text(t, FactKinds::ERRORS, &mut |_, f| self.count_error(f));
                self.note_error_line(t);
                any = true;
            }
        }
        if b.is_error && !any {
            if let Some(first) = out.lines().map(str::trim).find(|l| !l.is_empty()) {
                let tool = result_name(b, &self.names).unwrap_or("tool");
                self.note_error_line(&format!("{tool}: {first}"));
            }
        }
    }

    fn count_error(&mut self, name: &str) {
        match self.error_index.get(name) {
            Some(&i) => self.error_names[i].1 += 1,
            None => {
                self.error_index
                    .insert(name.to_owned(), self.error_names.len());
                self.error_names.push((name.to_owned(), 1));
            }
        }
    }

    fn note_error_line(&mut self, line: &str) {
        let l = shorten(line, LINE_CHARS).into_owned();
        if self.error_lines_seen.insert(l.clone()) {
            self.error_lines.push_back(l);
            if self.error_lines.len() > MAX_ERROR_LINES {
                self.error_lines.pop_front();
            }
        }
    }

    /// The candidate lines with their priorities, section by section.
    fn items(self, lang: Language) -> Vec<Item> {
        let mut items: Vec<Item> = Vec::new();
        let n = self.topics.len();
        for (i, t) in self.topics.into_iter().enumerate() {
            let p = if i == 0 {
                900
            } else if i + 1 == n {
                850
            } else {
                recency(300, 200, i, n)
            };
            items.push(Item {
                section: S_TOPICS,
                priority: p,
                text: t,
            });
        }
        // The user's instructions, verbatim. Prohibitions, safety rules and rules with a marker
        // ("never", "must", "only", "always", 必须 …) above everything but the task's topic;
        // other rules (conditions, preferences, goals) after the to-do list and the artifact
        // trail; plain requests ("Fix the parser.") below the files and errors.
        let n = self.constraints.len();
        for (i, c) in self.constraints.into_iter().enumerate() {
            let priority = match classify(&c) {
                Some(k) if k.evicted_last() || is_marked_rule(&c) => recency(890, 9, i, n),
                Some(InstructionKind::Requirement) => recency(500, 100, i, n),
                _ => recency(860, 9, i, n),
            };
            items.push(Item {
                section: S_CONSTRAINTS,
                priority,
                text: c,
            });
        }
        // The open to-do items of the latest list, in its order.
        let todos = self.todos.open();
        let n = todos.len();
        for (i, t) in todos.into_iter().enumerate() {
            items.push(Item {
                section: S_TODOS,
                priority: recency(870, 8, n - 1 - i, n),
                text: shorten(&t, LINE_CHARS).into_owned(),
            });
        }
        // The artifact trail: every changed file with its operations, oldest first.
        let zh = lang == Language::Zh;
        let trail_lines = self.trail.lines(zh);
        let changed: HashSet<String> = trail_lines
            .iter()
            .filter_map(|l| l.rsplit_once(": ").map(|(p, _)| p.to_owned()))
            .collect();
        let n = trail_lines.len();
        for (i, l) in trail_lines.into_iter().enumerate() {
            items.push(Item {
                section: S_TRAIL,
                priority: recency(881, 8, i, n),
                text: shorten(&l, LINE_CHARS * 2).into_owned(),
            });
        }
        // The latest assistant text is the current state even when it came with calls.
        let mut conclusions = self.conclusions;
        if let Some(c) = self.latest {
            if conclusions.last() != Some(&c) {
                conclusions.retain(|x| *x != c);
                conclusions.push(c);
            }
        }
        let n = conclusions.len();
        for (i, c) in conclusions.into_iter().enumerate() {
            let p = if i + 1 == n {
                880
            } else {
                recency(400, 250, i, n)
            };
            items.push(Item {
                section: S_CONCLUSIONS,
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
        if !self.tools.is_empty() {
            let mut t = self.tools;
            t.sort_by_key(|x| std::cmp::Reverse(x.1));
            let line = format!("{}{}{}", lang.label(Label::Tools), lang.colon(), list(&t));
            items.push(Item {
                section: S_TECHNICAL,
                priority: 720,
                text: shorten(&line, LINE_CHARS * 2).into_owned(),
            });
        }
        if !self.code_langs.is_empty() {
            let mut c = self.code_langs;
            c.sort_by_key(|x| std::cmp::Reverse(x.1));
            let line = format!("{}{}{}", lang.label(Label::Code), lang.colon(), list(&c));
            items.push(Item {
                section: S_TECHNICAL,
                priority: 600,
                text: shorten(&line, LINE_CHARS).into_owned(),
            });
        }
        let new_keys: Vec<String> = items
            .iter()
            .filter(|it| it.section == S_TECHNICAL)
            .filter_map(|it| it.text.split_once([':', '：']).map(|(k, _)| k.to_owned()))
            .collect();
        for l in self.earlier_technical {
            let key = l.split_once([':', '：']).map_or(l.as_str(), |(k, _)| k);
            if !new_keys.iter().any(|k| k == key) {
                items.push(Item {
                    section: S_TECHNICAL,
                    priority: 300,
                    text: l,
                });
            }
        }
        // Files the trail lists are not listed again.
        let files: Vec<String> = without_parents(self.files.finish())
            .into_iter()
            .filter(|f| !changed.contains(f))
            .collect();
        let n = self.earlier_files.len();
        for (i, f) in self.earlier_files.into_iter().enumerate() {
            let path = f.split([' ', '（']).next().unwrap_or(&f);
            if changed.contains(path) || files.iter().any(|x| x == path) {
                continue;
            }
            items.push(Item {
                section: S_FILES,
                priority: recency(380, 60, i, n),
                text: f,
            });
        }
        let n = files.len();
        for (i, f) in files.into_iter().enumerate() {
            let is_edit = self.edited.contains(&f);
            let used: usize = std::iter::once(f.as_str())
                .chain(f.match_indices('/').map(|(j, _)| &f[j + 1..]))
                .filter_map(|k| self.uses.get(k))
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
                section: S_FILES,
                priority: p,
                text: shorten(&text, LINE_CHARS).into_owned(),
            });
        }
        let n = self.commands.len();
        for (i, c) in self.commands.into_iter().enumerate() {
            items.push(Item {
                section: S_COMMANDS,
                priority: recency(300, 250, i, n),
                text: c,
            });
        }
        if !self.error_names.is_empty() {
            // Bare names a qualified one contains are left out.
            let qualified: HashSet<&str> = self
                .error_names
                .iter()
                .filter_map(|(k, _)| k.rsplit_once('.').map(|(_, last)| last))
                .collect();
            let mut e: Vec<(String, usize)> = self
                .error_names
                .iter()
                .filter(|(k, _)| k.contains('.') || !qualified.contains(k.as_str()))
                .cloned()
                .collect();
            e.sort_by_key(|x| std::cmp::Reverse(x.1));
            items.push(Item {
                section: S_ERRORS,
                priority: 700,
                text: shorten(&list(&e), LINE_CHARS * 2).into_owned(),
            });
        }
        let n = self.error_lines.len();
        for (i, l) in self.error_lines.into_iter().enumerate() {
            // The latest error is what the agent is in the middle of: one line, ranked with the
            // newest of the user's constraints (a small summary keeps it before the older ones).
            let priority = if i + 1 == n {
                889
            } else {
                recency(350, 250, i, n)
            };
            items.push(Item {
                section: S_ERRORS,
                priority,
                text: l,
            });
        }
        items
    }
}

/// Counts one more `key` in a list kept in first-seen order.
fn bump(list: &mut Vec<(String, usize)>, key: &str) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some(e) => e.1 += 1,
        None => list.push((key.to_owned(), 1)),
    }
}

/// The paths, in order, without directories that hold another listed path: they say nothing
/// the longer path does not.
fn without_parents(files: Vec<(FactKind, String)>) -> Vec<String> {
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
    files
        .into_iter()
        .map(|(_, f)| f)
        .filter(|f| !parents.contains(f))
        .collect()
}

fn joined<'b>(b: &'b Block<'_>) -> std::borrow::Cow<'b, str> {
    b.joined("\n")
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

#[cfg(test)]
mod tests;

//! The ledger (DESIGN, "The ledger"): the sections of a summary message the library owns and
//! carries verbatim from one compaction to the next — *the user's words* (the sentences of the
//! user's own messages in every replaced span, oldest first, deduplicated), *preserved details*
//! (must-keep facts the narrative lacks, each whole) and the *artifact trail* (changed files with
//! their operations). A summarizer writes only the narrative before them.
//!
//! Format (byte-stable; `v1` names it so a later format can still read this one):
//!
//! ```text
//! [context-compactor summary] The earlier part of this conversation was compacted; …
//!
//! <the narrative>
//!
//! [context-compactor ledger v1]
//! The user's words (verbatim, oldest first):
//! > Fix the failing test. Don't change the public API of invoice.render().
//! Preserved details:
//! - docs/spec.md
//! Artifact trail:
//! - src/invoice.py: edited
//! ```
//!
//! Design notes.
//!
//! * The sentinel line is always written, also with no entries: a summary with it is read as
//!   this format only, so a narrative's lines are never taken for entries. A sentinel or ledger
//!   header inside a narrative (an LLM, or a page it read, writing a fake one) is stripped when
//!   the summary is written ([`strip_fakes`]).
//! * A user-words line is one line of a user message with its kept sentences joined by one
//!   space; entries are sentences (split again on reading, the same way), so eviction drops a
//!   sentence, never part of one. Every words line starts with `> `: a user sentence that looks
//!   like a header or the sentinel stays an entry.
//! * Both languages' headers are read (the conversation's language vote can flip between
//!   compactions); 0.2 summaries ("Preserved details", "The user's own messages in the compacted
//!   part", "The user's constraints (verbatim)", the artifact trail, and their Chinese labels)
//!   are read too: their entries become ledger entries, the rest is narrative.
//! * Eviction (over a budget, and the ladder's last step): sentences that are not instructions
//!   first — those that are not the user's own prose (pasted output, markup, code, fragments:
//!   `instruction::is_stated`) before the stated facts, oldest first each; then instructions
//!   oldest first; prohibitions and safety rules last (`instruction::classify`). Facts are
//!   dropped whole, details before the trail, oldest first.
//! * A fact that a longer entry shows as one of its parts ([`is_part`]: a URL's host or path, a
//!   path's directory, tail or file name, a trail line's file) is not written again
//!   ([`Ledger::add_details`]): a small window holds more facts. Parts only, not any substring:
//!   a later compaction knows only the entry, and lists its parts that are facts when it is
//!   evicted ([`Ledger::lost`]), so nothing folded into it is lost silently.

use super::artifacts::Trail;
use super::instruction::{classify, is_stated};
use super::language::Language;

/// The versioned sentinel line that starts the ledger.
pub const SENTINEL: &str = "[context-compactor ledger v1]";
/// What every sentinel (any version) starts with: stripped from narratives.
const SENTINEL_STEM: &str = "[context-compactor ledger";

const WORDS_EN: &str = "The user's words (verbatim, oldest first):";
const WORDS_ZH: &str = "用户的原话（逐字，按时间顺序）：";
const DETAILS_EN: &str = "Preserved details:";
const DETAILS_ZH: &str = "保留的细节：";
const TRAIL_EN: &str = "Artifact trail:";
const TRAIL_ZH: &str = "文件变更记录：";

// 0.2 headers (read only).
const OLD_USER_EN: &str = "The user's own messages in the compacted part (verbatim, newest first):";
const OLD_USER_ZH: &str = "用户在被压缩部分中的原话（最新的在前）：";
const OLD_CONSTRAINTS: [&str; 2] = ["The user's constraints (verbatim)", "用户的约束（原文）"];
const OLD_TRAIL: [&str; 2] = [
    "Artifact trail (files changed, in order)",
    "文件变更记录（按顺序）",
];

/// One sentence of the user's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// Sentences with the same group were on one line (rendered on one line again).
    pub group: u32,
}

/// The ledger's entries, each section oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    pub words: Vec<Word>,
    /// Must-keep facts (each a whole fact).
    pub details: Vec<String>,
    /// Trail lines: `path: created → edited`.
    pub trail: Vec<String>,
    /// The language of the headers it was read with: kept, so the ledger stays byte-stable when
    /// the conversation's language vote flips.
    pub lang: Option<Language>,
}

/// What a budget or the ladder took out of a ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    pub words: Vec<String>,
    pub facts: Vec<String>,
}

impl Evicted {
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.facts.is_empty()
    }

    /// Everything evicted, facts first (as `must_keep_missing` lists them).
    pub fn all(&self) -> Vec<String> {
        self.facts.iter().chain(&self.words).cloned().collect()
    }
}

/// How a word ranks for eviction: 0 not an instruction, 1 an instruction, 2 a prohibition or
/// safety rule (evicted last).
pub fn rank(sentence: &str) -> u8 {
    match classify(sentence) {
        None => 0,
        Some(k) if k.evicted_last() => 2,
        Some(_) => 1,
    }
}

/// The eviction order within the ranks: among the words of rank 0, those that are not the user's
/// own prose ([`is_stated`]: pasted output, markup, code, fragments) go first (tier 0), the
/// stated facts after them (tier 1); instructions are tier 2, prohibitions and safety rules 3.
fn tier(sentence: &str) -> u8 {
    match rank(sentence) {
        0 => u8::from(is_stated(sentence)),
        r => r + 1,
    }
}

/// The sentences of one line, verbatim: split after `.`, `!`, `?` followed by white space and
/// after `。！？；`, the white space between them dropped. A piece of three characters or less
/// (a list number, `e.g.`) stays with the next one.
pub fn line_sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = line.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let end = match c {
            '.' | '!' | '?' => it.peek().is_some_and(|&(_, d)| d.is_whitespace()),
            '。' | '！' | '？' | '；' => true,
            _ => false,
        };
        let e = i + c.len_utf8();
        if end && line[start..e].trim().chars().count() > 3 {
            let s = line[start..e].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = e;
        }
    }
    let rest = line[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

impl Ledger {
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.details.is_empty() && self.trail.is_empty()
    }

    fn next_group(&self) -> u32 {
        self.words.last().map_or(0, |w| w.group + 1)
    }

    /// Adds the sentences of a user message's text (oldest first), each once: lines inside
    /// fenced code are not sentences.
    pub fn add_user_text(&mut self, text: &str) {
        let mut fence = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("```") || t.starts_with("~~~") {
                fence = !fence;
                continue;
            }
            if fence || t.is_empty() {
                continue;
            }
            let group = self.next_group();
            for s in line_sentences(t) {
                if !self.words.iter().any(|w| w.text == s) {
                    self.words.push(Word {
                        text: s.to_owned(),
                        group,
                    });
                }
            }
        }
    }

    /// Adds a must-keep fact (once).
    pub fn add_detail(&mut self, fact: &str) {
        if !self.details.iter().any(|d| d == fact) {
            self.details.push(fact.to_owned());
        }
    }

    /// Adds the must-keep facts of a compaction (oldest first), then leaves out each detail whose
    /// text another entry shows: a longer fact that contains it (`/cgi-bin/hello.pl` in
    /// `http://host/cgi-bin/hello.pl`, new or carried) or a trail line's path. The fact's text is
    /// in the ledger all the same, and a small window's budget holds more facts. A carried
    /// detail a new, longer fact shows is folded into it (with nothing new, nothing changes).
    /// Returns the details left out ([`Ledger::lost`] says which of them an eviction took).
    pub fn add_details(&mut self, facts: &[&str]) -> Vec<String> {
        for &f in facts {
            self.add_detail(f);
        }
        let mut hidden = Vec::new();
        let gone: Vec<bool> = self.details.iter().map(|d| self.shows(d)).collect();
        let mut i = 0;
        self.details.retain(|d| {
            let keep = !gone[i];
            i += 1;
            if !keep {
                hidden.push(d.clone());
            }
            keep
        });
        hidden
    }

    /// Whether an entry other than `fact` itself shows it as one of its parts ([`is_part`]): a
    /// longer detail or a trail line's path.
    pub fn shows(&self, fact: &str) -> bool {
        self.details.iter().any(|d| is_part(d, fact))
            || self.trail.iter().any(|t| {
                let path = trail_path(t);
                path == fact || is_part(path, fact)
            })
    }

    /// What an eviction took besides the `evicted` entries: the details of `hidden`
    /// ([`Ledger::add_details`]) and the parts of the evicted entries that are facts (a part a
    /// fact of an earlier compaction was folded into: a URL's host or path, a path's directory
    /// or file name) that no entry left shows and `shown` does not, each once.
    pub fn lost(
        &self,
        hidden: &[String],
        evicted: &[String],
        shown: &dyn Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let parts = evicted.iter().flat_map(|e| fact_parts(e));
        for h in hidden.iter().cloned().chain(parts) {
            if !self.shows(&h)
                && !self.details.contains(&h)
                && !evicted.contains(&h)
                && !out.contains(&h)
                && !shown(&h)
            {
                out.push(h);
            }
        }
        out
    }

    /// `other`'s entries after this one's (a later summary read back after an earlier one).
    pub fn merge(&mut self, other: Ledger) {
        self.lang = self.lang.or(other.lang);
        let base = self.next_group();
        let mut last = None;
        let mut group = base;
        for w in other.words {
            if last != Some(w.group) {
                group = if last.is_none() { base } else { group + 1 };
                last = Some(w.group);
            }
            if !self.words.iter().any(|x| x.text == w.text) {
                self.words.push(Word {
                    text: w.text,
                    group,
                });
            }
        }
        for d in other.details {
            self.add_detail(&d);
        }
        let mut t = Trail::new();
        t.absorb(&other.trail);
        self.absorb_trail(t);
    }

    /// The trail with `newer` (its own calls after this ledger's trail lines) merged in.
    pub fn absorb_trail(&mut self, mut newer: Trail) {
        newer.absorb(&self.trail);
        self.trail = newer.lines(false);
        // `lines(false)` writes English operation words; the Chinese ones are read back too.
    }

    /// The ledger as the summary message writes it after the narrative (the sentinel first).
    pub fn render(&self, lang: Language) -> String {
        let zh = self.lang.unwrap_or(lang) == Language::Zh;
        let mut out = String::from(SENTINEL);
        if !self.words.is_empty() {
            out.push('\n');
            out.push_str(if zh { WORDS_ZH } else { WORDS_EN });
            let mut last = None;
            for w in &self.words {
                if last == Some(w.group) {
                    // Sentences split after `。！？；` had nothing between them.
                    if !out.ends_with(['。', '！', '？', '；']) {
                        out.push(' ');
                    }
                } else {
                    out.push_str("\n> ");
                }
                out.push_str(&w.text);
                last = Some(w.group);
            }
        }
        for (list, en, cn) in [
            (&self.details, DETAILS_EN, DETAILS_ZH),
            (&self.trail, TRAIL_EN, TRAIL_ZH),
        ] {
            if list.is_empty() {
                continue;
            }
            out.push('\n');
            out.push_str(if zh { cn } else { en });
            for d in list {
                out.push_str("\n- ");
                out.push_str(d);
            }
        }
        out
    }

    /// Tokens of the words section and of the details + trail sections, as rendered.
    pub fn costs(&self, count: &dyn Fn(&str) -> usize) -> (usize, usize) {
        let words = if self.words.is_empty() {
            0
        } else {
            count(WORDS_EN) + self.words.iter().map(|w| count(&w.text) + 1).sum::<usize>()
        };
        let header = |l: &Vec<String>| if l.is_empty() { 0 } else { count(DETAILS_EN) };
        let details = header(&self.details)
            + header(&self.trail)
            + self
                .details
                .iter()
                .chain(&self.trail)
                .map(|d| count(d) + 2)
                .sum::<usize>();
        (words, details)
    }

    /// Evicts words (only those of rank `max_rank` or lower) until the words section is within
    /// `words_budget`, then facts until details + trail are within `details_budget`, in the
    /// stated order. Returns what was evicted.
    pub fn fit(
        &mut self,
        words_budget: usize,
        details_budget: usize,
        max_rank: u8,
        count: &dyn Fn(&str) -> usize,
    ) -> Evicted {
        let mut ev = Evicted::default();
        let (mut words, mut details) = self.costs(count);
        if words > words_budget {
            let tiers: Vec<u8> = self.words.iter().map(|w| tier(&w.text)).collect();
            let mut gone = vec![false; self.words.len()];
            'outer: for t in 0..=max_rank.min(2) + 1 {
                for (i, w) in self.words.iter().enumerate() {
                    if words <= words_budget {
                        break 'outer;
                    }
                    if tiers[i] == t {
                        gone[i] = true;
                        words -= count(&w.text) + 1;
                    }
                }
            }
            let mut i = 0;
            self.words.retain(|w| {
                let keep = !gone[i];
                i += 1;
                if !keep {
                    ev.words.push(w.text.clone());
                }
                keep
            });
        }
        while details > details_budget && !(self.details.is_empty() && self.trail.is_empty()) {
            let (gone, fact) = if !self.details.is_empty() {
                let d = self.details.remove(0);
                (
                    count(&d) + 2 + usize::from(self.details.is_empty()) * count(DETAILS_EN),
                    d,
                )
            } else {
                let t = self.trail.remove(0);
                let path = trail_path(&t).to_owned();
                (
                    count(&t) + 2 + usize::from(self.trail.is_empty()) * count(DETAILS_EN),
                    path,
                )
            };
            details = details.saturating_sub(gone);
            ev.facts.push(fact);
        }
        ev
    }

    /// The words of rank 2 only (the ledger's minimum: prohibitions and safety rules).
    pub fn minimum(&self) -> Ledger {
        Ledger {
            words: self
                .words
                .iter()
                .filter(|w| rank(&w.text) == 2)
                .cloned()
                .collect(),
            details: Vec::new(),
            trail: Vec::new(),
            lang: self.lang,
        }
    }

    /// Whether `fact` is shown by the trail (a changed file's line names it).
    pub fn trail_has(&self, fact: &str) -> bool {
        self.trail.iter().any(|t| trail_path(t) == fact)
    }
}

/// The parts of a URL or path that a reader names on its own: a URL's origin, its path, the URL
/// and its path without the query, and the query; a path's directories, its tails from each `/`
/// (the same file named from a nearer directory, its file name) and the path without its
/// extension.
/// `/usr/bin/perl` is no part of `/usr/bin/perlprint`, nor `/root` of `…?/root/flag`.
fn parts(entry: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if let Some(scheme) = entry.find("://") {
        let host = scheme + 3;
        if let Some(path) = entry[host..].find(['/', '?', '#']).map(|i| host + i) {
            out.push(&entry[..path]);
            if entry[path..].starts_with('/') {
                out.push(&entry[path..]);
            }
            if let Some(q) = entry[path..].find(['?', '#']).map(|i| path + i) {
                out.push(&entry[..q]);
                out.push(&entry[path..q]);
                out.push(&entry[q + 1..]);
            }
        }
    } else {
        for (i, c) in entry.char_indices() {
            // Not the path without its root's `/`: no one names a file so.
            if c == '/' && i > 0 {
                out.push(&entry[..i]);
                out.push(&entry[i + 1..]);
            }
        }
        // The file without its extension (`…/tool/store` of `…/tool/store.ts`).
        let name = entry.rfind('/').map_or(0, |i| i + 1);
        if let Some(dot) = entry[name..].rfind('.').filter(|&d| d > 0) {
            out.push(&entry[..name + dot]);
        }
    }
    out.retain(|p| !p.is_empty() && p.len() < entry.len());
    out
}

/// Whether `fact` is one of the longer `entry`'s parts (`parts`).
pub fn is_part(entry: &str, fact: &str) -> bool {
    entry.len() > fact.len() && entry.contains(fact) && parts(entry).contains(&fact)
}

/// The [`parts`] of `entry` that the fact scanner takes for a fact on their own.
fn fact_parts(entry: &str) -> Vec<String> {
    use crate::message::{Message, Role};
    let mut out: Vec<String> = Vec::new();
    for c in parts(entry) {
        if !out.iter().any(|o| o == c)
            && super::facts::must_keep_facts(&[Message::text(Role::User, c)]) == [c]
        {
            out.push(c.to_owned());
        }
    }
    out
}

/// The path a trail line is about (`path: ops (moved to)`).
pub fn trail_path(line: &str) -> &str {
    line.rsplit_once(": ").map_or(line, |(p, _)| p)
}

fn is_header(line: &str) -> bool {
    let l = line.trim();
    [
        WORDS_EN,
        WORDS_ZH,
        DETAILS_EN,
        DETAILS_ZH,
        TRAIL_EN,
        TRAIL_ZH,
        OLD_USER_EN,
        OLD_USER_ZH,
    ]
    .iter()
    .any(|h| l == *h || l == h.trim_end_matches([':', '：']))
}

/// A narrative with every sentinel line and ledger header removed (and the summary marker, which
/// only the library writes at the start of a summary).
pub fn strip_fakes(narrative: &str) -> String {
    let fake = |l: &str| {
        let t = l.trim();
        t.starts_with(SENTINEL_STEM) || t.starts_with(super::SUMMARY_MARKER) || is_header(t)
    };
    if !narrative.lines().any(fake) {
        return narrative.to_owned();
    }
    narrative
        .lines()
        .filter(|l| !fake(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The summarizer's prompt with the ledger as read-only context in front of it.
pub fn with_ledger_context(lang: Language, ledger: &str, user_prompt: &str) -> String {
    let note = match lang {
        Language::En => {
            "The library carries this ledger verbatim after your summary: it is context, not \
             something to rewrite. Do not repeat it, and write no ledger or sentinel of your own."
        }
        Language::Zh => "本库会在你的摘要之后原样附上这份记录：它只是上下文，不要改写或重复它，也不要自己写记录或标记行。",
    };
    format!("<ledger>\n{ledger}\n</ledger>\n{note}\n\n{user_prompt}")
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Words,
    Details,
    Trail,
    OldUser,
    OldConstraints,
    Narrative,
}

fn old_heading(line: &str, labels: &[&str]) -> bool {
    let h = line.trim_end().trim_end_matches([':', '：']);
    labels.iter().any(|l| {
        h == *l
            || h.strip_prefix(l)
                .is_some_and(|r| r.starts_with(" (") || r.starts_with('（'))
    })
}

/// Splits a summary body (the text after the marker line) into its narrative and its ledger:
/// this format after the sentinel, or a 0.2 summary's sections.
pub fn split(body: &str) -> (String, Ledger) {
    let mut ledger = Ledger::default();
    let lines: Vec<&str> = body.lines().collect();
    if let Some(at) = lines.iter().position(|l| l.trim() == SENTINEL) {
        let narrative = lines[..at].join("\n").trim().to_owned();
        let mut sec = Section::Narrative;
        let mut group = 0u32;
        for l in &lines[at + 1..] {
            let t = l.trim_end();
            if [WORDS_ZH, DETAILS_ZH, TRAIL_ZH].contains(&t) {
                ledger.lang = Some(Language::Zh);
            } else if [WORDS_EN, DETAILS_EN, TRAIL_EN].contains(&t) {
                ledger.lang = Some(Language::En);
            }
            if [WORDS_EN, WORDS_ZH].contains(&t) {
                sec = Section::Words;
            } else if [DETAILS_EN, DETAILS_ZH].contains(&t) {
                sec = Section::Details;
            } else if [TRAIL_EN, TRAIL_ZH].contains(&t) {
                sec = Section::Trail;
            } else if let (Section::Words, Some(w)) = (sec, t.strip_prefix("> ")) {
                for s in line_sentences(w) {
                    if !ledger.words.iter().any(|x| x.text == s) {
                        ledger.words.push(Word {
                            text: s.to_owned(),
                            group,
                        });
                    }
                }
                group += 1;
            } else if let Some(d) = t.strip_prefix("- ") {
                match sec {
                    Section::Details => ledger.add_detail(d),
                    Section::Trail => ledger.trail.push(d.to_owned()),
                    _ => {}
                }
            }
        }
        return (narrative, ledger);
    }
    // 0.2: its sections become entries, the rest is narrative.
    let mut narrative = Vec::new();
    let mut sec = Section::Narrative;
    let mut old_user: Vec<String> = Vec::new();
    let mut constraints: Vec<String> = Vec::new();
    for l in &lines {
        let t = l.trim_end();
        if t == OLD_USER_EN || t == OLD_USER_ZH {
            sec = Section::OldUser;
            continue;
        }
        if old_heading(t, &[DETAILS_EN.trim_end_matches(':'), "保留的细节"]) {
            sec = Section::Details;
            continue;
        }
        if old_heading(t, &OLD_CONSTRAINTS) {
            sec = Section::OldConstraints;
            continue;
        }
        if old_heading(t, &OLD_TRAIL) {
            sec = Section::Trail;
            continue;
        }
        match (sec, t.strip_prefix("- "), t.strip_prefix('>')) {
            (Section::OldUser, _, Some(q)) => {
                old_user.push(q.strip_prefix(' ').unwrap_or(q).to_owned());
                continue;
            }
            (Section::Details, Some(d), _) => {
                // 0.2 wrote `path: created → edited` when the operation was known.
                if is_trail_line(d) {
                    ledger.trail.push(d.to_owned());
                } else {
                    ledger.add_detail(d);
                }
                continue;
            }
            (Section::Trail, Some(d), _) => {
                ledger.trail.push(d.to_owned());
                continue;
            }
            (Section::OldConstraints, Some(c), _) => {
                constraints.push(c.to_owned());
                continue;
            }
            _ => {}
        }
        if !t.is_empty() || sec != Section::OldUser {
            sec = Section::Narrative;
        }
        if sec == Section::Narrative {
            narrative.push(*l);
        }
    }
    for c in constraints {
        ledger.add_user_text(&c);
    }
    // 0.2 wrote the user's messages newest first: oldest first here (line by line).
    for u in old_user.iter().rev() {
        ledger.add_user_text(u);
    }
    let mut t = Trail::new();
    t.absorb(&std::mem::take(&mut ledger.trail));
    ledger.trail = t.lines(false);
    (narrative.join("\n").trim().to_owned(), ledger)
}

/// Whether a line is a trail line (`path: op → op`).
fn is_trail_line(line: &str) -> bool {
    let mut t = Trail::new();
    t.absorb(&[line.to_owned()]);
    !t.is_empty()
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;

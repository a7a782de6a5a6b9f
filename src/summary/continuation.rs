//! What the agent needs to carry on after a compaction (DESIGN's continuation): the open items
//! of the latest plan or to-do list and the last unresolved error. Whatever the target (a small
//! one caps the narrative at a few hundred tokens), they stay in the kept tail or in the
//! narrative: a summary that lacks one gets it appended after its narrative (not a ledger
//! section: a later compaction reads them back from the narrative, and a newer list or error
//! replaces them).
//!
//! The last unresolved error is the last failing line of a tool result (`failing_line`, or the
//! first line of a result marked `is_error`), unless a later run of the same command (the same
//! tool and first words, or the same path) came back clean. An error stays unresolved when
//! another command fails after it: the earlier ones (up to `MAX_ERRORS` in all, one per
//! command) are carried too, after the to-do items and within the same room, as "Earlier
//! unresolved error" lines. Which failure is "the last" depends on what counts as failing (a
//! log line inside a clean run's output, a non-zero exit the result only marks); carrying the
//! unresolved ones of other commands keeps the one the agent must go back to whichever it is. The repair pass's synthetic result
//! for a call that got none (`crate::message::NO_RESULT`) is neither: a call still waiting has
//! not failed.

use super::language::{Label, Language};
use super::todos::{checklist, tail_strings, text_of, Todos};
use super::tools::{failing_line, is_shell_tool, shell_command};
use crate::cut::shorten;
use crate::message::{is_no_result, Block, BlockKind, Message, Role};
use rustc_hash::FxHashMap as HashMap;

/// Characters of a carried to-do item.
const ITEM_CHARS: usize = 100;
/// Characters of the carried error line.
const ERROR_CHARS: usize = 160;
/// To-do items carried at most (the open ones of the latest list, in its order).
const MAX_TODOS: usize = 24;
/// Unresolved errors carried at most (the last one and the earlier ones, one per command).
const MAX_ERRORS: usize = 3;
/// To-do items of the narrative's floor (what stays when the ladder leaves the narrative out):
/// the next open ones, the rest counted.
const FLOOR_TODOS: usize = 3;

/// The open to-do items and the last unresolved error seen so far.
#[derive(Clone, Debug, Default)]
pub struct Continuation {
    todos: Todos,
    /// A to-do list was seen (or carried): its open items are the plan.
    has_list: bool,
    /// (the command's key, the line) of the unresolved errors, oldest first: the last one is
    /// the last unresolved error. A key is empty for a line read back from a narrative.
    errors: Vec<(String, String)>,
}

/// The opening of the note a cut of tool output writes after its marker ([`cut_error_note`]).
const CUT_ERROR: &str = " (cut part's last error: ";

/// A cut tool output's note of its cut part's last error: (the text before the note, the error
/// line, the text after it). The line was shortened to [`ERROR_CHARS`] and holds no newline:
/// it ends at the first `) ` that closes none of its own parentheses, within that many
/// characters on the note's line (the kept tail's text follows the note).
fn noted_error(out: &str) -> Option<(&str, &str, &str)> {
    let at = out.rfind(CUT_ERROR)?;
    let start = at + CUT_ERROR.len();
    let rest = &out[start..];
    let line_end = rest.find('\n').unwrap_or(rest.len());
    let bound = rest
        .char_indices()
        .nth(ERROR_CHARS + 1)
        .map_or(rest.len(), |(i, _)| i);
    // The first `)` that closes no parenthesis of the line (an error line's own are balanced),
    // else (a line cut inside parentheses) the last `) ` within the bound.
    let mut depth = 0usize;
    let closing = rest[..line_end].char_indices().find_map(|(i, c)| match c {
        '(' => {
            depth += 1;
            None
        }
        ')' if depth == 0 => Some(i),
        ')' => {
            depth -= 1;
            None
        }
        _ => None,
    });
    let end = closing
        .filter(|&i| i <= bound && rest[i..].starts_with(") "))
        .or_else(|| {
            rest[..line_end]
                .match_indices(") ")
                .map(|(i, _)| i)
                .take_while(|&i| i <= bound)
                .last()
        })?;
    let line = rest[..end].trim();
    (!line.is_empty()).then(|| (&out[..at], line, &rest[end + 2..]))
}

/// The error a tool result reports: its last failing line, or the first line of a result marked
/// `is_error` that has none; `None` for a clean result and for the repair's synthetic one. A cut
/// output's note of its cut part's last error ([`cut_error_note`]) counts as the line it names,
/// where it stands: a failing line the kept tail of the output shows after it is later, one its
/// kept head shows before it is earlier (a later compaction reads a cut output of an earlier
/// one; the note is the only failing line it still shows).
pub fn failing_of(out: &str, is_error: bool) -> Option<&str> {
    if is_no_result(out) {
        return None;
    }
    fn find(text: &str) -> Option<&str> {
        text.lines().rev().find(|l| failing_line(l).is_some())
    }
    let found = match noted_error(out) {
        Some((before, line, after)) => find(after).or(Some(line)).or_else(|| find(before)),
        None => find(out),
    };
    found.map(str::trim).or_else(|| {
        is_error
            .then(|| out.lines().map(str::trim).find(|l| !l.is_empty()))
            .flatten()
    })
}

/// The error line a cut of tool output keeps after its marker (DESIGN's continuation: the last
/// unresolved error stays in the kept tail), `None` when the cut still shows it.
pub fn cut_error_note(out: &str, is_error: bool, cut: &str) -> Option<String> {
    let line = failing_of(out, is_error)?;
    let line = shorten(line, ERROR_CHARS);
    (!cut.contains(line.as_ref())).then(|| format!(" (cut part's last error: {line}) "))
}

/// The note a cut of a call's arguments or of assistant text writes after its marker for the
/// open checklist items (`- [ ] item` lines, DESIGN's continuation: a PR's test plan, the
/// agent's plan) of `values` (the text, or the arguments' string values) that `cut` no longer
/// shows: the items again as checklist lines (each cut to `ITEM_CHARS`, at most
/// `MAX_TODOS`), so the kept tail still shows the plan and a later compaction reads them back
/// as one; `None` when the cut shows them all.
pub fn cut_items_note(values: &str, cut: &str) -> Option<String> {
    if !values.contains("[ ]") {
        return None;
    }
    let mut items = Vec::new();
    super::todos::checklist_items(values, &mut items);
    let flat = cut.split_whitespace().collect::<Vec<_>>().join(" ");
    let lost: Vec<String> = items
        .iter()
        .filter(|t| !flat.contains(t.as_str()))
        .take(MAX_TODOS)
        .map(|t| shorten(t, ITEM_CHARS).into_owned())
        .collect();
    if lost.is_empty() {
        return None;
    }
    let mut note = String::from(CUT_ITEMS);
    for t in &lost {
        note.push_str("\n- [ ] ");
        note.push_str(t);
    }
    note.push_str("\n) ");
    Some(note)
}

/// The opening of [`cut_items_note`].
const CUT_ITEMS: &str = " (cut part's open items:";

/// Whether `narrative` carries the error `line` under one of the error labels (either language:
/// a rule summary of an earlier summary keeps its lines, and the language vote can flip).
fn carries(narrative: &str, line: &str) -> bool {
    let line = shorten(line, ERROR_CHARS);
    narrative.lines().any(|l| {
        let l = l.trim();
        l.ends_with(line.as_ref())
            && [Language::En, Language::Zh].iter().any(|lang| {
                [Label::LastError, Label::EarlierError]
                    .iter()
                    .any(|&label| l.starts_with(lang.label(label)))
            })
    })
}

/// The key of a call: its tool and the first words of its shell command, or its path.
fn call_key(name: &str, args: &str) -> String {
    if is_shell_tool(name) {
        if let Some(cmd) = shell_command(args) {
            return format!(
                "{name}\0{}",
                cmd.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
            );
        }
    }
    let path = serde_json::from_str::<serde_json::Value>(args)
        .ok()
        .and_then(|v| {
            ["path", "file_path", "filename", "file", "filePath"]
                .iter()
                .find_map(|k| v.get(*k).and_then(|x| x.as_str()).map(str::to_owned))
        })
        .unwrap_or_default();
    format!("{name}\0{path}")
}

/// [`call_key`] of a tool-call block.
fn block_key(b: &Block<'_>) -> String {
    call_key(b.name.as_deref().unwrap_or("tool"), &text_of(b))
}

impl Continuation {
    /// Read back what an earlier narrative carried: its to-do section and its error line.
    pub fn seed(&mut self, narrative: &str) {
        let mut in_todos = false;
        let mut todos: Option<Vec<String>> = None;
        let (mut earlier, mut last) = (Vec::new(), None);
        for line in narrative.lines() {
            let t = line.trim_end();
            if let Some(item) = t.strip_prefix("- ") {
                if in_todos {
                    todos
                        .get_or_insert_with(Vec::new)
                        .push(item.trim().to_owned());
                }
                continue;
            }
            in_todos = false;
            for lang in [Language::En, Language::Zh] {
                let todo = lang.label(Label::Todos);
                let head = t.trim_end_matches([':', '：']);
                if head == todo
                    || head
                        .strip_prefix(todo)
                        .is_some_and(|r| r.starts_with(" (") || r.starts_with('（'))
                {
                    in_todos = true;
                    todos = Some(Vec::new());
                }
                for label in [Label::EarlierError, Label::LastError] {
                    if let Some(rest) = t.strip_prefix(lang.label(label)) {
                        let rest = rest.trim_start_matches([':', '：']).trim();
                        if !rest.is_empty() {
                            let line = (String::new(), rest.to_owned());
                            if label == Label::LastError {
                                last = Some(line);
                            } else {
                                earlier.push(line);
                            }
                        }
                    }
                }
            }
        }
        if let Some(items) = todos {
            self.todos.seed(items);
            self.has_list = true;
        }
        for e in earlier.into_iter().chain(last) {
            self.failed(e.0, e.1);
        }
    }

    /// A failure of the command `key` (empty: unknown): it replaces that command's earlier one
    /// and is now the last; the oldest goes past [`MAX_ERRORS`].
    fn failed(&mut self, key: String, line: String) {
        self.errors
            .retain(|(k, l)| *l != line && (k.is_empty() || *k != key));
        self.errors.push((key, line));
        if self.errors.len() > MAX_ERRORS {
            self.errors.remove(0);
        }
    }

    /// Take in messages in order (the replaced span, then what follows it).
    pub fn visit<'m, 'x: 'm>(&mut self, messages: impl IntoIterator<Item = &'m Message<'x>>) {
        // The calls by id; a call's key (a JSON parse of its arguments) is worked out only when
        // a result needs it: a failure, or a clean run while errors are open.
        let mut by_id: HashMap<&'m str, &'m Block<'x>> = HashMap::default();
        for m in messages {
            // A checklist the agent wrote (`- [ ] item` lines) in its text is its latest plan;
            // one in a call's arguments (a PR's test plan, a file's) adds open items to the
            // plan without closing its own. A to-do call of the same message comes after.
            if m.role == Role::Assistant {
                let (prose, calls) = checklist(m);
                if !prose.is_empty() {
                    self.todos.items = prose.into_iter().map(|t| (t, false)).collect();
                    self.has_list = true;
                }
                for t in calls {
                    if !self.todos.items.iter().any(|(x, _)| *x == t) {
                        self.todos.items.push((t, false));
                    }
                    self.has_list = true;
                }
            }
            for b in m.blocks.iter() {
                match b.kind {
                    BlockKind::ToolCall => {
                        let name = b.name.as_deref().unwrap_or("tool");
                        // Only a to-do tool's arguments are read (most calls' are not).
                        if Todos::is_todo_tool(name) && self.todos.call(name, &text_of(b)) {
                            self.has_list = true;
                        }
                        if let Some(id) = &b.id {
                            by_id.insert(id.as_str(), b);
                        }
                    }
                    BlockKind::ToolResult => {
                        let key = || {
                            b.id.as_ref()
                                .and_then(|id| by_id.get(id.as_str()))
                                .map(|c| block_key(c))
                                .unwrap_or_default()
                        };
                        let out = text_of(b);
                        if is_no_result(&out) {
                            // The repair pass's stand-in for a call that got no result: not a
                            // failure, and not a clean run either.
                            continue;
                        }
                        match failing_of(&out, b.is_error) {
                            Some(line) => {
                                self.failed(key(), shorten(line, ERROR_CHARS).into_owned());
                            }
                            None => {
                                // A clean run of a failing command resolves it.
                                if !self.errors.is_empty() {
                                    let key = key();
                                    if !key.is_empty() {
                                        self.errors.retain(|(k, _)| *k != key);
                                    }
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The lines `narrative` lacks, to append after it: the open to-do items (under their
    /// heading) and the last unresolved error, unless `after` (the kept tail, which follows the
    /// summary verbatim) shows a newer list, error or a clean run of the failing command.
    pub fn missing<'m, 'x: 'm>(
        &self,
        narrative: &str,
        after: impl IntoIterator<Item = &'m Message<'x>>,
        lang: Language,
        max_chars: usize,
    ) -> String {
        self.lines(narrative, after, lang, max_chars, MAX_TODOS)
    }

    /// The narrative's floor: what stays of it when the ladder leaves the narrative out (DESIGN's
    /// continuation; the ledger gives its entries before these go). The lines of [`missing`] for
    /// an empty narrative, bounded: the error line and the next [`FLOOR_TODOS`] open items, each
    /// cut to its cap (the cut marked `…`), the items left out counted.
    ///
    /// [`missing`]: Continuation::missing
    pub fn floor<'m, 'x: 'm>(
        &self,
        after: impl IntoIterator<Item = &'m Message<'x>>,
        lang: Language,
        max_chars: usize,
    ) -> String {
        self.lines("", after, lang, max_chars, FLOOR_TODOS)
    }

    fn lines<'m, 'x: 'm>(
        &self,
        narrative: &str,
        after: impl IntoIterator<Item = &'m Message<'x>>,
        lang: Language,
        max_chars: usize,
        max_todos: usize,
    ) -> String {
        let after: Vec<&Message<'_>> = after.into_iter().collect();
        let mut later = Continuation {
            errors: self.errors.clone(),
            ..Continuation::default()
        };
        later.visit(after.iter().copied());
        // The list as the tail leaves it (a `TaskUpdate` there closes an item without showing
        // any), and what the tail shows of it verbatim.
        let mut now = self.clone();
        now.visit(after.iter().copied());
        let shown = tail_strings(&after);
        // The last error first (one line), then the open items in the list's order, then the
        // earlier unresolved errors, within `max_chars` (a share of the budget: a small window
        // cannot carry a long list). An error the tail resolved or shows failing again (its
        // command run again) is left to the tail; one the tail shows a newer failure after is an
        // earlier one.
        let mut out = String::new();
        let still: Vec<&(String, String)> = self
            .errors
            .iter()
            .filter(|e| later.errors.contains(e))
            .collect();
        let last_still = self
            .errors
            .last()
            .filter(|e| later.errors.last() == Some(e));
        // Written under its label also when the narrative shows the line (in a list of the
        // errors seen, say): the next compaction reads the label back, not the narrative's lists.
        let labelled =
            |label: Label, line: &str| format!("{}{}{line}", lang.label(label), lang.colon());
        if let Some((_, line)) = last_still {
            let entry = labelled(Label::LastError, &shorten(line, ERROR_CHARS));
            if !carries(narrative, line) {
                out.push_str(&entry);
            }
        }
        if now.has_list {
            let all: Vec<String> = now
                .todos
                .open()
                .into_iter()
                .filter(|t| !shown.contains(t.as_str()))
                .collect();
            let open: Vec<String> = all
                .iter()
                .take(max_todos)
                .map(|t| shorten(t, ITEM_CHARS).into_owned())
                .collect();
            // Listed under the to-do heading, not just shown somewhere in the narrative (a line
            // of its truncated transcript, say): the next compaction reads the heading back.
            let mut read_back = Continuation::default();
            read_back.seed(narrative);
            let listed = read_back.todos.open();
            // (An item's first 60 characters: the narrative may have cut it elsewhere.)
            let key = |t: &str| t.trim_end_matches('…').chars().take(60).collect::<String>();
            if open
                .iter()
                .any(|t| !listed.iter().any(|l| l.contains(key(t).as_str())))
            {
                let mut list = String::new();
                list.push_str(lang.label(Label::Todos));
                list.push_str(lang.colon().trim_end());
                let mut room = max_chars.saturating_sub(out.chars().count() + list.chars().count());
                let mut shown = 0;
                for t in &open {
                    let n = t.chars().count() + 3;
                    if n > room {
                        break;
                    }
                    room -= n;
                    list.push_str("\n- ");
                    list.push_str(t);
                    shown += 1;
                }
                if shown > 0 && shown < all.len() && max_todos < MAX_TODOS {
                    // The floor's bound: the items left out are counted, not silently gone.
                    list.push_str(&format!("\n(+{})", all.len() - shown));
                }
                if shown > 0 {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&list);
                }
            }
        }
        for (_, line) in still.iter().rev() {
            if last_still.is_some_and(|l| l.1 == *line) {
                continue;
            }
            let entry = labelled(Label::EarlierError, &shorten(line, ERROR_CHARS));
            if carries(narrative, line) {
                continue;
            }
            if out.chars().count() + entry.chars().count() + 1 > max_chars {
                break;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&entry);
        }
        out
    }
}

/// The messages micro and selective compaction leave whole, so the context keeps what the agent
/// needs next: the one holding the latest to-do list call (`TodoWrite`, `update_plan`, …) and
/// the one holding the result of the last unresolved error with its call, when that result is
/// at most `max_chars` long (indices into `messages`). Scans from the end and stops early.
pub fn live_messages<'m, 'x: 'm>(messages: &[&'m Message<'x>], max_chars: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut todo_found = false;
    // Results seen after (below) the current position: id -> failing line or None (clean).
    let mut later: Vec<(String, usize, bool)> = Vec::new();
    let mut failing: Option<(String, usize)> = None;
    // The calls seen so far by id; their keys are worked out only for the failing result's call
    // and the clean results after it.
    let mut calls: HashMap<&'m str, &'m Block<'x>> = HashMap::default();
    let mut error_done = false;
    for (i, m) in messages.iter().enumerate().rev() {
        for b in m.blocks.iter() {
            match b.kind {
                BlockKind::ToolCall => {
                    let name = b.name.as_deref().unwrap_or("tool");
                    let lower = name.to_ascii_lowercase();
                    if !todo_found
                        && matches!(
                            lower.as_str(),
                            "todowrite" | "todo_write" | "update_plan" | "write_todos"
                        )
                    {
                        todo_found = true;
                        out.push(i);
                    }
                    if !error_done {
                        if let Some(id) = &b.id {
                            calls.insert(id.as_str(), b);
                            if failing.as_ref().is_some_and(|(f, _)| f == id) {
                                // The failing result's call: is a later clean run of it there?
                                let key = block_key(b);
                                // A key starts with the tool's name and a NUL: another tool's
                                // call cannot match (its arguments are not parsed).
                                let may_match = |c: &Block<'_>| {
                                    let tool = c.name.as_deref().unwrap_or("tool");
                                    tool == name || tool.contains('\0') || name.contains('\0')
                                };
                                let resolved = later.iter().any(|(lid, _, bad)| {
                                    !bad && calls
                                        .get(lid.as_str())
                                        .is_some_and(|c| may_match(c) && block_key(c) == key)
                                });
                                if !resolved {
                                    out.push(i);
                                    out.push(failing.as_ref().map_or(i, |f| f.1));
                                }
                                error_done = true;
                            }
                        }
                    }
                }
                BlockKind::ToolResult if !error_done && failing.is_none() => {
                    let out_text = text_of(b);
                    if is_no_result(&out_text) {
                        continue;
                    }
                    let bad = b.is_error || failing_of(&out_text, false).is_some();
                    if bad && out_text.len() > max_chars {
                        // A long failing output is left to micro-compaction (a summary keeps
                        // its failing line): kept whole, it would crowd a small window.
                        error_done = true;
                        continue;
                    }
                    match (&b.id, bad) {
                        (Some(id), true) => failing = Some((id.clone(), i)),
                        (None, true) => {
                            out.push(i);
                            error_done = true;
                        }
                        (Some(id), false) => later.push((id.clone(), i, false)),
                        (None, false) => {}
                    }
                }
                _ => {}
            }
        }
        if todo_found && error_done {
            break;
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "AssertionError: assert f(x) == 3 (got 2)";

    #[test]
    fn a_cut_outputs_note_is_its_error_where_it_stands() {
        let note = cut_error_note(&format!("Traceback\n{LINE}\nteardown"), false, "Trace…")
            .expect("a note");
        let cut = format!("Traceback…[40 chars omitted]…{note}• done) tail\nmore");
        assert_eq!(failing_of(&cut, false), Some(LINE));
        // A failing line the kept tail shows after the note is later; one before it earlier.
        let after = format!("{cut}\nerror: the build failed");
        assert_eq!(failing_of(&after, false), Some("error: the build failed"));
        let before = format!("error: an older one\n{cut}");
        assert_eq!(failing_of(&before, false), Some(LINE));
        // CJK text right after the note (no panic on a char boundary).
        let zh = format!("输出…[9 chars omitted]…{note}一二三四五六七八九十");
        assert_eq!(failing_of(&zh, false), Some(LINE));
    }

    #[test]
    fn the_items_a_cut_removed_come_back_as_checklist_lines() {
        let values =
            "## Test plan\n- [ ] Run the nightly build\n- [x] Read the logs\n* [ ] Check   by hand";
        let note = cut_items_note(values, "## Test…[50 chars omitted]…by hand").expect("a note");
        assert_eq!(
            note,
            " (cut part's open items:\n- [ ] Run the nightly build\n- [ ] Check by hand\n) "
        );
        let mut read_back = Vec::new();
        crate::summary::todos::checklist_items(&note, &mut read_back);
        assert_eq!(read_back, ["Run the nightly build", "Check by hand"]);
        let kept = "## Test plan\n- [ ] Run the nightly build\n…[9 chars omitted]…Check by hand";
        assert_eq!(cut_items_note(values, kept), None);
        assert_eq!(cut_items_note("no list", ""), None);
    }
}

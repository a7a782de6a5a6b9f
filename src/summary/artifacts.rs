//! The artifact trail: every file the agent created, edited, moved or deleted, in the order it
//! was first touched, with its operations. Read from tool calls: edit/write/patch tools
//! (`Write`, `Edit`, `str_replace_editor` but not its `view`, `apply_patch`'s `*** Add File:`
//! lines) and shell commands (`>`/`>>` redirections, `tee`, `sed -i`, `touch`, `cp`, `mv` and
//! `git mv`, `rm` and `git rm`; heredoc bodies and quoted text are not commands).
//!
//! The rule summary renders the trail as one line per file (`path: created → edited`), and
//! reads such lines back from an earlier summary so a chain of compactions keeps the whole trail
//! (`Trail::absorb`).
//!
//! Just over 600 lines: the trail and the small shell-word reader it needs (redirections,
//! heredocs, quoting) are one responsibility; the reader would be the next split.

use super::tools::{is_shell_tool, shell_command, PATH_KEYS};

/// What a call did to a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Created,
    Edited,
    Moved,
    Deleted,
}

impl Op {
    /// The operation's word in a summary line (`en`/`zh`).
    pub fn word(self, zh: bool) -> &'static str {
        match (self, zh) {
            (Op::Created, false) => "created",
            (Op::Edited, false) => "edited",
            (Op::Moved, false) => "moved",
            (Op::Deleted, false) => "deleted",
            (Op::Created, true) => "创建",
            (Op::Edited, true) => "修改",
            (Op::Moved, true) => "移动",
            (Op::Deleted, true) => "删除",
        }
    }

    fn parse(w: &str) -> Option<Op> {
        match w.trim() {
            "created" | "创建" => Some(Op::Created),
            "edited" | "修改" => Some(Op::Edited),
            "moved" | "移动" => Some(Op::Moved),
            "deleted" | "删除" => Some(Op::Deleted),
            _ => None,
        }
    }
}

/// Files in the order first touched, each with its operations (repeats of the same one in a
/// row kept once) and where a move took it.
#[derive(Default, Debug)]
pub struct Trail {
    entries: Vec<(String, Vec<Op>, Option<String>)>,
    /// Words of earlier calls' arguments: a file they named exists, so writing it edits it.
    seen: rustc_hash::FxHashSet<String>,
    /// SWE-agent's editor: `edit`/`insert` without a path change the file `open`/`create` opened.
    open_file: Option<String>,
}

/// What SWE-agent's results end with: `(Open file: PATH)`.
const OPEN_FILE: &str = "(Open file: ";

/// The separator of operations in a trail line.
const ARROW: &str = " → ";

impl Trail {
    pub fn new() -> Self {
        Trail::default()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn note(&mut self, op: Op, path: &str, to: Option<&str>) {
        let Some(path) = clean_path(path) else {
            return;
        };
        let op = if op == Op::Created && self.seen.contains(&path) {
            Op::Edited
        } else {
            op
        };
        let to = to.and_then(clean_path);
        match self.entries.iter_mut().find(|e| e.0 == path) {
            Some(e) => {
                if e.1.last() != Some(&op) {
                    e.1.push(op);
                }
                if to.is_some() {
                    e.2 = to.clone();
                }
            }
            None => self.entries.push((path, vec![op], to.clone())),
        }
        if let Some(dest) = to {
            self.note(Op::Moved, &dest, None);
        }
    }

    /// Takes in one tool call: its name and raw arguments.
    pub fn call(&mut self, name: &str, args: &str) {
        self.call_ops(name, args);
        self.know(args);
    }

    /// Takes in text that names files the agent has used (a call's arguments, an earlier
    /// summary's file list or commands): a file it names exists, so writing it later edits it.
    pub fn know(&mut self, text: &str) {
        // Every word of every call's arguments comes through here: no allocation for a word
        // already known.
        for w in text.split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '\'' | '"' | '=' | ',' | ';' | ':' | '（' | '）' | '(' | ')'
                )
        }) {
            if let Some(p) = clean_path_str(w) {
                if !self.seen.contains(p) {
                    self.seen.insert(p.to_owned());
                }
            }
        }
    }

    fn call_ops(&mut self, name: &str, args: &str) {
        let lower = name.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "open" | "create" | "goto_file" | "edit" | "insert"
        ) {
            if let Ok(serde_json::Value::Object(o)) =
                serde_json::from_str::<serde_json::Value>(args)
            {
                let path = PATH_KEYS
                    .iter()
                    .find_map(|k| o.get(*k).and_then(|x| x.as_str()))
                    .and_then(clean_path);
                match (lower.as_str(), path) {
                    ("open" | "goto_file", Some(p)) => {
                        self.open_file = Some(p);
                        return;
                    }
                    ("create", Some(p)) => {
                        self.open_file = Some(p.clone());
                        self.note(Op::Created, &p, None);
                        return;
                    }
                    ("edit" | "insert", None) => {
                        if let Some(p) = self.open_file.clone() {
                            self.note(Op::Edited, &p, None);
                        }
                        return;
                    }
                    _ => {}
                }
            }
        }
        if is_shell_tool(name) {
            if let Some(cmd) = shell_command(args) {
                self.shell(&cmd);
            }
            return;
        }
        let n = name.to_ascii_lowercase();
        let v: Option<serde_json::Value> = serde_json::from_str(args).ok();
        let patch = match &v {
            Some(serde_json::Value::Object(o)) => ["patch", "input"]
                .iter()
                .find_map(|k| o.get(*k).and_then(|x| x.as_str()).map(str::to_owned)),
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            _ => (args.contains("*** ")).then(|| args.to_owned()),
        };
        if let Some(p) = patch.filter(|p| p.contains("*** ") && n.contains("patch")) {
            self.patch(&p);
            return;
        }
        let Some(serde_json::Value::Object(o)) = v else {
            return;
        };
        let Some(path) = PATH_KEYS
            .iter()
            .find_map(|k| o.get(*k).and_then(|x| x.as_str()))
        else {
            return;
        };
        let command = o.get("command").and_then(|c| c.as_str()).unwrap_or("");
        let op = match n.as_str() {
            "str_replace_editor"
            | "str_replace_based_edit_tool"
            | "edit_file"
            | "editor"
            | "file_editor" => match command {
                "create" => Some(Op::Created),
                "str_replace" | "insert" | "undo_edit" | "edit" | "write" | "append" => {
                    Some(Op::Edited)
                }
                // `edit_file {path, old, new}` has no command: its name says what it does.
                "" if n == "edit_file" => Some(Op::Edited),
                _ => None,
            },
            "write" | "write_file" | "create_file" | "create" | "save_file" => {
                let known = clean_path(path).is_some_and(|p| self.entries.iter().any(|e| e.0 == p));
                Some(if known { Op::Edited } else { Op::Created })
            }
            "edit" | "multiedit" | "notebookedit" | "str_replace" | "insert" | "edit_notebook"
            | "replace" | "append" => Some(Op::Edited),
            "delete_file" | "delete" | "remove_file" => Some(Op::Deleted),
            _ => None,
        };
        if let Some(op) = op {
            self.note(op, path, None);
        }
    }

    /// `apply_patch` input: `*** Add File:`, `*** Update File:` (+ `*** Move to:`), `*** Delete File:`.
    fn patch(&mut self, text: &str) {
        let mut last: Option<String> = None;
        for line in text.lines() {
            let l = line.trim_end();
            if let Some(p) = l.strip_prefix("*** Add File: ") {
                self.note(Op::Created, p, None);
                last = Some(p.to_owned());
            } else if let Some(p) = l.strip_prefix("*** Update File: ") {
                self.note(Op::Edited, p, None);
                last = Some(p.to_owned());
            } else if let Some(p) = l.strip_prefix("*** Delete File: ") {
                self.note(Op::Deleted, p, None);
                last = None;
            } else if let Some(to) = l.strip_prefix("*** Move to: ") {
                if let Some(from) = last.take() {
                    self.note(Op::Moved, &from, Some(to));
                }
            }
        }
    }

    /// A shell script: each of its commands.
    fn shell(&mut self, cmd: &str) {
        let mut lines = cmd.lines();
        while let Some(line) = lines.next() {
            let words = split_words(line);
            for simple in
                words.split(|w| w.op && matches!(w.text.as_str(), ";" | "&&" | "||" | "|" | "&"))
            {
                self.simple(simple);
            }
            // A heredoc's body is data, not commands.
            if let Some(end) = heredoc_end(line) {
                for l in lines.by_ref() {
                    if l.trim() == end {
                        break;
                    }
                }
            }
        }
    }

    fn simple(&mut self, words: &[Word]) {
        let mut plain: Vec<&str> = Vec::new();
        let mut k = 0;
        while k < words.len() {
            let w = &words[k];
            if w.op && (w.text == ">" || w.text == ">>" || w.text == ">|") {
                if let Some(t) = words.get(k + 1).filter(|t| !t.op) {
                    let op = if w.text == ">>" {
                        Op::Edited
                    } else {
                        Op::Created
                    };
                    self.note(op, &t.text, None);
                }
                k += 2;
                continue;
            }
            if w.op && w.text.starts_with('<') {
                k += 2;
                continue;
            }
            if !w.op {
                plain.push(&w.text);
            }
            k += 1;
        }
        let Some((&first, mut rest)) = plain.split_first() else {
            return;
        };
        let mut prog = first.rsplit('/').next().unwrap_or(first);
        if matches!(prog, "sudo" | "command" | "exec" | "time") {
            if let Some((&p, r)) = rest.split_first() {
                prog = p.rsplit('/').next().unwrap_or(p);
                rest = r;
            }
        }
        if prog == "git" {
            if let Some((&sub, r)) = rest.split_first() {
                if sub == "mv" || sub == "rm" {
                    prog = sub;
                    rest = r;
                }
            }
        }
        let operands: Vec<&str> = rest
            .iter()
            .copied()
            .filter(|w| !w.starts_with('-'))
            .collect();
        let has = |f: &str| {
            rest.iter()
                .any(|w| *w == f || (f == "-i" && w.starts_with("-i")))
        };
        match prog {
            "tee" => {
                let op = if has("-a") { Op::Edited } else { Op::Created };
                for w in &operands {
                    self.note(op, w, None);
                }
            }
            "sed" if has("-i") || has("--in-place") => {
                let files = if has("-e") || has("--expression") {
                    &operands[..]
                } else {
                    operands.get(1..).unwrap_or(&[])
                };
                let files = if has("-e") {
                    operands.get(1..).unwrap_or(&[])
                } else {
                    files
                };
                for w in files {
                    self.note(Op::Edited, w, None);
                }
            }
            "touch" => {
                for w in &operands {
                    self.note(Op::Created, w, None);
                }
            }
            "cp" if operands.len() == 2 => self.note(Op::Created, operands[1], None),
            "mv" if operands.len() == 2 => self.note(Op::Moved, operands[0], Some(operands[1])),
            "rm" | "unlink" => {
                for w in &operands {
                    self.note(Op::Deleted, w, None);
                }
            }
            _ => {}
        }
    }

    /// The trail's lines, oldest first: `path: created → edited`, a move naming where it went.
    pub fn lines(&self, zh: bool) -> Vec<String> {
        self.entries
            .iter()
            .map(|(p, ops, to)| {
                let ops: Vec<&str> = ops.iter().map(|o| o.word(zh)).collect();
                let mut s = format!("{p}: {}", ops.join(ARROW));
                if let Some(t) = to {
                    s.push_str(&format!(" ({t})"));
                }
                s
            })
            .collect()
    }

    /// The trail of `messages`' tool calls after the trail lines found anywhere in `earlier`
    /// (an earlier summary: its trail section and its preserved details, `- path: op → op`).
    pub fn of(earlier: Option<&str>, messages: &[crate::message::Message<'_>]) -> Trail {
        use crate::message::BlockKind;
        // SWE-agent's results end with `(Open file: PATH)`: the file an `edit` without a path
        // changed when the `open` was before this span.
        let mut open_after: rustc_hash::FxHashMap<String, String> = Default::default();
        for m in messages {
            for b in m.blocks.iter() {
                if let (BlockKind::ToolResult, Some(id)) = (b.kind, &b.id) {
                    // Most results have no marker: looked for before any text is transcoded
                    // (in a result of one text: pieces joined could make one across them).
                    if let [one] = b.texts.as_slice() {
                        if !one.text().contains_ascii(OPEN_FILE) {
                            continue;
                        }
                    }
                    if let Some(p) = open_file_marker(&b.joined("")) {
                        open_after.insert(id.clone(), p);
                    }
                }
            }
        }
        let mut t = Trail::new();
        if let Some(e) = earlier {
            // Files the earlier summary lists as used (read, named in a command) existed before
            // this span: writing one here edits it. Not its preserved details: those hold the
            // files the user named in prose, which may be files still to create.
            for l in known_lines(e) {
                t.know(l);
            }
        }
        for m in messages {
            for b in m.blocks.iter() {
                if b.kind == BlockKind::ToolCall {
                    if t.open_file.is_none() {
                        let hint = b.id.as_ref().and_then(|id| open_after.get(id));
                        t.open_file = hint.and_then(|p| clean_path(p));
                    }
                    t.call(b.name.as_deref().unwrap_or(""), &b.joined(""));
                }
            }
        }
        if let Some(e) = earlier {
            let lines: Vec<String> = e
                .lines()
                .filter_map(|l| l.strip_prefix("- "))
                .map(str::to_owned)
                .collect();
            t.absorb(&lines);
        }
        t
    }

    /// The operations of `path` as a trail line writes them (`created → edited`), if any.
    pub fn ops_of(&self, path: &str, zh: bool) -> Option<String> {
        self.entries
            .iter()
            .find(|e| e.0 == path)
            .map(|(_, ops, to)| {
                let mut s = ops
                    .iter()
                    .map(|o| o.word(zh))
                    .collect::<Vec<_>>()
                    .join(ARROW);
                if let Some(t) = to {
                    s.push_str(&format!(" ({t})"));
                }
                s
            })
    }

    /// Reads trail lines of an earlier summary (as [`Trail::lines`] wrote them) in front of
    /// this trail's own: the earlier files come first, a file touched again keeps both
    /// histories.
    pub fn absorb(&mut self, earlier: &[String]) {
        let mut old = Trail::new();
        for line in earlier {
            // The rule summary's file list writes `path (edited)` / `path（修改）`: an edit too.
            let listed = line
                .strip_suffix(')')
                .and_then(|l| l.rsplit_once(" ("))
                .or_else(|| line.strip_suffix('）').and_then(|l| l.rsplit_once('（')));
            if let Some((path, Some(op))) = listed.map(|(p, w)| (p, Op::parse(w))) {
                if is_one_path(path) {
                    old.entries.push((path.to_owned(), vec![op], None));
                    continue;
                }
            }
            let (body, to) = match line.rsplit_once(" (") {
                Some((b, t)) if t.ends_with(')') && !t.contains(' ') => {
                    (b, Some(t.trim_end_matches(')').to_owned()))
                }
                _ => (line.as_str(), None),
            };
            let Some((path, ops)) = body.rsplit_once(": ") else {
                continue;
            };
            let ops: Vec<Op> = ops.split(ARROW.trim()).filter_map(Op::parse).collect();
            if ops.is_empty() || !is_one_path(path) {
                continue;
            }
            old.entries.push((path.to_owned(), ops, to));
        }
        for (p, ops, to) in std::mem::take(&mut self.entries) {
            match old.entries.iter_mut().find(|e| e.0 == p) {
                Some(e) => {
                    // The earlier trail knew the file: writing it again edits it (unless it was
                    // deleted in between: then it is created again).
                    for mut op in ops {
                        if op == Op::Created && e.1.last().is_some_and(|&l| l != Op::Deleted) {
                            op = Op::Edited;
                        }
                        if e.1.last() != Some(&op) {
                            e.1.push(op);
                        }
                    }
                    if to.is_some() {
                        e.2 = to;
                    }
                }
                None => old.entries.push((p, ops, to)),
            }
        }
        // SWE-agent's `edit`/`insert` change the open file; after a summary the file last
        // changed is the best guess until an `open` says otherwise.
        let open_file = self
            .open_file
            .take()
            .or_else(|| old.entries.last().map(|e| e.0.clone()));
        old.seen = std::mem::take(&mut self.seen);
        old.open_file = open_file;
        *self = old;
    }
}

/// Whether `path` is one path as a trail line writes it: not empty, not a command line or a
/// sentence (`cd /srv/app && python /tmp/x.py: created` in an earlier LLM summary).
fn is_one_path(path: &str) -> bool {
    clean_path_str(path).is_some()
}

/// The lines of an earlier summary's file list and commands sections (either language): what
/// they name was there before the span the summary replaced.
fn known_lines(earlier: &str) -> impl Iterator<Item = &str> {
    use super::language::{Label, Language};
    let mut inside = false;
    earlier
        .lines()
        .filter_map(move |line| match line.strip_prefix("- ") {
            Some(item) => inside.then_some(item),
            None => {
                let heading = line.trim_end().trim_end_matches([':', '：']);
                inside = [Label::Files, Label::Commands].iter().any(|l| {
                    [Language::En, Language::Zh].iter().any(|lang| {
                        let label = lang.label(*l);
                        heading.strip_prefix(label).is_some_and(|r| {
                            r.is_empty() || r.starts_with(" (") || r.starts_with('（')
                        })
                    })
                });
                None
            }
        })
}

/// The path of SWE-agent's `(Open file: PATH)` status line in a tool result (`n/a`: none).
fn open_file_marker(text: &str) -> Option<String> {
    let at = text.rfind(OPEN_FILE)?;
    let rest = &text[at + OPEN_FILE.len()..];
    let path = rest.split(')').next()?.trim();
    (!path.is_empty() && path != "n/a" && !path.contains(char::is_whitespace))
        .then(|| path.to_owned())
}

/// A path as written, or `None` for what is not a file (`/dev/null`, `&1`, a `$VAR`, a glob,
/// an option). A leading `./` is dropped.
fn clean_path(p: &str) -> Option<String> {
    clean_path_str(p).map(str::to_owned)
}

/// [`clean_path`] without the copy.
fn clean_path_str(p: &str) -> Option<&str> {
    let p = p.trim().trim_matches(|c| c == '\'' || c == '"');
    if p.is_empty()
        || p.starts_with("/dev/")
        || p.starts_with('&')
        || p.starts_with('-')
        || p.contains(|c: char| {
            matches!(
                c,
                '$' | '*' | '?' | '`' | '(' | ')' | '{' | '}' | '<' | '>' | '|' | ';'
            ) || c.is_whitespace()
        })
    {
        return None;
    }
    let p = p.strip_prefix("./").filter(|r| !r.is_empty()).unwrap_or(p);
    let p = p.trim_end_matches('/');
    (!p.is_empty()).then_some(p)
}

/// A word of a shell line: text with quotes removed, or an operator (`;`, `&&`, `|`, `>`, …).
struct Word {
    text: String,
    op: bool,
}

/// Splits a shell line into words and operators, honouring single and double quotes and
/// backslash escapes; `2>` and `&>` become `>`.
fn split_words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    let flush = |cur: &mut String, quoted: &mut bool, out: &mut Vec<Word>| {
        if !cur.is_empty() || *quoted {
            out.push(Word {
                text: std::mem::take(cur),
                op: false,
            });
        }
        *quoted = false;
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = true;
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    cur.push(d);
                }
            }
            '"' => {
                quoted = true;
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                cur.push(e);
                            }
                        }
                        _ => cur.push(d),
                    }
                }
            }
            '\\' => {
                if let Some(e) = chars.next() {
                    cur.push(e);
                }
            }
            '#' if cur.is_empty() && !quoted => break,
            c if c.is_whitespace() => flush(&mut cur, &mut quoted, &mut out),
            ';' | '|' | '&' | '>' | '<' => {
                // `2>` / `&>`: a redirection of a descriptor.
                let fd = c == '>'
                    && !quoted
                    && (cur.chars().all(|d| d.is_ascii_digit()) && !cur.is_empty());
                if fd {
                    cur.clear();
                }
                flush(&mut cur, &mut quoted, &mut out);
                let mut op = c.to_string();
                while let Some(&d) = chars.peek() {
                    if (op == "&" && (d == '&' || d == '>'))
                        || (op == "|" && (d == '|' || d == '&'))
                        || (op == ">" && (d == '>' || d == '|' || d == '&'))
                        || (op == "<" && d == '<')
                    {
                        op.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                let op = match op.as_str() {
                    "&>" => ">".to_owned(),
                    // `>&2`, `2>&1`: a descriptor, not a file: skip the target word.
                    ">&" => {
                        while chars
                            .peek()
                            .is_some_and(|d| d.is_ascii_alphanumeric() || *d == '-')
                        {
                            chars.next();
                        }
                        continue;
                    }
                    _ => op,
                };
                out.push(Word { text: op, op: true });
            }
            _ => cur.push(c),
        }
    }
    flush(&mut cur, &mut quoted, &mut out);
    out
}

/// The end word of a heredoc the line opens (`<<EOF`, `<<'EOF'`, `<<-EOF`).
fn heredoc_end(line: &str) -> Option<String> {
    let i = line.find("<<")?;
    let rest = line[i + 2..].trim_start_matches('-').trim_start();
    if rest.starts_with('<') {
        return None;
    }
    let rest = rest.trim_start_matches(['\'', '"']);
    let end: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!end.is_empty()).then_some(end)
}

#[cfg(test)]
#[path = "artifacts_tests.rs"]
mod tests;

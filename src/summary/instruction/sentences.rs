//! The sentences of a user message, as a reader would split them: what the instruction
//! classifier reads and what the ledger carries as "the user's words".
//!
//! * Harness wrappers Claude Code and friends write into user-role messages
//!   (`<system-reminder>…</system-reminder>`, `<command-name>`, `<task-notification>`, "[Request
//!   interrupted by user]") are not the user's words: an element is dropped whole, and a message
//!   that is a task notification is dropped whole (its trailing "Read the output file…" line is
//!   the harness's too).
//! * Code is not sentences: fenced blocks (```` ``` ```` / `~~~`) and lines that are code
//!   ([`looks_like_code`]) are dropped; inline code stays inside its sentence, and a `.` inside
//!   backticks never ends one.
//! * Lists: each bullet or numbered item is its own sentence (its marker dropped); a Markdown
//!   heading's `#` marks are dropped; a quote's `>` is kept (a quote is not an instruction).
//! * Ends: `.`, `!`, `?` (and `;`) followed by whitespace, except after "e.g." / "i.e." /
//!   "etc." / "vs." / a single letter; `。！？；` always; a closing quote or bracket right after
//!   stays with its sentence. Whitespace runs collapse to one space (byte-stable: the same text
//!   gives the same sentences).

/// Harness wrappers written into user-role messages that are not the user's words.
pub const HARNESS_PREFIXES: &[&str] = &[
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

/// The sentences of one user message's text, in order, deduplicated (see the module notes).
pub fn instruction_sentences(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if text.trim_start().starts_with("<task-notification>") {
        return out;
    }
    let text = strip_wrappers(text);
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            continue;
        }
        if t.is_empty() || t.starts_with("[Request interrupted") || looks_like_code(t) {
            continue;
        }
        let (quote, body) = match t.strip_prefix('>') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, strip_marker(t)),
        };
        for s in split_line(body) {
            let s = collapse(s);
            if !s.chars().any(char::is_alphanumeric) || looks_like_code(&s) {
                continue;
            }
            let s = if quote { format!("> {s}") } else { s };
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// A line of code or of a numbered listing, not prose: it starts with a line number
/// (`1463: msg = …`) or a prompt or comment mark, holds more than four of `{}()[]=;<>`, ends like a
/// statement (`{`, or `;` after `=`/`(` or a single word), or starts with a keyword and holds an operator.
pub fn looks_like_code(s: &str) -> bool {
    let s = s.trim();
    let digits = s.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && s[digits..].starts_with([':', '|']) {
        return true;
    }
    if ["$ ", ">>> ", "@@ ", "#!", "//", "/*", "*/", "</"]
        .iter()
        .any(|p| s.starts_with(p))
    {
        return true;
    }
    if s.bytes()
        .filter(|c| {
            matches!(
                c,
                b'{' | b'}' | b'(' | b')' | b'[' | b']' | b'=' | b';' | b'<' | b'>'
            )
        })
        .count()
        > 4
    {
        return true;
    }
    let statement =
        s.ends_with(';') && (s.contains(['=', '(']) || !s.contains(char::is_whitespace));
    if s.ends_with('{') || statement || s == "}" {
        return true;
    }
    // Most lines hold no inline code: no copy then.
    let outside: std::borrow::Cow<'_, str> = if s.contains('`') {
        without_inline_code(s).into()
    } else {
        s.into()
    };
    let first = outside.split_whitespace().next().unwrap_or("");
    let keyword = [
        "if", "for", "while", "def", "class", "return", "import", "from", "const", "let", "var",
        "fn", "pub", "elif", "else:", "try:", "except",
    ]
    .contains(&first);
    let operator = [
        " == ", " != ", " >= ", " <= ", " => ", " -> ", " && ", " || ", " > ", " < ",
    ]
    .iter()
    .any(|o| outside.contains(o));
    (keyword && (operator || call(&outside) || outside.trim_end().ends_with(':')))
        || (operator && call(&outside))
}

/// Whether `s` holds a call: an identifier directly followed by `(`, a `)` later.
fn call(s: &str) -> bool {
    let mut prev: Option<char> = None;
    for (i, c) in s.char_indices() {
        if c == '(' && prev.is_some_and(|p| p.is_ascii_alphanumeric() || p == '_') {
            return s[i..].contains(')');
        }
        prev = Some(c);
    }
    false
}

/// `s` with its inline code spans (`` `…` ``) removed.
pub(super) fn without_inline_code(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut inside = false;
    for c in s.chars() {
        if c == '`' {
            inside = !inside;
            continue;
        }
        if !inside {
            out.push(c);
        }
    }
    out
}

/// `text` without harness wrapper elements (`<system-reminder>…</system-reminder>`, …).
fn strip_wrappers(text: &str) -> String {
    let mut out = text.to_owned();
    for p in HARNESS_PREFIXES {
        let Some(name) = p.strip_prefix('<').and_then(|p| p.strip_suffix('>')) else {
            continue;
        };
        let close = format!("</{name}>");
        while let Some(at) = out.find(p) {
            let end = match out[at..].find(&close) {
                Some(e) => at + e + close.len(),
                None => out.len(),
            };
            out.replace_range(at..end, "\n");
        }
    }
    out
}

/// A list item's marker (`- `, `* `, `+ `, `• `, `1. `, `1) `, `- [ ] `) or a heading's `#`s.
fn strip_marker(t: &str) -> &str {
    let mut s = t;
    if let Some(rest) = s.strip_prefix(['-', '*', '+', '•']) {
        if rest.starts_with(char::is_whitespace) {
            s = rest.trim_start();
        }
    } else if s.starts_with('#') {
        let rest = s.trim_start_matches('#');
        if rest.starts_with(char::is_whitespace) {
            s = rest.trim_start();
        }
    } else {
        let digits = s.chars().take_while(|c| c.is_ascii_digit()).count();
        if (1..=3).contains(&digits) {
            let rest = &s[digits..];
            if let Some(r) = rest.strip_prefix(['.', ')', '、']) {
                if r.starts_with(char::is_whitespace) || rest.starts_with('、') {
                    s = r.trim_start();
                }
            }
        }
    }
    for box_ in ["[ ] ", "[x] ", "[X] "] {
        if let Some(rest) = s.strip_prefix(box_) {
            return rest.trim_start();
        }
    }
    s
}

/// Abbreviations after which a `.` does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "mr.", "dr.",
];

/// The sentences of one line (see the module notes for where they end).
fn split_line(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut code = false;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut k = 0;
    while k < chars.len() {
        let (i, c) = chars[k];
        if c == '`' {
            code = !code;
        }
        let end = !code
            && match c {
                '。' | '！' | '？' | '；' => true,
                '.' | '!' | '?' | ';' => {
                    let next = chars.get(k + 1).map(|&(_, d)| d);
                    let closing = next.is_some_and(|d| "\"'”’)]」』".contains(d));
                    let after = if closing {
                        chars.get(k + 2).map(|&(_, d)| d)
                    } else {
                        next
                    };
                    after.is_some_and(char::is_whitespace)
                        && !(c == '.' && abbreviation(&line[start..i + 1]))
                }
                _ => false,
            };
        if end {
            // A closing quote or bracket right after the end stays with the sentence.
            while let Some(&(_, d)) = chars.get(k + 1) {
                if "\"'”’)]」』".contains(d) {
                    k += 1;
                } else {
                    break;
                }
            }
            let e = chars.get(k + 1).map_or(line.len(), |&(j, _)| j);
            out.push(&line[start..e]);
            start = e;
        }
        k += 1;
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

/// Whether `upto` (a sentence so far, ending in `.`) ends with an abbreviation or an initial.
fn abbreviation(upto: &str) -> bool {
    let last = upto.rsplit(char::is_whitespace).next().unwrap_or("");
    let lower = last.to_lowercase();
    let lower = lower.trim_start_matches(['(', '"', '\'']);
    ABBREVIATIONS.contains(&lower)
        || (lower.chars().count() == 2 && lower.starts_with(|c: char| c.is_alphabetic()))
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chinese_lists_code_and_wrappers() {
        let text = "Fix the bug. Don't touch tests!\n```\nnever in code\n```\n\
            保留核心修复，先不要提交debug日志。以后每次回复都用中文！为什么？\n\
            - Run `make check. now` first; then push.\n2. Use pnpm, e.g. pnpm i.\n\
            # Heading\n> He said \"never\"\n    let x = foo(1);\n\
            <system-reminder>Do not reply.</system-reminder>Keep it short.";
        assert_eq!(
            instruction_sentences(text),
            [
                "Fix the bug.",
                "Don't touch tests!",
                "保留核心修复，先不要提交debug日志。",
                "以后每次回复都用中文！",
                "为什么？",
                "Run `make check. now` first;",
                "then push.",
                "Use pnpm, e.g. pnpm i.",
                "Heading",
                "> He said \"never\"",
                "Keep it short.",
            ]
        );
        assert!(
            instruction_sentences("<task-notification>x</task-notification>\nRead it.").is_empty()
        );
        assert_eq!(
            instruction_sentences("He said \"stop.\" Then go."),
            ["He said \"stop.\"", "Then go."]
        );
    }

    #[test]
    fn code_lines() {
        for code in [
            "if x > 0: return x",
            "for item in items: print(item)",
            "if (x > 0) { return x; }",
            "const savedTop = savedScrollTopRef.current;",
            "1463: msg = foo",
            "useEffect(() => {",
        ] {
            assert!(looks_like_code(code), "{code}");
        }
        for prose in [
            "If the build fails, fix it before committing.",
            "When you finish, run the tests.",
            "Note that you cannot use interactive commands (e.g. python, vim).",
            "如果测试失败就先修复再提交。",
        ] {
            assert!(!looks_like_code(prose), "{prose}");
        }
    }
}

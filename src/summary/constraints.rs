//! The user's constraints: sentences of the user's own messages that hold an imperative
//! ("don't", "do not", "never", "always", "must", "only"; 不要, 别, 不能, 禁止, 必须, 一定, 务必,
//! 只, 总是, 永远不, 绝不, 不许, 不准). The rule summary carries them verbatim (whitespace
//! collapsed): an agent that loses "never push to main" after a compaction does what it was told
//! not to.

/// Longest sentence taken as a constraint (a longer "sentence" is pasted text, not an order).
pub const MAX_CONSTRAINT_CHARS: usize = 300;

const EN: &[&str] = &[
    "don't", "don’t", "do not", "never", "always", "must", "only",
];
const ZH: &[&str] = &[
    "不要",
    "别",
    "不能",
    "禁止",
    "必须",
    "一定",
    "务必",
    "只",
    "总是",
    "永远不",
    "绝不",
    "不许",
    "不准",
];

/// Whether `s` holds an imperative word (English words whole, Chinese ones outside compounds
/// that mean something else: 区别, 特别, 只是, 能不能, …).
pub fn is_constraint(s: &str) -> bool {
    let lower = s.to_lowercase();
    for w in EN {
        let mut from = 0;
        while let Some(i) = lower[from..].find(w) {
            let at = from + i;
            let before = lower[..at].chars().next_back();
            let after = lower[at + w.len()..].chars().next();
            let letter = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphabetic());
            if !letter(before) && !letter(after) {
                return true;
            }
            from = at + w.len();
        }
    }
    for w in ZH {
        let mut from = 0;
        while let Some(i) = s[from..].find(w) {
            let at = from + i;
            let before = s[..at].chars().next_back();
            let after = s[at + w.len()..].chars().next();
            let ok = match *w {
                "别" => {
                    !before.is_some_and(|c| "区特分识类级个告派差性离辨鉴甄".contains(c))
                        && !after.is_some_and(|c| "的人处".contains(c))
                }
                "只" => !after.is_some_and(|c| "是要".contains(c)),
                "不能" => before != Some('能') && after != Some('不'),
                _ => true,
            };
            if ok {
                return true;
            }
            from = at + w.len();
        }
    }
    false
}

/// The constraint sentences of one user message's text, outside fenced code, in order.
pub fn constraint_sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        for s in sentences(t) {
            let s = s.trim_matches(|c: char| c.is_whitespace() || "-*>#".contains(c));
            let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
            let n = s.chars().count();
            if (4..=MAX_CONSTRAINT_CHARS).contains(&n)
                && !looks_like_code(&s)
                && is_constraint(&s)
                && !out.contains(&s)
            {
                out.push(s);
            }
        }
    }
    out
}

/// A line of code or of a numbered listing (`1463: msg = …`), not an order: it starts with a
/// line number, or holds more than four of `{}()[]=;<>`.
pub fn looks_like_code(s: &str) -> bool {
    let digits = s.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && s[digits..].starts_with([':', '|']) {
        return true;
    }
    s.chars().filter(|c| "{}()[]=;<>".contains(*c)).count() > 4
}

/// The sentences of a line: split after `.`, `!`, `?` followed by whitespace, and after
/// `。！？；;`.
fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = line.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let end = match c {
            '.' | '!' | '?' => it.peek().is_some_and(|&(_, d)| d.is_whitespace()),
            '。' | '！' | '？' | '；' | ';' => true,
            _ => false,
        };
        if end {
            let e = i + c.len_utf8();
            out.push(&line[start..e]);
            start = e;
        }
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imperatives_in_english_and_chinese() {
        assert!(is_constraint("Never push to main."));
        assert!(is_constraint("You MUST include one bash call"));
        assert!(is_constraint("先不要提交debug日志"));
        assert!(is_constraint("只修改 src 目录"));
        assert!(!is_constraint("The money is not mine."));
        assert!(!is_constraint("这只是一个测试"));
        assert!(!is_constraint("能不能缩短截流策略"));
        assert!(!is_constraint("两者的区别是什么"));
        assert_eq!(
            constraint_sentences("Fix the bug. Don't touch tests!\n```\nnever in code\n```\n保留核心修复，先不要提交debug日志"),
            ["Don't touch tests!", "保留核心修复，先不要提交debug日志"]
        );
    }
}

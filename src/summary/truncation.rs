//! The truncation summary (seed 003), the last resort when even the rule summary does not fit:
//! the opening characters of each replaced message, one line each, the oldest and the newest
//! kept when not all fit. Reads only the messages it shows.

use super::language::{Label, Language};
use super::transcript::{call_names, result_name};
use crate::cut::shorten;
use crate::message::{BlockKind, Message, Role};
use crate::text::Text;
use rustc_hash::FxHashMap as HashMap;

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
            BlockKind::Thinking
            | BlockKind::RedactedThinking
            | BlockKind::Reasoning
            | BlockKind::Compaction => {}
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
    use crate::message::Block;

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
}

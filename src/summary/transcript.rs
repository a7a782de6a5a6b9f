//! The replaced span as the transcript the summarizer reads, and its chunking.
//!
//! One entry per message, each block on its own labelled line:
//!
//! ```text
//! [user]: Fix the failing test in billing/tax.py
//! [assistant]: Let me look.
//! [assistant → bash]: {"command": "pytest tests/test_tax.py"}
//! [tool result: bash]: ===== 1 failed …[2817 chars omitted]… ZeroDivisionError
//! ```
//!
//! Tool output and thinking are cut to `item_max_chars` (head + tail, [`head_tail_text`]),
//! reading only the kept ends of a UCS-2/UCS-4 string; tool-call arguments too, as JSON that
//! stays valid ([`cut_json_args`]). The user's and the assistant's own text is never cut
//! here (it is what the summary is about); [`fit_entries`] cuts an entry that alone would
//! not fit a summarizer call.

use crate::cut::{cut_json_args, head_tail_text};
use crate::message::{Block, BlockKind, Message, Piece, Role};
use crate::text::Text;
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::ops::Range;

/// Tool names by call id, for the calls of `messages`.
pub fn call_names<'m>(messages: &'m [Message<'_>]) -> HashMap<&'m str, &'m str> {
    let mut names = HashMap::default();
    for m in messages {
        for b in m.calls() {
            if let (Some(id), Some(name)) = (b.id.as_deref(), b.name.as_deref()) {
                names.insert(id, name);
            }
        }
    }
    names
}

/// The tool name of a result: its call's name (by id), else the name the result carries.
pub fn result_name<'m>(b: &'m Block<'_>, names: &HashMap<&'m str, &'m str>) -> Option<&'m str> {
    b.id.as_deref()
        .and_then(|id| names.get(id).copied())
        .or(b.name.as_deref())
}

fn role_label(role: Role) -> &'static str {
    match role {
        Role::Tool | Role::Function => "tool",
        r => r.name(),
    }
}

/// The block's pieces as one string (borrowed when there is one UTF-8 piece).
fn joined<'b>(pieces: &'b [Piece<'_>]) -> Cow<'b, str> {
    match pieces {
        [] => Cow::Borrowed(""),
        [one] => one.text().to_utf8(),
        many => {
            let mut s = String::new();
            for (i, p) in many.iter().enumerate() {
                if i > 0 {
                    s.push('\n');
                }
                s.push_str(&p.text().to_utf8());
            }
            Cow::Owned(s)
        }
    }
}

/// The pieces cut to `max_chars` (only the kept ends of a single piece are read).
fn cut_pieces(pieces: &[Piece<'_>], max_chars: usize) -> String {
    if let [one] = pieces {
        let t: Text<'_> = one.text();
        return head_tail_text(t, max_chars).unwrap_or_else(|| t.to_utf8().into_owned());
    }
    let all = joined(pieces);
    head_tail_text(Text::Utf8(&all), max_chars).unwrap_or_else(|| all.into_owned())
}

fn push_line(out: &mut String, label: &str, body: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push('[');
    out.push_str(label);
    out.push_str("]:");
    if !body.is_empty() {
        out.push(' ');
        out.push_str(body);
    }
}

fn images_note(n: u32) -> String {
    match n {
        0 => String::new(),
        1 => "[image]".to_owned(),
        n => format!("[{n} images]"),
    }
}

/// Renders one message (see the module note); `names` maps call ids to tool names.
pub fn render_message(
    m: &Message<'_>,
    names: &HashMap<&str, &str>,
    item_max_chars: usize,
) -> String {
    let role = role_label(m.role);
    let mut out = String::new();
    // Whether the last line is this role's prose, so further prose joins it.
    let mut in_prose = false;
    for b in m.blocks.iter() {
        let prose: Option<Cow<'_, str>> = match b.kind {
            BlockKind::Text => Some(joined(&b.texts)),
            BlockKind::Image => Some(Cow::Owned(images_note(b.images.max(1)))),
            BlockKind::Audio => Some(Cow::Borrowed("[audio]")),
            BlockKind::Document => Some(if b.texts.iter().all(|p| p.text().is_blank()) {
                Cow::Borrowed("[document]")
            } else {
                Cow::Owned(format!(
                    "[document] {}",
                    cut_pieces(&b.texts, item_max_chars)
                ))
            }),
            _ => None,
        };
        if let Some(p) = prose {
            if in_prose {
                out.push('\n');
                out.push_str(&p);
            } else {
                push_line(&mut out, role, &p);
                in_prose = true;
            }
            continue;
        }
        in_prose = false;
        match b.kind {
            BlockKind::Refusal => {
                push_line(&mut out, &format!("{role} refusal"), &joined(&b.texts))
            }
            BlockKind::ToolCall => {
                let name = b.name.as_deref().unwrap_or("tool");
                let args = joined(&b.texts);
                let args = cut_json_args(&args, item_max_chars).map_or(args, Cow::Owned);
                push_line(&mut out, &format!("{role} → {name}"), &args);
            }
            BlockKind::ToolResult => {
                let label = match (result_name(b, names), b.is_error) {
                    (Some(n), false) => format!("tool result: {n}"),
                    (Some(n), true) => format!("tool error: {n}"),
                    (None, false) => "tool result".to_owned(),
                    (None, true) => "tool error".to_owned(),
                };
                let mut body = cut_pieces(&b.texts, item_max_chars);
                if b.images > 0 {
                    if !body.is_empty() {
                        body.push(' ');
                    }
                    body.push_str(&images_note(b.images));
                }
                push_line(&mut out, &label, &body);
            }
            BlockKind::Thinking => push_line(
                &mut out,
                &format!("{role} thinking"),
                &cut_pieces(&b.texts, item_max_chars),
            ),
            BlockKind::RedactedThinking => {
                push_line(&mut out, &format!("{role} thinking"), "[redacted]")
            }
            // Responses reasoning (encrypted) and provider compaction items: not readable.
            BlockKind::Reasoning => {
                push_line(&mut out, &format!("{role} reasoning"), "[encrypted]")
            }
            BlockKind::Compaction => push_line(&mut out, role, "[earlier provider compaction]"),
            // Unknown blocks (server tools, future types): their text.
            _ => push_line(&mut out, role, &cut_pieces(&b.texts, item_max_chars)),
        }
    }
    if out.is_empty() {
        push_line(&mut out, role, "");
    }
    out
}

/// The transcript of `messages` for the summarizer: one entry per message (see the module
/// note), tool output, thinking and tool-call arguments cut to `item_max_chars` each.
pub fn render_transcript(messages: &[Message<'_>], item_max_chars: usize) -> Vec<String> {
    let names = call_names(messages);
    messages
        .iter()
        .map(|m| render_message(m, &names, item_max_chars))
        .collect()
}

/// Splits entries into contiguous chunks of at most `max_tokens` each (as `count` counts
/// them, plus one token per entry for the separator), in order, covering every entry. An
/// entry that alone is over the limit gets a chunk of its own (cut it with [`fit_entries`]).
/// Empty input gives no chunks.
pub fn chunk_transcript(
    entries: &[String],
    count: impl Fn(&str) -> usize,
    max_tokens: usize,
) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut acc = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let n = count(e) + 1;
        if i > start && acc + n > max_tokens {
            chunks.push(start..i);
            start = i;
            acc = 0;
        }
        acc += n;
    }
    if start < entries.len() {
        chunks.push(start..entries.len());
    }
    chunks
}

/// Cuts (head + tail, marked) every entry whose count is over `max_tokens` to the longest
/// cut that fits. Returns how many entries were cut.
pub fn fit_entries(
    entries: &mut [String],
    count: impl Fn(&str) -> usize,
    max_tokens: usize,
) -> usize {
    let mut cut = 0;
    for e in entries.iter_mut() {
        if let Some(c) = fit_entry(e, &count, max_tokens) {
            *e = c;
            cut += 1;
        }
    }
    cut
}

/// `entry` cut to fit `max_tokens`, or `None` when it fits.
pub fn fit_entry(entry: &str, count: &impl Fn(&str) -> usize, max_tokens: usize) -> Option<String> {
    let n = count(entry);
    if n <= max_tokens {
        return None;
    }
    let len = entry.chars().count();
    // Largest char budget whose cut fits; start from the proportional guess.
    let (mut lo, mut hi) = (0usize, len);
    let mut best: Option<String> = None;
    let mut guess = (len as u128 * max_tokens as u128 / n.max(1) as u128) as usize;
    while lo < hi {
        let mid = if guess > lo && guess < hi {
            guess
        } else {
            lo + (hi - lo) / 2
        };
        guess = 0;
        match head_tail_text(Text::Utf8(entry), mid.max(24)) {
            Some(c) if count(&c) <= max_tokens => {
                best = Some(c);
                lo = mid + 1;
            }
            Some(_) => hi = mid,
            None => hi = mid,
        }
    }
    Some(best.unwrap_or_else(|| head_tail_text(Text::Utf8(entry), 24).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Message, Piece, Role};

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    #[test]
    fn renders_openai_shape() {
        let big = "x".repeat(5000);
        let msgs = vec![
            Message::text(Role::User, "Fix tax.py"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::text("Let me look."),
                    Block::tool_call(Some("c1"), "bash", "{\"cmd\":\"ls\"}"),
                    Block::tool_call(Some("c2"), "read", "{\"path\":\"tax.py\"}"),
                ],
            ),
            Message::new(Role::Tool, vec![Block::tool_result(Some("c1"), "tax.py")]),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(Some("c2"), big.as_str())],
            ),
            Message::new(Role::Tool, vec![Block::tool_result(Some("zz"), "orphan")]),
            Message::new(Role::Assistant, vec![]),
        ];
        let t = render_transcript(&msgs, 100);
        assert_eq!(t.len(), msgs.len());
        assert_eq!(t[0], "[user]: Fix tax.py");
        assert_eq!(
            t[1],
            "[assistant]: Let me look.\n[assistant → bash]: {\"cmd\":\"ls\"}\n[assistant → read]: {\"path\":\"tax.py\"}"
        );
        assert_eq!(t[2], "[tool result: bash]: tax.py");
        assert!(t[3].starts_with("[tool result: read]: xxx") && t[3].contains("chars omitted"));
        assert!(chars(&t[3]) <= 100 + "[tool result: read]: ".len());
        assert_eq!(t[4], "[tool result]: orphan");
        assert_eq!(t[5], "[assistant]:");
    }

    #[test]
    fn renders_anthropic_shape() {
        let mut err = Block::tool_result(Some("t1"), "boom");
        err.is_error = true;
        let mut img_result = Block::tool_result(Some("t2"), "shot");
        img_result.images = 2;
        let thought = "思考".repeat(100);
        let msgs = vec![
            Message::new(
                Role::User,
                vec![
                    Block::text("look at this"),
                    Block::new(BlockKind::Image),
                    Block::text("and this"),
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![
                    Block::thinking(thought.as_str()),
                    Block::new(BlockKind::RedactedThinking),
                    Block::tool_call(Some("t1"), "Bash", "{\"command\":\"make\"}"),
                    Block::tool_call(Some("t2"), "Screenshot", "{}"),
                ],
            ),
            Message::new(Role::User, vec![err, img_result, Block::text("继续")]),
        ];
        let t = render_transcript(&msgs, 50);
        assert_eq!(t[0], "[user]: look at this\n[image]\nand this");
        assert!(t[1].starts_with("[assistant thinking]: 思考"), "{}", t[1]);
        assert!(t[1].contains("chars omitted"));
        assert!(t[1].contains("[assistant thinking]: [redacted]"));
        assert!(t[1].ends_with("[assistant → Screenshot]: {}"));
        assert_eq!(
            t[2],
            "[tool error: Bash]: boom\n[tool result: Screenshot]: shot [2 images]\n[user]: 继续"
        );
    }

    #[test]
    fn wide_text_is_cut_on_code_points() {
        let s: String = "🙂a".repeat(2000);
        let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let msgs = vec![
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("a"), "bash", "{}")],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(
                    Some("a"),
                    Piece::Borrowed(Text::Ucs4(&ucs4)),
                )],
            ),
        ];
        let t = render_transcript(&msgs, 60);
        assert!(t[1].starts_with("[tool result: bash]: 🙂a🙂a"));
        assert!(t[1].ends_with("🙂a"));
        // Long tool-call arguments are cut as JSON.
        let args = serde_json::json!({"command": "y".repeat(3000)}).to_string();
        let msgs = vec![Message::new(
            Role::Assistant,
            vec![Block::tool_call(Some("a"), "bash", args.as_str())],
        )];
        let t = render_transcript(&msgs, 200);
        let json = t[0].strip_prefix("[assistant → bash]: ").unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(json).is_ok());
        assert!(render_transcript(&[], 10).is_empty());
    }

    #[test]
    fn chunks_cover_everything_in_order() {
        let entries: Vec<String> = ["aaaa", "bb", "cccccccccc", "d", "e"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let count = |s: &str| s.len();
        assert_eq!(chunk_transcript(&entries, count, 8), vec![0..2, 2..3, 3..5]);
        assert_eq!(chunk_transcript(&entries, count, 1000), vec![0..5]);
        assert_eq!(
            chunk_transcript(&entries, count, 0),
            vec![0..1, 1..2, 2..3, 3..4, 4..5]
        );
        assert!(chunk_transcript(&[], count, 10).is_empty());
    }

    #[test]
    fn fit_cuts_over_long_entries() {
        let mut entries = vec!["short".to_owned(), "z".repeat(10_000), "中文".repeat(3000)];
        let count = |s: &str| s.chars().count() / 4;
        assert_eq!(fit_entries(&mut entries, count, 500), 2);
        assert_eq!(entries[0], "short");
        for e in &entries[1..] {
            assert!(count(e) <= 500, "{}", count(e));
            assert!(count(e) > 450, "{}", count(e));
            assert!(crate::cut::is_cut(e));
        }
    }
}

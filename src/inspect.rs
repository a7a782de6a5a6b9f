//! Where a conversation's tokens go, message by message and block by block: what `context-compactor
//! stats` prints, read from the same views the rest of the core reads (so every format the
//! boundary reads, framework objects included, gets the same figures, and a Python shell never
//! parses a wire format again).
//!
//! A block's tokens are the share of its message's count that it adds (see
//! [`crate::tokens::counter::block_count_with`]): a message's tokens are
//! `message_overhead_tokens` plus the sum over its blocks, the same total `measure` gives. A
//! tool result is named after the call it answers (by id; Gemini's id-less pairs were given ids
//! by the boundary), else after its own `name` (a Gemini response, a legacy `function` message).

use crate::message::{BlockKind, Message, Role};
use crate::text::Text;
use crate::tokens::counter::{block_count_with, Framing};
use std::collections::HashMap;

/// One block of a message, as the stats see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub kind: BlockKind,
    /// Tokens the block adds to its message.
    pub tokens: usize,
    /// A call's tool name; for a result, the name of the call it answers.
    pub name: Option<String>,
    /// The call id (a call) or the id it answers (a result).
    pub id: Option<String>,
    pub is_error: bool,
}

/// One message, as the stats see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageInfo {
    pub role: Role,
    /// The message's tokens (framing included), as `measure` counts them.
    pub tokens: usize,
    pub blocks: Vec<BlockInfo>,
    /// One line of what the message says (see [`preview`]).
    pub preview: String,
}

/// Describe every message: its role, its blocks' kinds, tool names and tokens, and a preview of
/// at most `preview_chars` code points (`0`: none). `count` counts a text (it may fail: a Python
/// callable), which stops the walk.
pub fn inspect_with<E>(
    messages: &[Message<'_>],
    framing: Framing,
    preview_chars: usize,
    mut count: impl FnMut(Text<'_>) -> Result<usize, E>,
) -> Result<Vec<MessageInfo>, E> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let mut blocks = Vec::with_capacity(m.blocks.len());
        let mut tokens = framing.message_overhead_tokens;
        for b in m.blocks.iter() {
            let n = block_count_with(b, framing, &mut count)?;
            tokens += n;
            let name = match (b.kind, b.id.as_deref()) {
                (BlockKind::ToolCall, id) => {
                    if let (Some(id), Some(name)) = (id, b.name.as_deref()) {
                        names.insert(id, name);
                    }
                    b.name.clone()
                }
                (BlockKind::ToolResult, Some(id)) => names
                    .get(id)
                    .map(|s| (*s).to_owned())
                    .or_else(|| own_result_name(m, b.name.as_deref())),
                (BlockKind::ToolResult, None) => own_result_name(m, b.name.as_deref()),
                _ => None,
            };
            blocks.push(BlockInfo {
                kind: b.kind,
                tokens: n,
                name,
                id: b.id.clone(),
                is_error: b.is_error,
            });
        }
        out.push(MessageInfo {
            role: m.role,
            tokens,
            blocks,
            preview: preview(m, preview_chars),
        });
    }
    Ok(out)
}

/// The name a result carries itself: a Gemini `function_response.name`, a legacy `function`
/// message's name. A Responses output's own name is its item type, not a tool: not used.
fn own_result_name(m: &Message<'_>, name: Option<&str>) -> Option<String> {
    if m.responses {
        return None;
    }
    name.map(str::to_owned)
}

/// Collects a one-line preview: whitespace runs folded to one space, cut with `…`.
struct Line {
    s: String,
    len: usize,
    max: usize,
    space: bool,
}

impl Line {
    fn full(&self) -> bool {
        self.len > self.max
    }

    fn push(&mut self, c: char) {
        if self.full() {
            return;
        }
        if c.is_whitespace() {
            self.space = self.len > 0;
            return;
        }
        if self.space {
            self.s.push(' ');
            self.len += 1;
            self.space = false;
        }
        if !self.full() {
            self.s.push(c);
            self.len += 1;
        }
    }

    fn text(&mut self, t: Text<'_>) {
        if self.len > 0 {
            self.space = true;
        }
        for c in t.chars() {
            if self.full() {
                return;
            }
            self.push(c);
        }
    }

    fn finish(mut self) -> String {
        if self.full() {
            let keep = self.max.saturating_sub(1);
            let cut: String = self.s.chars().take(keep).collect();
            self.s = cut.trim_end().to_owned();
            self.s.push('…');
        }
        self.s
    }
}

/// One line of what a message says, at most `chars` code points: its prose (text and refusal
/// blocks) and `→ name, …` for its tool calls; failing those, its tool results' text, then its
/// thinking; failing those, the kinds of its blocks in brackets (`[reasoning]`, `[image]`: opaque
/// and binary content is not shown). Whitespace runs become one space; a cut ends with `…`.
pub fn preview(m: &Message<'_>, chars: usize) -> String {
    if chars == 0 {
        return String::new();
    }
    let mut line = Line {
        s: String::new(),
        len: 0,
        max: chars,
        space: false,
    };
    let prose = |k: BlockKind| matches!(k, BlockKind::Text | BlockKind::Refusal);
    for b in m.blocks.iter().filter(|b| prose(b.kind)) {
        b.texts.iter().for_each(|p| line.text(p.text()));
    }
    let calls: Vec<&str> = m
        .calls()
        .map(|c| c.name.as_deref().unwrap_or("?"))
        .collect();
    if !calls.is_empty() {
        line.text(Text::Utf8("→"));
        line.push(' ');
        line.text(Text::Utf8(&calls.join(", ")));
    }
    for kinds in [&[BlockKind::ToolResult][..], &[BlockKind::Thinking][..]] {
        if line.len > 0 {
            break;
        }
        for b in m.blocks.iter().filter(|b| kinds.contains(&b.kind)) {
            b.texts.iter().for_each(|p| line.text(p.text()));
        }
    }
    if line.len == 0 {
        let mut seen: Vec<BlockKind> = Vec::new();
        for b in m.blocks.iter() {
            if !seen.contains(&b.kind) {
                seen.push(b.kind);
                line.text(Text::Utf8(&format!("[{}]", kind_name(b.kind))));
            }
        }
    }
    line.finish()
}

/// A block kind's name, as the stats print it.
pub fn kind_name(kind: BlockKind) -> &'static str {
    match kind {
        BlockKind::Text => "text",
        BlockKind::Refusal => "refusal",
        BlockKind::Image => "image",
        BlockKind::Audio => "audio",
        BlockKind::Document => "document",
        BlockKind::ToolCall => "tool_call",
        BlockKind::ToolResult => "tool_result",
        BlockKind::Thinking => "thinking",
        BlockKind::RedactedThinking => "redacted_thinking",
        BlockKind::Other => "other",
        BlockKind::Reasoning => "reasoning",
        BlockKind::Compaction => "compaction",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Block;
    use crate::tokens::counter::{message_tokens, Tokenizer};
    use std::convert::Infallible;

    fn approx(t: Text<'_>) -> Result<usize, Infallible> {
        Ok(Tokenizer::Approx.count(t))
    }

    fn infos(messages: &[Message<'_>], chars: usize) -> Vec<MessageInfo> {
        match inspect_with(messages, Framing::default(), chars, approx) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    #[test]
    fn blocks_add_up_to_the_message_count() {
        let f = Framing::default();
        let msgs = vec![
            Message::text(Role::User, "fix src/main.rs please"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::text("looking"),
                    Block::tool_call(Some("c1"), "bash", "{\"cmd\": \"ls\"}"),
                    Block::tool_call(Some("c2"), "read", "{\"path\": \"a.py\"}"),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    Block::tool_result(Some("c2"), "print(1)"),
                    Block::tool_result(Some("c1"), "a.py\nb.py"),
                ],
            ),
        ];
        let out = infos(&msgs, 60);
        for (m, info) in msgs.iter().zip(&out) {
            assert_eq!(info.tokens, message_tokens(Tokenizer::Approx, m, f));
            let sum: usize = info.blocks.iter().map(|b| b.tokens).sum();
            assert_eq!(info.tokens, f.message_overhead_tokens + sum);
        }
        let names: Vec<_> = out[2].blocks.iter().map(|b| b.name.as_deref()).collect();
        assert_eq!(names, [Some("read"), Some("bash")]);
        assert_eq!(out[1].preview, "looking → bash, read");
        assert_eq!(out[2].preview, "print(1) a.py b.py");
    }

    #[test]
    fn preview_folds_cuts_and_names_opaque_blocks() {
        let long = "一二三四五六七八九十 ".repeat(10);
        let msgs = vec![
            Message::text(Role::User, &long),
            Message::new(Role::Assistant, vec![Block::new(BlockKind::Reasoning)]),
            Message::text(Role::User, "  a \n\n b  "),
        ];
        let out = infos(&msgs, 12);
        assert_eq!(out[0].preview, "一二三四五六七八九十…");
        assert_eq!(out[1].preview, "[reasoning]");
        assert_eq!(out[2].preview, "a b");
        assert_eq!(infos(&msgs, 0)[0].preview, "");
    }
}

//! Tool blocks, thinking loops, turns, and the legal cut points between them.
//!
//! Design note: many agent runs are one user turn followed by hundreds of tool blocks, so a
//! compactor that may only cut at turn boundaries cannot compact them at all. Cuts are legal
//! between any two blocks, inside a turn too, but never inside a tool block (an assistant
//! message with calls plus all their results, parallel calls being one block).
//!
//! Design note — thinking loops. Anthropic's docs (platform.claude.com, "Thinking in tool and
//! multi-turn workflows", and the Thinking page's "Thinking with tool use" and "Preserving
//! thinking blocks") say: a tool-use loop is one assistant turn; when a tool result goes back,
//! the thinking blocks of that assistant message must come back complete and unmodified (the
//! signature is checked); only the current tool-use cycle's thinking must be preserved; and an
//! assistant message of the current turn that does not open with its thinking is refused
//! (`expected thinking or redacted_thinking`). So the pending loop was first kept whole — but
//! in a Claude Code session that loop is usually the whole agent
//! run (one user message, hundreds of tool blocks), and nothing could be compacted (19 of 29
//! calls over the window on `cc_3d` at 30%). A summary is a user *text* message, which starts a
//! new turn; an assistant message that opens with a `thinking`/`redacted_thinking` block then
//! opens that turn exactly as the model wrote it. So inside the pending loop a cut is legal just
//! before such a message (with interleaved thinking most messages of the loop are such), and
//! every kept message stays byte-identical. Elsewhere in the pending loop — before an assistant
//! message that starts with text or a call — a cut would leave a turn whose thinking is gone,
//! and stays illegal. Everything here is one O(n) pass.

use crate::message::{Message, Role};

/// A closed range of message indices, `start..=end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn len(&self) -> usize {
        self.end - self.start + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether a cut before message `cut` would split this span.
    pub fn splits(&self, cut: usize) -> bool {
        self.start < cut && cut <= self.end
    }
}

/// An assistant message with calls plus the messages that carry their results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolBlock {
    pub span: Span,
    /// Calls with no result yet; only possible for the conversation's last block.
    pub pending: usize,
}

/// The shape of a conversation.
#[derive(Clone, Debug, Default)]
pub struct Structure {
    pub tool_blocks: Vec<ToolBlock>,
    pub thinking_loops: Vec<Span>,
    pub turns: Vec<Span>,
    /// Indices `c` (0..=n) where the list may be cut into `messages[..c]` and `messages[c..]`
    /// without splitting a tool block or the pending part of a thinking loop.
    pub cut_points: Vec<usize>,
    /// For each message, the tool block it belongs to (index into `tool_blocks`).
    pub block_of: Vec<Option<usize>>,
    /// The thinking loop the conversation ends in, if it is still going (its thinking must stay).
    pub pending_loop: Option<Span>,
    /// The last tool block when a call in it still waits for its result (it must stay last).
    pub pending_block: Option<Span>,
}

/// Index one past the last message that carries results for the calls at `i`.
///
/// OpenAI results are the `tool`/`function` messages right after the call; Anthropic results
/// sit in the next user message(s), which may also carry text after the results (that message
/// then closes the block).
pub fn result_region_end<'a, M: AsRef<Message<'a>>>(messages: &[M], i: usize) -> usize {
    if crate::formats::responses::is_item(messages[i].as_ref()) {
        return crate::formats::responses::region_end(messages, i);
    }
    let mut j = i + 1;
    while j < messages.len() {
        let m = messages[j].as_ref();
        if m.role == Role::Assistant || !m.has_results() {
            break;
        }
        j += 1;
        if !m.is_result_only() {
            break;
        }
    }
    j
}

/// Whether a call with `id` is answered by one of `messages[from..to]`.
fn answered<'a, M: AsRef<Message<'a>>>(
    messages: &[M],
    from: usize,
    to: usize,
    id: Option<&str>,
) -> bool {
    messages[from..to]
        .iter()
        .flat_map(|m| m.as_ref().results())
        .any(|r| r.id.as_deref() == id)
}

/// Find the tool blocks, thinking loops, turns and legal cut points.
/// Works on any list whose items give a message view (`Message`, or the planner's slots).
pub fn analyze<'a, M: AsRef<Message<'a>>>(messages: &[M]) -> Structure {
    let n = messages.len();
    let mut s = Structure {
        block_of: vec![None; n],
        ..Structure::default()
    };

    let mut i = 0;
    while i < n {
        let m = messages[i].as_ref();
        if m.role == Role::Assistant && m.has_calls() {
            let end = result_region_end(messages, i);
            let pending = if end == n && crate::formats::responses::is_item(m) {
                crate::formats::responses::pending_in(messages, i, end)
            } else if end == n {
                m.calls()
                    .filter(|c| !answered(messages, i + 1, end, c.id.as_deref()))
                    .count()
            } else {
                0
            };
            let k = s.tool_blocks.len();
            s.tool_blocks.push(ToolBlock {
                span: Span {
                    start: i,
                    end: end - 1,
                },
                pending,
            });
            for b in &mut s.block_of[i..end] {
                *b = Some(k);
            }
            i = end;
        } else {
            i += 1;
        }
    }

    let turn_starts: Vec<usize> = (0..n)
        .filter(|&i| messages[i].as_ref().is_user_text())
        .collect();
    for (k, &start) in turn_starts.iter().enumerate() {
        let end = turn_starts.get(k + 1).map_or(n, |&next| next) - 1;
        s.turns.push(Span { start, end });
    }

    // A thinking loop runs from an assistant message that opens with thinking to the message
    // before the next user text.
    let mut i = 0;
    while i < n {
        if messages[i].as_ref().role == Role::Assistant
            && messages[i].as_ref().starts_with_thinking()
        {
            let mut end = i;
            while end + 1 < n && !messages[end + 1].as_ref().is_user_text() {
                end += 1;
            }
            s.thinking_loops.push(Span { start: i, end });
            i = end + 1;
        } else {
            i += 1;
        }
    }

    // A loop is pending while the conversation ends inside it: with tool results, or with a
    // call still waiting. A final assistant answer without calls completes it.
    let complete = messages
        .last()
        .is_some_and(|m| m.as_ref().role == Role::Assistant && !m.as_ref().has_calls());
    let pending_loop = s
        .thinking_loops
        .last()
        .copied()
        .filter(|l| l.end + 1 == n && !complete);
    s.pending_loop = pending_loop;
    s.pending_block = s
        .tool_blocks
        .last()
        .filter(|b| b.pending > 0 && b.span.end + 1 == n)
        .map(|b| b.span);
    s.cut_points = (0..=n)
        .filter(|&c| {
            let in_block =
                c > 0 && c < n && s.block_of[c].is_some_and(|k| s.tool_blocks[k].span.splits(c));
            // Inside the pending loop only before an assistant message that opens with
            // thinking: what follows is a complete assistant turn (see the design note).
            let in_loop = pending_loop.is_some_and(|l| l.splits(c))
                && !(c < n && {
                    let m = messages[c].as_ref();
                    m.role == Role::Assistant && m.starts_with_thinking()
                });
            // A Responses reasoning item stays with the item that follows it.
            !in_block && !in_loop && !crate::formats::responses::splits_reasoning(messages, c)
        })
        .collect();
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Message, Role};

    fn call<'a>(ids: &[&str]) -> Message<'a> {
        Message::new(
            Role::Assistant,
            ids.iter()
                .map(|id| Block::tool_call(Some(id), "bash", "{}"))
                .collect(),
        )
    }

    fn result<'a>(id: &str) -> Message<'a> {
        Message::new(Role::Tool, vec![Block::tool_result(Some(id), "ok")])
    }

    #[test]
    fn parallel_calls_are_one_block_and_cuts_fall_between_blocks() {
        let msgs = vec![
            Message::text(Role::System, "sys"),
            Message::text(Role::User, "do it"),
            call(&["a", "b"]),
            result("a"),
            result("b"),
            call(&["c"]),
            result("c"),
            Message::text(Role::Assistant, "done"),
        ];
        let s = analyze(&msgs);
        assert_eq!(s.tool_blocks.len(), 2);
        assert_eq!(s.tool_blocks[0].span, Span { start: 2, end: 4 });
        assert_eq!(s.tool_blocks[1].span, Span { start: 5, end: 6 });
        assert_eq!(s.cut_points, vec![0, 1, 2, 5, 7, 8]);
        assert_eq!(s.turns, vec![Span { start: 1, end: 7 }]);
    }

    #[test]
    fn trailing_pending_call() {
        let msgs = vec![
            Message::text(Role::User, "go"),
            call(&["a", "b"]),
            result("a"),
        ];
        let s = analyze(&msgs);
        assert_eq!(s.tool_blocks[0].pending, 1);
        assert_eq!(s.cut_points, vec![0, 1, 3]);
    }

    #[test]
    fn pending_thinking_loop_is_not_cut() {
        let think = Message::new(
            Role::Assistant,
            vec![
                Block::thinking("hmm"),
                Block::tool_call(Some("a"), "bash", "{}"),
            ],
        );
        let user_result = Message::new(Role::User, vec![Block::tool_result(Some("a"), "ok")]);
        let msgs = vec![
            Message::text(Role::User, "go"),
            think.clone(),
            user_result.clone(),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("b"), "bash", "{}")],
            ),
            Message::new(Role::User, vec![Block::tool_result(Some("b"), "ok")]),
        ];
        let s = analyze(&msgs);
        assert_eq!(s.thinking_loops, vec![Span { start: 1, end: 4 }]);
        // Message 3 opens with a call, not thinking: no cut before it.
        assert_eq!(s.cut_points, vec![0, 1, 5]);

        // With interleaved thinking (each assistant message of the loop opens with thinking),
        // a cut before each of them is legal: the summary starts a new turn there.
        let mut interleaved = msgs.clone();
        interleaved[3] = Message::new(
            Role::Assistant,
            vec![
                Block::thinking("next"),
                Block::tool_call(Some("b"), "bash", "{}"),
            ],
        );
        let s = analyze(&interleaved);
        assert_eq!(s.pending_loop, Some(Span { start: 1, end: 4 }));
        assert_eq!(s.cut_points, vec![0, 1, 3, 5]);

        // Once the user speaks again, the loop is complete and may be cut between blocks.
        let mut done = msgs.clone();
        done.push(Message::text(Role::User, "thanks"));
        let s = analyze(&done);
        assert_eq!(s.cut_points, vec![0, 1, 3, 5, 6]);
        assert_eq!(s.turns.len(), 2);
    }

    #[test]
    fn anthropic_result_message_with_text_closes_block() {
        let mut mixed = Message::new(Role::User, vec![Block::tool_result(Some("a"), "ok")]);
        mixed.blocks_mut().push(Block::text("and also this"));
        let msgs = vec![
            Message::text(Role::User, "go"),
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(Some("a"), "bash", "{}")],
            ),
            mixed,
            Message::text(Role::Assistant, "ok"),
        ];
        let s = analyze(&msgs);
        assert_eq!(s.tool_blocks[0].span, Span { start: 1, end: 2 });
        assert_eq!(s.turns.len(), 2, "a user message with text starts a turn");
        assert_eq!(s.cut_points, vec![0, 1, 3, 4]);
    }
}

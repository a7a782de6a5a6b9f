//! Provider compaction output: OpenAI `compaction` items and Anthropic `compaction` blocks are
//! earlier summaries made by the provider (DESIGN, Formats, "Provider compaction output").
//!
//! Design note — what the providers say.
//!
//! - OpenAI, "Compaction" (developers.openai.com/api/docs/guides/compaction): server-side
//!   compaction (`context_management` with `compact_threshold`) or `POST /responses/compact`
//!   returns an opaque, encrypted `compaction` item that "carries forward key prior state and
//!   reasoning"; for stateless input-array chaining the caller appends output items as usual,
//!   and "can drop items that came before the most recent compaction item". The standalone
//!   endpoint returns the user messages followed by one compaction item. So: the item is never
//!   split, edited or re-summarised (a fixed slot, `draft::Slot::is_fixed`); user messages
//!   before the latest one are kept where the planner replaces a span; other items before it
//!   may go into our summary (recorded, like every replaced item).
//! - Anthropic, "Compaction" (platform.claude.com/docs/en/build-with-claude/compaction, beta
//!   header `compact-2026-01-12`): when the input crosses the trigger, the response holds a
//!   `compaction` block with the summary; on the next request the API ignores everything
//!   before it. The API refuses a compaction block that is not the first block of the
//!   conversation (`compaction_block_misplaced`) and more than one with content
//!   (`compaction_block_ambiguous`). So such a conversation starts with the assistant message
//!   that holds the latest block — the `first_not_user` rule and the repair pass accept that
//!   shape — and everything before it is dropped (recorded). The task (the first user message)
//!   is kept when the block's readable `content` holds its opening words; otherwise it is
//!   re-sent as a user message right after that assistant message.

use crate::message::{BlockKind, Message, Role};
use crate::validate::problem::rule;

/// `(message, block)` of every Anthropic compaction block, in order.
pub fn blocks(messages: &[Message<'_>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if crate::formats::responses::is_item(m) {
            continue;
        }
        for (k, b) in m.blocks.iter().enumerate() {
            if b.kind == BlockKind::Compaction {
                out.push((i, k));
            }
        }
    }
    out
}

/// Whether `m` opens the conversation the way a compaction block must: an assistant message
/// whose first block is the compaction block.
pub fn opens_with_block(m: &Message<'_>) -> bool {
    m.role == Role::Assistant
        && !crate::formats::responses::is_item(m)
        && m.blocks
            .first()
            .is_some_and(|b| b.kind == BlockKind::Compaction)
}

/// Whether the block's readable content holds the task's opening words (the first eight words,
/// or its first 40 characters for text without spaces, as CJK text is).
pub fn holds_task(block_text: &str, task_text: &str) -> bool {
    let words: Vec<&str> = task_text.split_whitespace().take(8).collect();
    let head = if words.len() >= 3 {
        words.join(" ")
    } else {
        task_text
            .chars()
            .filter(|c| !c.is_whitespace())
            .take(40)
            .collect()
    };
    if head.is_empty() {
        return true;
    }
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.len() >= 3 {
        flat(block_text).contains(&head)
    } else {
        block_text
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .contains(&head)
    }
}

/// Anthropic's compaction blocks: only as the first block of the conversation, only one with
/// content (the design note above).
pub fn check(messages: &[Message<'_>], push: &mut impl FnMut(usize, &'static str, String)) {
    let first = messages.iter().position(|m| !m.role.is_instruction());
    let mut with_content = 0;
    for (i, k) in blocks(messages) {
        if Some(i) != first || k != 0 || messages[i].role != Role::Assistant {
            push(
                i,
                rule::COMPACTION_BLOCK_MISPLACED,
                format!("content[{k}]: a compaction block must be the first block of the conversation, in an assistant message"),
            );
        }
        if messages[i].blocks[k]
            .texts
            .iter()
            .any(|t| !t.text().is_blank())
        {
            with_content += 1;
            if with_content == 2 {
                push(
                    i,
                    rule::COMPACTION_BLOCK_AMBIGUOUS,
                    format!("content[{k}]: a second compaction block with content"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_words_in_the_block() {
        assert!(holds_task(
            "The user asked: fix the bug in src/app.py   please, and then ...",
            "fix the bug in src/app.py please"
        ));
        assert!(!holds_task(
            "Summary of work so far.",
            "fix the bug in src/app.py please"
        ));
        assert!(holds_task(
            "用户要求：修复登录页面的错误并补充测试。",
            "修复登录页面的错误并补充测试"
        ));
    }
}

//! The working list the planner edits: one slot per output message, each with the view the
//! rest of the core reads (for counting, structure and validation) and how to build it.

use super::output::{Origin, OutBlock, OutMsg};
use crate::message::{Block, BlockKind, Conversation, Message, Piece, Role};
use crate::text::Text;
use crate::tokens::counter::{message_count_with, Framing};
use std::convert::Infallible;

/// Counts the tokens of a text (the configured tokenizer).
pub trait Count {
    fn count(&self, text: Text<'_>) -> usize;
}

impl<F: Fn(Text<'_>) -> usize> Count for F {
    fn count(&self, text: Text<'_>) -> usize {
        self(text)
    }
}

/// Tokens of a block's texts and images (its share of the message, besides the fixed framing).
pub fn block_tokens(b: &Block<'_>, framing: Framing, counter: &dyn Count) -> usize {
    b.texts
        .iter()
        .map(|p| counter.count(p.text()))
        .sum::<usize>()
        + crate::tokens::counter::block_images_tokens(b, framing)
}

/// Tokens of a message view with `counter`.
pub fn tokens_of(m: &Message<'_>, framing: Framing, counter: &dyn Count) -> usize {
    let counted = message_count_with(m, framing, |t| Ok::<_, Infallible>(counter.count(t)));
    match counted {
        Ok(n) => n,
        Err(never) => match never {},
    }
}

/// One output message in the making.
#[derive(Clone, Debug)]
pub struct Slot<'a> {
    pub out: OutMsg,
    pub view: Message<'a>,
    pub tokens: usize,
    /// Pinned by the caller (never replaced or edited).
    pub pinned: bool,
    /// The message is an earlier compaction's summary (see [`starts_with_summary`]): asked
    /// of every slot by each pass, so worked out once (reading each message's first
    /// characters again was a cache miss per message per pass: 7% of a 10k `compact()`).
    summary: bool,
}

impl<'a> AsRef<Message<'a>> for Slot<'a> {
    fn as_ref(&self) -> &Message<'a> {
        &self.view
    }
}

impl<'a> Slot<'a> {
    /// Input message `i`, unchanged.
    pub fn keep(conv: &Conversation<'a>, i: usize, tokens: usize, pinned: bool) -> Self {
        let view = conv.messages[i].clone();
        Slot {
            out: OutMsg::Keep(i),
            summary: starts_with_summary(&view),
            view,
            tokens,
            pinned,
        }
    }

    /// A slot built from `out`, counted with `counter`.
    pub fn build(
        conv: &Conversation<'a>,
        out: OutMsg,
        framing: Framing,
        counter: &dyn Count,
    ) -> Self {
        let view = view_of(conv, &out);
        let tokens = tokens_of(&view, framing, counter);
        Slot {
            out,
            summary: starts_with_summary(&view),
            view,
            tokens,
            pinned: false,
        }
    }

    /// Index of the input message this slot comes from.
    pub fn source(&self) -> Option<usize> {
        self.out.source()
    }

    /// Make the slot a `Rebuild` (if it is a `Keep`) so blocks can be edited.
    fn rebuildable(&mut self) -> Option<&mut Vec<OutBlock>> {
        if let OutMsg::Keep(i) = self.out {
            let blocks = (0..self.view.blocks.len())
                .map(|k| OutBlock::Orig {
                    msg: i,
                    block: k,
                    edit: None,
                })
                .collect();
            self.out = OutMsg::Rebuild { from: i, blocks };
        }
        match &mut self.out {
            OutMsg::Rebuild { blocks, .. } => Some(blocks),
            _ => None,
        }
    }

    /// Replace the text of block `k` (a result's content, a call's arguments, a text). An image
    /// block becomes a text block. Returns false for blocks of new messages (never edited).
    pub fn edit_block(
        &mut self,
        k: usize,
        text: String,
        framing: Framing,
        counter: &dyn Count,
    ) -> bool {
        let old = block_tokens(&self.view.blocks[k], framing, counter);
        let new = counter.count(Text::Utf8(&text));
        self.edit_block_counted(k, text, old, new)
    }

    /// [`Slot::edit_block`] when the caller already counted the block's tokens before (`old`,
    /// texts and images) and the new text's (`new`): the message is not counted again.
    pub fn edit_block_counted(&mut self, k: usize, text: String, old: usize, new: usize) -> bool {
        if self.view.blocks[k].opaque || self.view.blocks[k].signed {
            return false;
        }
        let Some(blocks) = self.rebuildable() else {
            return false;
        };
        let OutBlock::Orig { edit, .. } = &mut blocks[k] else {
            return false;
        };
        *edit = Some(text.clone());
        let b = &mut self.view.blocks_mut()[k];
        if b.kind == BlockKind::Image {
            b.kind = BlockKind::Text;
        }
        b.images = 0;
        b.image_sizes.clear();
        b.texts = vec![Piece::Owned(text)];
        self.tokens = (self.tokens + new).saturating_sub(old);
        self.summary = starts_with_summary(&self.view);
        true
    }

    /// Pinned or a system/developer message: kept where it is and as it is by every step
    /// (never summarised, dropped or edited).
    /// A provider's compaction item is an earlier summary: fixed too (DESIGN, "Provider
    /// compaction output").
    pub fn is_fixed(&self) -> bool {
        self.pinned
            || self.view.role.is_instruction()
            || crate::formats::responses::is_compaction(&self.view)
    }

    /// Whether the slot is an earlier compaction's summary message.
    pub fn is_summary(&self) -> bool {
        self.summary
    }

    /// Where the output message comes from.
    pub fn origin(&self) -> Origin {
        match &self.out {
            OutMsg::Keep(i) => Origin::Kept(*i),
            OutMsg::Rebuild { from, .. } => Origin::Edited(*from),
            OutMsg::New { .. } if self.is_summary() => Origin::Summary,
            OutMsg::New { .. } => Origin::Inserted,
        }
    }

    /// Drop block `k`. Returns false when it cannot be dropped.
    pub fn drop_block(&mut self, k: usize, framing: Framing, counter: &dyn Count) -> bool {
        if self.view.blocks[k].opaque || self.view.blocks[k].signed {
            return false;
        }
        let Some(blocks) = self.rebuildable() else {
            return false;
        };
        blocks.remove(k);
        self.view.blocks_mut().remove(k);
        self.view.empty = self.view.blocks.is_empty();
        self.tokens = tokens_of(&self.view, framing, counter);
        self.summary = starts_with_summary(&self.view);
        true
    }
}

/// Whether a message's first text starts with the summary marker (`is_summary_text` of its
/// first characters: the marker after at most 16 characters of white space), read in place.
/// Only a role the library writes a summary in (user, system, developer) and a text block
/// count: an assistant or tool message that starts with the marker (text a model or a page it
/// read wrote) is not our summary, and its text is never read back as one.
pub fn starts_with_summary(m: &Message<'_>) -> bool {
    if !matches!(m.role, Role::User | Role::System | Role::Developer) {
        return false;
    }
    m.blocks
        .first()
        .filter(|b| b.kind == BlockKind::Text)
        .and_then(|b| b.texts.first())
        .is_some_and(|p| {
            let mut head = p
                .text()
                .chars()
                .take(super::SUMMARY_MARKER.len() + 16)
                .skip_while(|c| c.is_whitespace());
            super::SUMMARY_MARKER
                .chars()
                .all(|m| head.next() == Some(m))
        })
}

/// The view of an output message.
pub fn view_of<'a>(conv: &Conversation<'a>, out: &OutMsg) -> Message<'a> {
    match out {
        OutMsg::Keep(i) => conv.messages[*i].clone(),
        OutMsg::Rebuild { from, blocks } => {
            let mut m = Message::new(conv.messages[*from].role, blocks_view(conv, blocks));
            m.fingerprint = 0;
            m
        }
        OutMsg::New { role, blocks } => Message::new(*role, blocks_view(conv, blocks)),
    }
}

fn blocks_view<'a>(conv: &Conversation<'a>, blocks: &[OutBlock]) -> Vec<Block<'a>> {
    blocks
        .iter()
        .map(|b| match b {
            OutBlock::Orig { msg, block, edit } => {
                let mut v = conv.messages[*msg].blocks[*block].clone();
                if let Some(text) = edit {
                    if v.kind == BlockKind::Image {
                        v.kind = BlockKind::Text;
                    }
                    v.images = 0;
                    v.image_sizes.clear();
                    v.texts = vec![Piece::Owned(text.clone())];
                }
                v
            }
            OutBlock::Text(t) => {
                let mut v = Block::new(BlockKind::Text);
                v.texts.push(Piece::Owned(t.clone()));
                v
            }
            OutBlock::Result {
                id,
                name,
                text,
                is_error,
            } => {
                let mut v = Block::new(BlockKind::ToolResult);
                v.id = id.clone();
                v.name = name.clone();
                v.is_error = *is_error;
                v.texts.push(Piece::Owned(text.clone()));
                v
            }
        })
        .collect()
}

/// Total tokens of the slots.
/// The views of `slots[i]` for each `i` (for the facts and truncation summary of dropped ones).
pub(super) fn views<'a>(slots: &[Slot<'a>], idx: &[usize]) -> Vec<Message<'a>> {
    idx.iter().map(|&i| slots[i].view.clone()).collect()
}

pub fn total(slots: &[Slot<'_>]) -> usize {
    slots.iter().map(|s| s.tokens).sum()
}

/// Whether the role speaks for the user side (for strict alternation).
pub fn is_user_side(m: &Message<'_>) -> bool {
    m.role != Role::Assistant && !m.role.is_instruction()
}

//! Counting whole messages: what each block adds to the prompt.
//!
//! Design note: providers do not publish their chat framing exactly, so the rule is the one
//! OpenAI documents for Chat Completions (a few tokens per message for the role and
//! separators, `message_overhead_tokens`, default 4) applied to both formats, plus the
//! counted text of each block: text, refusals, thinking, tool-call names and JSON arguments,
//! tool-result content, every string of an unknown block; images whose size the boundary read
//! from their base64 data by their provider's formula ([`crate::image`]); other images, audio
//! and opaque documents at `image_tokens` each (their size is not in the message). Tool
//! definitions count their
//! compact JSON. One rule lives here, and a Python callable counter plugs in through
//! [`message_count_with`]: the fixed part is computed here, the callable counts the texts.

use crate::message::{BlockKind, Conversation, Message, Piece};
use crate::text::Text;
use crate::tokens::estimate::estimate;
use crate::tokens::exact::{self, Encoding};
use std::convert::Infallible;

/// Tokens a tool call adds beyond its name and arguments (framing of the call object).
pub const CALL_OVERHEAD_TOKENS: usize = 3;
/// Tokens a tool definition adds beyond its JSON.
pub const TOOL_DEF_OVERHEAD_TOKENS: usize = 3;

/// A built-in text counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tokenizer {
    /// The fast estimate that errs high.
    Approx,
    /// Exact BPE.
    Exact(Encoding),
}

impl Tokenizer {
    pub fn parse(name: &str) -> Option<Tokenizer> {
        match name {
            "approx" => Some(Tokenizer::Approx),
            other => Encoding::parse(other).map(Tokenizer::Exact),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Approx => "approx",
            Tokenizer::Exact(e) => e.name(),
        }
    }

    pub fn count(self, text: Text<'_>) -> usize {
        match self {
            Tokenizer::Approx => estimate(text),
            Tokenizer::Exact(e) => exact::count(e, &text.to_utf8()),
        }
    }
}

/// The framing parameters of the count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    pub message_overhead_tokens: usize,
    pub image_tokens: usize,
    /// Whose formula counts the images of known size (`image_model`).
    pub image_model: crate::image::ImageModel,
}

impl Default for Framing {
    fn default() -> Self {
        Framing {
            message_overhead_tokens: 4,
            image_tokens: 1600,
            image_model: crate::image::ImageModel::Highest,
        }
    }
}

/// Tokens of a block's images: each image of known size by its provider's formula
/// ([`crate::image`]), the others at `image_tokens`.
pub fn block_images_tokens(b: &crate::message::Block<'_>, framing: Framing) -> usize {
    if b.images == 0 {
        return 0;
    }
    crate::image::images_tokens(
        b.images,
        &b.image_sizes,
        framing.image_model,
        framing.image_tokens,
    )
}

/// Tokens of one message, the one rule: the fixed framing (message overhead, images, call
/// overhead) plus `count` of each counted text, block by block (a call's name, then its
/// arguments). `count` may fail (a Python callable counter), which stops the count.
pub fn message_count_with<E>(
    m: &Message<'_>,
    framing: Framing,
    mut count: impl FnMut(Text<'_>) -> Result<usize, E>,
) -> Result<usize, E> {
    let mut n = framing.message_overhead_tokens;
    for b in m.blocks.iter() {
        n += block_count_with(b, framing, &mut count)?;
    }
    Ok(n)
}

/// Tokens one block adds to its message: its images, a call's framing and tool name, and `count`
/// of each of its texts. A message's count is `message_overhead_tokens` plus the sum over its
/// blocks (`crate::inspect` reports the parts).
pub fn block_count_with<E>(
    b: &crate::message::Block<'_>,
    framing: Framing,
    mut count: impl FnMut(Text<'_>) -> Result<usize, E>,
) -> Result<usize, E> {
    let mut n = block_images_tokens(b, framing);
    if b.kind == BlockKind::ToolCall {
        n += CALL_OVERHEAD_TOKENS;
        if let Some(name) = b.name.as_deref() {
            n += count(Text::Utf8(name))?;
        }
    }
    for p in &b.texts {
        n += count(p.text())?;
    }
    Ok(n)
}

/// Tokens of one message with a built-in tokenizer.
pub fn message_tokens(tok: Tokenizer, m: &Message<'_>, framing: Framing) -> usize {
    let counted = message_count_with(m, framing, |t| Ok::<_, Infallible>(tok.count(t)));
    match counted {
        Ok(n) => n,
        Err(never) => match never {},
    }
}

/// Tokens of the separate system prompt (0 when there is none).
pub fn system_tokens(tok: Tokenizer, system: &[Piece<'_>], framing: Framing) -> usize {
    if system.is_empty() {
        return 0;
    }
    framing.message_overhead_tokens + system.iter().map(|p| tok.count(p.text())).sum::<usize>()
}

/// Tokens of the tool definitions.
pub fn tools_tokens(tok: Tokenizer, tools: &[Piece<'_>]) -> usize {
    tools
        .iter()
        .map(|p| TOOL_DEF_OVERHEAD_TOKENS + tok.count(p.text()))
        .sum()
}

/// The count of a whole request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: Vec<usize>,
    pub system: usize,
    pub tools: usize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.messages.iter().sum::<usize>() + self.system + self.tools
    }
}

/// Count every part of a request.
pub fn count_conversation(tok: Tokenizer, conv: &Conversation<'_>, framing: Framing) -> Counts {
    Counts {
        messages: conv
            .messages
            .iter()
            .map(|m| message_tokens(tok, m, framing))
            .collect(),
        system: system_tokens(tok, &conv.system, framing),
        tools: tools_tokens(tok, &conv.tools),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Format, Role};

    #[test]
    fn message_framing() {
        let f = Framing::default();
        let tok = Tokenizer::Approx;
        let empty = Message::new(Role::Assistant, vec![]);
        assert_eq!(message_tokens(tok, &empty, f), 4);
        let mut img = Block::new(BlockKind::Image);
        img.images = 1;
        let m = Message::new(Role::User, vec![img]);
        assert_eq!(message_tokens(tok, &m, f), 4 + 1600);
        let call = Message::new(
            Role::Assistant,
            vec![Block::tool_call(Some("a"), "bash", "{\"cmd\": \"ls\"}")],
        );
        let expected = 4
            + CALL_OVERHEAD_TOKENS
            + estimate(Text::Utf8("bash"))
            + estimate(Text::Utf8("{\"cmd\": \"ls\"}"));
        assert_eq!(message_tokens(tok, &call, f), expected);
    }

    #[test]
    fn conversation_total() {
        let mut conv = Conversation::new(
            Format::Anthropic,
            vec![Message::text(Role::User, "hello there")],
        );
        conv.system.push(Piece::from("be brief"));
        conv.tools.push(Piece::Owned("{\"name\":\"bash\"}".into()));
        let c = count_conversation(Tokenizer::Approx, &conv, Framing::default());
        assert_eq!(c.messages.len(), 1);
        assert!(c.system > 4 && c.tools > 3);
        assert_eq!(c.total(), c.messages[0] + c.system + c.tools);
    }
}

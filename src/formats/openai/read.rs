//! Reading a message with a role into the core's view, once for both readers (generic over
//! [`Source`]: the Rust API's JSON values and the binding's Python objects, dicts or the
//! `openai` / `anthropic` SDKs' objects read by attribute).
//!
//! Design note: this reads every message that has a `role` — Chat Completions, Anthropic and a
//! Responses `message` item — which differ only in their content (a string or a list of parts
//! or blocks, read by `crate::formats::blocks`). What only Chat
//! Completions has is read here: `tool` / `function` messages (one tool result), an assistant's
//! `refusal`, `tool_calls` (`function` calls carry `arguments`, `custom` ones `input`) and the
//! legacy `function_call`. Calls are read on every role so that validation can report
//! misplaced ones. A message without a role is an error naming `role`, unless the source reads
//! it another way ([`Source::roleless`]: the binding's framework objects). A message with
//! `input_*` / `output_*` parts gives the Responses hint, kept on the message alone
//! (`Message::responses`).

use crate::formats::blocks;
use crate::formats::loc::Loc;
use crate::formats::source::{list, opt_string, text, Source};
use crate::message::{Block, BlockKind, Message, Origin, Piece, Role};

/// Read message `index`, a message with a role (see the design note).
pub fn message<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    index: usize,
) -> Result<Message<'a>, S::Error> {
    let saw_responses = std::mem::take(&mut src.hints().responses);
    let m = chat_message(src, obj, index);
    let hints = src.hints();
    let mine = std::mem::replace(&mut hints.responses, saw_responses);
    hints.responses |= mine;
    let mut m = m?;
    m.responses = mine;
    Ok(m)
}

fn chat_message<'a, S: Source<'a>>(
    src: &mut S,
    obj: &S::Obj,
    index: usize,
) -> Result<Message<'a>, S::Error> {
    let loc = Loc::root(Some(index), "");
    let role = match src.field(obj, "role", &loc)? {
        Some(r) => Role::parse(&text(src, &r, &loc.child("role"))?.to_utf8()),
        None => {
            if let Some(m) = src.roleless(obj, index)? {
                return Ok(m);
            }
            return Err(src.error(&loc.child("role"), "missing role"));
        }
    };
    if matches!(
        role,
        Role::Tool | Role::Function | Role::System | Role::Developer
    ) {
        src.hints().openai = true;
    }
    let mut blocks = Vec::new();
    let content = src.field(obj, "content", &loc)?;
    let mut empty = match &content {
        None => true,
        Some(c) => src.len_is_zero(c),
    };
    match role {
        Role::Tool | Role::Function => {
            let mut b = Block::new(BlockKind::ToolResult);
            b.origin = Origin::Whole;
            if role == Role::Tool {
                b.id = opt_string(src, obj, "tool_call_id", &loc)?;
            } else {
                b.name = opt_string(src, obj, "name", &loc)?;
            }
            if let Some(c) = &content {
                blocks::result_content(src, c, &mut b, &loc.child("content"))?;
            }
            blocks.push(b);
        }
        _ => {
            if let Some(c) = &content {
                blocks::content(src, c, &mut blocks, &loc.child("content"))?;
            }
        }
    }
    if role == Role::Assistant {
        if let Some(r) = src.field(obj, "refusal", &loc)? {
            let t = text(src, &r, &loc.child("refusal"))?;
            let mut b = Block::new(BlockKind::Refusal);
            b.origin = Origin::Refusal;
            b.texts.push(Piece::Borrowed(t));
            blocks.push(b);
            empty = false;
        }
    }
    // Calls are read on every role so that validation can report misplaced ones.
    if let Some(calls) = src.field(obj, "tool_calls", &loc)? {
        let loc = loc.child("tool_calls");
        let items = list(src, &calls, &loc)?;
        if !items.is_empty() {
            src.hints().openai = true;
            empty = false;
        }
        blocks.reserve(items.len());
        for (k, call) in items.iter().enumerate() {
            let mut b = tool_call(src, call, &loc.item(k))?;
            b.origin = Origin::Call(k);
            blocks.push(b);
        }
    }
    if let Some(fc) = src.field(obj, "function_call", &loc)? {
        src.hints().openai = true;
        empty = false;
        let loc = loc.child("function_call");
        let f = src.object(&fc, &loc)?;
        let mut b = Block::new(BlockKind::ToolCall);
        b.origin = Origin::FunctionCall;
        b.name = opt_string(src, &f, "name", &loc)?;
        if let Some(a) = src.field(&f, "arguments", &loc)? {
            let t = text(src, &a, &loc.child("arguments"))?;
            b.texts.push(Piece::Borrowed(t));
        }
        blocks.push(b);
    }
    let mut m = Message::new(role, blocks);
    m.empty = empty && m.blocks.iter().all(|b| b.kind != BlockKind::ToolCall);
    src.read_done(obj, &mut m);
    Ok(m)
}

/// A `tool_calls[k]` entry (`function` calls carry `arguments`, `custom` ones `input`).
fn tool_call<'a, S: Source<'a>>(
    src: &mut S,
    call: &S::Node,
    loc: &Loc<'_>,
) -> Result<Block<'a>, S::Error> {
    let obj = src.object(call, loc)?;
    let mut b = Block::new(BlockKind::ToolCall);
    b.id = opt_string(src, &obj, "id", loc)?;
    let (fname, akey, f) = match src.field(&obj, "function", loc)? {
        Some(f) => ("function", "arguments", f),
        None => match src.field(&obj, "custom", loc)? {
            Some(c) => ("custom", "input", c),
            None => return Err(src.error(&loc.child("function"), "missing function")),
        },
    };
    let floc = loc.child(fname);
    let f = src.object(&f, &floc)?;
    b.name = opt_string(src, &f, "name", &floc)?;
    if let Some(a) = src.field(&f, akey, &floc)? {
        let t = text(src, &a, &floc.child(akey))?;
        b.texts.push(Piece::Borrowed(t));
    }
    Ok(b)
}

//! The parts of reading that every format shares around the blocks themselves: a block without
//! `type`, a tool result's content, and the request's separate system prompt and tools.

use super::access::Access;
use super::loc::{Loc, LocErr};
use super::{Extractor, MAX_DEPTH};
use crate::message::{Block, BlockKind, Piece};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

impl<'py> Extractor<'py> {
    /// A content block without `type`: a text block when it has a string `text` (the repair
    /// pass adds the type), else an unknown block; both marked malformed.
    pub(super) fn untyped_block(
        &mut self,
        part: &Bound<'py, PyAny>,
        acc: &Access<'_, 'py>,
        loc: &Loc<'_>,
    ) -> PyResult<Block<'static>> {
        let text = acc
            .get(intern!(self.py, "text"), loc)?
            .filter(|v| v.is_instance_of::<PyString>());
        let mut b = match text {
            Some(v) => {
                let mut b = Block::new(BlockKind::Text);
                b.texts
                    .push(Piece::Borrowed(self.text(&v, &loc.child("text"))?));
                b
            }
            None => {
                let mut b = Block::new(BlockKind::Other);
                self.strings(part, &mut b.texts, loc, 0)?;
                b
            }
        };
        b.malformed = Some("type");
        Ok(b)
    }

    /// A tool result's content: a string, or text/image blocks.
    pub(super) fn result_content(
        &mut self,
        c: &Bound<'py, PyAny>,
        b: &mut Block<'static>,
        loc: &Loc<'_>,
    ) -> PyResult<()> {
        // A tool result may hold blocks, which may hold tool results: bound the nesting (a
        // self-containing block would otherwise recurse until the stack overflows).
        if self.result_depth >= MAX_DEPTH {
            return Err(loc.err(self.py, "tool results nested too deeply (or cyclic)"));
        }
        self.result_depth += 1;
        let mut inner = Vec::new();
        let r = self.content(c, &mut inner, loc);
        self.result_depth -= 1;
        r?;
        for ib in inner {
            b.images += ib.images;
            b.image_sizes.extend(ib.image_sizes);
            b.texts.extend(ib.texts);
        }
        Ok(())
    }

    /// The separate system prompt: a string, or a list of text blocks.
    pub fn system(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Vec<Piece<'static>>> {
        let loc = Loc::root(None, "system");
        let mut blocks = Vec::new();
        self.content(v, &mut blocks, &loc)?;
        Ok(blocks.into_iter().flat_map(|b| b.texts).collect())
    }

    /// Tool definitions, each as compact JSON.
    pub fn tools(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Vec<Piece<'static>>> {
        let loc = Loc::root(None, "tools");
        let mut out = Vec::new();
        for (k, t) in self.sequence(v, &loc)?.iter().enumerate() {
            let mut json = String::new();
            self.json(t, &mut json, &loc.item(k), 0)?;
            out.push(Piece::Owned(json));
        }
        Ok(out)
    }
}

//! Image blocks of every wire format, read in one place: OpenAI `image_url` (Chat Completions),
//! `input_image` (Responses) and Anthropic `image` blocks. An image whose bytes are in the block
//! (a base64 data URL, or an Anthropic `source` of type `base64`) gets its size from its header
//! ([`crate::image`]); one given by URL or file id has no size and counts `image_tokens`.
//! Reading the size never fails a request: an odd field is an image of unknown size.

use super::access::Access;
use super::loc::Loc;
use super::Extractor;
use crate::image::{sized, Provider, SizedImage};
use crate::message::{Block, BlockKind};
use crate::python::image::{base64_size, url_size};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

impl<'py> Extractor<'py> {
    /// An image block of type `ty`, with its size when its data is in the block.
    pub(super) fn image_block(
        &mut self,
        acc: &Access<'_, 'py>,
        ty: &str,
        loc: &Loc<'_>,
    ) -> Block<'static> {
        let mut b = Block::new(BlockKind::Image);
        b.image_sizes.extend(self.image_of(acc, ty, loc));
        b
    }

    fn image_of(&self, acc: &Access<'_, 'py>, ty: &str, loc: &Loc<'_>) -> Option<SizedImage> {
        let py = self.py;
        let get = |a: &Access<'_, 'py>, key: &Bound<'py, PyString>| a.get(key, loc).ok().flatten();
        let detail = |a: &Access<'_, 'py>| {
            get(a, intern!(py, "detail")).and_then(|d| d.extract::<String>().ok())
        };
        match ty {
            "image_url" => {
                let v = get(acc, intern!(py, "image_url"))?;
                if v.is_instance_of::<PyString>() {
                    return sized(url_size(&v), None, Provider::OpenAi);
                }
                let inner = Access::of(&v, loc).ok()?;
                let url = get(&inner, intern!(py, "url"))?;
                sized(url_size(&url), detail(&inner).as_deref(), Provider::OpenAi)
            }
            "input_image" => {
                let url = get(acc, intern!(py, "image_url"))?;
                sized(url_size(&url), detail(acc).as_deref(), Provider::OpenAi)
            }
            "image" => {
                let source = get(acc, intern!(py, "source"))?;
                let inner = Access::of(&source, loc).ok()?;
                let kind = get(&inner, intern!(py, "type"))?;
                if kind.extract::<&str>().ok()? != "base64" {
                    return None;
                }
                let data = get(&inner, intern!(py, "data"))?;
                sized(base64_size(&data), None, Provider::Anthropic)
            }
            _ => None,
        }
    }
}

//! Images at the boundary: the size of an image block read from its base64 data (one place for
//! every wire format's image blocks), `image_model` parsing, and `image_size` /
//! `image_tokens` for Python (the table of docs/tokens.md and the tests use them).

use super::errors::config_error;
use super::text::borrow_text;
use crate::image::{
    base64_image_size, data_url_size, image_tokens as formula_tokens, Detail, ImageModel,
    ImageSize, Provider, SizedImage,
};
use crate::text::Text;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The image model of an `image_model=` value (`None` ⇒ the highest documented count).
pub fn parse_image_model(py: Python<'_>, name: Option<&str>) -> PyResult<ImageModel> {
    crate::config::validate::image_model(name).map_err(|e| super::errors::config_error_of(py, &e))
}

/// The bytes of an ASCII string, read in place (base64 is ASCII; anything else has no size).
fn with_ascii<R>(s: &Bound<'_, PyString>, f: impl FnOnce(&[u8]) -> Option<R>) -> Option<R> {
    // SAFETY: `s` is alive for the whole call and the bytes are not kept.
    let t = unsafe { borrow_text(s) }.ok()?;
    match t {
        Text::Utf8(u) => f(u.as_bytes()),
        Text::Latin1(b) => f(b),
        Text::Ucs2(_) | Text::Ucs4(_) => None,
    }
}

/// The size of the image in a data URL string.
pub fn url_size(url: &Bound<'_, PyAny>) -> Option<ImageSize> {
    let s = url.cast::<PyString>().ok()?;
    with_ascii(s, data_url_size)
}

/// The size of a bare base64 string (Anthropic's `source.data`).
pub fn base64_size(data: &Bound<'_, PyAny>) -> Option<ImageSize> {
    let s = data.cast::<PyString>().ok()?;
    with_ascii(s, base64_image_size)
}

/// Width and height of an image given as a base64 data URL or bare base64 text, read from its
/// header (PNG, JPEG, GIF, WebP); ``None`` when it cannot be read.
#[pyfunction]
pub fn image_size(data: &Bound<'_, PyString>) -> Option<(u32, u32)> {
    with_ascii(data, |b| data_url_size(b).or_else(|| base64_image_size(b)))
        .map(|s| (s.width, s.height))
}

/// Tokens of one image of `width` × `height` pixels by the provider's documented formula:
/// `model` (an OpenAI, Claude or Gemini model name) or, with ``None``, the highest documented
/// count for `provider` (``"openai"``, ``"anthropic"`` or ``"gemini"``); `detail` is OpenAI's.
#[pyfunction]
#[pyo3(signature = (width, height, *, model=None, detail=None, provider="openai"))]
pub fn image_tokens(
    py: Python<'_>,
    width: u32,
    height: u32,
    model: Option<&str>,
    detail: Option<&str>,
    provider: &str,
) -> PyResult<usize> {
    let model = parse_image_model(py, model)?;
    let provider = match provider {
        "openai" | "responses" => Provider::OpenAi,
        "anthropic" => Provider::Anthropic,
        "gemini" => Provider::Gemini,
        other => {
            return Err(config_error(
                py,
                "provider",
                &format!(
                    "unknown provider {other:?}; expected \"openai\", \"anthropic\" or \"gemini\""
                ),
            ))
        }
    };
    if width == 0 || height == 0 {
        return Err(config_error(py, "width", "width and height must be > 0"));
    }
    let img = SizedImage {
        size: ImageSize { width, height },
        detail: detail.map_or(Detail::Auto, Detail::parse),
        provider,
    };
    Ok(formula_tokens(&img, model))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(image_size, m)?)?;
    m.add_function(wrap_pyfunction!(image_tokens, m)?)?;
    Ok(())
}

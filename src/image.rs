//! Images counted as the provider bills them: the pixel size read from the header of a base64
//! image (PNG, JPEG, GIF, WebP), and each provider's documented formula with its resizing rules.
//! Over 600 lines (about 660, its tests in `image/tests.rs`): the header reader and the formulas
//! meet in one `image_tokens`, and the design note below documents both.
//!
//! Design note.
//!
//! * **Only the header is decoded.** A data URL's base64 text is read in place and decoded by
//!   random access (byte `i` lives in the 4-character group `i / 3`), so a PNG, GIF or WebP
//!   costs one or two groups, and a JPEG only the two-byte length of each segment before its
//!   start-of-frame marker (EXIF and ICC segments are skipped, never decoded). No pixel is
//!   decoded and no dependency is added. The format comes from the magic bytes, not from the
//!   declared media type. A header that cannot be read (SVG, a truncated or invalid payload, a
//!   base64 text broken into lines) gives no size, and the image is counted at
//!   `image_tokens`, as are images given by URL or file id.
//! * **The formulas**, as each provider documents them (read 2026-11; tests pin the documents'
//!   own examples):
//!   - OpenAI, <https://developers.openai.com/api/docs/guides/images-vision> ("Model sizing
//!     behavior", "Patch-based image tokenization", "Tile-based image tokenization"). Tile
//!     models (`gpt-5.1`, `gpt-5`, `gpt-4o`, `gpt-4.1`, `gpt-4o-mini`, `o1`, `o3`):
//!     `detail: "low"` costs the base tokens; otherwise the image is fitted in 2048×2048, its
//!     shortest side scaled down to 768 (the other rounded down), and each 512 px tile costs
//!     the tile tokens, plus the base. Patch models: the image is fitted in the detail level's
//!     pixel limit, then, when the level has a patch budget and the image's 32 px patches
//!     exceed it, shrunk by the document's two-step factor; the patches are multiplied by the
//!     model's multiplier and rounded up. Limits per family and detail: `gpt-5.6-*` low 512 px,
//!     high 2048 px + 2,500 patches, original/auto 65,535 px and no budget; `gpt-5.5` low 512,
//!     high 2048 + 2,500, original/auto 6000 + 10,000; `gpt-5.4*` low 2048 + 6,144, high/auto
//!     2048 + 2,500, original 6000 + 10,000; `gpt-5.2` and `gpt-4.1-mini` 2048 + 6,144 at every
//!     level; the deprecated `gpt-5-mini`, `gpt-5-nano`, `gpt-4.1-nano` and `o4-mini` a 1,536
//!     patch budget (the guide's earlier version), detail ignored. Multipliers 1.2 (`gpt-5.2`
//!     and later, `gpt-5-mini`), 1.5 (`gpt-5-nano`), 1.62 (`gpt-4.1-mini`), 2.46
//!     (`gpt-4.1-nano`), 1.72 (`o4-mini`).
//!   - Anthropic, <https://platform.claude.com/docs/en/build-with-claude/vision> ("Evaluate
//!     image size", "How Claude resizes and pads images"): an image costs
//!     `⌈w/28⌉·⌈h/28⌉` visual tokens after it is resized to the largest aspect-preserving size
//!     whose padded sides fit the edge limit and whose tokens fit the token limit (1568 px and
//!     1568 tokens; 2576 px and 4784 tokens for Claude Opus 4.7, Opus 4.8, Fable 5, Mythos 5 and
//!     later). The resize is the document's reference search, rounding as Python's `round`.
//!     (The older `w·h/750` rule is the same count within a few percent.)
//!   - Gemini, <https://ai.google.dev/gemini-api/docs/tokens> ("Count multimodal tokens"): 258
//!     tokens when both sides are at most 384 px, else 258 per 768×768 tile.
//! * **`image_model`** names the model whose formula applies to every image (the model bills,
//!   whatever wire format carried the image). Unset, each image counts the highest documented
//!   count for its block's provider: the maximum over the OpenAI models above for an OpenAI
//!   block (at its `detail`), the high-resolution Claude limits for an Anthropic block, the
//!   Gemini rule for a Gemini part. One exception: `gpt-4o-mini`'s counts (2,833 + 5,667 per
//!   tile, 33 times gpt-4o's: a 1024×1024 image is 25,501 tokens) price its images like
//!   gpt-4o's at its lower token price; taking them as the default would count one screenshot
//!   as a fifth of a 128k window, so they apply only when `image_model="gpt-4o-mini"`.

/// An image's size in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImageSize {
    pub width: u32,
    pub height: u32,
}

/// The `detail` an OpenAI image part asks for (`auto` when absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Detail {
    #[default]
    Auto,
    Low,
    High,
    Original,
}

impl Detail {
    pub fn parse(s: &str) -> Detail {
        match s {
            "low" => Detail::Low,
            "high" => Detail::High,
            "original" => Detail::Original,
            _ => Detail::Auto,
        }
    }
}

/// Whose wire block carried the image: its formula applies when no model is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    OpenAi,
    Anthropic,
    Gemini,
}

/// An image of a block whose size is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SizedImage {
    pub size: ImageSize,
    pub detail: Detail,
    pub provider: Provider,
}

/// An image of known size from a wire block's fields (`detail` as the block gives it), for
/// both readers.
pub fn sized(
    size: Option<ImageSize>,
    detail: Option<&str>,
    provider: Provider,
) -> Option<SizedImage> {
    size.map(|size| SizedImage {
        size,
        detail: detail.map_or(Detail::Auto, Detail::parse),
        provider,
    })
}

/// How a patch model sizes an image at each detail level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatchFamily {
    /// `gpt-5.6-sol`, `-terra`, `-luna`.
    Gpt56,
    /// `gpt-5.5`.
    Gpt55,
    /// `gpt-5.4`, `-mini`, `-nano`.
    Gpt54,
    /// `gpt-5.2`, `gpt-4.1-mini`: 2048 px and 6,144 patches at every level.
    Flat6144,
    /// The deprecated `gpt-5-mini`, `gpt-5-nano`, `gpt-4.1-nano`, `o4-mini`: 1,536 patches.
    Legacy1536,
}

/// The OpenAI formula of a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpenAiFormula {
    Tiles { base: u32, tile: u32 },
    Patches { family: PatchFamily, percent: u32 },
}

/// The model whose formula counts images (`image_model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ImageModel {
    /// Unset: the highest documented count for the image's provider.
    #[default]
    Highest,
    OpenAi(OpenAiFormula),
    /// Claude: the edge and visual-token limits.
    Anthropic {
        max_edge: u32,
        max_tokens: u32,
    },
    Gemini,
}

const CLAUDE_STANDARD: ImageModel = ImageModel::Anthropic {
    max_edge: 1568,
    max_tokens: 1568,
};
const CLAUDE_HIGH_RES: ImageModel = ImageModel::Anthropic {
    max_edge: 2576,
    max_tokens: 4784,
};

/// OpenAI model names (prefixes, the longest first among those sharing a start) and formulas.
const OPENAI_MODELS: &[(&str, OpenAiFormula)] = {
    use OpenAiFormula::{Patches, Tiles};
    use PatchFamily::*;
    &[
        (
            "gpt-5.6",
            Patches {
                family: Gpt56,
                percent: 120,
            },
        ),
        (
            "gpt-5.5",
            Patches {
                family: Gpt55,
                percent: 120,
            },
        ),
        (
            "gpt-5.4",
            Patches {
                family: Gpt54,
                percent: 120,
            },
        ),
        (
            "gpt-5.2",
            Patches {
                family: Flat6144,
                percent: 120,
            },
        ),
        (
            "gpt-5.1",
            Tiles {
                base: 70,
                tile: 140,
            },
        ),
        (
            "gpt-5-mini",
            Patches {
                family: Legacy1536,
                percent: 120,
            },
        ),
        (
            "gpt-5-nano",
            Patches {
                family: Legacy1536,
                percent: 150,
            },
        ),
        (
            "gpt-5",
            Tiles {
                base: 70,
                tile: 140,
            },
        ),
        (
            "gpt-4.1-mini",
            Patches {
                family: Flat6144,
                percent: 162,
            },
        ),
        (
            "gpt-4.1-nano",
            Patches {
                family: Legacy1536,
                percent: 246,
            },
        ),
        (
            "gpt-4.1",
            Tiles {
                base: 85,
                tile: 170,
            },
        ),
        (
            "gpt-4.5",
            Tiles {
                base: 85,
                tile: 170,
            },
        ),
        (
            "gpt-4o-mini",
            Tiles {
                base: 2833,
                tile: 5667,
            },
        ),
        (
            "gpt-4o",
            Tiles {
                base: 85,
                tile: 170,
            },
        ),
        (
            "o4-mini",
            Patches {
                family: Legacy1536,
                percent: 172,
            },
        ),
        (
            "o1",
            Tiles {
                base: 75,
                tile: 150,
            },
        ),
        (
            "o3",
            Tiles {
                base: 75,
                tile: 150,
            },
        ),
        (
            "computer-use-preview",
            Tiles {
                base: 65,
                tile: 129,
            },
        ),
    ]
};

impl ImageModel {
    /// The formula of a model name (`gpt-4o-2024-08-06`, `openai/gpt-5.4-mini`,
    /// `claude-opus-4-8`, `gemini-3-pro`), or `None` for a model no document covers.
    pub fn parse(name: &str) -> Option<ImageModel> {
        let lower = name.trim().to_ascii_lowercase();
        let name = lower.rsplit('/').next().unwrap_or(&lower);
        for (prefix, f) in OPENAI_MODELS {
            if let Some(rest) = name.strip_prefix(prefix) {
                // `gpt-5` must not take `gpt-5x`; `gpt-5.4` takes `gpt-5.4-mini-2026-01-01`.
                if rest.is_empty() || rest.starts_with('-') {
                    return Some(ImageModel::OpenAi(*f));
                }
            }
        }
        if let Some(rest) = name.strip_prefix("claude-") {
            return Some(if claude_high_res(rest) {
                CLAUDE_HIGH_RES
            } else {
                CLAUDE_STANDARD
            });
        }
        if name.starts_with("gemini-") {
            return Some(ImageModel::Gemini);
        }
        None
    }
}

/// Whether a Claude model (name after `claude-`) has the high-resolution limits: Opus 4.7 and
/// later Opus 4.x, and every model of generation 5 or later (Fable 5, Mythos 5, ...).
fn claude_high_res(rest: &str) -> bool {
    let mut family = "";
    let mut nums = Vec::new();
    for part in rest.split('-') {
        match part.parse::<u32>() {
            // A date suffix (20250514) is not a version.
            Ok(n) if n < 100 => nums.push(n),
            Ok(_) => {}
            Err(_) if nums.is_empty() => family = part,
            Err(_) => {}
        }
    }
    match (nums.first(), nums.get(1)) {
        (Some(&major), _) if major >= 5 => true,
        (Some(4), Some(&minor)) => family == "opus" && minor >= 7,
        _ => false,
    }
}

/// Tokens of the images of a block: `images` images, of which `sized` (in order) have a known
/// size; the others count `fallback` (`image_tokens`) each.
pub fn images_tokens(
    images: u32,
    sized: &[SizedImage],
    model: ImageModel,
    fallback: usize,
) -> usize {
    let known = sized.len().min(images as usize);
    let mut n = (images as usize - known) * fallback;
    for img in &sized[..known] {
        n += image_tokens(img, model);
    }
    n
}

/// Tokens of one image of known size.
pub fn image_tokens(img: &SizedImage, model: ImageModel) -> usize {
    let ImageSize {
        width: w,
        height: h,
    } = img.size;
    match model {
        ImageModel::OpenAi(f) => openai_tokens(f, img.detail, w, h),
        ImageModel::Anthropic {
            max_edge,
            max_tokens,
        } => anthropic_tokens(w, h, max_edge, max_tokens),
        ImageModel::Gemini => gemini_tokens(w, h),
        ImageModel::Highest => match img.provider {
            Provider::OpenAi => OPENAI_MODELS
                .iter()
                .filter(|(name, _)| *name != "gpt-4o-mini")
                .map(|(_, f)| openai_tokens(*f, img.detail, w, h))
                .max()
                .unwrap_or(0),
            Provider::Anthropic => image_tokens(img, CLAUDE_HIGH_RES),
            Provider::Gemini => gemini_tokens(w, h),
        },
    }
}

/// `other · limit / long` rounded down (the side that is not the long one after a fit).
fn scale_down(other: u32, limit: u32, long: u32) -> u32 {
    ((u64::from(other) * u64::from(limit)) / u64::from(long)).max(1) as u32
}

/// `other · limit / long` rounded to the nearest integer.
fn scale_round(other: u32, limit: u32, long: u32) -> u32 {
    ((u64::from(other) * u64::from(limit) + u64::from(long) / 2) / u64::from(long)).max(1) as u32
}

/// `(w, h)` fitted in a `limit`×`limit` square, never enlarged; `round` rounds the short side
/// to the nearest pixel, else down.
fn fit_square(w: u32, h: u32, limit: u32, round: bool) -> (u32, u32) {
    let long = w.max(h);
    if long <= limit {
        return (w, h);
    }
    let f = if round { scale_round } else { scale_down };
    if w >= h {
        (limit, f(h, limit, w))
    } else {
        (f(w, limit, h), limit)
    }
}

fn ceil_div(a: u32, b: u32) -> u64 {
    u64::from(a.div_ceil(b))
}

fn openai_tokens(f: OpenAiFormula, detail: Detail, w: u32, h: u32) -> usize {
    match f {
        OpenAiFormula::Tiles { base, tile } => {
            if detail == Detail::Low {
                return base as usize;
            }
            let (mut w, mut h) = fit_square(w, h, 2048, false);
            let short = w.min(h);
            if short > 768 {
                if w <= h {
                    h = scale_down(h, 768, w);
                    w = 768;
                } else {
                    w = scale_down(w, 768, h);
                    h = 768;
                }
            }
            (u64::from(base) + u64::from(tile) * ceil_div(w, 512) * ceil_div(h, 512)) as usize
        }
        OpenAiFormula::Patches { family, percent } => {
            use PatchFamily::*;
            let (max_dim, budget) = match (family, detail) {
                (Gpt56, Detail::Low) | (Gpt55, Detail::Low) => (Some(512), None),
                (Gpt56 | Gpt55 | Gpt54, Detail::High) | (Gpt54, Detail::Auto) => {
                    (Some(2048), Some(2500))
                }
                (Gpt56, _) => (Some(65_535), None),
                (Gpt55 | Gpt54, _) => (Some(6000), Some(10_000)),
                (Flat6144, _) => (Some(2048), Some(6144)),
                (Legacy1536, _) => (None, Some(1536)),
            };
            let (w, h) = match max_dim {
                Some(m) => fit_square(w, h, m, true),
                None => (w, h),
            };
            let patches = patch_count(w, h, budget);
            (patches * u64::from(percent)).div_ceil(100) as usize
        }
    }
}

/// 32 px patches covering `w`×`h`, after the document's shrink when a budget applies and the
/// image exceeds it (steps A-C of "Patch-based image tokenization").
pub fn patch_count(w: u32, h: u32, budget: Option<u32>) -> u64 {
    let raw = ceil_div(w, 32) * ceil_div(h, 32);
    let Some(budget) = budget else { return raw };
    if raw <= u64::from(budget) {
        return raw;
    }
    let (wf, hf) = (f64::from(w), f64::from(h));
    let mut r = (32.0 * 32.0 * f64::from(budget) / (wf * hf)).sqrt();
    let (pw, ph) = (wf * r / 32.0, hf * r / 32.0);
    r *= (pw.floor() / pw).min(ph.floor() / ph);
    let rw = ((wf * r).floor() as u32).max(1);
    let rh = ((hf * r).floor() as u32).max(1);
    (ceil_div(rw, 32) * ceil_div(rh, 32)).min(u64::from(budget))
}

/// Claude's visual tokens of an image already within its limits.
fn claude_patches(w: u32, h: u32) -> u64 {
    ceil_div(w, 28) * ceil_div(h, 28)
}

/// The size Claude resizes an image to before padding: the document's reference search (the
/// largest aspect-preserving size whose padded sides fit `max_edge` and whose visual tokens fit
/// `max_tokens`), rounding the short side as Python's `round` does (half to even).
pub fn claude_resized(w: u32, h: u32, max_edge: u32, max_tokens: u32) -> (u32, u32) {
    let fits = |w: u32, h: u32| {
        u64::from(w.div_ceil(28)) * 28 <= u64::from(max_edge)
            && u64::from(h.div_ceil(28)) * 28 <= u64::from(max_edge)
            && claude_patches(w, h) <= u64::from(max_tokens)
    };
    if fits(w, h) {
        return (w, h);
    }
    if h > w {
        let (rh, rw) = claude_resized(h, w, max_edge, max_tokens);
        return (rw, rh);
    }
    let aspect = f64::from(w) / f64::from(h);
    let other = |long: u32| ((f64::from(long) / aspect).round_ties_even() as u32).max(1);
    let (mut lo, mut hi) = (1u32, w);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if fits(mid, other(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, other(lo))
}

fn anthropic_tokens(w: u32, h: u32, max_edge: u32, max_tokens: u32) -> usize {
    let (rw, rh) = claude_resized(w, h, max_edge, max_tokens);
    claude_patches(rw, rh) as usize
}

fn gemini_tokens(w: u32, h: u32) -> usize {
    if w <= 384 && h <= 384 {
        258
    } else {
        258 * (ceil_div(w, 768) * ceil_div(h, 768)) as usize
    }
}

// -- reading the size from the header -----------------------------------------------------------

/// A base64 text read by random access: byte `i` of the decoded data is in the 4-character
/// group `i / 3`, so only the groups holding the header are decoded.
struct Base64<'a> {
    text: &'a [u8],
}

fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

impl Base64<'_> {
    /// Decoded byte `i`, or `None` past the end or on a character outside the alphabet.
    fn byte(&self, i: usize) -> Option<u8> {
        let g = i / 3 * 4;
        let group = self.text.get(g..(g + 4).min(self.text.len()))?;
        let k = i % 3;
        // Byte k of a group needs characters k and k + 1.
        let a = sextet(*group.get(k)?)?;
        let b = sextet(*group.get(k + 1)?)?;
        Some(match k {
            0 => (a << 2 | b >> 4) as u8,
            1 => ((a & 0xF) << 4 | b >> 2) as u8,
            _ => ((a & 0x3) << 6 | b) as u8,
        })
    }

    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        for (j, o) in out.iter_mut().enumerate() {
            *o = self.byte(at + j)?;
        }
        Some(out)
    }

    fn u16_be(&self, at: usize) -> Option<u32> {
        let [a, b] = self.bytes::<2>(at)?;
        Some(u32::from(a) << 8 | u32::from(b))
    }

    fn u16_le(&self, at: usize) -> Option<u32> {
        let [a, b] = self.bytes::<2>(at)?;
        Some(u32::from(b) << 8 | u32::from(a))
    }

    fn u32_be(&self, at: usize) -> Option<u32> {
        let [a, b, c, d] = self.bytes::<4>(at)?;
        Some(u32::from_be_bytes([a, b, c, d]))
    }

    fn u24_le(&self, at: usize) -> Option<u32> {
        let [a, b, c] = self.bytes::<3>(at)?;
        Some(u32::from(a) | u32::from(b) << 8 | u32::from(c) << 16)
    }
}

/// Most JPEG segments walked before the start of frame (real files have a dozen or so).
const MAX_JPEG_SEGMENTS: usize = 4096;

/// The size of a base64-encoded PNG, JPEG, GIF or WebP, read from its header.
pub fn base64_image_size(b64: &[u8]) -> Option<ImageSize> {
    let d = Base64 { text: b64 };
    let head = d.bytes::<4>(0)?;
    let size = match head {
        [0x89, b'P', b'N', b'G'] => {
            // Signature (8), IHDR length (4) and type (4), then width and height.
            if &d.bytes::<4>(12)? != b"IHDR" {
                return None;
            }
            (d.u32_be(16)?, d.u32_be(20)?)
        }
        [b'G', b'I', b'F', b'8'] => (d.u16_le(6)?, d.u16_le(8)?),
        [b'R', b'I', b'F', b'F'] => {
            if &d.bytes::<4>(8)? != b"WEBP" {
                return None;
            }
            match &d.bytes::<4>(12)? {
                b"VP8 " => {
                    // Frame header: 3 bytes, start code 9d 01 2a, then 14-bit sizes.
                    if d.bytes::<3>(23)? != [0x9d, 0x01, 0x2a] {
                        return None;
                    }
                    (d.u16_le(26)? & 0x3fff, d.u16_le(28)? & 0x3fff)
                }
                b"VP8L" => {
                    let [sig, b1, b2, b3, b4] = d.bytes::<5>(20)?;
                    if sig != 0x2f {
                        return None;
                    }
                    let (b1, b2, b3, b4) =
                        (u32::from(b1), u32::from(b2), u32::from(b3), u32::from(b4));
                    (
                        1 + ((b2 & 0x3f) << 8 | b1),
                        1 + ((b4 & 0x0f) << 10 | b3 << 2 | (b2 & 0xc0) >> 6),
                    )
                }
                b"VP8X" => (1 + d.u24_le(24)?, 1 + d.u24_le(27)?),
                _ => return None,
            }
        }
        [0xff, 0xd8, 0xff, _] => jpeg_size(&d)?,
        _ => return None,
    };
    (size.0 > 0 && size.1 > 0).then_some(ImageSize {
        width: size.0,
        height: size.1,
    })
}

/// Walk the JPEG segments to the first start-of-frame marker (SOF0-SOF15 except DHT, JPG and
/// DAC) and read its height and width; segments before it are skipped by their lengths.
fn jpeg_size(d: &Base64<'_>) -> Option<(u32, u32)> {
    let mut i = 2;
    for _ in 0..MAX_JPEG_SEGMENTS {
        if d.byte(i)? != 0xff {
            return None;
        }
        // Fill bytes: any number of 0xff before the marker.
        let mut m = d.byte(i + 1)?;
        while m == 0xff {
            i += 1;
            m = d.byte(i + 1)?;
        }
        match m {
            0xc0..=0xcf if !matches!(m, 0xc4 | 0xc8 | 0xcc) => {
                // Length (2), precision (1), height (2), width (2).
                return Some((d.u16_be(i + 7)?, d.u16_be(i + 5)?));
            }
            // Markers without a length.
            0x01 | 0xd0..=0xd7 => i += 2,
            // Start of scan or end of image before any frame.
            0xd9 | 0xda => return None,
            _ => i += 2 + d.u16_be(i + 2)? as usize,
        }
    }
    None
}

/// The size of the image in a `data:` URL with base64 content (`data:image/png;base64,...`);
/// `None` for other URLs, other encodings, or an unreadable header.
pub fn data_url_size(url: &[u8]) -> Option<ImageSize> {
    let head = url.get(..5)?;
    if !head.eq_ignore_ascii_case(b"data:") {
        return None;
    }
    // The media type and parameters are short; the payload starts after the first comma.
    let comma = url.iter().take(512).position(|&c| c == b',')?;
    let meta = &url[5..comma];
    if !meta.windows(7).any(|w| w.eq_ignore_ascii_case(b";base64")) {
        return None;
    }
    base64_image_size(&url[comma + 1..])
}

#[cfg(test)]
mod tests;

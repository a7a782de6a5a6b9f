use super::*;

/// Standard base64 with padding (the tests build their own images; no dependency).
pub(crate) fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(crate) fn png(w: u32, h: u32) -> Vec<u8> {
    let mut v = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
    v.extend_from_slice(b"IHDR");
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[8, 6, 0, 0, 0, 1, 2, 3, 4]);
    v
}

fn gif(w: u16, h: u16) -> Vec<u8> {
    let mut v = b"GIF89a".to_vec();
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&h.to_le_bytes());
    v.extend_from_slice(&[0xf7, 0, 0]);
    v
}

fn riff(chunk: &[u8], body: &[u8]) -> Vec<u8> {
    let mut v = b"RIFF".to_vec();
    v.extend_from_slice(&(4 + 8 + body.len() as u32).to_le_bytes());
    v.extend_from_slice(b"WEBP");
    v.extend_from_slice(chunk);
    v.extend_from_slice(&(body.len() as u32).to_le_bytes());
    v.extend_from_slice(body);
    v
}

fn webp_vp8(w: u16, h: u16) -> Vec<u8> {
    let mut body = vec![0x9d, 0x00, 0x00, 0x9d, 0x01, 0x2a];
    body.extend_from_slice(&w.to_le_bytes());
    body.extend_from_slice(&h.to_le_bytes());
    body.extend_from_slice(&[0; 8]);
    riff(b"VP8 ", &body)
}

fn webp_vp8l(w: u32, h: u32) -> Vec<u8> {
    let bits = (w - 1) | (h - 1) << 14 | 1 << 28;
    let mut body = vec![0x2f];
    body.extend_from_slice(&bits.to_le_bytes());
    body.extend_from_slice(&[0; 6]);
    riff(b"VP8L", &body)
}

fn webp_vp8x(w: u32, h: u32) -> Vec<u8> {
    let mut body = vec![0x10, 0, 0, 0];
    body.extend_from_slice(&(w - 1).to_le_bytes()[..3]);
    body.extend_from_slice(&(h - 1).to_le_bytes()[..3]);
    riff(b"VP8X", &body)
}

/// A JPEG header: JFIF, a large EXIF segment, a quantisation table, then the frame marker
/// `sof` (0xc0 baseline, 0xc2 progressive) with one fill byte before it.
pub(crate) fn jpeg(w: u16, h: u16, sof: u8, exif_len: usize) -> Vec<u8> {
    let mut v = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
    v.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
    v.extend_from_slice(&[0xff, 0xe1]);
    v.extend_from_slice(&((exif_len + 2) as u16).to_be_bytes());
    v.extend(std::iter::repeat_n(0x5a, exif_len));
    v.extend_from_slice(&[0xff, 0xdb, 0, 67]);
    v.extend(std::iter::repeat_n(1, 65));
    v.extend_from_slice(&[0xff, 0xff, sof, 0, 17, 8]);
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xff, 0xda, 0, 12]);
    v
}

fn size_of(bytes: &[u8]) -> Option<(u32, u32)> {
    base64_image_size(b64(bytes).as_bytes()).map(|s| (s.width, s.height))
}

#[test]
fn headers_of_every_format() {
    for (w, h) in [
        (1, 1),
        (200, 200),
        (1024, 768),
        (1920, 1080),
        (4032, 3024),
        (10, 16383),
    ] {
        assert_eq!(size_of(&png(w, h)), Some((w, h)), "png {w}x{h}");
        assert_eq!(size_of(&webp_vp8l(w, h)), Some((w, h)), "vp8l {w}x{h}");
        assert_eq!(size_of(&webp_vp8x(w, h)), Some((w, h)), "vp8x {w}x{h}");
        let (w16, h16) = (w as u16, h as u16);
        assert_eq!(size_of(&gif(w16, h16)), Some((w, h)), "gif {w}x{h}");
        assert_eq!(size_of(&webp_vp8(w16, h16)), Some((w, h)), "vp8 {w}x{h}");
        for sof in [0xc0, 0xc1, 0xc2] {
            assert_eq!(
                size_of(&jpeg(w16, h16, sof, 300)),
                Some((w, h)),
                "jpeg {sof:x}"
            );
        }
    }
    // PNG with more than 65535 px on a side.
    assert_eq!(size_of(&png(100_000, 3)), Some((100_000, 3)));
    // Unreadable: not an image, SVG, truncated, zero-sized, invalid characters in the header.
    assert_eq!(size_of(b"hello world"), None);
    assert_eq!(size_of(b"<svg xmlns='http://www.w3.org/2000/svg'/>"), None);
    assert_eq!(size_of(&png(10, 10)[..18]), None);
    assert_eq!(size_of(&png(0, 10)), None);
    assert_eq!(base64_image_size(b"iVBO!!!!"), None);
    assert_eq!(base64_image_size(b""), None);
    // A JPEG whose scan starts before any frame marker has no size.
    assert_eq!(size_of(&[0xff, 0xd8, 0xff, 0xda, 0, 2]), None);
}

#[test]
fn only_the_header_is_decoded() {
    // The payload after the header is not base64 at all: the header still reads.
    let mut text = b64(&png(640, 480));
    text.push_str(&"!".repeat(10_000));
    assert_eq!(
        base64_image_size(text.as_bytes()),
        Some(ImageSize {
            width: 640,
            height: 480
        })
    );
    // A JPEG's EXIF segment is skipped by its length, never decoded: garble its middle.
    let j = jpeg(3000, 2000, 0xc0, 60_000);
    let mut text = b64(&j).into_bytes();
    for c in &mut text[400..70_000] {
        *c = b'*';
    }
    assert_eq!(
        base64_image_size(&text),
        Some(ImageSize {
            width: 3000,
            height: 2000
        })
    );
    // URL-safe base64 reads too.
    let safe = b64(&gif(7, 9)).replace('+', "-").replace('/', "_");
    assert_eq!(base64_image_size(safe.as_bytes()).map(|s| s.width), Some(7));
}

#[test]
fn data_urls() {
    let url = format!("data:image/png;base64,{}", b64(&png(1280, 720)));
    assert_eq!(
        data_url_size(url.as_bytes()),
        Some(ImageSize {
            width: 1280,
            height: 720
        })
    );
    // The declared type may be wrong: the magic bytes decide.
    let url = format!("DATA:image/jpeg;name=x.png;base64,{}", b64(&png(5, 6)));
    assert_eq!(data_url_size(url.as_bytes()).map(|s| s.height), Some(6));
    for bad in [
        "https://example.com/a.png",
        "data:image/png,rawbytes",
        "data:image/png;base64",
        "",
    ] {
        assert_eq!(data_url_size(bad.as_bytes()), None, "{bad}");
    }
}

fn img(w: u32, h: u32, detail: Detail, provider: Provider) -> SizedImage {
    SizedImage {
        size: ImageSize {
            width: w,
            height: h,
        },
        detail,
        provider,
    }
}

fn openai(model: &str, w: u32, h: u32, detail: Detail) -> usize {
    let m = ImageModel::parse(model).unwrap();
    image_tokens(&img(w, h, detail, Provider::OpenAi), m)
}

#[test]
fn openai_documented_examples() {
    // Tile models (gpt-4o examples of the guide).
    assert_eq!(openai("gpt-4o", 1024, 1024, Detail::High), 765);
    assert_eq!(openai("gpt-4o-2024-08-06", 2048, 4096, Detail::High), 1105);
    assert_eq!(openai("gpt-4o", 4096, 8192, Detail::Low), 85);
    assert_eq!(openai("gpt-4o", 4096, 8192, Detail::Auto), 1105);
    // Small images are not enlarged: one tile.
    assert_eq!(openai("gpt-4.1", 100, 100, Detail::High), 85 + 170);
    assert_eq!(openai("gpt-5.1", 1024, 1024, Detail::High), 70 + 4 * 140);
    assert_eq!(
        openai("gpt-4o-mini", 1024, 1024, Detail::High),
        2833 + 4 * 5667
    );
    // Patch models: the gpt-5.4 high examples.
    assert_eq!(openai("gpt-5.4", 1024, 1024, Detail::High), 1229);
    assert_eq!(openai("gpt-5.4", 2048, 2048, Detail::High), 3000);
    // The earlier guide's 1,536-patch example (multiplier 1).
    assert_eq!(patch_count(1800, 2400, Some(1536)), 1452);
    assert_eq!(patch_count(1024, 1024, Some(1536)), 1024);
    assert_eq!(patch_count(2048, 768, Some(1536)), 1536);
    // gpt-5.4 auto = high; low has a bigger budget (can cost more than high).
    assert_eq!(openai("gpt-5.4-mini", 2048, 2048, Detail::Auto), 3000);
    assert_eq!(
        openai("gpt-5.4", 2048, 2048, Detail::Low),
        (4096 * 12usize).div_ceil(10)
    );
    // gpt-5.6: original/auto keeps the size, no budget (a 4K screenshot: 120 × 68 patches).
    assert_eq!(
        openai("gpt-5.6-sol", 3840, 2160, Detail::Auto),
        (120 * 68 * 12usize).div_ceil(10)
    );
    assert_eq!(
        openai("gpt-5.6-luna", 3840, 2160, Detail::Low),
        (16 * 9 * 12usize).div_ceil(10)
    );
    // gpt-5.5 original: 6000 px and 10,000 patches.
    assert!(openai("gpt-5.5", 8000, 8000, Detail::Original) <= 12_000);
    // Deprecated patch models: 1,536 patches times the multiplier, detail ignored.
    assert_eq!(
        openai("gpt-4.1-nano", 1024, 1024, Detail::Low),
        (1024 * 246usize).div_ceil(100)
    );
    assert_eq!(patch_count(4000, 4000, Some(1536)), 39 * 39);
    assert_eq!(
        openai("o4-mini", 4000, 4000, Detail::High),
        (1521 * 172usize).div_ceil(100)
    );
    assert_eq!(
        openai("gpt-4.1-mini", 1024, 1024, Detail::High),
        (1024 * 162usize).div_ceil(100)
    );
}

#[test]
fn anthropic_documented_examples() {
    let claude = |model: &str, w, h| {
        image_tokens(
            &img(w, h, Detail::Auto, Provider::Anthropic),
            ImageModel::parse(model).unwrap(),
        )
    };
    // The vision guide's tables: most models, then Opus 4.7 / 4.8.
    for (w, h, standard, high) in [
        (200, 200, 64, 64),
        (1000, 1000, 1296, 1296),
        (1092, 1092, 1521, 1521),
        (1920, 1080, 1560, 2691),
        (2000, 1500, 1564, 3888),
        (3840, 2160, 1560, 4784),
    ] {
        assert_eq!(claude("claude-sonnet-4-6", w, h), standard, "{w}x{h}");
        assert_eq!(claude("claude-opus-4-8", w, h), high, "{w}x{h}");
        assert_eq!(claude("claude-opus-4-7-20260401", w, h), high, "{w}x{h}");
    }
    // The resized sizes the guide names.
    assert_eq!(claude_resized(1920, 1080, 1568, 1568), (1456, 819));
    assert_eq!(claude_resized(2000, 1500, 1568, 1568), (1270, 952));
    assert_eq!(claude_resized(3840, 2160, 2576, 4784), (2576, 1449));
    // The A4 page: the visual-token limit triggers first.
    assert_eq!(claude_resized(1075, 1520, 1568, 1568), (924, 1307));
    // Unset model, Anthropic block: the high-resolution limits.
    let i = img(1920, 1080, Detail::Auto, Provider::Anthropic);
    assert_eq!(image_tokens(&i, ImageModel::Highest), 2691);
}

#[test]
fn gemini_rule() {
    let g = |w, h| {
        image_tokens(
            &img(w, h, Detail::Auto, Provider::Gemini),
            ImageModel::Gemini,
        )
    };
    assert_eq!(g(384, 384), 258);
    assert_eq!(g(385, 100), 258);
    assert_eq!(g(1024, 1024), 4 * 258);
    assert_eq!(g(1920, 1080), 6 * 258);
    assert_eq!(ImageModel::parse("gemini-3-pro"), Some(ImageModel::Gemini));
}

#[test]
fn model_names() {
    assert_eq!(
        ImageModel::parse("openai/GPT-4o"),
        Some(ImageModel::OpenAi(OpenAiFormula::Tiles {
            base: 85,
            tile: 170
        }))
    );
    // `gpt-5` does not take `gpt-5.4`; a date suffix is fine.
    assert_ne!(ImageModel::parse("gpt-5.4"), ImageModel::parse("gpt-5"));
    assert_eq!(
        ImageModel::parse("gpt-5-2025-08-07"),
        ImageModel::parse("gpt-5")
    );
    assert_eq!(ImageModel::parse("gpt-50"), None);
    assert_eq!(ImageModel::parse("llama-3"), None);
    assert_eq!(
        ImageModel::parse("claude-3-5-sonnet-20241022"),
        Some(CLAUDE_STANDARD)
    );
    assert_eq!(
        ImageModel::parse("claude-sonnet-4-6"),
        Some(CLAUDE_STANDARD)
    );
    assert_eq!(ImageModel::parse("claude-fable-5"), Some(CLAUDE_HIGH_RES));
    assert_eq!(
        ImageModel::parse("anthropic/claude-mythos-5"),
        Some(CLAUDE_HIGH_RES)
    );
}

#[test]
fn unset_model_takes_the_highest_openai_count() {
    for (w, h) in [
        (64, 64),
        (512, 512),
        (1024, 1024),
        (1920, 1080),
        (4032, 3024),
    ] {
        for detail in [Detail::Auto, Detail::Low, Detail::High, Detail::Original] {
            let i = img(w, h, detail, Provider::OpenAi);
            let highest = image_tokens(&i, ImageModel::Highest);
            for (name, f) in OPENAI_MODELS {
                if *name == "gpt-4o-mini" {
                    continue;
                }
                assert!(
                    image_tokens(&i, ImageModel::OpenAi(*f)) <= highest,
                    "{name} {w}x{h}"
                );
            }
        }
    }
    // Unknown sizes fall back to image_tokens; sizes beyond the image count are ignored.
    let sized = [img(1024, 1024, Detail::High, Provider::OpenAi)];
    let m = ImageModel::parse("gpt-4o").unwrap();
    assert_eq!(images_tokens(3, &sized, m, 1600), 765 + 2 * 1600);
    assert_eq!(images_tokens(0, &sized, m, 1600), 0);
}

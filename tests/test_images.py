"""Images counted as the provider bills them: sizes read from base64 headers built here by hand
(PNG, JPEG with EXIF before its frame, GIF, WebP VP8/VP8L/VP8X), each provider's documented
formula (the documents' own examples), and counts that stay exact through a compaction."""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_compactor import CompactionConfig, ConfigError, ContextCompactor, TokenCounter, _core

# -- images built by hand (no imaging library) ---------------------------------------------------------


def png(w: int, h: int) -> bytes:
    ihdr = struct.pack(">II", w, h) + bytes([8, 6, 0, 0, 0])
    body = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0"
    return body + b"\0\0\0\0IDAT" + bytes(64)  # a stand-in for the pixels


def jpeg(w: int, h: int, *, progressive: bool = False, exif: int = 5_000) -> bytes:
    out = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    out += b"\xff\xe1" + struct.pack(">H", exif + 2) + b"Exif\0\0" + bytes(exif - 6)
    out += b"\xff\xdb" + struct.pack(">H", 67) + bytes(65)
    sof = 0xC2 if progressive else 0xC0
    out += bytes([0xFF, sof]) + struct.pack(">HBHH", 17, 8, h, w) + bytes(12)
    return out + b"\xff\xda" + struct.pack(">H", 12) + bytes(80) + b"\xff\xd9"


def gif(w: int, h: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", w, h) + b"\xf7\0\0" + bytes(32)


def _riff(chunk: bytes, body: bytes) -> bytes:
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBP" + chunk + struct.pack("<I", len(body)) + body


def webp_vp8(w: int, h: int) -> bytes:
    return _riff(b"VP8 ", b"\x9d\0\0\x9d\x01\x2a" + struct.pack("<HH", w, h) + bytes(16))


def webp_vp8l(w: int, h: int) -> bytes:
    bits = (w - 1) | (h - 1) << 14 | 1 << 28
    return _riff(b"VP8L", b"\x2f" + struct.pack("<I", bits) + bytes(16))


def webp_vp8x(w: int, h: int) -> bytes:
    return _riff(b"VP8X", b"\x10\0\0\0" + struct.pack("<I", w - 1)[:3] + struct.pack("<I", h - 1)[:3])


def data_url(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"


SIZES = [(1, 1), (200, 200), (512, 512), (1024, 768), (1092, 1092), (1920, 1080), (1080, 1920), (4032, 3024)]
BUILDERS = {
    "png": png,
    "jpeg": jpeg,
    "jpeg-progressive": lambda w, h: jpeg(w, h, progressive=True),
    "gif": gif,
    "webp-vp8": webp_vp8,
    "webp-vp8l": webp_vp8l,
    "webp-vp8x": webp_vp8x,
}


@pytest.mark.parametrize("fmt", sorted(BUILDERS))
def test_sizes_read_from_headers(fmt: str) -> None:
    for w, h in SIZES:
        raw = BUILDERS[fmt](w, h)
        assert _core.image_size(data_url(raw)) == (w, h), (fmt, w, h)
        assert _core.image_size(base64.b64encode(raw).decode()) == (w, h)


def test_unreadable_images_have_no_size() -> None:
    assert _core.image_size("https://example.com/a.png") is None
    assert _core.image_size("data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode()) is None
    assert _core.image_size(data_url(png(10, 10))[:40]) is None
    assert _core.image_size("data:image/png;base64,中文") is None
    # MIME-style line breaks inside the base64 text: not read (counted at image_tokens).
    wrapped = base64.encodebytes(jpeg(100, 100, exif=200)).decode()
    assert _core.image_size(wrapped) is None


# -- the documented formulas ------------------------------------------------------------------------------


def test_openai_documented_examples() -> None:
    t = _core.image_tokens
    assert t(1024, 1024, model="gpt-4o", detail="high") == 765
    assert t(2048, 4096, model="gpt-4o", detail="high") == 1105
    assert t(4096, 8192, model="gpt-4o", detail="low") == 85
    assert t(1024, 1024, model="gpt-5.4", detail="high") == 1229
    assert t(2048, 2048, model="gpt-5.4", detail="high") == 3000
    assert t(1024, 1024, model="gpt-4.1-mini") == math.ceil(1024 * 1.62)
    # gpt-5.6: auto keeps the size, no patch budget.
    assert t(3840, 2160, model="gpt-5.6-sol") == math.ceil(120 * 68 * 1.2)


def test_anthropic_documented_examples() -> None:
    for w, h, standard, high in [
        (200, 200, 64, 64),
        (1000, 1000, 1296, 1296),
        (1092, 1092, 1521, 1521),
        (1920, 1080, 1560, 2691),
        (2000, 1500, 1564, 3888),
        (3840, 2160, 1560, 4784),
    ]:
        assert _core.image_tokens(w, h, model="claude-sonnet-4-6") == standard
        assert _core.image_tokens(w, h, model="claude-opus-4-8") == high
        assert _core.image_tokens(w, h, provider="anthropic") == high


def test_gemini_rule() -> None:
    assert _core.image_tokens(384, 384, model="gemini-2.5-flash") == 258
    assert _core.image_tokens(1920, 1080, provider="gemini") == 6 * 258


def test_unknown_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as e:
        CompactionConfig(image_model="llava-13b")
    assert e.value.field == "image_model"
    with pytest.raises(ConfigError):
        CompactionConfig(image_model=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        TokenCounter(image_model="nope")
    assert CompactionConfig(image_model="gpt-4o").image_model == "gpt-4o"


# -- counting messages ------------------------------------------------------------------------------------


def openai_image_msg(url: str, detail: str | None = None) -> dict[str, Any]:
    image_url: dict[str, Any] = {"url": url}
    if detail:
        image_url["detail"] = detail
    return {"role": "user", "content": [{"type": "image_url", "image_url": image_url}]}


def anthropic_image_msg(raw: bytes, mime: str = "image/png") -> dict[str, Any]:
    source = {"type": "base64", "media_type": mime, "data": base64.b64encode(raw).decode()}
    return {"role": "user", "content": [{"type": "image", "source": source}]}


@pytest.mark.parametrize("model", [None, "gpt-4o", "gpt-5.4", "claude-opus-4-8", "gemini-3-pro"])
def test_message_counts_use_the_formula(model: str | None) -> None:
    counter = TokenCounter(image_model=model)
    for fmt, build in BUILDERS.items():
        for w, h in SIZES:
            url = data_url(build(w, h))
            expected = _core.image_tokens(w, h, model=model, detail="low")
            assert counter.count_messages([openai_image_msg(url, "low")]) == 4 + expected, (fmt, w, h)
            # The same image as a Responses-style part and as an Anthropic block.
            part = {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "high"}]}
            high = _core.image_tokens(w, h, model=model, detail="high")
            assert counter.count_messages([part]) == 4 + high
            anth = _core.image_tokens(w, h, model=model, provider="anthropic")
            assert counter.count_messages([anthropic_image_msg(build(w, h))], format="anthropic") == 4 + anth


def test_unknown_sizes_count_image_tokens() -> None:
    counter = TokenCounter(image_tokens=1234)
    assert counter.count_messages([openai_image_msg("https://example.com/cat.png")]) == 4 + 1234
    file_part = {"role": "user", "content": [{"type": "input_image", "file_id": "file-abc"}]}
    assert counter.count_messages([file_part]) == 4 + 1234
    url_block = {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}
    assert counter.count_messages([url_block], format="anthropic") == 4 + 1234


def test_images_inside_tool_results() -> None:
    shots = [png(1280, 800), jpeg(640, 480)]
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "two screenshots"}]
        + [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(s).decode()},
            }
            for s in shots
        ],
    }
    msgs = [
        {"role": "user", "content": "take screenshots"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [result]},
    ]
    counter = TokenCounter(image_model="claude-sonnet-4-6")
    per = counter.count_each(msgs).messages
    text_only = TokenCounter(image_tokens=0).count_each(
        [msgs[0], msgs[1], {"role": "user", "content": [{**result, "content": result["content"][:1]}]}]
    )
    images = _core.image_tokens(1280, 800, model="claude-sonnet-4-6") + _core.image_tokens(
        640, 480, model="claude-sonnet-4-6"
    )
    assert per[2] == text_only.messages[2] + images


def _screenshot_conversation(fmt: str) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the layout bug in src/app/page.tsx; 修复布局。"}]
    for i in range(12):
        raw = png(800 + 64 * i, 600 + 32 * i) if i % 2 else jpeg(1920, 1080 + i)
        mime = "image/png" if i % 2 else "image/jpeg"
        if fmt == "anthropic":
            block = {
                "type": "image",
                "source": {"type": "base64", "media_type": mime, "data": base64.b64encode(raw).decode()},
            }
            msgs.append({"role": "user", "content": [{"type": "text", "text": f"screenshot {i} " + "x " * 300}, block]})
        else:
            msgs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"screenshot {i} " + "x " * 300},
                        {"type": "image_url", "image_url": {"url": data_url(raw, mime), "detail": "high"}},
                    ],
                }
            )
        msgs.append({"role": "assistant", "content": f"Looked at screenshot {i}: the header overlaps. " * 20})
    return msgs


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("model", [None, "gpt-4o", "claude-sonnet-4-6"])
def test_counts_stay_exact_through_a_compaction(fmt: str, model: str | None) -> None:
    msgs = _screenshot_conversation(fmt)
    cfg = CompactionConfig(max_context_tokens=20_000, reserve_tokens=1_000, image_model=model)
    compactor = ContextCompactor(config=cfg)
    check = compactor.check(msgs, format=fmt)
    counter = TokenCounter(image_model=model)
    assert check.current_tokens == counter.count_messages(msgs, format=fmt)
    result = compactor.compact(msgs, format=fmt)
    assert result.tokens_before == check.current_tokens
    assert result.tokens_after == counter.count_messages(result.messages, format=fmt)
    assert result.tokens_after < result.tokens_before


@settings(max_examples=200, deadline=None)
@given(
    w=st.integers(1, 16_383),
    h=st.integers(1, 16_383),
    fmt=st.sampled_from(sorted(BUILDERS)),
    model=st.sampled_from([None, "gpt-4o", "gpt-5.4-mini", "gpt-5.6-terra", "o4-mini", "claude-opus-4-7", "gemini-3"]),
    detail=st.sampled_from([None, "low", "high", "auto", "original"]),
)
def test_any_size_any_format(w: int, h: int, fmt: str, model: str | None, detail: str | None) -> None:
    url = data_url(BUILDERS[fmt](w, h))
    assert _core.image_size(url) == (w, h)
    n = _core.image_tokens(w, h, model=model, detail=detail)
    assert n > 0
    assert TokenCounter(image_model=model).count_messages([openai_image_msg(url, detail)]) == 4 + n

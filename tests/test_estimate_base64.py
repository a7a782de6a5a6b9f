"""Base64 errs high too: long runs of base64 in any text are estimated at their own rate, at or
above o200k's exact count, the same in every string layout."""

from __future__ import annotations

import base64
import random

import pytest

from context_compactor import count_tokens, estimate_tokens


def _b64(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return base64.b64encode(bytes(rng.randrange(256) for _ in range(n * 3 // 4 + 3))).decode()[:n]


@pytest.mark.parametrize("length", [256, 1_000, 10_000, 200_000])
def test_random_base64_is_not_under_counted(length: int) -> None:
    s = _b64(length, length)
    ratio = estimate_tokens(s) / count_tokens(s, "o200k_base")
    assert 1.0 <= ratio <= 1.12, ratio


def test_a_repr_holding_an_image_is_not_under_counted() -> None:
    url = "data:image/png;base64," + _b64(40_000, 3)
    text = repr([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}])
    ratio = estimate_tokens(text) / count_tokens(text, "o200k_base")
    assert 1.0 <= ratio <= 1.12, ratio
    # In Chinese prose (a UCS-2 string), urlsafe, and after an emoji (UCS-4): the same rule.
    run = base64.urlsafe_b64encode(_b64(3_000, 4).encode()).decode()
    for text in (f"截图如下：{run}。请检查。", f"🙂 {run} 🙂"):
        ratio = estimate_tokens(text) / count_tokens(text, "o200k_base")
        assert 1.0 <= ratio <= 1.15, ratio


def test_short_runs_keep_the_rule() -> None:
    short = _b64(255, 9)
    assert estimate_tokens(short) / count_tokens(short) < 1.0  # documented: shorter runs keep the rule

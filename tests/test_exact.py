"""`count_tokens` / `count_tokens_many`: exact o200k_base and cl100k_base counts, offline.

The reference is Python tiktoken's `len(enc.encode_ordinary(text))` (special-token text
counted as ordinary text), loaded offline from the rank files the library ships
(`src/tokens/data/*.ranks`, rebuilt byte for byte into OpenAI's `.tiktoken` files, which
tiktoken checks against its pinned sha256), so these tests need no network and no cargo
cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_compactor import count_tokens, count_tokens_many

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

from _data import corpus_texts  # the corpus reader benches/bench_exact.py times on

REPO = Path(__file__).resolve().parent.parent
ENCODINGS = ("o200k_base", "cl100k_base")


def _ranks_module() -> Any:
    spec = importlib.util.spec_from_file_location("_exact_ranks", REPO / "src" / "tokens" / "data" / "ranks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Any]]:
    """`reference(name)`: tiktoken's Encoding, its cache filled from our rank files."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = _ranks_module()
    cache = tmp_path_factory.mktemp("tiktoken-exact")
    for name in ENCODINGS:
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(ranks.tiktoken_file(name))
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        yield tiktoken.get_encoding
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


TRICKY = [
    "",
    " ",
    "a",
    "<|endoftext|>",
    "<|endoftext|><|fim_prefix|><|fim_middle|><|fim_suffix|><|endofprompt|>",
    "text before <|endoftext|> and after <|im_start|>user<|im_end|>",
    "Hello, world! How's it going? I'M FINE, THEY'RE HERE, we'll see, I'd, you've, it'S",
    "don’t won’t 'tis 'TWAS ſ's 'ſ",
    "🚀🚀🚀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🫠",
    "上下文压缩：保持长对话在窗口内。我们需要精确地计算令牌数量！",
    "日本語のテキスト、カタカナ、ひらがな。한국어 텍스트입니다. Ελληνικά. Русский текст. עברית. العربية",
    "mixed 中文English混合text123数字",
    " " * 1000,
    "\t" * 300 + "x",
    "\n" * 500,
    "\r\n" * 200,
    "a\r\n\r\n  \r\n\tb \n \n",
    "  trailing spaces   ",
    "word   \n   word\n\n\n   ",
    "1234567890" * 20,
    "3.14159 1,000,000 -42 +7 1e10 0x1F ²³ ⅔ ٣٤٥ 一二三",
    "a" * 5000,
    "abc" * 3000,
    "x" * 129 + "y" * 257,
    "Supercalifragilisticexpialidocious" * 40,
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ=" * 30,
    "https://example.com/path/to/file.py?query=1&b=2#frag //comment /* c */ ///",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": None}  # comment\n",
    '{"command": ["bash", "-lc", "ls -la && echo \\"done\\""], "workdir": "/tmp"}',
    "é e\u0301 ñ n\u0303 Å A\u030a ǅ ǈ ʰ ß ẞ ﬁ Ⅻ",
    "\u0301\u0301\u0301 leading marks \u20dd and \u0903",
    "\x00\x01\x1f\x7f \x85 \xa0 \u2028 \u2029 \u3000 \ufeff \u200b \u200d",
    "\ue000 private \U000f0000 \U0010ffff end",
    "𝔸𝕓𝕔 𝟘𝟙 \U00020000\U0002a6d6 ancient 𐌰𐌱",
    "\u1c89\u1c8a Unicode 16 letters \ua7cb\ua7cc\U00010d50\U00010d70",
    "!!!???...,,,;;;:::---___===+++***&&&%%%$$$###@@@",
    " !\n ?\r\n /x //\n/",
    "' 's 't ''s ' s",
]


def _tricky_ids() -> list[str]:
    return [f"{i}:{t[:20]!r}" for i, t in enumerate(TRICKY)]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_corpus_is_exact(encoding: str, reference: Callable[[str], Any], openai_corpus: dict[str, Any]) -> None:
    texts = corpus_texts(openai_corpus.values())
    assert len(texts) > 1000
    enc = reference(encoding)
    expected = [len(enc.encode_ordinary(t)) for t in texts]
    got = count_tokens_many(texts, encoding=encoding)
    mismatches = [(i, texts[i][:60], g, e) for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} texts differ: {mismatches[:5]}"
    # One at a time too (a different code path in the binding: no batch, no threads).
    step = max(1, len(texts) // 300)
    assert [count_tokens(t, encoding=encoding) for t in texts[::step]] == expected[::step]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("text", TRICKY, ids=_tricky_ids())
def test_tricky_strings(encoding: str, text: str, reference: Callable[[str], Any]) -> None:
    assert count_tokens(text, encoding=encoding) == len(reference(encoding).encode_ordinary(text))


# Characters that drive every alternative of the two split patterns: letter cases, marks,
# contractions (and the long s that case-folds to `s`), digits of several kinds, whitespace
# of several kinds, punctuation, CJK, emoji, and one special-token string.
ALPHABET = [
    *"abstlervdmSTLERVDMAZ'’ \t\n\r0789/.,!-_(\"",
    "\r\n",
    "  ",
    "\x0b",
    "\x0c",
    "\x85",
    "\xa0",
    "\u2028",
    "\u3000",
    "ſ",
    "²",
    "Ⅻ",
    "٣",
    "\u0301",
    "\u0903",
    "\u20dd",
    "é",
    "É",
    "ǅ",
    "ʰ",
    "ß",
    "中",
    "文",
    "。",
    "ー",
    "한",
    "ا",
    "🚀",
    "👍🏽",
    "\u200d",
    "\ufe0f",
    "\ue000",
    "\U0010ffff",
    "𝔸",
    "<|endoftext|>",
]


def _random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        n = rng.randint(1, 40)
        if rng.random() < 0.2:
            # Any code point but surrogates (Python strings with them are not UTF-8).
            chars = [chr(rng.choice([rng.randint(0, 0xD7FF), rng.randint(0xE000, 0x10FFFF)])) for _ in range(n)]
        else:
            chars = rng.choices(ALPHABET, k=n)
        texts.append("".join(chars))
    return texts


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_random_strings(encoding: str, reference: Callable[[str], Any]) -> None:
    enc = reference(encoding)
    texts = _random_texts(seed=20251122 + len(encoding), count=4000)
    expected = [len(enc.encode_ordinary(t)) for t in texts]
    got = count_tokens_many(texts, encoding=encoding)
    mismatches = [(t, g, e) for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(deadline=None, max_examples=300)
@given(text=st.text(max_size=200))
def test_any_text(encoding: str, text: str, reference: Callable[[str], Any]) -> None:
    assert count_tokens(text, encoding=encoding) == len(reference(encoding).encode_ordinary(text))


# Long runs of one character (or of a short unit) are one piece for the split (digits aside), which
# is counted in windows (src/tokens/exact/long.rs). tiktoken takes 1.2-1.6 s per 1 MB run here, so
# 1 MB runs for a few cases and 200 KB for the rest (benches/bench_pathological.py compares every
# run at 1 MB); o200k's whitespace runs stay at 200 KB because tiktoken's regex overflows its stack
# on ~1 MB of them.
RUN_UNITS = ["a", "A", " ", "\n", "\t", "-", ".", "0", "é", "。", "中", "🚀", "ab", "aab", "\r\n"]
MB_RUNS = [("o200k_base", "a"), ("o200k_base", "\n"), ("o200k_base", "。"), ("o200k_base", "-"), ("cl100k_base", " ")]


def _run_of(unit: str, size: int) -> str:
    return unit * (size // len(unit.encode()))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_long_runs(encoding: str, reference: Callable[[str], Any]) -> None:
    enc = reference(encoding)
    texts = [_run_of(unit, 200_000) for unit in RUN_UNITS]
    # Around a power of two, a different last or first character, two runs in a row.
    texts += ["a" * (1 << 17), "a" * ((1 << 17) - 1), "a" * 100_000 + "b", "x" + "a" * 100_000]
    texts += [" " * 100_000 + "x", "ab" * 50_001 + "a", "a" * 60_000 + "A" * 60_000 + "-" * 60_000]
    mismatches = [(t[:3], len(t)) for t in texts if count_tokens(t, encoding=encoding) != len(enc.encode_ordinary(t))]
    assert not mismatches


@pytest.mark.parametrize(("encoding", "unit"), MB_RUNS)
def test_one_megabyte_runs(encoding: str, unit: str, reference: Callable[[str], Any]) -> None:
    text = _run_of(unit, 1_000_000)
    assert count_tokens(text, encoding=encoding) == len(reference(encoding).encode_ordinary(text))


def test_many_matches_one_at_a_time() -> None:
    texts = [*TRICKY, *_random_texts(seed=7, count=500)] * 3
    for encoding in ENCODINGS:
        assert count_tokens_many(texts, encoding=encoding) == [count_tokens(t, encoding=encoding) for t in texts]
    assert count_tokens_many([]) == []
    assert count_tokens("hello world") == count_tokens("hello world", encoding="o200k_base") == 2


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="encoding"):
        count_tokens("x", encoding="p50k_base")
    with pytest.raises(ValueError, match="encoding"):
        count_tokens_many(["x"], encoding="gpt2")


def _run(code: str, timeout: float = 120) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads resident memory from /proc")
def test_tables_load_on_first_use_not_at_import() -> None:
    """Importing builds no table; the first exact count builds its encoding's (~8 MB for o200k)."""
    out = _run(
        """
        import os, time

        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        base = rss()
        import context_compactor
        after_import = rss()
        context_compactor.estimate_tokens("estimates need no table")
        t0 = time.perf_counter()
        context_compactor.count_tokens("hello", encoding="o200k_base")
        first = time.perf_counter() - t0
        after_first = rss()
        t0 = time.perf_counter()
        context_compactor.count_tokens("hello", encoding="o200k_base")
        second = time.perf_counter() - t0
        print(after_import - base, after_first - after_import, first, second)
        """
    )
    _, first_use, first, second = (float(x) for x in out.split())
    # Had the import built the table, the first count would add next to nothing.
    assert first_use > 6e6, f"the first exact count grew memory by only {first_use / 1e6:.1f} MB: loaded at import?"
    assert first > 5 * second


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_count_many_after_fork() -> None:
    """A forked child inherits the parallel pool's memory but not its threads: it must not hang."""
    _run(
        """
        import os, sys, time
        from context_compactor import count_tokens, count_tokens_many

        texts = ["some text to count, " * 200 + str(i) for i in range(400)]  # well above the threshold
        expected = [count_tokens(t) for t in texts]
        assert count_tokens_many(texts) == expected  # the parent builds and uses its pool
        pid = os.fork()
        if pid == 0:
            ok = count_tokens_many(texts) == expected and count_tokens_many(texts, encoding="cl100k_base")
            os._exit(0 if ok else 1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                sys.exit(os.waitstatus_to_exitcode(status))
            time.sleep(0.05)
        os.kill(pid, 9)
        sys.exit("the forked child hung in count_tokens_many")
        """
    )

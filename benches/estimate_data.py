"""Datasets for fitting and checking the default token estimate (`src/tokens/estimate.rs`).

Two sets, kept apart on purpose:

* **fit set** (`build_fit_set`): built from files installed on this machine, never from the
  shared corpus. English prose from the Rust toolchain's books (HTML) and Python packages'
  README/METADATA text; code from the Python standard library, site-packages and the Rust
  crates in `~/.cargo/registry`; Chinese from zh_CN translations (Rust by Example's `zh`
  pages, gettext catalogues under `/usr/share/locale/zh_CN`); tool output and tool-call
  arguments synthesised from those files in the shapes agents produce (numbered file views,
  grep hits, directory listings, diffs, tracebacks, logs, hashes; JSON arguments of shell/read/edit/write
  tools).
* **check set** (`corpus_groups`): texts of at least 40 characters from the shared corpus
  (`openai/*.json`), grouped as English prose, Chinese prose, mixed prose, tool output and
  tool-call arguments. The grouping lives here so the fit script, the benchmark and the tests
  use the same one.

Run `python benches/estimate_data.py OUT.json` to write the fit set (kind -> list of texts).
"""

from __future__ import annotations

import base64
import difflib
import gettext
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import traceback
from html.parser import HTMLParser
from pathlib import Path

MIN_CHARS = 40
GROUPS = ("english", "chinese", "mixed", "tool_output", "tool_args")


def is_cjk(cp: int) -> bool:
    """The estimate's CJK class: Han, kana, Hangul, CJK and fullwidth punctuation."""
    return (
        0x2E80 <= cp <= 0x9FFF
        or 0xA960 <= cp <= 0xA97F
        or 0xAC00 <= cp <= 0xD7FF
        or 0xF900 <= cp <= 0xFAFF
        or 0xFE30 <= cp <= 0xFE4F
        or 0xFF00 <= cp <= 0xFFEF
        or 0x20000 <= cp <= 0x3FFFF
    )


def cjk_share(text: str) -> float:
    """CJK characters as a share of the non-whitespace characters."""
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return 0.0
    return sum(is_cjk(ord(c)) for c in visible) / len(visible)


def prose_group(text: str) -> str:
    """English below 5% CJK, Chinese from 50%, mixed in between."""
    share = cjk_share(text)
    if share < 0.05:
        return "english"
    if share >= 0.5:
        return "chinese"
    return "mixed"


def default_corpus_dir() -> Path:
    env = os.environ.get("CORPUS_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def _content_texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


def corpus_groups(corpus_dir: Path | str | None = None) -> dict[str, list[str]]:
    """The check set: corpus texts of >= 40 characters by group (see the module docstring).

    Tool-role contents are tool output; `tool_calls[].function.arguments` are tool-call
    arguments; every other role's content is prose, grouped by its CJK share.
    """
    root = Path(corpus_dir) if corpus_dir is not None else default_corpus_dir()
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    for path in sorted(root.glob("openai/*.json")):
        for msg in json.loads(path.read_text(encoding="utf-8")):
            for text in _content_texts(msg.get("content")):
                if len(text) >= MIN_CHARS:
                    groups["tool_output" if msg.get("role") == "tool" else prose_group(text)].append(text)
            for call in msg.get("tool_calls") or []:
                args = (call.get("function") or {}).get("arguments")
                if isinstance(args, str) and len(args) >= MIN_CHARS:
                    groups["tool_args"].append(args)
    return groups


# ---------------------------------------------------------------------------------------------
# Fit set
# ---------------------------------------------------------------------------------------------

HOME = Path.home()
RUST_DOC = next(iter(sorted(HOME.glob(".rustup/toolchains/stable-*/share/doc/rust/html"))), None)
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SITE = Path(sysconfig.get_paths()["purelib"])
CRATES = sorted(HOME.glob(".cargo/registry/src/*/*"))


class _HtmlText(HTMLParser):
    """Text blocks of an mdBook page's <main>: paragraphs, list items, headings, code blocks."""

    BLOCKS = frozenset({"p", "li", "h1", "h2", "h3", "h4", "pre", "td", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self._stack: list[str] = []
        self._buf: list[str] = []
        self._in_main = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "main":
            self._in_main = True
        if self._in_main and tag in self.BLOCKS:
            self._flush()
            self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "main":
            self._flush()
            self._in_main = False
        if self._in_main and tag in self.BLOCKS and self._stack and self._stack[-1] == tag:
            self._flush()
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if self._in_main and self._stack:
            self._buf.append(data)

    def _flush(self) -> None:
        text = "".join(self._buf)
        self._buf = []
        if text.strip() and self._stack:
            kind = "code" if self._stack[-1] == "pre" else "text"
            self.blocks.append((kind, text if kind == "code" else " ".join(text.split())))


def html_blocks(path: Path) -> list[tuple[str, str]]:
    parser = _HtmlText()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser.blocks


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""


def _log_length(rng: random.Random, lo: int = MIN_CHARS, hi: int = 8000) -> int:
    return int(lo * (hi / lo) ** rng.random())


def _chunk_lines(rng: random.Random, text: str, target: int) -> str:
    """A run of whole lines from a random place, about `target` characters long."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return ""
    start = rng.randrange(len(lines))
    out: list[str] = []
    size = 0
    for line in lines[start:]:
        out.append(line)
        size += len(line)
        if size >= target:
            break
    return "".join(out)


def _group_blocks(rng: random.Random, blocks: list[str], n: int, sep: str = "\n\n") -> list[str]:
    """Join consecutive blocks into texts of log-uniform length."""
    texts = []
    for _ in range(n):
        target = _log_length(rng)
        i = rng.randrange(len(blocks))
        parts: list[str] = []
        size = 0
        while i < len(blocks) and size < target:
            parts.append(blocks[i])
            size += len(blocks[i]) + len(sep)
            i += 1
        text = sep.join(parts)
        if len(text) >= MIN_CHARS:
            texts.append(text)
    return texts


def _sample_files(rng: random.Random, pattern_roots: list[tuple[Path, str]], k: int) -> list[Path]:
    files: list[Path] = []
    for root, pattern in pattern_roots:
        files.extend(p for p in root.glob(pattern) if p.is_file() and p.stat().st_size < 400_000)
    files.sort()
    return rng.sample(files, min(k, len(files)))


def english_prose(rng: random.Random, n: int) -> list[str]:
    blocks: list[str] = []
    if RUST_DOC is not None:
        for book in ("book", "nomicon", "reference", "edition-guide", "cargo"):
            for page in sorted((RUST_DOC / book).rglob("*.html")):
                blocks.extend(t for kind, t in html_blocks(page) if kind == "text" and len(t) > 20)
    for meta in sorted(SITE.glob("*.dist-info/METADATA")):
        body = _read(meta).split("\n\n", 1)[-1]
        paras = [p for p in re.split(r"\n\s*\n", body) if len(p) > 60 and not p.lstrip().startswith((".. ", "|"))]
        blocks.extend(paras)
    for doc in _sample_files(rng, [(SITE, "**/*.md"), (SITE, "**/*.rst"), (SITE, "**/*.txt")], 300):
        blocks.extend(p for p in re.split(r"\n\s*\n", _read(doc)) if len(p) > 60)
    return _group_blocks(rng, blocks, n)


def source_code(rng: random.Random, n: int) -> list[str]:
    roots = [(STDLIB, "*.py"), (STDLIB, "*/*.py"), (SITE, "*/*.py"), (SITE, "*/*/*.py")]
    roots += [(c, "src/**/*.rs") for c in CRATES]
    files = _sample_files(rng, roots, n)
    texts = [_chunk_lines(rng, _read(f), _log_length(rng)) for f in files]
    return [t for t in texts if len(t) >= MIN_CHARS]


def _code_files(rng: random.Random, k: int) -> list[Path]:
    roots = [(STDLIB, "*.py"), (SITE, "*/*.py")] + [(c, "src/**/*.rs") for c in CRATES]
    return _sample_files(rng, roots, k)


def _numbered(rng: random.Random, text: str, first: int) -> str:
    style = rng.choice(["{:6d}\t{}", "{:6d}→{}", "{}:{}", "{:>6}  {}"])
    return "\n".join(style.format(first + i, line) for i, line in enumerate(text.splitlines()))


def _grep_hits(rng: random.Random, files: list[Path]) -> str:
    word = rng.choice(["def ", "self.", "return", "import", "Error", "fn ", "impl", "None", "let mut", "pub "])
    out = []
    for f in files:
        for i, line in enumerate(_read(f).splitlines(), 1):
            if word in line:
                out.append(f"{f}:{i}:{line}")
        if len(out) > 60:
            break
    return "\n".join(out[: rng.randint(3, 60)])


def _listing(rng: random.Random) -> str:
    root = rng.choice([SITE, STDLIB, *CRATES])
    cmd = rng.choice([["ls", "-la", str(root)], ["ls", "-R", str(root)], ["find", str(root), "-maxdepth", "2"]])
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    return _chunk_lines(rng, out, _log_length(rng))


def _diff(rng: random.Random, files: list[Path]) -> str:
    f = rng.choice(files)
    old = _read(f).splitlines(keepends=True)
    if len(old) < 10:
        return ""
    new = list(old)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(new))
        new[i] = "    # changed: " + new[i].lstrip()
        if rng.random() < 0.5:
            del new[max(0, i - 2)]
    return "".join(difflib.unified_diff(old, new, f"a/{f.name}", f"b/{f.name}"))


def _traceback(rng: random.Random) -> str:
    snippets = [
        lambda: json.loads("{" + '"a": 1,' * rng.randint(0, 3)),
        lambda: int("not a number"),
        lambda: {}["missing_key"],
        lambda: open("/nonexistent/path/config.toml"),  # noqa: SIM115
        lambda: re.compile("(unclosed"),
        lambda: __import__("no_such_module_here"),
    ]
    try:
        rng.choice(snippets)()
    except Exception as exc:
        return "".join(traceback.format_exception(exc))
    return ""


def _log_file(rng: random.Random) -> str:
    logs = [p for p in Path("/var/log").rglob("*.log") if p.is_file() and os.access(p, os.R_OK)]
    if not logs:
        return ""
    return _chunk_lines(rng, _read(rng.choice(sorted(logs))), _log_length(rng))


def _hashes(rng: random.Random) -> str:
    """Hash- and base64-heavy output: a wheel's RECORD (sha256 in base64), or `base64 FILE`."""
    if rng.random() < 0.6:
        records = sorted(SITE.glob("*.dist-info/RECORD"))
        return _chunk_lines(rng, _read(rng.choice(records)), _log_length(rng, hi=4000)) if records else ""
    blobs = sorted(p for p in SITE.glob("*/*.so") if p.stat().st_size > 8192)
    if not blobs:
        return ""
    raw = rng.choice(blobs).read_bytes()
    start = rng.randrange(len(raw) - 4096)
    encoded = base64.b64encode(raw[start : start + _log_length(rng, hi=3000)]).decode()
    return "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))


def tool_output(rng: random.Random, n: int) -> list[str]:
    files = _code_files(rng, 600)
    texts = []
    while len(texts) < n:
        r = rng.random()
        if r < 0.06:
            text = _hashes(rng)
        elif r < 0.35:
            f = rng.choice(files)
            body = _read(f)
            chunk = _chunk_lines(rng, body, _log_length(rng))
            first = body[: body.find(chunk)].count("\n") + 1 if chunk else 1
            text = _numbered(rng, chunk, first)
        elif r < 0.5:
            text = _grep_hits(rng, rng.sample(files, 20))
        elif r < 0.6:
            text = _listing(rng)
        elif r < 0.75:
            text = _diff(rng, files)
        elif r < 0.85:
            text = _traceback(rng)
        elif r < 0.92:
            text = _log_file(rng)
        else:
            f = rng.choice(files)
            text = f"The file {f} has been updated. Here's the result of running `cat -n` on a snippet:\n"
            text += _numbered(rng, _chunk_lines(rng, _read(f), _log_length(rng, hi=2000)), 1)
        if len(text) >= MIN_CHARS:
            texts.append(text[:30000])
    return texts


def _shell_command(rng: random.Random, files: list[Path]) -> str:
    f = rng.choice(files)
    d = f.parent
    code = _chunk_lines(rng, _read(f), _log_length(rng, hi=4000))
    word = rng.choice(["def ", "class ", "Error", "fn ", "import", "TODO", "self", "return"])
    forms = [
        f"cd {d} && grep -rn '{word.strip()}' . | head -50",
        f"sed -n '{rng.randint(1, 200)},{rng.randint(200, 400)}p' {f}",
        f"cd {d} && python -m pytest tests/ -x -q 2>&1 | tail -30",
        f"cat > {d}/patch_{f.stem}.py << 'EOF'\n{code}\nEOF",
        f"ls -la {d}",
        f"find {d} -name '*{f.suffix}' | xargs wc -l | sort -n | tail -20",
        f'python3 -c "import {f.stem}; print({f.stem}.__file__)"',
        f"git diff HEAD~1 -- {f}",
        f"cd {d} && cargo build --release 2>&1 | tail -40",
    ]
    return rng.choice(forms)


def tool_args(rng: random.Random, n: int) -> list[str]:
    files = _code_files(rng, 600)
    jsons = _sample_files(rng, [(SITE, "**/*.json")], 200)
    texts = []
    while len(texts) < n:
        f = rng.choice(files)
        r = rng.random()
        if r < 0.4:
            args: object = {"command": _shell_command(rng, files)}
            if rng.random() < 0.3:
                args = {**args, "description": f"Inspect {f.stem}", "timeout": 120000}
        elif r < 0.5:
            args = {"file_path": str(f)}
            if rng.random() < 0.5:
                args = {**args, "offset": rng.randint(1, 500), "limit": rng.choice([50, 100, 200])}
        elif r < 0.75:
            old = _chunk_lines(rng, _read(f), _log_length(rng, hi=3000))
            new = old.replace("return", "return  # patched", 1) + "\n# end\n"
            keys = rng.choice([("file_path", "old_string", "new_string"), ("path", "old_str", "new_str")])
            args = {keys[0]: str(f), keys[1]: old, keys[2]: new}
            if keys[1] == "old_str":
                args = {"command": "str_replace", **args}
        elif r < 0.85:
            args = {"file_path": str(f), "content": _chunk_lines(rng, _read(f), _log_length(rng))}
        elif r < 0.92:
            args = {
                "pattern": rng.choice(["def \\w+\\(", "TODO|FIXME", "import .*json", "fn main"]),
                "path": str(f.parent),
            }
        else:
            raw = _read(rng.choice(jsons)) if jsons else "{}"
            try:
                args = json.loads(raw)
            except ValueError:
                continue
            text = json.dumps(args, ensure_ascii=rng.random() < 0.5)
            texts.append(text[: _log_length(rng)])
            continue
        text = json.dumps(args, ensure_ascii=rng.random() < 0.7)
        if len(text) >= MIN_CHARS:
            texts.append(text)
    return [t for t in texts if len(t) >= MIN_CHARS]


def _zh_catalogue_strings() -> list[str]:
    out = []
    for mo in sorted(Path("/usr/share/locale/zh_CN/LC_MESSAGES").glob("*.mo")):
        try:
            with mo.open("rb") as fh:
                catalog = gettext.GNUTranslations(fh)
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        out.extend(s for k, s in catalog._catalog.items() if k and isinstance(s, str) and s.strip())
    return out


def chinese_and_mixed(rng: random.Random, n: int) -> tuple[list[str], list[str]]:
    blocks: list[str] = []
    pages: list[str] = []
    if RUST_DOC is not None:
        for page in sorted((RUST_DOC / "rust-by-example" / "zh").rglob("*.html")):
            page_blocks = html_blocks(page)
            blocks.extend(t for kind, t in page_blocks if kind == "text")
            pages.append("\n\n".join(t if k == "text" else f"```rust\n{t}```" for k, t in page_blocks))
    catalogue = _zh_catalogue_strings()
    rng.shuffle(catalogue)
    zh_blocks = [b for b in blocks if cjk_share(b) >= 0.5]
    chinese = _group_blocks(rng, zh_blocks, n // 2)
    chinese += [t for t in _group_blocks(rng, catalogue, n, sep="\n") if prose_group(t) == "chinese"][: n // 2]
    mixed = [t for t in _group_blocks(rng, blocks, n) if prose_group(t) == "mixed"][: n // 2]
    for _ in range(n - len(mixed)):
        page = rng.choice(pages)
        text = _chunk_lines(rng, page, _log_length(rng))
        if len(text) >= MIN_CHARS and prose_group(text) == "mixed":
            mixed.append(text)
    return chinese, mixed


def build_fit_set(seed: int = 7, n: int = 400) -> dict[str, list[str]]:
    """The fit set by kind: english, code, tool_output, tool_args, chinese, mixed."""
    rng = random.Random(seed)
    chinese, mixed = chinese_and_mixed(rng, n)
    return {
        "english": english_prose(rng, n),
        "code": source_code(rng, n),
        "tool_output": tool_output(rng, n),
        "tool_args": tool_args(rng, n),
        "chinese": chinese,
        "mixed": mixed,
    }


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "estimate_fit_set.json")
    data = build_fit_set()
    out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    for kind, texts in data.items():
        print(f"{kind:12} {len(texts):5} texts {sum(map(len, texts)):9} chars")


if __name__ == "__main__":
    main()

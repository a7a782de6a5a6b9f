"""The BPE rank files of `src/tokens/exact`: OpenAI's `.tiktoken` files in a compact binary form.

`<name>.ranks` holds every token of the encoding in rank order (rank 0 first), each as one
length byte followed by the token's bytes. It carries exactly the information of OpenAI's
`<name>.tiktoken` file (one `base64(token) rank` line per token, ranks 0, 1, 2, ...), which
`tiktoken_file` rebuilds byte for byte (tiktoken checks the result against its pinned
sha256, so a corrupted file cannot pass unnoticed).

    python src/tokens/data/ranks.py path/to/o200k_base.tiktoken   # writes o200k_base.ranks here
"""

from __future__ import annotations

import base64
import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# sha256 of OpenAI's files, as pinned by tiktoken_ext/openai_public.py.
SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def tokens(name: str) -> list[bytes]:
    """The tokens of `name` in rank order, read from `<name>.ranks`."""
    data = (HERE / f"{name}.ranks").read_bytes()
    out = []
    i = 0
    while i < len(data):
        n = data[i]
        out.append(data[i + 1 : i + 1 + n])
        i += 1 + n
    return out


def tiktoken_file(name: str) -> bytes:
    """OpenAI's `<name>.tiktoken` file, byte for byte, rebuilt from `<name>.ranks`."""
    text = b"".join(base64.b64encode(tok) + b" %d\n" % rank for rank, tok in enumerate(tokens(name)))
    digest = hashlib.sha256(text).hexdigest()
    if digest != SHA256[name]:
        raise ValueError(f"{name}.ranks does not rebuild OpenAI's file (sha256 {digest})")
    return text


def convert(tiktoken_path: str) -> Path:
    """Write `<name>.ranks` next to this script from OpenAI's `<name>.tiktoken`."""
    path = Path(tiktoken_path)
    name = path.name.split(".")[0]
    out = bytearray()
    for rank, line in enumerate(path.read_bytes().splitlines()):
        tok, r = line.split()
        if int(r) != rank:
            raise ValueError(f"ranks are not 0, 1, 2, ... at line {rank + 1}")
        tok = base64.b64decode(tok)
        if not 0 < len(tok) < 256:
            raise ValueError(f"token of {len(tok)} bytes at rank {rank}")
        out += bytes([len(tok)]) + tok
    dest = HERE / f"{name}.ranks"
    dest.write_bytes(bytes(out))
    tiktoken_file(name)  # round trip, checked against the pinned hash
    return dest


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(convert(arg))

"""Regenerate the sentences of `instructions.jsonl` from the corpus (labels are kept by text).

    python tests/data/extract_instructions.py [CORPUS_DIR]

Every user-typed sentence of the six Claude Code sessions and of the aider transcript, the
first ten sentences of two SWE-agent instruction sections (twenty in all), and the written
cases of `written_instructions.py`; deduplicated by text, in that order. A sentence already in
the file keeps its label; a new one gets `"?"` until a person labels it (README.md says how).
The split is deliberately simple and independent of the core's splitter: lines, list markers
and headings stripped, then after `.!?` + space and after `。！？；`. Fenced code lines are kept
(one item a line) so the set also checks that code is not taken for an instruction.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "instructions.jsonl"
# Harness wrappers Claude Code writes into user-role records: not the user's words. Each kept
# whole, as one item labelled null (the core's splitter drops them).
WRAPPERS = (
    "<command-name>",
    "<command-message>",
    "<local-command-caveat>",
    "<local-command-stdout>",
    "<system-reminder>",
    "<task-notification>",
    "[Request interrupted by user",
)
_SPLIT = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+|(?<=[。！？；])", re.IGNORECASE)
_MARKER = re.compile(r"^(?:[-*+>]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+|#+\s+)")


def sentences(text: str) -> list[str]:
    out: list[str] = []
    fence = False
    for line in text.splitlines():
        t = line.strip()
        if t.startswith(("```", "~~~")):
            fence = not fence
            continue
        if not t:
            continue
        if fence:
            out.append(t)
            continue
        t = _MARKER.sub("", t).strip()
        out.extend(s.strip() for s in _SPLIT.split(t) if s.strip())
    return out


def claude_code(corpus: Path) -> list[tuple[str, str]]:
    items = []
    for f in sorted((corpus / "claude-code").glob("*.jsonl")):
        for line in f.open(encoding="utf-8"):
            rec = json.loads(line)
            if rec.get("type") != "user" or rec.get("isCompactSummary"):
                continue
            content = rec.get("message", {}).get("content")
            texts = (
                [content]
                if isinstance(content, str)
                else [b.get("text", "") for b in content or [] if b.get("type") == "text"]
            )
            for text in texts:
                if text.strip().startswith(WRAPPERS):
                    items.append((" ".join(text.split()), f"{f.stem}:wrapper"))
                else:
                    items.extend((s, f.stem) for s in sentences(text))
    return items


# Lines aider itself prints and the transcript records in user messages (pasted tool output).
_AIDER_OUTPUT = re.compile(
    r"^(Tokens: |Applied edit|Commit [0-9a-f]{7}|You can use /undo|Removed: |Now at: |Added .* to the chat"
    r"|The last commit|You could try|\^C|Aider v|Models: |Git repo: |Repo-map: |Use /help|Committing |/Users/)"
)


def aider(corpus: Path) -> list[tuple[str, str]]:
    items = []
    for f in sorted((corpus / "openai").glob("aider__*.json")):
        for m in json.loads(f.read_text(encoding="utf-8")):
            if m["role"] != "user":
                continue
            for line in m["content"].splitlines():
                if _AIDER_OUTPUT.match(line.strip()):
                    items.append((line.strip(), "aider:output"))
                else:
                    items.extend((s, "aider") for s in sentences(line))
    return items


def swe_templates(corpus: Path) -> list[tuple[str, str]]:
    items = []
    for name, start in (
        ("swe-agent__marshmallow-1867__function_calling_replace_from_source.json", "INSTRUCTIONS:"),
        ("mini-swe-agent__astropy__astropy-12907.json", "## Important Boundaries"),
    ):
        user = next(m for m in json.loads((corpus / "openai" / name).read_text()) if m["role"] == "user")
        text = user["content"].split(start, 1)[1]
        items.extend((s, f"swe-template:{name.split('__')[0]}") for s in sentences(text)[:10])
    return items


def main() -> None:
    sys.path.insert(0, str(HERE))
    from written_instructions import WRITTEN

    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2].parent / "shared" / "corpus"
    old = {}
    if OUT.exists():
        for line in OUT.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            old[row["text"]] = row["label"]
    rows, seen = [], set()
    found = claude_code(corpus) + aider(corpus) + swe_templates(corpus)
    for text, source in found + [(t, s) for t, _, s in WRITTEN]:
        if text in seen:
            continue
        seen.add(text)
        rows.append({"text": text, "label": old.get(text, "?"), "source": source})
    for text, label, _ in WRITTEN:
        next(r for r in rows if r["text"] == text)["label"] = label
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} sentences, {sum(r['label'] == '?' for r in rows)} unlabelled -> {OUT}")


if __name__ == "__main__":
    main()

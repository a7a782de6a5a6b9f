"""``context_compactor.eval.facts``, the one must-keep fact extractor (the eval's and the test
oracle's): one conversation gives the same facts in every wire format it reads. Each corpus
conversation is converted here into Responses items (``tests/_responses.py``) and Gemini contents
(``tests/_gemini.py``, dicts and ``google.genai`` objects), and its facts must be those of the
original, none gained and none lost; the fact rules themselves are tested in ``test_sweep.py``."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest

import _gemini
from _responses import to_responses
from conftest import corpus_or_skip
from context_compactor.eval.facts import fact_texts, facts_in_text, message_facts
from context_compactor.io import load

GENAI = importlib.util.find_spec("google.genai") is not None


def facts(messages: list[Any]) -> set[str]:
    return {f for m in messages for f in message_facts(m)}


def corpus() -> list[tuple[str, str, list[Any], Any]]:
    root = corpus_or_skip()
    out = [
        (p.name, "openai", json.loads(p.read_text(encoding="utf-8")), None) for p in sorted(root.glob("openai/*.json"))
    ]
    for p in sorted(root.glob("claude-code/*.jsonl")):
        t = load(p)
        out.append((p.name, t.format, list(t.messages), t.system))
    return out


def test_the_same_facts_in_every_format() -> None:
    checked = 0
    for name, fmt, messages, system in corpus():
        original = facts(messages)
        contents, _ = _gemini.to_gemini(messages, fmt, system)
        assert facts(contents) == original, f"{name} as Gemini dicts"
        if GENAI:
            assert facts(_gemini.as_types(contents)) == original, f"{name} as google.genai types"
        if fmt == "openai":
            assert facts(to_responses(messages)) == original, f"{name} as Responses items"
        checked += len(original)
    assert checked > 400  # the corpus has facts to lose


def test_codex_rollout_call_arguments_are_read_as_values() -> None:
    items = load(corpus_or_skip() / "responses" / "codex-session-viewer_example.jsonl").messages
    calls = [it for it in items if it.get("type") == "function_call"]
    assert len(calls) == 246
    for it in calls:
        args = json.loads(it["arguments"])
        values = _strings(args)
        assert fact_texts(it) == values
        assert set(message_facts(it)) == {f for v in values for f in facts_in_text(v)}
    # Tool output and reasoning are not where facts are read; user and assistant text is.
    assert all(fact_texts(it) == [] for it in items if it.get("type") in ("function_call_output", "reasoning"))
    user = next(it for it in items if it.get("role") == "user")
    assert fact_texts(user) == [p["text"] for p in user["content"]]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("camel", [False, True])
def test_gemini_parts_in_snake_or_camel_case(camel: bool) -> None:
    call = "functionCall" if camel else "function_call"
    content = {
        "role": "model",
        "parts": [
            {"text": "想一想 /tmp/secret.py", "thought": True},
            {"text": "我修改了src/main.rs文件"},
            {call: {"name": "open", "args": {"path": "docs/guide.md", "n": 1}}},
        ],
    }
    # A thought is not where facts are read (like Anthropic thinking); CJK ends a path.
    assert fact_texts(content) == ["我修改了src/main.rs文件", "docs/guide.md"]
    assert message_facts(content) == ["src/main.rs", "docs/guide.md"]


def test_base64_runs_and_data_uris_are_not_facts() -> None:
    """A console dump of an image (base64 with ``/`` in it) and a data URI give no path or URL;
    the facts around them stay (a dump once counted 628 base64 fragments as paths)."""
    import base64
    import random

    rng = random.Random(7)
    blob = base64.b64encode(bytes(rng.randrange(256) for _ in range(3000))).decode()
    text = (
        f"console dump:\n{blob[:76]}\n{blob[76:152]}\n{blob}\n"
        f"![shot](data:image/png;base64,{blob[:400]}) see src/app/main.py and https://example.com/x"
    )
    assert facts_in_text(text) == ["https://example.com/x", "src/app/main.py"]
    # A long real path is no base64 run (it has "." and "_"), and neither is a word of 64 letters.
    long_path = "/srv/" + "/".join(f"dir_{i}" for i in range(12)) + "/module_name.py"
    assert facts_in_text(f"open {long_path} now") == [long_path]


def test_template_strings_regexes_and_globs_are_not_facts() -> None:
    """Code in the Codex rollout's patches: a URL built from variables, a regex quantifier and a
    glob's tail named no file (the eval counted ``http://$``, ``/{2,}/g`` and ``/.ndjson/.json``
    as facts the core was supposed to keep); the facts beside them stay."""
    code = (
        "console.log(`listening on http://${HOST}:${PORT}`)\n"
        "s = s.replace(/\\\\/{2,}/g, '/')\n"
        "filter for `/.codex/sessions/**/*.jsonl?/.ndjson/.json` in src/utils/dir-enum.ts"
    )
    assert facts_in_text(code) == ["/.codex/sessions", "src/utils/dir-enum.ts"]
    assert facts_in_text("docs/{zh,en}/x.md at http://127.0.0.1:8000/") == [
        "http://127.0.0.1:8000/",
        "docs/{zh,en}/x.md",
    ]

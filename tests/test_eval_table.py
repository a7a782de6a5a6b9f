"""`context-compactor eval`'s text table: every cell in its own aligned column, names whole."""

from __future__ import annotations

import io
import re

from context_compactor.cli.eval import print_table
from context_compactor.eval import PROBES, EvalReport, PolicyRun, ProbeScore, TranscriptEval

_CELL = re.compile(r"\S+(?: \S+)*")  # a cell: words with single spaces; columns are 2+ apart


def _run(name: str, kept: int, total: int) -> PolicyRun:
    run = PolicyRun(name, tokens=[100] * 12, compacted_calls=[3, 7], prefix_stability=0.5, fits=name != "no_compaction")
    run.probes = {p: ProbeScore(kept, total) for p in PROBES}
    run.probes["recall"] = ProbeScore(11, 12)
    run.cost = {"openai": 0.1234, "anthropic": 0.5}
    return run


def _report() -> EvalReport:
    policies = ("policy", "baseline", "no_compaction", "truncation")
    t = TranscriptEval(
        file="/corpus/kimi-cli-claude-code__cc_08_60e52c3d41_2.json",
        format="openai",
        messages=40,
        transcript_tokens=10_000,
        window=3_000,
        runs={p: _run(p, 21_000, 21_000) for p in policies},
    )
    return EvalReport(transcripts=[t], policies=policies)


def _cells(line: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in _CELL.finditer(line)]


def test_cells_never_run_together_and_names_are_whole() -> None:
    out = io.StringIO()
    print_table(_report(), out)
    text = out.getvalue()
    lines = text.splitlines()
    head = _cells(lines[0])
    left = {start for start, _, _ in head[:2]}  # transcript, policy: left-aligned
    right = {end for _, end, _ in head[2:]}  # figures: right-aligned under their heading
    after = ("cost vs", "must-keep facts", "skipped", "transcripts where", "mean target")  # prose after the tables
    table = [line for line in lines[1:] if line and line != "overall" and not line.startswith(after)]
    assert len(table) == 8
    for line in table:
        for start, end, cell in _cells(line.replace("  (over the window)", "")):
            assert start in left or end in right, f"{cell!r} is out of its column in {line!r}"
    assert "91.7% 11/12" in text and "100.0% 21000/21000" in text
    assert "91.7% 11/12100.0%" not in text
    for name in ("no_compaction", "truncation", "kimi-cli-claude-code__cc_08_60e52c3d41_2.json"):
        assert re.search(rf"(^|  ){re.escape(name)}(  |$)", text, re.M), name
    assert sum("(over the window)" in line for line in lines) == 1

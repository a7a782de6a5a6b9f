"""The sweep (``tests/sweep.py``) over the corpus converted into Gemini ``contents``.

Every corpus conversation is converted (``tests/_gemini.py``) into dicts and into
``google.genai.types.Content`` objects (odd files without call ids, paired by order and name) and
swept over the same grid as the original, checked by the same oracle with its Gemini rules, plus
what only Gemini has: every output content validates as a ``types.Content``
(``types.Content.model_validate``), a ``types`` input gives ``types`` outputs, no call or response
is orphaned, no thought signature is altered or separated from its part.

``python tests/sweep_gemini.py [--full] [--kind dicts|types|both] [--only NAME]`` prints the counts
and the recall next to the original format's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _gemini
import _oracle as oracle
import sweep

#: Gemini-only kinds, on top of ``sweep.KINDS``.
GEMINI_KINDS = {
    "not_sdk_content": "outputs that are not valid types.Content (model_validate)",
    "wrong_types": "types.Content input, output of another type",
    "orphans": "orphaned calls or responses (oracle)",
    "signatures": "altered or separated thought signatures (oracle)",
}


def gemini_cases(kind: str, cases: Sequence[sweep.Case] | None = None) -> list[sweep.Case]:
    out = []
    for k, c in enumerate(cases if cases is not None else sweep.load_cases()):
        contents, system = _gemini.to_gemini(c.messages, c.fmt, c.system, ids=k % 2 == 0)
        if kind == "types":
            contents = _gemini.as_types(contents)
        out.append(sweep.Case(f"{c.name}#{kind}", "gemini", contents, system or None, _gemini.tools_of(c.tools)))
    return out


def _gemini_check(original: Any) -> Any:
    from google.genai import types

    def check(inp: Sequence[Any], before: Any, result: Any, **kw: Any) -> oracle.Check:
        c = original(inp, before, result, **kw)
        if kw.get("fmt") != "gemini":
            return c
        typed = bool(inp) and not isinstance(inp[0], dict)
        for i, m in enumerate(result.messages):
            if typed and not isinstance(m, types.Content):
                c.flag("wrong_types", f"{i}: {type(m).__name__}")
            try:
                types.Content.model_validate(m if isinstance(m, dict) else m.model_dump())
            except Exception as e:
                c.flag("not_sdk_content", f"{i}: {type(e).__name__}: {str(e)[:200]}")
        out = list(result.messages)
        for p in _gemini.problems(out):
            if "without its call" in p or "get no response" in p:
                c.flag("orphans", p)
        for p in _gemini.signature_problems(inp, out):
            c.flag("signatures", p)
        return c

    return check


def run(kind: str, grid: sweep.Grid, only: str | None = None) -> sweep.Tally:
    base = [c for c in sweep.load_cases() if not only or only in c.name]
    kinds = ("dicts", "types") if kind == "both" else (kind,)
    cases = [c for k in kinds for c in gemini_cases(k, base)]
    saved_kinds, saved_check = dict(sweep.KINDS), oracle.check_compaction
    sweep.KINDS.update(GEMINI_KINDS)
    oracle.check_compaction = _gemini_check(saved_check)
    try:
        return sweep.sweep(cases, grid)
    finally:
        oracle.check_compaction = saved_check
        sweep.KINDS.clear()
        sweep.KINDS.update(saved_kinds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the full grid (default: the CI subset)")
    parser.add_argument("--kind", default="both", choices=["dicts", "types", "both"])
    parser.add_argument("--only", help="only corpus files whose name contains this")
    parser.add_argument("--baseline", action="store_true", help="also sweep the original formats, for the recall")
    args = parser.parse_args(argv)
    grid = sweep.FULL if args.full else sweep.CI
    tally = run(args.kind, grid, args.only)
    sweep.KINDS.update(GEMINI_KINDS)
    print(sweep.report(tally, grid))
    if args.baseline:
        base = sweep.sweep([c for c in sweep.load_cases() if not args.only or args.only in c.name], grid)
        for share in grid.shares:
            for s in grid.summarizers:
                k, t = tally.recall(share, s)
                bk, bt = base.recall(share, s)
                print(f"recall {share:.0%} {s}: gemini {sweep.pct(k, t)}  original {sweep.pct(bk, bt)}")
    return 1 if any(tally.counts.get(k) for k in sweep.KINDS) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The canary grid: every corpus conversation, planted (:mod:`.canaries`), through chained
compactions (:mod:`.chains`) under each summarizer, chain and budget; and the instruction chain
probe (:mod:`.instruction_chain`). ``make canaries`` runs it all::

    python -m context_compactor.eval.grid FILES... --json target/canaries.json --html target/canaries.html

Survival is the share of canaries said so far that are in the context, per summarizer
(``rule``: the built-in rule summary; ``adversarial``: :mod:`.adversarial`), budget
(``unbudgeted``, or a window of 30/20/10% of the planted conversation), chain, round, kind and
position. *Silent* losses are lost canaries that no ``must_keep_missing`` of the chain names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TextIO

from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError
from context_compactor.eval.adversarial import adversarial_summarizer
from context_compactor.eval.canaries import KINDS, POSITIONS, canaries_for, plant
from context_compactor.eval.chains import CHAINS, ChainRound, ChainRun, chain_config, run_chain
from context_compactor.io import Transcript, load
from context_compactor.tokens import TokenCounter

__all__ = ["BUDGETS", "SUMMARIZERS", "CanaryReport", "main", "print_table", "run_grid"]

SUMMARIZERS: dict[str, Callable[..., Any] | None] = {"rule": None, "adversarial": adversarial_summarizer}
#: Budget name -> the window as a share of the conversation (``None``: nothing must be evicted).
BUDGETS: dict[str, float | None] = {"unbudgeted": None, "30%": 0.3, "20%": 0.2, "10%": 0.1}


@dataclass
class CanaryReport:
    """Every chain of the grid; :meth:`survival` and :meth:`table` sum them."""

    runs: list[ChainRun] = field(default_factory=list)
    instruction_runs: list[ChainRun] = field(default_factory=list)
    rounds: int = 5
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def select(self, runs: Iterable[ChainRun] | None = None, **where: str) -> list[ChainRun]:
        return [r for r in (self.runs if runs is None else runs) if all(getattr(r, k) == v for k, v in where.items())]

    @staticmethod
    def count(
        runs: Iterable[ChainRun], round: int, kind: str | None = None, position: str | None = None
    ) -> dict[str, int]:
        """Items said by ``round`` (1-based), kept, lost-and-listed and lost-silently, over ``runs``
        (a chain that stopped early counts its last round)."""
        out = {"said": 0, "kept": 0, "listed": 0, "silent": 0}
        for run in runs:
            if not run.rounds:
                continue
            r = run.rounds[min(round, len(run.rounds)) - 1]
            for i, c in enumerate(run.canaries):
                if not r.said[i] or (kind and c.kind != kind) or (position and c.position != position):
                    continue
                out["said"] += 1
                out["kept"] += r.kept[i]
                out["listed"] += r.listed[i]
                out["silent"] += not r.kept[i] and not r.listed[i]
        return out

    def survival(self, runs: Iterable[ChainRun], round: int, **by: str | None) -> float | None:
        c = self.count(runs, round, **by)
        return c["kept"] / c["said"] if c["said"] else None

    def table(self, runs: Sequence[ChainRun] | None = None) -> list[dict[str, Any]]:
        """One row per summarizer, budget and chain: survival per round, per kind and position at
        the last round, silent losses, the chain problems (forced rounds with ``strategy="none"``,
        rounds over the threshold without ``over_budget``, ledger growth)."""
        runs = self.runs if runs is None else list(runs)
        rows = []
        for s in dict.fromkeys(r.summarizer for r in runs):
            for b in dict.fromkeys(r.budget for r in runs):
                for ch in CHAINS:
                    sel = self.select(runs, summarizer=s, budget=b, chain=ch)
                    if not sel:
                        continue
                    n = max((len(run.rounds) for run in sel), default=self.rounds)
                    last = self.count(sel, n)
                    rounds = [r for run in sel for r in run.rounds]
                    rows.append(
                        {
                            "summarizer": s,
                            "budget": b,
                            "chain": ch,
                            "chains": len(sel),
                            "by_round": [self.survival(sel, k) for k in range(1, n + 1)],
                            "by_kind": {k: self.survival(sel, n, kind=k) for k in KINDS},
                            "by_position": {p: self.survival(sel, n, position=p) for p in POSITIONS},
                            "last_round": last,
                            "silent_losses": sum(self.count(sel, k)["silent"] for k in range(1, n + 1)),
                            "forced_none": sum(1 for r in rounds if r.strategy == "none"),
                            "not_within": sum(1 for r in rounds if not r.within),
                            "over_budget": sum(1 for r in rounds if r.over_budget),
                            "fake_in_context": sum(1 for run in sel if run.rounds and run.rounds[-1].fake_entries),
                            "fake_in_ledger": sum(1 for run in sel if run.rounds and run.rounds[-1].fake_in_ledger),
                            "problems": sum(len(run.problems()) for run in sel),
                            "errors": sum(1 for run in sel if run.error),
                        }
                    )
        return rows

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CanaryReport:
        """A report read back from :meth:`to_dict`'s JSON (to draw it again)."""

        def run(r: dict[str, Any]) -> ChainRun:
            items = [SimpleNamespace(**c) for c in r["items"]]
            out = ChainRun(r["file"], r["chain"], r["summarizer"], r["budget"], r["window"], items, error=r["error"])
            fields = {f.name for f in dataclasses.fields(ChainRound)}
            out.rounds = [ChainRound(**{k: x.get(k) for k in fields}) for x in r["rounds"]]
            return out

        return cls(
            runs=[run(r) for r in d["runs"]],
            instruction_runs=[run(r) for r in d["instruction_runs"]],
            rounds=d["rounds"],
            skipped=[(x["file"], x["reason"]) for x in d["skipped"]],
            seconds=d["seconds"],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "seconds": round(self.seconds, 2),
            "table": self.table(),
            "instruction_table": self.table(self.instruction_runs) if self.instruction_runs else [],
            "runs": [r.to_dict() for r in self.runs],
            "instruction_runs": [r.to_dict() for r in self.instruction_runs],
            "skipped": [{"file": f, "reason": why} for f, why in self.skipped],
        }


def run_grid(
    files: Iterable[str | Transcript],
    *,
    budgets: Sequence[str] = tuple(BUDGETS),
    chains: Sequence[str] = CHAINS,
    summarizers: Sequence[str] = tuple(SUMMARIZERS),
    rounds: int = 5,
    instructions: int = 0,
    progress: TextIO | None = None,
    config: Mapping[str, Any] | None = None,
) -> CanaryReport:
    """Plant every file, run every chain, and (with ``instructions`` > 0) the instruction chain
    probe of that many rounds on the unplanted files, unbudgeted. ``config``: other
    :class:`~context_compactor.CompactionConfig` fields for the canary chains (the window and
    ``min_savings_ratio`` are the chain's; the instruction chains keep the defaults)."""
    from context_compactor.eval.instruction_chain import run_instruction_chains

    t0 = time.perf_counter()
    report = CanaryReport(rounds=rounds)
    counter = TokenCounter("approx")
    for slot, f in enumerate(files):
        try:
            transcript = f if isinstance(f, Transcript) else load(f)
        except (OSError, ValueError) as e:
            report.skipped.append((str(f), str(e)))
            continue
        name = transcript.path or f"<transcript {slot}>"
        planted, canaries = plant(transcript, canaries_for(name, slot))
        tokens = counter.count_messages(
            planted.messages, system=planted.system, tools=planted.tools, format=planted.format
        )
        t1 = time.perf_counter()
        for s in summarizers:
            for b in budgets:
                config_ = chain_config(tokens, BUDGETS[b], config)
                for ch in chains:
                    report.runs.append(
                        run_chain(
                            planted,
                            canaries,
                            chain=ch,
                            config=config_,
                            summarizer=SUMMARIZERS[s],
                            summarizer_name=s,
                            budget=b,
                            rounds=rounds,
                        )
                    )
            if instructions:
                report.instruction_runs += run_instruction_chains(
                    transcript, summarizer=SUMMARIZERS[s], summarizer_name=s, chains=chains, rounds=instructions
                )
        if progress is not None:
            progress.write(f"canaries {name.rsplit('/', 1)[-1]}: {tokens:,} tokens, {time.perf_counter() - t1:.1f} s\n")
            progress.flush()
    report.seconds = round(time.perf_counter() - t0, 2)  # the JSON keeps 2 decimals: a replay prints the same
    return report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_table(report: CanaryReport, out: TextIO) -> None:
    """The survival table: per summarizer, budget and chain, each round, then by kind and
    position at the last round, silent losses and problems."""
    for title, rows in (("canaries", report.table()), ("instructions", report.table(report.instruction_runs))):
        if not rows:
            continue
        n = len(rows[0]["by_round"])
        out.write(f"\n{title}: survival by round (1-{n}), kind and position at round {n}\n")
        head = f"{'summarizer':<12}{'budget':<11}{'chain':<8}" + "".join(f"{'r' + str(k + 1):>7}" for k in range(n))
        if title == "canaries":
            head += "".join(f"{k[:6]:>7}" for k in KINDS) + "".join(f"{p[:6]:>7}" for p in POSITIONS)
        head += f"{'silent':>7}{'none':>6}{'over':>6}{'probl':>6}"
        out.write(head + "\n")
        for row in rows:
            line = f"{row['summarizer']:<12}{row['budget']:<11}{row['chain']:<8}"
            line += "".join(f"{_pct(x):>7}" for x in row["by_round"])
            if title == "canaries":
                line += "".join(f"{_pct(row['by_kind'][k]):>7}" for k in KINDS)
                line += "".join(f"{_pct(row['by_position'][p]):>7}" for p in POSITIONS)
            line += f"{row['silent_losses']:>7}{row['forced_none']:>6}{row['over_budget']:>6}{row['problems']:>6}"
            out.write(line + "\n")
    adv = [r for r in report.table() if r["summarizer"] == "adversarial"]
    if adv:
        ctx, led, n = (sum(r[k] for r in adv) for k in ("fake_in_context", "fake_in_ledger", "chains"))
        out.write(
            f"\nthe adversarial summarizer's fake ledger entries: in the final context of {ctx} of {n} chains, "
            f"inside the ledger (after its sentinel) of {led}\n"
        )
    for f, why in report.skipped:
        out.write(f"skipped {f}: {why}\n")
    out.write(f"\n{len(report.runs)} canary chains, {len(report.instruction_runs)} instruction chains, "
              f"{report.seconds:.0f} s\n")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m context_compactor.eval.grid FILES... [--json OUT] [--html OUT]``: 0 when no chain
    crashed, else 1."""
    p = argparse.ArgumentParser(prog="python -m context_compactor.eval.grid", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*")
    p.add_argument("--from-json", default=None, metavar="IN.json", help="draw a report written by --json again")
    p.add_argument(
        "--budgets", default=",".join(BUDGETS), help="comma-separated: " + ", ".join(BUDGETS).replace("%", "%%")
    )
    p.add_argument("--summarizers", default=",".join(SUMMARIZERS), help="comma-separated: rule, adversarial")
    p.add_argument("--chains", default=",".join(CHAINS), help="comma-separated: forced, growing")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--instructions", type=int, default=10, help="rounds of the instruction chain probe (0: off)")
    p.add_argument("--json", default=None, metavar="OUT.json")
    p.add_argument("--html", default=None, metavar="OUT.html")
    p.add_argument(
        "--config",
        default=None,
        metavar="CONFIG.toml",
        help="CompactionConfig fields for the canary chains, e.g. details_budget_tokens = 400 "
        "(the window and min_savings_ratio stay the chain's)",
    )
    args = p.parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            report = CanaryReport.from_dict(json.load(f))
        print_table(report, sys.stdout)
        _write(report, args)
        return 0
    if not args.files:
        p.error("give FILES (or --from-json)")
    try:
        config = _read_config(args.config)
    except (OSError, ConfigError) as e:
        p.error(str(e))
    report = run_grid(
        args.files,
        budgets=args.budgets.split(","),
        chains=args.chains.split(","),
        summarizers=args.summarizers.split(","),
        rounds=args.rounds,
        instructions=args.instructions,
        progress=sys.stderr,
        config=config,
    )
    print_table(report, sys.stdout)
    _write(report, args)
    return 1 if any(r.error for r in (*report.runs, *report.instruction_runs)) else 0


def _read_config(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    from context_compactor.cli.common import read_toml

    fields = read_toml(path)
    CompactionConfig.from_dict(fields)  # a bad field fails here, before the first chain
    return fields


def _write(report: CanaryReport, args: argparse.Namespace) -> None:
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report.to_dict(), f, ensure_ascii=False, indent=1)
    if args.html:
        from context_compactor._html_report import render_canaries_html

        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_canaries_html(report))


if __name__ == "__main__":
    sys.exit(main())

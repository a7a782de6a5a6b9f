"""The eval's static HTML reports: one self-contained file each (inline CSS and SVG, no script, no
external asset, no server). :func:`render_html`: the overall table, and per transcript its probe
table and two charts (the context size per model call and the billed input cost per call, one
line per policy), written by ``context-compactor eval --html report.html``.
:func:`render_canaries_html`: the canary grid's survival charts and tables (``make canaries``)."""

from __future__ import annotations

import os
from html import escape
from typing import TYPE_CHECKING, Any

from context_compactor._chart import line_chart

if TYPE_CHECKING:
    from context_compactor.eval import EvalReport
    from context_compactor.eval.grid import CanaryReport

__all__ = ["render_canaries_html", "render_html"]

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1000px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 32px; border-top: 1px solid #ddd; padding-top: 16px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
.low { background: #fde0dd; }
.note { color: #555; font-size: 13px; }
svg.chart { display: block; margin: 8px 0; }
"""


def _head(title: str) -> list[str]:
    """The document's start, up to its heading: both reports' pages share it."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _cell(x: float | None, good: float = 0.95) -> str:
    cls = ' class="low"' if x is not None and x < good else ""
    return f"<td{cls}>{_pct(x)}</td>"


def render_html(report: EvalReport, *, title: str = "context-compactor eval") -> str:
    """The report as one HTML document (a string)."""
    from context_compactor.eval import PROBES

    scored = [p for p in report.policies if p in ("policy", "baseline")]
    window = (
        f"window {report.window_ratio:.0%} of each transcript"
        if report.window_ratio is not None
        else f"window {report.max_tokens:,} tokens"
        if report.max_tokens
        else "default window"
    )
    h: list[str] = [
        *_head(title),
        f'<p class="note">{len(report.transcripts)} transcripts, {escape(window)}; probes scored at every '
        "compaction from the raw transcript; billed input simulated with prompt caching "
        f"({escape(', '.join(t.name for t in report.prices.values()))}). The charts leave out no compaction "
        "(the whole transcript each call: its line would flatten the others); its figures are in the tables.</p>",
        '<h2 id="overall">Overall</h2>',
        "<table><tr><th>policy</th>"
        + "".join(f"<th>{p.replace('_', ' ')}</th>" for p in PROBES)
        + "<th>compactions</th><th>cache-prefix stability</th>"
        + "".join(f"<th>$ {escape(k)}</th>" for k in report.prices)
        + "</tr>",
    ]
    for pol in report.policies:
        o = report.overall(pol)
        row = f"<tr><td>{escape(pol)}</td>"
        row += "".join(_cell(o[p]) if pol in scored else "<td>–</td>" for p in PROBES)
        row += f"<td>{o['compactions']}</td><td>{_pct(o['prefix_stability']) if pol in scored else '–'}</td>"
        row += "".join(f"<td>{o['cost'][k]:.4f}</td>" for k in report.prices)
        h.append(row + "</tr>")
    h.append("</table>")
    if report.canary_policies:
        h += _canary_overall(report)
    if report.skipped:
        h.append('<p class="note">Skipped: ' + "; ".join(escape(f"{f}: {r}") for f, r in report.skipped) + "</p>")
    for t in report.transcripts:
        name = os.path.basename(t.file)
        h.append(f'<h2 class="transcript">{escape(name)}</h2>')
        h.append(
            f'<p class="note">{escape(t.format)}, {t.messages} messages, {t.transcript_tokens:,} tokens; '
            f"window {t.window:,}</p>"
        )
        h.append(
            "<table><tr><th>policy</th>"
            + "".join(f"<th>{p.replace('_', ' ')}</th>" for p in PROBES)
            + "<th>calls</th><th>compactions</th><th>prefix stability</th>"
            + "".join(f"<th>$ {escape(k)}</th>" for k in report.prices)
            + "</tr>"
        )
        for pol, r in t.runs.items():
            row = f"<tr><td>{escape(pol)}{'' if r.fits else ' (over the window)'}</td>"
            for p in PROBES:
                s = r.probes[p]
                row += (
                    _cell(s.share).replace("</td>", f" ({s.kept}/{s.total})</td>")
                    if pol in scored and s.total
                    else "<td>–</td>"
                )
            row += f"<td>{len(r.tokens)}</td><td>{r.compactions}</td>"
            row += f"<td>{_pct(r.prefix_stability) if pol in scored else '–'}</td>"
            row += "".join(f"<td>{r.cost.get(k, 0.0):.4f}</td>" for k in report.prices)
            h.append(row + "</tr>")
        h.append("</table>")
        if t.canaries:
            h += _canary_rows(t.canaries)
        missed = [
            (pol, p, m) for pol, r in t.runs.items() if pol in scored for p, s in r.probes.items() for m in s.missed
        ]
        if missed:
            h.append('<details><summary class="note">missed items (first few)</summary><ul class="note">')
            h += [f"<li>{escape(pol)} · {escape(p)}: {escape(m)}</li>" for pol, p, m in missed[:20]]
            h.append("</ul></details>")
        h.append(
            line_chart(
                {pol: [float(v) for v in r.tokens] for pol, r in t.runs.items() if pol != "no_compaction"},
                title=f"{name}: context tokens per model call",
                y_label="context tokens",
                hlines={f"window {t.window:,}": float(t.window)},
            )
        )
        key = next(iter(report.prices), None)
        if key is not None:
            h.append(
                line_chart(
                    {pol: r.cost_per_call.get(key, []) for pol, r in t.runs.items() if pol != "no_compaction"},
                    title=f"{name}: billed input per call ({report.prices[key].name})",
                    y_label="dollars",
                    fmt="dollars",
                )
            )
    h.append("</body></html>")
    return "\n".join(h) + "\n"


def _canary_overall(report: EvalReport) -> list[str]:
    """The eval's canary section: survival per policy over every compaction, the first five
    compactions (a chart and a table), per kind and position."""
    from context_compactor.eval.canaries import KINDS, POSITIONS

    surv = {p: report.canary_survival(p) for p in report.canary_policies}
    n = max(len(s["by_round"]) for s in surv.values())
    h = [
        '<h2 id="canaries">Canary survival</h2>',
        '<p class="note">A copy of each transcript with 15 canaries (safety rules, constraints, facts, goals, '
        "preferences; English and Chinese; at the top, middle and bottom) replayed per policy at the same window "
        "as the eval's replays; after every compaction a canary said so far survives when its exact sentence is in "
        "the context. <i>all</i>: every compaction; c1-c5: the first five (a transcript with fewer counts its "
        "last); silent: lost and in no <code>must_keep_missing</code> (canary x compaction).</p>",
        line_chart(
            {p: [100.0] + [100 * (x or 0.0) for x in s["by_round"]] for p, s in surv.items()},
            title="canary survival per compaction",
            y_label="survival",
            x_label="compaction (0: as planted)",
            fmt="percent",
            height=240,
        ),
        '<table class="eval-canaries"><tr><th>policy</th><th>all</th>'
        + "".join(f"<th>c{k + 1}</th>" for k in range(n))
        + "".join(f"<th>{escape(k)}</th>" for k in (*KINDS, *POSITIONS))
        + "<th>silent</th><th>compactions</th><th>mean target</th></tr>",
    ]
    for p, s in surv.items():
        row = f"<tr><td>{escape(p)}</td>" + _cell(s["share"]).replace(
            "</td>", f" ({s['items'][0]}/{s['items'][1]})</td>"
        )
        row += "".join(_cell(x) for x in s["by_round"])
        row += "".join(_cell(s["by_kind"][k]) for k in KINDS) + "".join(_cell(s["by_position"][q]) for q in POSITIONS)
        t = s["mean_target"]
        row += f"<td>{s['silent']}</td><td>{s['compactions']}</td><td>{'–' if t is None else f'{t:.2f}'}</td></tr>"
        h.append(row)
    h.append("</table>")
    return h


def _canary_rows(runs: dict[str, Any]) -> list[str]:
    """One transcript's canary survival per policy."""
    from context_compactor.eval.canaries import POSITIONS
    from context_compactor.eval.planted import survival

    h = [
        '<table class="transcript-canaries"><tr><th>canaries</th><th>all</th>'
        + "".join(f"<th>{escape(q)}</th>" for q in POSITIONS)
        + "<th>silent</th><th>compactions</th></tr>"
    ]
    for p, run in runs.items():
        s = survival([run])
        row = f"<tr><td>{escape(p)}</td>" + _cell(s["share"]).replace(
            "</td>", f" ({s['items'][0]}/{s['items'][1]})</td>"
        )
        row += "".join(_cell(s["by_position"][q]) for q in POSITIONS)
        h.append(row + f"<td>{s['silent']}</td><td>{s['compactions']}</td></tr>")
    h.append("</table>")
    return h


def render_canaries_html(report: CanaryReport, *, title: str = "context-compactor canaries") -> str:
    """The canary grid (:mod:`context_compactor.eval.grid`) as one HTML document: per chain a
    survival chart (one line per summarizer and budget, round 0 being the planted conversation),
    the table by round, kind and position, and the instruction chain probe's table."""
    from context_compactor.eval.canaries import KINDS, POSITIONS

    h: list[str] = [
        *_head(title),
        f'<p class="note">{len(report.runs)} canary chains of {report.rounds} forced compactions '
        f"({len({r.file for r in report.runs})} conversations), {len(report.instruction_runs)} instruction "
        "chains. A canary survives a round when its exact sentence is in the compacted request; a lost one "
        "that no <code>must_keep_missing</code> of its chain names is a silent loss.</p>",
    ]
    for label, rows in (("Canaries", report.table()), ("Instructions", report.table(report.instruction_runs))):
        if not rows:
            continue
        h.append(f'<h2 id="{label.lower()}">{label}</h2>')
        for chain in dict.fromkeys(r["chain"] for r in rows):
            for summarizer in dict.fromkeys(r["summarizer"] for r in rows):
                sel = [r for r in rows if r["chain"] == chain and r["summarizer"] == summarizer]
                series = {r["budget"]: [100.0] + [100 * (x or 0.0) for x in r["by_round"]] for r in sel}
                h.append(
                    line_chart(
                        series,
                        title=f"{label}: survival per round, {chain} chains, {summarizer} summary",
                        y_label="survival",
                        x_label="compaction (0: as planted)",
                        fmt="percent",
                        height=240,
                    )
                )
        n = len(rows[0]["by_round"])
        head = "<tr><th>summarizer</th><th>window</th><th>chain</th>"
        head += "".join(f"<th>r{k + 1}</th>" for k in range(n))
        head += "<th>silent losses (item-rounds)</th><th>forced none</th><th>over budget</th><th>problems</th></tr>"
        h.append(f'<table class="{label.lower()}-rounds">' + head)
        for r in rows:
            row = f"<tr><td>{escape(r['summarizer'])}</td><td>{escape(r['budget'])}</td><td>{escape(r['chain'])}</td>"
            row += "".join(_cell(x) for x in r["by_round"])
            row += f"<td>{r['silent_losses']}</td><td>{r['forced_none']}</td><td>{r['over_budget']}</td>"
            row += f"<td>{r['problems']}</td></tr>"
            h.append(row)
        h.append("</table>")
        if label == "Canaries":
            h.append(f'<p class="note">By kind and position at round {n}:</p>')
            head = "<tr><th>summarizer</th><th>window</th><th>chain</th>"
            head += "".join(f"<th>{escape(k)}</th>" for k in KINDS) + "".join(
                f"<th>{escape(p)}</th>" for p in POSITIONS
            )
            h.append('<table class="canaries-kinds">' + head + "</tr>")
            for r in rows:
                row = f"<tr><td>{escape(r['summarizer'])}</td><td>{escape(r['budget'])}</td>"
                row += f"<td>{escape(r['chain'])}</td>"
                row += "".join(_cell(r["by_kind"][k]) for k in KINDS)
                row += "".join(_cell(r["by_position"][p]) for p in POSITIONS)
                h.append(row + "</tr>")
            h.append("</table>")
    adv = [r for r in report.table() if r["summarizer"] == "adversarial"]
    if adv:
        ctx, led, n = (sum(r[k] for r in adv) for k in ("fake_in_context", "fake_in_ledger", "chains"))
        h.append(
            f'<p class="note">The adversarial summarizer\'s fake ledger entries are in the final context of {ctx} of '
            f"{n} chains, inside the ledger (after its sentinel) of {led}.</p>"
        )
    problems = [(run, p) for run in (*report.runs, *report.instruction_runs) for p in run.problems()]
    if problems:
        h.append('<details><summary class="note">chain problems (first 40)</summary><ul class="note">')
        h += [
            f"<li>{escape(os.path.basename(run.file))} · {escape(run.summarizer)} · {escape(run.budget)} · "
            f"{escape(run.chain)}: {escape(p)}</li>"
            for run, p in problems[:40]
        ]
        h.append("</ul></details>")
    h.append("</body></html>")
    return "\n".join(h) + "\n"

"""The eval's static HTML report: one self-contained file (inline CSS and SVG, no script, no
external asset, no server) with the overall table, and per transcript its probe table and two
charts: the context size per model call and the billed input cost per call, one line per policy.
Written by ``context-compactor eval --html report.html``."""

from __future__ import annotations

import os
from html import escape
from typing import TYPE_CHECKING

from context_compactor._chart import line_chart

if TYPE_CHECKING:
    from context_compactor.eval import EvalReport

__all__ = ["render_html"]

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
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
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

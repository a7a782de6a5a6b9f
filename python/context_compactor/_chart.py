"""The charts: the replay's SVG line chart of the context size over the model calls
(:func:`render_svg`), and a plain multi-series line chart (:func:`line_chart`) the eval's HTML
report draws context size and cost per call with.

Drawn by hand (a few SVG elements) rather than with a plotting library: matplotlib would be a
heavy dependency for one CLI chart (LAYOUT-REVIEW). Used by ``context-compactor replay --chart``
and re-exported as :func:`context_compactor.replay.render_svg`.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

if TYPE_CHECKING:
    from collections.abc import Callable

    from context_compactor.replay import ReplayReport

__all__ = ["line_chart", "render_svg"]


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = max(span / ticks, 1e-9)
    mag = 10.0 ** int(f"{raw:e}".split("e")[1])
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _fmt_tokens(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    if n >= 1_000:
        return f"{n / 1_000:g}k"
    return f"{n:g}"


#: Width of a character of the bold 14px title, a little over the average of common sans fonts
#: (DejaVu Sans Bold measured 8.2 px), so that a wrapped line never runs past the edge.
_TITLE_CHAR_PX = 8.6
#: Title lines at most; a longer title ends with an ellipsis (the whole title is the SVG's <title>).
_TITLE_LINES = 2
_TITLE_LINE_PX = 18


def _wrap(text: str, max_chars: int, max_lines: int = _TITLE_LINES) -> list[str]:
    """``text`` in lines of at most ``max_chars`` (at spaces; a longer word is cut), at most
    ``max_lines`` of them, the last ending with "…" when text was left out."""
    max_chars = max(max_chars, 4)
    lines: list[str] = []
    cur = ""
    for word in text.split():
        while len(word) > max_chars:
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(word[:max_chars])
            word = word[max_chars:]
        candidate = f"{cur} {word}" if cur else word
        if len(candidate) <= max_chars:
            cur = candidate
        else:
            lines.append(cur)
            cur = word
    if cur:
        lines.append(cur)
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], lines[max_lines - 1][: max_chars - 1].rstrip() + "…"]
    return lines or [""]


def _grid(
    out: list[str],
    plot: tuple[float, float, float, float],
    y: Callable[[float], float],
    y_max: float,
    step: float,
    tick: Callable[[float], str],
) -> None:
    """The horizontal grid lines with their y tick labels every ``step`` up to ``y_max``, and the
    two axes, of the plot area ``(left, top, width, height)``."""
    left, top, pw, ph = plot
    v = 0.0
    while v <= y_max + 1e-9:
        yy = y(v)
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" fill="#555">{tick(v)}</text>')
        v += step
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#333"/>')
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>')


def render_svg(report: ReplayReport, *, title: str | None = None, width: int = 960, height: int = 360) -> str:
    """An SVG line chart of the context size over the model calls, compactions marked.

    Each compaction shows as a drop from its ``tokens_before`` to its ``tokens_after`` with a red
    marker (hover for the details); dashed lines show the soft and hard thresholds, a solid line
    the window (the budget, ``max_context_tokens - reserve``). A ring marks each call over the
    budget or answered with ``over_budget`` by ``prepare()``.

    Args:
        report: A :class:`ReplayReport`.
        title: The chart's title (the file name and figures by default). A long one wraps onto a
            second line and is then cut with "…" (the SVG's ``<title>`` keeps all of it).
        width: Width in pixels.
        height: Height in pixels.

    Returns:
        The SVG document as a string (well-formed XML).

    Example:
        >>> from context_compactor import ContextCompactor
        >>> from context_compactor.replay import replay
        >>> report = replay("examples/agent_session.json", ContextCompactor(max_context_tokens=3000))
        >>> with open("replay.svg", "w") as f:
        ...     _ = f.write(render_svg(report))
    """
    left, right, top, bottom = 72, 24, 44, 48
    if title is None:
        name = os.path.basename(report.file) if report.file else "transcript"
        stab = report.prefix_stability
        title = f"{name}: {len(report.turns)} model calls, {report.compaction_count} compactions" + (
            f", cache-prefix stability {stab:.0%}" if stab is not None else ""
        )
    # A long title wraps (then ends with "…") inside the width; the plot moves down for it.
    title_lines = _wrap(title, int((width - left - right) / _TITLE_CHAR_PX))
    top += _TITLE_LINE_PX * (len(title_lines) - 1)
    pw, ph = width - left - right, height - top - bottom
    turns = report.turns
    by_turn = {c.turn: c for c in report.compactions}
    window = report.budget
    peak = max(
        [report.hard_threshold, report.soft_threshold, window or 0]
        + [t.tokens for t in turns]
        + [c.tokens_before for c in report.compactions]
    )
    step = _nice_step(peak * 1.05)
    y_max = step * (int(peak * 1.05 / step) + 1)
    n = max(len(turns) - 1, 1)

    def x(k: float) -> float:
        return left + pw * k / n

    def y(v: float) -> float:
        return top + ph * (1 - v / y_max)

    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
    ]
    for k, line in enumerate(title_lines):
        out.append(
            f'<text class="title" x="{left}" y="{24 + _TITLE_LINE_PX * k}" font-size="14" '
            f'font-weight="bold">{escape(line)}</text>'
        )
    _grid(out, (left, top, pw, ph), y, y_max, step, _fmt_tokens)
    # x axis ticks (model calls).
    xstep = max(1, int(_nice_step(n, 8)))
    for k in range(0, len(turns), xstep):
        out.append(f'<text x="{x(k):.1f}" y="{top + ph + 16}" text-anchor="middle" fill="#555">{k}</text>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#333">model call</text>')
    out.append(
        f'<text x="16" y="{top + ph / 2:.1f}" text-anchor="middle" fill="#333" '
        f'transform="rotate(-90 16 {top + ph / 2:.1f})">context tokens</text>'
    )
    # Thresholds, and the window (the budget: over it is over the window), solid.
    lines = [(report.soft_threshold, "soft threshold", "#e69f00", "6 4")]
    if report.hard_threshold != window:
        lines.append((report.hard_threshold, "hard threshold", "#d55e00", "6 4"))
    if window is not None:
        label = "window (budget = hard threshold)" if report.hard_threshold == window else "window (budget)"
        lines.append((window, label, "#a50026", ""))
    for value, label, color, dash in lines:
        yy = y(value)
        out.append(
            f'<line class="threshold" x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="{color}"'
            + (f' stroke-dasharray="{dash}"/>' if dash else ' stroke-width="1.4"/>')
        )
        out.append(
            f'<text x="{left + pw - 4}" y="{yy - 4:.1f}" text-anchor="end" fill="{color}">{label} {value:,}</text>'
        )
    # The context size: a drop at each compaction.
    points: list[str] = []
    for k, t in enumerate(turns):
        c = by_turn.get(k)
        if c is not None:
            points.append(f"{x(k):.1f},{y(c.tokens_before):.1f}")
        points.append(f"{x(k):.1f},{y(t.tokens):.1f}")
    if points:
        out.append(f'<polyline fill="none" stroke="#0072b2" stroke-width="1.6" points="{" ".join(points)}"/>')
    for c in report.compactions:
        k = c.turn
        if k >= len(turns):
            continue
        after = turns[k].tokens
        tip = (
            f"call {k} (message {c.message_index}): {c.strategy}, {c.tokens_before:,} → {c.tokens_after:,} tokens, "
            f"facts kept {c.facts_kept}/{c.facts_total}"
        )
        out.append(
            f'<line x1="{x(k):.1f}" y1="{y(c.tokens_before):.1f}" x2="{x(k):.1f}" y2="{y(after):.1f}" '
            f'stroke="#cc3311" stroke-width="1.2" stroke-dasharray="2 2"/>'
        )
        out.append(
            f'<circle class="compaction" cx="{x(k):.1f}" cy="{y(after):.1f}" r="4" fill="#cc3311">'
            f"<title>{escape(tip)}</title></circle>"
        )
    # Over budget: a ring round the context sent (after any compaction of that call).
    for k, t in enumerate(turns):
        if t.over_by > 0 or t.over_budget:
            tip = f"call {k} (message {t.message_index}): {t.tokens:,} tokens, " + (
                f"over the window by {t.over_by:,}" if t.over_by > 0 else "over budget (above the soft threshold)"
            )
            out.append(
                f'<circle class="over-budget" cx="{x(k):.1f}" cy="{y(t.tokens):.1f}" r="7" fill="none" '
                f'stroke="#a50026" stroke-width="1.5"><title>{escape(tip)}</title></circle>'
            )
    legend_y = top - 8
    out.append(
        f'<line x1="{left + pw - 300}" y1="{legend_y}" x2="{left + pw - 280}" y2="{legend_y}" stroke="#0072b2"/>'
    )
    out.append(f'<text x="{left + pw - 276}" y="{legend_y + 4}">context sent</text>')
    out.append(f'<circle cx="{left + pw - 180}" cy="{legend_y}" r="4" fill="#cc3311"/>')
    out.append(f'<text x="{left + pw - 172}" y="{legend_y + 4}">compaction</text>')
    if any(t.over_by > 0 or t.over_budget for t in turns):
        out.append(
            f'<circle cx="{left + pw - 90}" cy="{legend_y}" r="6" fill="none" stroke="#a50026" stroke-width="1.5"/>'
        )
        out.append(f'<text x="{left + pw - 80}" y="{legend_y + 4}">over budget</text>')
    desc = {"file": report.file, "compactions": report.compaction_count, "over_window": len(report.over_window_turns)}
    out.append(f"<desc>{escape(json.dumps(desc))}</desc>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


#: Colours of the series of :func:`line_chart` (Okabe-Ito, readable by the colour-blind).
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")


def line_chart(
    series: dict[str, list[float]],
    *,
    title: str,
    y_label: str,
    x_label: str = "model call",
    fmt: str = "tokens",
    hlines: dict[str, float] | None = None,
    width: int = 900,
    height: int = 300,
) -> str:
    """An SVG chart of one line per series over the same x (the index), with a legend.

    Args:
        series: Name → values (one per x).
        title: The chart's title.
        y_label: The y axis' label.
        x_label: The x axis' label.
        fmt: ``"tokens"`` (12k), ``"dollars"`` ($0.012) or ``"percent"`` (values 0-100) for the y ticks.
        hlines: Dashed horizontal lines, name → value (a window, a threshold).
        width: Width in pixels.
        height: Height in pixels.

    Returns:
        The SVG element as a string (no XML declaration: it goes inline in HTML).
    """
    left, right, top, bottom = 78, 24, 44, 42
    pw, ph = width - left - right, height - top - bottom
    hl = hlines or {}
    values = [v for vs in series.values() for v in vs] + list(hl.values())
    peak = max(values, default=1.0) or 1.0
    step = _nice_step(peak * 1.05)
    y_max = step * (int(peak * 1.05 / step) + 1)
    if fmt == "percent":  # a share: the axis is 0-100%, whatever the data
        step, y_max = 20.0, 100.0
    n = max(max((len(v) for v in series.values()), default=1) - 1, 1)

    def x(k: float) -> float:
        return left + pw * k / n

    def y(v: float) -> float:
        return top + ph * (1 - v / y_max)

    def tick(v: float) -> str:
        if fmt == "percent":
            return f"{v:g}%"
        return _fmt_tokens(v) if fmt == "tokens" else f"${v:.4g}"

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" role="img">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">{escape(_wrap(title, 90, 1)[0])}</text>',
    ]
    _grid(out, (left, top, pw, ph), y, y_max, step, tick)
    xstep = max(1, int(_nice_step(n, 8)))
    for k in range(0, n + 1, xstep):
        out.append(f'<text x="{x(k):.1f}" y="{top + ph + 16}" text-anchor="middle" fill="#555">{k}</text>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#333">{x_label}</text>')
    out.append(
        f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" fill="#333" '
        f'transform="rotate(-90 14 {top + ph / 2:.1f})">{escape(y_label)}</text>'
    )
    for name, value in hl.items():
        yy = y(value)
        out.append(
            f'<line class="hline" x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#a50026" '
            f'stroke-dasharray="6 4"/>'
        )
        out.append(f'<text x="{left + pw - 4}" y="{yy - 4:.1f}" text-anchor="end" fill="#a50026">{escape(name)}</text>')
    lx = left + 8
    for i, (name, vs) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{x(k):.1f},{y(val):.1f}" for k, val in enumerate(vs))
        if pts:
            out.append(
                f'<polyline class="series" data-series="{escape(name)}" fill="none" stroke="{color}" '
                f'stroke-width="1.6" points="{pts}"/>'
            )
        out.append(
            f'<line x1="{lx}" y1="{top - 10}" x2="{lx + 18}" y2="{top - 10}" stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{lx + 22}" y="{top - 6}">{escape(name)}</text>')
        lx += 30 + 7 * len(name)
    out.append("</svg>")
    return "\n".join(out)

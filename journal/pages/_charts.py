"""Charts of the journal report as inline SVG, computed here: no charting library, nothing for the page to fetch or run.

Each chart is one ``<svg>`` whose columns are ``<g class="col" data-col="...">``
(a day, a week or a digest), one per column, so that a reader (or a test)
can tell what each column holds; every mark carries a ``<title>`` with its
figures. Colours come from the page's style by class (``k0``...``k5``), or
are presentation attributes: the page's policy allows no ``style=``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from journal.frame.htmlpage import text

__all__ = ["heat_grid", "line_chart", "link_chart", "stacked_bars"]

_WIDTH: Final = 720
_LEFT: Final = 34
_LABELS_LEFT: Final = 170
_HEIGHT: Final = 150
_ROW: Final = 16


def _step(columns: int, left: int) -> float:
    return (_WIDTH - left - 4) / max(columns, 1)


def _tick_every(columns: int) -> int:
    """Label every n-th column so that labels never overlap (about twelve per chart)."""
    return max(1, -(-columns // 12))


def _svg(height: float, label: str, inner: list[str]) -> str:
    return f'<svg class="chart" viewBox="0 0 {_WIDTH} {height:.0f}" role="img" aria-label="{text(label)}">' + "".join(inner) + "</svg>"


def stacked_bars(
    columns: Sequence[str],
    counts: Mapping[str, Mapping[str, int]],
    series: Sequence[str],
    label: str,
    *,
    unit: str = "entries",
    classes: Sequence[str] = (),
) -> str:
    """One stacked bar per column: how many of each *series* (a kind) it holds, in *unit*.

    Each series is coloured by its class in *classes*, else by its index (``k0``...``k5``).
    """
    top = max((sum(counts.get(column, {}).values()) for column in columns), default=0) or 1
    step = _step(len(columns), _LEFT)
    plot = _HEIGHT - 20
    inner = [f'<text x="{_LEFT - 4}" y="10" text-anchor="end">{top}</text>', f'<text x="{_LEFT - 4}" y="{plot}" text-anchor="end">0</text>']
    every = _tick_every(len(columns))
    for index, column in enumerate(columns):
        held = counts.get(column, {})
        x = _LEFT + index * step
        parts = [f'<g class="col" data-col="{text(column)}" data-count="{sum(held.values())}">']
        summary = ", ".join(f"{name} {held[name]}" for name in series if held.get(name))
        parts.append(f"<title>{text(column)}: {sum(held.values())} {unit}{' (' + text(summary) + ')' if summary else ''}</title>")
        y = float(plot)
        for position, name in enumerate(series):
            if not held.get(name):
                continue
            height = plot * held[name] / top
            y -= height
            colour = classes[position] if position < len(classes) else f"k{position % 6}"
            parts.append(f'<rect class="{colour}" x="{x + step * 0.1:.2f}" y="{y:.2f}" width="{step * 0.8:.2f}" height="{height:.2f}"/>')
        parts.append("</g>")
        inner.extend(parts)
        if index % every == 0:
            inner.append(f'<text x="{x + step / 2:.1f}" y="{_HEIGHT - 6}" text-anchor="middle">{text(column[5:])}</text>')
    return _svg(_HEIGHT, label, inner)


def line_chart(columns: Sequence[str], values: Mapping[str, float], label: str, *, low: float = 0.0, high: float = 1.0) -> str:
    """A line through one point per column that has a value (the others are left out, not drawn as zero)."""
    step = _step(len(columns), _LEFT)
    plot = _HEIGHT - 20
    span = (high - low) or 1.0
    inner = [
        f'<text x="{_LEFT - 4}" y="10" text-anchor="end">{high:g}</text>',
        f'<text x="{_LEFT - 4}" y="{plot}" text-anchor="end">{low:g}</text>',
        f'<line x1="{_LEFT}" y1="{plot}" x2="{_WIDTH - 4}" y2="{plot}" stroke="#d8dde2"/>',
    ]
    points = []
    marks = []
    every = _tick_every(len(columns))
    for index, column in enumerate(columns):
        x = _LEFT + index * step + step / 2
        if index % every == 0:
            inner.append(f'<text x="{x:.1f}" y="{_HEIGHT - 6}" text-anchor="middle">{text(column[5:])}</text>')
        if column not in values:
            continue
        value = min(max(values[column], low), high)
        y = plot - plot * (value - low) / span
        points.append(f"{x:.2f},{y:.2f}")
        marks.append(
            f'<g class="col" data-col="{text(column)}"><title>{text(column)}: {values[column]:.2f}</title>'
            f'<circle cx="{x:.2f}" cy="{y:.2f}" r="2.2" fill="#4e79a7"/></g>'
        )
    if points:
        inner.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="#4e79a7" stroke-width="1.2"/>')
    inner.extend(marks)
    return _svg(_HEIGHT, label, inner)


def heat_grid(
    columns: Sequence[str], rows: Sequence[str], counts: Mapping[tuple[str, str], int], label: str, *, unit: str = "entries"
) -> str:
    """One row per *rows* item (a theme, a tag, a mood, a focus), one column per *columns*; darker where the count is higher."""
    step = _step(len(columns), _LABELS_LEFT)
    height = 24 + _ROW * len(rows)
    top = max(counts.values(), default=0) or 1
    inner = []
    for position, row in enumerate(rows):
        y = 4 + position * _ROW
        inner.append(
            f'<text x="{_LABELS_LEFT - 6}" y="{y + _ROW * 0.7:.1f}" text-anchor="end">{text(row if len(row) <= 28 else row[:27] + "…")}</text>'
        )
    every = _tick_every(len(columns))
    for index, column in enumerate(columns):
        x = _LABELS_LEFT + index * step
        parts = [f'<g class="col" data-col="{text(column)}">']
        for position, row in enumerate(rows):
            count = counts.get((row, column), 0)
            if not count:
                continue
            y = 4 + position * _ROW
            parts.append(
                f'<rect x="{x:.2f}" y="{y}" width="{max(step - 0.5, 0.5):.2f}" height="{_ROW - 2}" fill="#4e79a7" '
                f'fill-opacity="{0.15 + 0.85 * count / top:.2f}"><title>{text(column)}, {text(row)}: {count} {unit}</title></rect>'
            )
        parts.append("</g>")
        inner.extend(parts)
        if index % every == 0:
            inner.append(
                f'<text x="{x + step / 2:.1f}" y="{height - 6}" text-anchor="middle">{text(column[5:] if column[4:5] == "-" else column)}</text>'
            )
    return _svg(height, label, inner)


def link_chart(points: Sequence[tuple[str, float, float, int, str]], links: Sequence[tuple[str, str, str]], label: str) -> str:
    """Entries as dots (x: time across the window, 0 to 1; y: hour of the day, 0 to 24) and links as lines between them.

    *points* are ``(key, x, hour, colour index, title)``, each dot a link to ``#key``; *links* are
    ``(from key, to key, kind)`` with kind ``continues`` or ``corrects`` (drawn red and thicker).
    """
    height = _HEIGHT + 30
    plot = height - 22
    place = {key: (_LEFT + x * (_WIDTH - _LEFT - 8), 6 + (plot - 6) * hour / 24) for key, x, hour, _, _ in points}
    inner = [f'<text x="{_LEFT - 4}" y="12" text-anchor="end">0h</text>', f'<text x="{_LEFT - 4}" y="{plot}" text-anchor="end">24h</text>']
    for source, target, kind in links:
        (x1, y1), (x2, y2) = place[source], place[target]
        colour, width = ("#e15759", 1.6) if kind == "corrects" else ("#4e79a7", 0.8)
        inner.append(
            f'<line class="link {kind}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
            f'stroke-width="{width}" stroke-opacity="0.6"/>'
        )
    for key, _, _, colour_index, title in points:
        x, y = place[key]
        inner.append(
            f'<a href="#{key}"><circle class="k{colour_index % 6}" cx="{x:.1f}" cy="{y:.1f}" r="2.4"><title>{text(title)}</title></circle></a>'
        )
    return _svg(height, label, inner)

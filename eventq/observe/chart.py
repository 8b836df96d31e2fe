"""A line chart as inline SVG (pure): the dashboard needs no JavaScript to draw."""

from __future__ import annotations

from html import escape

COLORS = ("#2b6cb0", "#c05621", "#2f855a", "#c53030", "#6b46c1")


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def line_chart(series: dict[str, list[tuple[float, float]]], title: str,
               width: int = 640, height: int = 180, unit: str = "") -> str:
    """An SVG of the series (each [(t seconds, value)]) over their common time span."""
    pad_left, pad_bottom, pad_top = 48, 20, 22
    points = [p for values in series.values() for p in values]
    head = (f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
            f'<text x="4" y="14" class="chart-title">{escape(title)}</text>')
    if len({t for t, _ in points}) < 2:
        return head + (f'<text x="{width // 2}" y="{height // 2}" text-anchor="middle" '
                       'class="chart-empty">collecting samples (one every 5 s)</text></svg>')
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    top = _nice_max(max(v for _, v in points))
    plot_w, plot_h = width - pad_left - 8, height - pad_top - pad_bottom

    def xy(t: float, v: float) -> str:
        x = pad_left + (t - t0) / (t1 - t0) * plot_w
        y = pad_top + plot_h - v / top * plot_h
        return f"{x:.1f},{y:.1f}"

    parts = [head,
             f'<line x1="{pad_left}" y1="{pad_top + plot_h}" x2="{width - 8}" '
             f'y2="{pad_top + plot_h}" class="axis"/>',
             f'<text x="{pad_left - 4}" y="{pad_top + 4}" text-anchor="end" class="tick">'
             f'{top:g}{escape(unit)}</text>',
             f'<text x="{pad_left - 4}" y="{pad_top + plot_h}" text-anchor="end" '
             'class="tick">0</text>',
             f'<text x="{pad_left}" y="{height - 4}" class="tick">-{(t1 - t0) / 60:.1f} min</text>',
             f'<text x="{width - 8}" y="{height - 4}" text-anchor="end" class="tick">now</text>']
    legend_x = 16 + 7 * len(title)  # after the title
    for i, (name, values) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        if values:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                         f'points="{" ".join(xy(t, v) for t, v in values)}"/>')
        parts.append(f'<text x="{legend_x}" y="14" fill="{color}" class="legend">'
                     f'{escape(name)}</text>')
        legend_x += 12 + 8 * len(name)
    parts.append("</svg>")
    return "".join(parts)

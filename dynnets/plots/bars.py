"""Grouped horizontal bar charts as SVG, written directly (no plotting library needed).

Used by ``experiments/execution_strategies.py`` for sentences/s of each
execution strategy, training and evaluation side by side.
"""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .trees import FONT_FAMILY, text_width

__all__ = ["SERIES_COLOURS", "bars_svg"]

#: Okabe-Ito colours (distinct under the common colour-vision deficiencies).
SERIES_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00")


def _f(v):
    return f"{v:.1f}".rstrip("0").rstrip(".")


def bars_svg(labels, series, *, title="", unit="", bar_height=12.0, plot_width=420.0, font_size=12.0):
    """A horizontal grouped bar chart.

    Parameters
    ----------
    labels : sequence of str
        One group of bars per label, top to bottom.
    series : dict name -> sequence of float or None
        One bar per label for each series (None: no bar, "n/a" written).
    title, unit : str
        Caption, and the unit written after each value.

    Returns
    -------
    str
        A standalone SVG document; each bar is a ``<rect class="bar">`` with
        ``data-label``, ``data-series`` and ``data-value``.
    """
    labels = list(labels)
    names = list(series)
    for name in names:
        if len(series[name]) != len(labels):
            raise ValueError(f"bars_svg: series {name!r} has {len(series[name])} values for {len(labels)} labels")
    values = [v for name in names for v in series[name] if v is not None]
    top = max(values, default=0.0) or 1.0
    f = font_size
    margin = 10.0
    label_w = max((text_width(s, f) for s in labels), default=0.0) + 10.0
    value_w = text_width(f"{top:,.0f} {unit}", 0.85 * f) + 8.0
    group_h = bar_height * len(names) + 8.0
    legend_y = margin + 1.1 * f + 8.0
    y0 = legend_y + f + 10.0
    width = max(margin * 2 + label_w + plot_width + value_w, 2 * margin + text_width(title, f))
    height = y0 + group_h * len(labels) + margin
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
           f'viewBox="0 0 {_f(width)} {_f(height)}" font-family="{FONT_FAMILY}" font-size="{_f(f)}" '
           f'role="img" aria-label={quoteattr(title)}>',
           f"<title>{escape(title)}</title>", '<rect width="100%" height="100%" fill="#ffffff"/>',
           f'<text class="caption" x="{_f(margin)}" y="{_f(margin + 1.1 * f)}">{escape(title)}</text>']
    x = margin + label_w
    for s, name in enumerate(names):
        colour = SERIES_COLOURS[s % len(SERIES_COLOURS)]
        out.append(f'<rect x="{_f(x)}" y="{_f(legend_y)}" width="{_f(f)}" height="{_f(f)}" fill="{colour}"/>')
        out.append(f'<text x="{_f(x + 1.4 * f)}" y="{_f(legend_y + 0.85 * f)}">{escape(name)}</text>')
        x += 1.4 * f + text_width(name, f) + 1.5 * f
    x0 = margin + label_w
    for i, label in enumerate(labels):
        gy = y0 + i * group_h
        out.append(f'<text x="{_f(x0 - 6)}" y="{_f(gy + group_h / 2)}" text-anchor="end">{escape(label)}</text>')
        for s, name in enumerate(names):
            v = series[name][i]
            by = gy + s * bar_height
            if v is None:
                out.append(f'<text x="{_f(x0 + 2)}" y="{_f(by + 0.8 * bar_height)}" font-size="{_f(0.85 * f)}" '
                           f'fill="#666666">n/a</text>')
                continue
            w = plot_width * float(v) / top
            colour = SERIES_COLOURS[s % len(SERIES_COLOURS)]
            out.append(f'<rect class="bar" data-label={quoteattr(label)} data-series={quoteattr(name)} '
                       f'data-value="{float(v):.6g}" x="{_f(x0)}" y="{_f(by)}" width="{_f(w)}" '
                       f'height="{_f(bar_height - 1)}" fill="{colour}"/>')
            out.append(f'<text x="{_f(x0 + w + 4)}" y="{_f(by + 0.8 * bar_height)}" font-size="{_f(0.85 * f)}">'
                       f'{float(v):,.0f} {escape(unit)}</text>')
    out.append(f'<line x1="{_f(x0)}" y1="{_f(y0 - 2)}" x2="{_f(x0)}" y2="{_f(height - margin)}" stroke="#444444"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"

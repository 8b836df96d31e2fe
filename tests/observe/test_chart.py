"""The dashboard's charts (eventq/observe/chart.py): inline SVG."""

from __future__ import annotations

from eventq.observe.chart import line_chart


def test_a_chart_is_inline_svg_and_says_when_it_has_no_data_yet():
    empty = line_chart({"ready": []}, "jobs <q>")
    assert empty.startswith("<svg") and "collecting samples" in empty
    assert "jobs &lt;q&gt;" in empty and "<q>" not in empty
    chart = line_chart({"ready": [(0, 1), (5, 3)], "leased": [(0, 0), (5, 0)]}, "jobs")
    assert chart.count("<polyline") == 2 and chart.endswith("</svg>")

"""The SVG bar chart: one bar per label and series, lengths proportional to the values."""
import xml.etree.ElementTree as ET

import pytest

from dynnets.plots.bars import SERIES_COLOURS, bars_svg

NS = "{http://www.w3.org/2000/svg}"


def test_bars_proportional_and_labelled():
    svg = bars_svg(["a", "b"], {"train": [100.0, 400.0], "eval": [50.0, None]}, title="t", unit="sent/s")
    bars = [r for r in ET.fromstring(svg).iter(f"{NS}rect") if r.get("class") == "bar"]
    got = {(r.get("data-label"), r.get("data-series")): (float(r.get("data-value")), float(r.get("width")),
                                                         r.get("fill")) for r in bars}
    assert set(got) == {("a", "train"), ("b", "train"), ("a", "eval")}
    longest = got[("b", "train")][1]
    for (label, series), (v, w, fill) in got.items():
        assert w == pytest.approx(longest * v / 400.0, abs=0.06)
        assert fill == SERIES_COLOURS[0 if series == "train" else 1]
    assert "n/a" in svg and "400 sent/s" in svg


def test_bars_length_mismatch():
    with pytest.raises(ValueError, match="series 'x' has 1 values for 2 labels"):
        bars_svg(["a", "b"], {"x": [1.0]})

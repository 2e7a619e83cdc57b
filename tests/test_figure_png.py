"""Every replay's figure is written by replays.outputs.save_png as a palette PNG: results/ commits
all of them under a few-MB cap (tests/test_evidence_files.py), so the encoding is checked on a
real matplotlib drawing, not assumed."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from replays import outputs


def _draw():
    plt = outputs.pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for i in range(6):
        ax.plot(range(40), [(x * (i + 1)) % 17 for x in range(40)], marker="o", label=f"series {i}")
    ax.fill_between(range(40), 0, 3, alpha=0.2)
    ax.legend()
    return fig


def test_a_replay_figure_is_a_palette_png_of_the_same_drawing_and_the_same_bytes_twice(tmp_path: Path):
    a, b = outputs.save_png(_draw(), tmp_path / "a.png"), outputs.save_png(_draw(), tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()  # no time or version stamped in it
    buf = io.BytesIO()
    _draw().savefig(buf, format="png", dpi=outputs.DPI)  # what matplotlib alone writes
    with Image.open(a) as small, Image.open(io.BytesIO(buf.getvalue())) as full:
        assert small.mode == "P" and small.size == full.size
        assert "Software" not in small.info
        # the same picture: only anti-aliased edge pixels move, and not far (quantized, not dithered)
        pixels = zip(small.convert("RGB").tobytes(), full.convert("RGB").tobytes(), strict=True)
        diff = sorted(abs(p - q) for p, q in pixels)
        assert diff[-1] < 64 and diff[int(len(diff) * 0.999)] <= 32 and sum(diff) / len(diff) < 1.0
    assert a.stat().st_size < len(buf.getvalue()) * 0.7
    assert not list(tmp_path.glob("*.tmp*"))  # written through a temporary name, which is gone

"""What a test can check in a drawn figure without comparing it to a stored picture: which
colours the drawing puts down. A file size says nothing (a palette PNG of the same plot is a few
kB larger or smaller with its numbers); the series' colours say that the series were drawn."""

from __future__ import annotations

from pathlib import Path

from PIL import Image


def drawn_colours(path: Path, min_share: float = 0.001) -> set[tuple[int, int, int]]:
    """The saturated colours (not white, grey or black: the axes, text and grid) that cover at
    least `min_share` of the figure's pixels: the series, bars and bands it shows."""
    with Image.open(path) as im:
        rgb = im.convert("RGB")
        total = rgb.size[0] * rgb.size[1]
        counts = rgb.getcolors(total) or []
    return {c for n, c in counts if n >= min_share * total and max(c) - min(c) > 60}

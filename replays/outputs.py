"""The one report writer of every replay kind: a figure's files in its folder results/<name>/.

An emulated figure (replays.report), a model figure (replays.modelfig_report) and the matrix
(replays.matrix_report) each supply what is theirs: the markdown, the data as JSON, the table's
columns and rows, the plots as functions drawing into a path. This module writes them, in the
same encodings for all three (CSV as csv.DictWriter writes it, JSON indented by one, PNGs at
120 dpi in a 256-colour palette), through one `write_text` and one `save_png`: the only places a
replay's result files are written, so how they are written (e.g. atomically) is decided once.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from topologies.files import atomic_path, write_text_atomic

#: the resolution of every replay's figures (tens of KB each as a palette PNG, what results/ commits)
DPI = 120
#: colours of a figure's PNG (`palette_png`)
COLOURS = 256


def write_text(path: Path, text: str) -> Path:
    """Write one result file (its folder made) whole, through a temporary name and a rename
    (topologies.files); the one place a replay's text outputs are written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
    return path


def csv_text(fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """The table as csv.DictWriter writes it (header, \\r\\n line ends); keys not in `fields` left out."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow(row)
    return buf.getvalue()


def write_csv(path: Path, fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    return write_text(path, csv_text(fields, rows))


def json_text(data: BaseModel | Any) -> str:
    """A report's data: a pydantic model as model_dump_json, anything else as json.dumps, indent 1."""
    return data.model_dump_json(indent=1) if isinstance(data, BaseModel) else json.dumps(data, indent=1)


def write_json(path: Path, data: BaseModel | Any) -> Path:
    return write_text(path, json_text(data))


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend: replays draw files, never windows (and run without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(canvas: Any, path: Path, dpi: int = DPI) -> Path:
    """Save a matplotlib figure as a palette PNG (`png_bytes`) and close it; the one place a
    replay's figures are written."""
    data = png_bytes(canvas, dpi=dpi)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path


def png_bytes(canvas: Any, text: Mapping[str, str] | None = None, dpi: int = DPI) -> bytes:
    """A matplotlib figure as palette PNG bytes (`palette_png`, `text` its metadata), the figure
    closed: what save_png writes, and what the benchmarks' figures (replays.benchfigures) compare
    with the file before writing it."""
    buf = io.BytesIO()
    canvas.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    pyplot().close(canvas)
    return palette_png(buf.getvalue(), text)


def palette_png(png: bytes, text: Mapping[str, str] | None = None) -> bytes:
    """The PNG in `COLOURS` colours, without dithering, with `text` as its only metadata (no time
    nor version: the same drawing gives the same bytes). A plot has few colours: this is about a
    third of the bytes of matplotlib's RGBA and the same to the eye, and results/ commits every
    figure under a few-MB cap (tests/test_evidence_files.py)."""
    from PIL import Image, PngImagePlugin

    with Image.open(io.BytesIO(png)) as im:
        small = im.convert("RGB").quantize(colors=COLOURS, dither=Image.Dither.NONE)
    info = PngImagePlugin.PngInfo()
    for k, v in (text or {}).items():
        info.add_text(k, v)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True, pnginfo=info)
    return out.getvalue()


@dataclass(frozen=True)
class Table:
    """The figure's data as CSV: file name, columns, rows (dicts; keys beyond the columns ignored)."""

    name: str
    fields: Sequence[str]
    rows: Iterable[Mapping[str, Any]]


@dataclass(frozen=True)
class ReportFiles:
    """What one replay writes into its folder; each kind fills in its own.

    `markdown` and `data` are (file name, content): report.md / report.json for figures and model
    figures, matrix.md / matrix.json for the matrix. `plots` are (file name, draw) with draw taking
    the path to write."""

    markdown: tuple[str, str]
    data: tuple[str, BaseModel | Any]
    table: Table
    plots: Sequence[tuple[str, Callable[[Path], None]]] = field(default_factory=tuple)


def write_report_files(out: Path, files: ReportFiles) -> list[Path]:
    """Every file of a replay's report in `out`: the table, the plots, the markdown, the data."""
    written = [write_csv(out / files.table.name, files.table.fields, files.table.rows)]
    for name, draw in files.plots:
        draw(out / name)
        written.append(out / name)
    written.append(write_text(out / files.markdown[0], files.markdown[1]))
    written.append(write_json(out / files.data[0], files.data[1]))
    return written

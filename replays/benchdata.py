"""Where a benchmark's data table lives in results/bench/, and reading and writing it.

A benchmark writes <stem>.json; one longer than GZIP_DATA_BYTES is kept as <stem>.json.gz
instead, since results/ has a size cap (tests/test_evidence_files.py) and the flow-model
calibration's table alone is ~0.9 MB of JSON. Its own module, apart from replays.evidence, so that
the figures' replays (whose staleness follows their import closure) do not depend on it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from topologies.files import atomic_open

#: a benchmark's data larger than this is kept gzipped as <stem>.json.gz
GZIP_DATA_BYTES = 256 * 1024


def bench_data_path(folder: Path, stem: str) -> Path:
    """Where benchmark `stem`'s data is: <stem>.json.gz if it was big enough to be gzipped
    (write_bench_data), else <stem>.json (which may not exist)."""
    gz = folder / f"{stem}.json.gz"
    return gz if gz.is_file() else folder / f"{stem}.json"


def read_data_bytes(path: Path) -> bytes:
    """A data file's JSON text as bytes, gunzipped if its name ends in .gz."""
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def read_bench_data(folder: Path, stem: str) -> Any:
    """Benchmark `stem`'s data (bench_data_path), parsed."""
    return json.loads(read_data_bytes(bench_data_path(folder, stem)))


def write_bench_data(folder: Path, stem: str, text: str) -> str:
    """Write benchmark `stem`'s data whole: <stem>.json, or <stem>.json.gz (gzip -9, mtime 0, so
    the same data gives the same bytes) when longer than GZIP_DATA_BYTES; the other name is
    removed so that a reader never finds an older table beside the new one. Returns the file name
    (the summary's `files.data`)."""
    raw = text.encode()
    big = len(raw) > GZIP_DATA_BYTES
    name = f"{stem}.json.gz" if big else f"{stem}.json"
    with atomic_open(folder / name, "wb") as f:
        f.write(gzip.compress(raw, compresslevel=9, mtime=0) if big else raw)
    (folder / (f"{stem}.json" if big else f"{stem}.json.gz")).unlink(missing_ok=True)
    return name

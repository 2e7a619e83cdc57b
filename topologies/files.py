"""Result files written whole or not at all: a temporary name in the same folder, then a rename.

A run, a replay or a benchmark killed half-way (SIGKILL, a full disk, Ctrl-C at the wrong moment)
must never leave a reader half a summary.json, nor half of one beside the previous run's whole
one. Every writer of a result (runs/, replays/, benchmarks/, the calibration caches) goes through
these helpers: the text goes to a hidden temporary file beside the target, which `os.replace`
renames onto it in one step (atomic within one file system, hence the same folder). A reader sees
the old file or the new one, never a mix; a write that fails leaves the old file as it was and
removes its temporary.

This module sits on the lowest floor (stdlib only) so that every package can import it without an
upward import; reading YAML, the other file helper every floor shares, is topologies.spec's.
No fsync: the rename guards against a killed process, which is what happens to runs; a power cut
is not what these files have to survive.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def temporary_beside(path: Path) -> Path:
    """A hidden name in `path`'s folder, unique to this write, that keeps its suffix (matplotlib
    and the like choose the format from it): .summary.1234-ab12cd.tmp.json."""
    return path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:6]}.tmp{path.suffix}")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write `path` through (for writers that take a file name: savefig,
    copyfile): renamed onto `path` when the block ends without an exception, removed otherwise."""
    target = Path(path)
    tmp = temporary_beside(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)  # after the rename there is nothing left to remove


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", newline: str | None = None) -> Iterator[IO[Any]]:
    """`open(path, mode)` whose file appears under `path` only once closed whole (csv writers)."""
    with atomic_path(path) as tmp, open(tmp, mode, newline=newline) as f:
        yield f


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a temporary name and a rename; returns the path."""
    with atomic_open(path) as f:
        f.write(text)
    return Path(path)


def write_json_atomic(path: str | Path, data: Any, indent: int | None = 1, **kw: Any) -> Path:
    """`data` as JSON (indent 1, the results' layout) into `path`, written atomically."""
    return write_text_atomic(path, json.dumps(data, indent=indent, **kw))

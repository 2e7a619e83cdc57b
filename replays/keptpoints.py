"""A model figure's kept points: reused only where the code that would compute them now is the code
that did.

A model or scheme figure (replays.modelreplay, replays.schemefig_replay) saves each point it
computes, so that a rerun computes only what changed. A saved point with the same spec is not yet
the same number: the flow model or the scheme code may have changed since.
So each point records the tree it was computed on (`computed_on`: commit and local changes,
replays.provenance), and is reused only where nothing its computing module reaches changed between
that tree and the tree now (replays.staleness.against_tree over the point's dependencies, the
same test an emulated sweep applies to its kept repetitions, replays.sweep.drop_other_code). A
point saved without that record is computed again.

The figure's provenance is then that of the last replay that computed points (`run.json`,
replays.figsummary.run_record): a replay that only reused points keeps it, with its wall time, as
a resumed emulated sweep does; it never passes for a run of its own (the wall time of reading
points back, on today's date).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from replays import figsummary
from replays.provenance import REPO, Provenance
from replays.staleness import CURRENT, against_tree
from topologies.files import write_json_atomic

LOG = logging.getLogger(__name__)


def stamp(point: dict[str, Any], started: Provenance) -> dict[str, Any]:
    """The point with the tree it was computed on."""
    computed_on = {"commit": started.commit, "dirty_files": started.dirty_files, "date": started.date}
    return {**point, "computed_on": computed_on}


class KeptPoints:
    """Saved points of one replay, judged against the tree `now` over `depends_on` (the point's
    computing module, named, and the folders and files it reads); one verdict per recorded tree."""

    def __init__(self, now: Provenance, depends_on: list[str], repo: Path = REPO) -> None:
        self.now = now
        self.depends_on = depends_on
        self.repo = repo
        self._verdicts: dict[str, str] = {}

    def _same_code(self, computed_on: dict[str, Any]) -> str:
        """'' where the tree it was computed on computes what the tree now would, else why not."""
        key = json.dumps(computed_on.get("commit")) + json.dumps(computed_on.get("dirty_files") or {}, sort_keys=True)
        if key not in self._verdicts:
            st = against_tree(
                computed_on.get("commit"),
                computed_on.get("dirty_files") or {},
                self.now.commit,
                self.now.dirty_files,
                self.depends_on,
                self.repo,
            )
            self._verdicts[key] = "" if st.state == CURRENT else st.text
        return self._verdicts[key]

    def get(self, path: Path, spec: dict[str, Any], due: tuple[str, ...] = ()) -> dict[str, Any] | None:
        """The point saved at `path` if it has this spec, a value for each field `due` and was
        computed on the same code; else None (one log line says why a point with this spec is
        computed again)."""
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or saved.get("spec") != spec or any(saved.get(f) is None for f in due):
            return None
        computed_on = saved.get("computed_on")
        why = "no record of the code it was computed on" if not computed_on else self._same_code(computed_on)
        if why:
            LOG.info("%s: computed again (%s)", path.name, why)
            return None
        return saved


def replay_provenance(out: Path, computed: bool, wall_s: float, started: Provenance) -> tuple[float, Provenance]:
    """The wall time and provenance a model figure's report records: this replay's where it
    computed points (then kept in `out`/run.json), else those of the last replay that did."""
    if computed:
        write_json_atomic(out / "run.json", figsummary.run_record(wall_s, 0.0, started), indent=None)
        return wall_s, started
    last_wall, last = figsummary.last_run(out)
    return (last_wall, last) if last is not None and last_wall is not None else (wall_s, started)

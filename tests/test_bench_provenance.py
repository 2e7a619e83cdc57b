"""Every benchmark's record (benchmarks/common.py): its json carries the provenance block of
replays.provenance, and a figure-level summary (kind "benchmark") lands beside its json and md,
which the reproduction page reads. Written here from a benchmark's own helpers with a small result,
nothing emulated (the benchmarks themselves run as root: scripts/bench_*.sh)."""

from __future__ import annotations

import json
import subprocess

from benchmarks.common import bench_parser, meta, write_results
from replays import reproduction
from replays.evidence import read_summary
from replays.provenance import REPO


def test_write_results_adds_provenance_and_the_summary(tmp_path, capsys):
    out = tmp_path / "results" / "bench"
    args = bench_parser("bench_schemes", None, "the quick one").parse_args(["--quick", "--out", str(out)])
    out.mkdir(parents=True)
    res = {"meta": meta(args), "points": [{"gst_s": 1.5}]}
    res["meta"]["wall_s"] = 3.25
    write_results(out, "schemes", "Scheme benchmark", res, "| a |\n|---|\n| 1 |", args.quick)
    data = json.loads((out / "schemes.json").read_text())
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    p = data["provenance"]
    assert (p["commit"], p["wall_s"], p["quick"]) == (head.strip(), 3.25, True)
    assert p["machine"]["cores"] and p["date"] and "provenance" not in data["meta"]
    assert data["meta"]["git_commit"] == head.strip()  # the existing fields stay
    assert (out / "schemes.md").read_text().startswith("# Scheme benchmark (quick, ")
    s = read_summary(out / "schemes.summary.json")
    assert s is not None and (s.kind, s.paper, s.quick) == ("benchmark", None, True)
    assert s.command == "scripts/bench_schemes.sh --quick"
    assert (s.files.report, s.files.data) == ("schemes.md", "schemes.json")
    assert s.provenance.model_dump() == p
    for dep in s.depends_on:  # every dependency names something that exists
        assert (REPO / dep).exists(), dep
    assert "benchmarks/schemes.py" in s.depends_on and "emulation/" in s.depends_on
    assert "schemes.summary.json" in capsys.readouterr().out
    # the page shows it under the testbed's own results
    entry = next(e for sec in reproduction.collect(tmp_path / "results") for e in sec.entries if e.name == "schemes")
    assert entry.state == reproduction.MEASURED and entry.summary.quick
    # run on HEAD: current on a clean checkout (CI's); with local changes, stale only by some of them
    # (those its imports reach and HEAD lacks: replays.staleness)
    dirty = [f for f in s.provenance.dirty_files if any(f.startswith(d) for d in s.depends_on)]
    assert entry.staleness is not None
    changed = entry.staleness.changed
    assert entry.staleness.state == ("stale" if changed else "current") and set(changed) <= set(dirty)

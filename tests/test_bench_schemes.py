"""The scheme benchmark's fast path (scripts/bench_schemes.sh --quick) on real Mininet: it runs,
writes its tables, and its numbers obey the bound they are set against (no timed asserts)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.root


def test_quick_scheme_benchmark_runs_and_no_sync_beats_its_schedule(tmp_path: Path):
    from benchmarks import schemes

    assert schemes.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "schemes.json").read_text())
    rows = res["expected"]
    assert {r["scheme"] for r in rows} == {"ring", "rat"} and all(r["hosts"] == 8 for r in rows)
    # each scheme at the topology's own MTU and with jumbo frames, read back from a live interface
    assert sorted((r["mtu"], r["scheme"]) for r in rows) == [
        (1500, "rat"),
        (1500, "ring"),
        (9000, "rat"),
        (9000, "ring"),
    ]
    for r in rows:  # the busiest cable's bytes over its rate is a floor no run can beat
        assert r["gst"]["n"] == 2 and r["gst"]["mean"] >= 0.95 * r["expected_s"] > 0, r
        # the engines did CPU work in their synchronisations, and no more than the machine's cores hold
        assert 0 < r["sync_cpu_cores"] <= os.cpu_count() and r["sync_cpu_s_per_gb"] > 0, r
    loop = res["overhead"]
    assert {r["scheme"] for r in loop} == {"mesh", "ring", "rat"}
    assert all(r["per_host_mbytes_s"] > 0 and r["cpu_s_per_gb"] > r["sync_cpu_s_per_gb"] > 0 for r in loop)
    md = (tmp_path / "schemes.md").read_text()
    assert (
        "### 1. Measured GST against the schedule's expectation" in md and "| leafspine-2rack.yaml | 9000 | rat |" in md
    )

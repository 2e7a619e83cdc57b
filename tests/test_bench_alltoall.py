"""The all-to-all benchmark's fast path on real Mininet/OVS (scripts/bench_alltoall.sh, one rate):
nine hosts of Torus-3x3 each send every other its share in plain TCP, and the engine runs the mesh
on the same network. Asserted on what was measured: every flow of every round delivered its bytes,
and neither the raw all-to-all nor the engine's mesh beat its busiest cable's bound (the ratios to
the bound are the benchmark's figures, printed, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import alltoall
from emulation import relaying, rto

pytestmark = pytest.mark.root


def test_one_rate_raw_and_engine_all_to_all(tmp_path: Path, no_leftovers, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the relay ceiling it keeps
    assert alltoall.main(["--quick", "--rates", "3.125", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "alltoall-quick.json").read_text())
    assert res["provenance"]["quick"]
    (row,) = res["rows"]
    assert row["topology"] == "torus-3x3.yaml" and row["hosts"] == 9 and row["mbps"] == 3.125
    assert row["raw_flows"] == 9 * 8 * 2  # every ordered pair, both rounds, every byte
    # one and two cables away (host -> wire -> host, or through a relaying server): both route lengths
    assert set(row["raw_by_links"]) == {"2", "4"}, row["raw_by_links"]
    assert len(row["raw_end_s"]) == 2 and min(row["raw_end_s"]) >= 0.95 * row["bound_s"], row
    assert len(row["engine_gst_s"]) == 2 and min(row["engine_gst_s"]) >= 0.95 * row["mesh_bound_s"], row
    assert row["mesh_bound_s"] > row["bound_s"] > 0
    # timer expiries and duplicates received are among the retransmissions; the testbed's RTO floor
    # (emulation.rto: a full queue's drain time at 3.125 Mbit/s, where the kernel has the sysctl)
    assert 0 <= row["raw_timeouts"] <= row["raw_retrans"] and 0 <= row["raw_dsacks"] <= row["raw_retrans"], row
    assert row["rto_setting"] == "auto"
    assert row["rto_min_ms"] == (round(rto.drain_ms(3.125, 1500)) if rto.has_rto_floor() else None)
    assert "| torus-3x3.yaml | 3.125 | 9 |" in (tmp_path / "alltoall-quick.md").read_text()
    # what the verdict of a relaying run is judged by: this rate's figure, kept for this machine
    kept = relaying.measured("torus")
    assert kept is not None and (kept.mbps, kept.failed_mbps, kept.topology) == (3.125, None, "torus-3x3.yaml")
    assert res["ceilings"]["torus"]["mbps"] == 3.125

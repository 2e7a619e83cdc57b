"""The DVF benchmark's fast path (scripts/bench_dvf.sh --quick): pf-fig9's AlexNet group through
the engine's own codec without a network. What it found, asserted on the numbers it computes:
nothing is lost (applied + residual = computed), the workers' one delta holds back far less of
the servers' sums than of a worker's update, so the broadcast side is cut less than the push
side, and a servers' delta by the paper's rule cuts more in all."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import dvf


def test_quick_dvf_run_shows_where_the_cut_goes(tmp_path: Path):
    assert dvf.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "dvf-quick.json").read_text())
    assert res["clocks"] == 3 and res["provenance"]["quick"]
    rows = {(r["variant"], r["delta"]): dvf.Row(**{**r, "clocks": [dvf.Clock(**c) for c in r["clocks"]]})
            for r in res["rows"]}  # fmt: skip
    assert set(rows) == {("encode", "-"), ("figure", "up"), ("figure", "low"), ("per side", "up"), ("per side", "low")}
    for r in rows.values():
        assert r.group == "AlexNet" and len(r.clocks) == 3
        assert r.invariant_error < 1e-5, r  # DVF lost nothing
    enc = rows["encode", "-"]
    assert abs(enc.cut(0)) < 0.01  # dense Gaussian payload: the wire form is the raw vector
    for delta in ("up", "low"):
        fig, side = rows["figure", delta], rows["per side", delta]
        assert fig.clocks[0].push_zeros > 0.4  # the figure's deltas hold back 50-70% of an update
        assert fig.clocks[0].bcast_zeros < fig.clocks[0].push_zeros - 0.2  # ... and far less of the sums
        assert fig.side_cut("bcast") < fig.side_cut("push") - 0.2
        assert side.server_delta > 1.5 * side.worker_delta
        assert side.cut(0) > fig.cut(0) + 0.1
    assert rows["figure", "up"].cut(0) > rows["figure", "low"].cut(0) > 0.1
    md = (tmp_path / "dvf-quick.md").read_text()
    assert "| AlexNet | per side (up) |" in md
    assert (tmp_path / "dvf-quick.summary.json").exists()

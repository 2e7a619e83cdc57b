"""A relaying server's NIC shared by its own flow and one it forwards (BCube, Torus), for real.

With one FIFO, TCP Small Queues left the relay's own flow a few % of the NIC (0.12-1.0 of 5 Mbit/s
in three runs here); `relay_queue: fair` (the default) gives each sending host its share."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulation import measure
from emulation.net import Testbed

pytestmark = pytest.mark.root
RATE_MBPS = 5.0


def test_a_relays_own_flow_and_a_forwarded_one_share_its_nic(tmp_path: Path):
    text = Path("topologies/bcube-4-1.yaml").read_text().replace("scale: 40", f"scale: {1000 / RATE_MBPS:g}")
    topo = tmp_path / "bcube.yaml"
    topo.write_text(f"{text}\nrelay_queue: fair\n")
    with Testbed(topo) as tb:
        # BCubeRouting: s0_3 -> s1_0 crosses s1_3 and leaves it by its level-0 NIC, as s1_3 -> s1_1
        assert tb.model.family.relay_hosts(tb.model, "s0_3", "s1_0") == ("s0_3", "s1_3", "s1_0")
        forwarded, own = measure.iperf(tb, [("s0_3", "s1_0"), ("s1_3", "s1_1")], seconds=12)
    assert forwarded.configured_mbps == own.configured_mbps == pytest.approx(RATE_MBPS)
    shares = [forwarded.achieved_mbps / RATE_MBPS, own.achieved_mbps / RATE_MBPS]
    assert sum(shares) >= 0.85, shares  # the NIC stays busy
    assert min(shares) >= 0.35, shares  # and neither flow starves (fair: 0.5 each)

"""Jumbo frames (topology field `mtu`), on a real emulation (root). A module of its own: the
emulation module's network fixture stays up until its module ends, and one emulation runs at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulation.net import Testbed
from testbed.check import check_mtu, check_shaping

pytestmark = pytest.mark.root


def test_jumbo_frames_cross_every_switch_at_their_rate(tmp_path):
    """`mtu: 9000`: every host and switch interface takes it, a 9,000-byte packet that may not be
    fragmented crosses ECS and ToR (ovs-vswitchd's userspace datapath passes it whole), HTB's
    quantum is one jumbo frame, and a TCP flow still gets 90-100% of its link's rate."""
    import subprocess

    import yaml

    from emulation.hostcmd import run

    data = yaml.safe_load(Path("topologies/psnet-testbed.yaml").read_text()) | {"mtu": 9000, "name": "psnet-jumbo"}
    path = tmp_path / "psnet-jumbo.yaml"
    path.write_text(yaml.safe_dump(data))
    with Testbed(path) as tb:
        w, ps = tb.model.workers()[0].name, tb.model.pss()[0].name
        for h in (w, ps):
            for ln in tb.model.links_of(h):
                assert " mtu 9000 " in run(tb.host(h), ["ip", "-o", "link", "show", ln.intf(h)])
                sw = ln.intf(ln.other(h))
                link = subprocess.run(["ip", "-o", "link", "show", sw], capture_output=True, text=True, check=True)
                assert " mtu 9000 " in link.stdout, sw
                tc = subprocess.run(["tc", "-d", "class", "show", "dev", sw], capture_output=True, text=True)
                assert "quantum 9014" in tc.stdout, tc.stdout
        ping = run(tb.host(w), ["ping", "-c", "2", "-W", "2", "-M", "do", "-s", "8972", tb.model.nodes[ps].ip])
        assert " 0% packet loss" in ping, ping  # 8,972 + 28 bytes of headers = 9,000, not fragmented
        row = check_mtu(tb)
        assert row.ok and row.expected == "2/2 9000-byte packets, unfragmented", row
        (row,) = check_shaping(tb, seconds=3)
        assert row.ok, row

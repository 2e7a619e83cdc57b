"""PLink's probes from the command line (runs/probe.py). The probes on a real emulated network
(16 hosts of an oversubscribed leaf-spine, 15 rounds of disjoint pairs, rack mates measuring more
than pairs across uplinks, ProbeEmbed's groups against the racks) are tests/test_plink_runs.py's,
inside a whole PLink run; the algorithm's own AMI >= 0.9 on seeded noise is
tests/test_plink_groups.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root
TESTBED = [sys.executable, "-m", "testbed.cli"]


def test_probing_a_host_the_file_does_not_have_is_one_line_and_builds_nothing():
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run(
        [*TESTBED, "topo", "probe", "topologies/leafspine-rat.yaml", "--hosts", "h0_2", "zz"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--hosts: no host zz in it; its hosts: h0_2" in r.stderr

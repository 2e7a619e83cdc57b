"""The hosts' RTO floor (emulation.rto, the topology's `rto_min_ms`): what each setting gives, the
one-line refusal of a bad value, and on real Mininet that every emulated host's namespace holds
the floor while the machine's own TCP keeps the kernel's."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulation import rto
from emulation.net import Testbed
from emulation.shaping import QUEUE_PKTS
from topologies.build import build_network
from topologies.schema import load_spec, parse_spec
from topologies.spec import TopologyError

TOP = Path(__file__).resolve().parent.parent
FLOOR = Path("/proc/sys/net/ipv4/tcp_rto_min_us")
needs_floor = pytest.mark.skipif(not FLOOR.exists(), reason="no per-namespace RTO floor (Linux 6.11+)")


def network(name: str, **over):
    spec = load_spec(TOP / "topologies" / name)
    return build_network(parse_spec({**spec.model_dump(), **over}, name))


def test_a_full_queue_drains_in_its_bytes_over_the_rate():
    # 1,000 frames of 1,514 bytes at 4 Mbit/s: 3,028 ms; jumbo frames keep the queue's bytes
    assert rto.drain_ms(4.0, 1500) == pytest.approx(QUEUE_PKTS * 1514 * 8 / 4e3)
    assert rto.drain_ms(4.0, 1500) == pytest.approx(3028.0)
    assert rto.drain_ms(4.0, 9000) == pytest.approx(rto.drain_ms(4.0, 1500), rel=0.02)


@needs_floor
def test_auto_is_the_slowest_cables_drain_time_above_the_kernels_floor_only():
    slow = network("torus-3x3.yaml")  # 25 Mbit/s cables: 484 ms
    assert rto.floor_ms(slow) == round(rto.drain_ms(25.0, 1500)) == 484.0
    assert rto.sysctl_arg(slow) == ["net.ipv4.tcp_rto_min_us=484000"]
    fast = network("torus-3x3.yaml", scale=1)  # 100 Mbit/s and up: under 200 ms, the kernel's stays
    assert min(ln.mbps for ln in fast.veth_links()) >= 100 and rto.floor_ms(fast) is None
    assert rto.sysctl_arg(fast) == []


def test_kernel_leaves_it_and_a_number_sets_it():
    assert rto.floor_ms(network("torus-3x3.yaml", rto_min_ms="kernel")) is None
    assert rto.floor_ms(network("torus-3x3.yaml", rto_min_ms=1500)) == 1500.0


def test_a_bad_floor_is_one_line_naming_the_field_and_the_choices():
    for bad in ("kernl", 0, -3, True):
        with pytest.raises(TopologyError) as e:
            network("torus-3x3.yaml", rto_min_ms=bad)
        assert str(e.value).startswith("torus-3x3.yaml: rto_min_ms: "), str(e.value)
        assert "use auto (the default), kernel (Linux's 200 ms) or ms" in str(e.value)


@pytest.mark.root
@needs_floor
def test_every_host_holds_the_floor_and_the_root_namespace_keeps_its_own(no_leftovers):
    root = FLOOR.read_text().strip()
    for setting, want in ((1500, 1500), ("auto", 969)):  # auto: 12.5 Mbit/s cables, a 969-ms drain
        net = network("psnet-1tor.yaml", scale=40.0, rto_min_ms=setting)
        assert rto.floor_ms(net) == want
        with Testbed(net) as tb:
            got = {tb.host(h.name).cmd(f"sysctl -n {rto.RTO_MIN_SYSCTL}").strip() for h in net.hosts()}
        assert got == {str(want * 1000)}, (setting, got)
    assert FLOOR.read_text().strip() == root

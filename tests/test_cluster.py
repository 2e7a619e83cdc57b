"""One network over two servers (`--cluster`, emulation/cluster.py, emulation/cluster_net.py),
on two "servers" made on this machine (servers/local.py: each a namespace with its own
sshd and its own Open vSwitch). Every path of the cluster edition runs for real: SSH logins
through the run's ssh_config, remote switches on each server's own ovs-vswitchd, hosts whose
shells are SSH sessions, VXLAN tunnels for the cut cables, HTB on both ends of them, the
controller on this machine's loopback reached through reverse tunnels."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from benchmarks.cluster import measure
from emulation import bringup, registry
from emulation.cluster_inventory import load_cluster
from emulation.cluster_net import ClusterTestbed
from emulation.registry import existing_bridges
from replays.provenance import REPO
from servers.local import OvsServers
from tests.sshd_helpers import clear_dead_runs_leftovers

pytestmark = [pytest.mark.root]

TOPOLOGY = REPO / "topologies" / "leafspine-2rack.yaml"


@pytest.fixture(scope="module")
def servers(tmp_path_factory, request) -> OvsServers:
    clear_dead_runs_leftovers()
    s = OvsServers(tmp_path_factory.mktemp("cluster"))
    request.addfinalizer(s.stop)
    s.start()
    return s


def _cluster_file(s: OvsServers, path, known_hosts=None):
    return load_cluster(s.cluster_file(path, known_hosts))


def _on(s: OvsServers, i: int, command: str) -> str:
    return s.run(i, command)


def _left_on_servers(s: OvsServers, wait_s: float = 5.0) -> list[str]:
    """Bridges, tunnel devices, veths and processes a run left on the servers, once its SSH
    sessions had `wait_s` to close (sshd ends a session's process after the client has gone)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = _left_now(s)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _left_now(s: OvsServers) -> list[str]:
    left = []
    for i in range(s.count):
        left += [f"server{i + 1}: bridge {b}" for b in _on(s, i, "ovs-vsctl list-br").split()]
        links = re.findall(r"^\d+: ([^:@]+)", _on(s, i, "ip -o link show"), re.M)
        left += [f"server{i + 1}: link {n}" for n in links if n not in {"lo", "eth0", "eth1", "ovs-netdev"}]
        left += [f"server{i + 1}: process {p}" for p in s.others(i)]
    return left


def test_a_leaf_spine_over_two_servers_carries_shaped_tcp_across_its_tunnels(servers, tmp_path, no_leftovers):
    """Leaf-spine, 2 racks of 4 (50 Mbit/s per host): the partition puts a rack on each server, so
    the rack-to-rack traffic crosses VXLAN tunnels. Every host reaches one on the other server; one
    TCP flow from rack 0 to rack 1, then four at once, run at their host cables' rate (HTB on the
    tunnels' ends as on any cable; benchmarks/cluster.py's measurement), and the tunnels' devices
    on the servers counted their bytes. Nothing is left after."""
    inv = _cluster_file(servers, tmp_path / "cluster.yaml")
    with ClusterTestbed(TOPOLOGY, inv) as tb:
        p = tb.placement
        assert {p.server_of[h.name] for h in tb.model.hosts()} == {"server1", "server2"}
        assert p.cut, p.text()
        hosts = {s: [h.name for h in tb.model.hosts() if p.server_of[h.name] == s] for s in ("server1", "server2")}
        a, b = hosts["server1"][0], hosts["server2"][0]
        for src in hosts["server1"]:
            out = tb.host(src).cmd(f"ping -c 1 -W 2 {tb.model.nodes[b].ip}")
            assert " 0% packet loss" in out, out
        # the switches are on the servers' own OVS, none here
        assert not set(existing_bridges()) & {n.name for n in tb.model.switches()}
        bridges = _on(servers, 0, "ovs-vsctl list-br").split() + _on(servers, 1, "ovs-vsctl list-br").split()
        assert sorted(bridges) == sorted(n.name for n in tb.model.switches())
        rate = min(ln.mbps for ln in tb.model.links_of(a))
        before = _tunnel_bytes(servers, tb)
        row = measure(tb, "two servers", rate, seconds=2)  # benchmarks/cluster.py's own measurement
        moved = _tunnel_bytes(servers, tb) - before
        assert 0.85 <= row.one_share <= 1.03 and 0.75 <= row.four_share <= 1.03, row
        # the tunnel's switch-side devices received at least what iperf3 reported delivered
        assert moved >= 0.95 * (row.one_flow_mbps + row.four_flows_mbps) * 1e6 / 8 * 2, (moved, row)
        assert row.tunnelled == len(p.cut) and row.rtt_ms < 20
    assert _left_on_servers(servers) == []


def _tunnel_bytes(s: OvsServers, tb: ClusterTestbed) -> int:
    """Bytes the cut cables' switch-side tunnel devices received, on both servers."""
    total = 0
    for ln in tb.placement.cut:
        for end in (ln.a, ln.b):
            if tb.model.nodes[end].is_host:
                continue
            i = int(tb.server_of(end)[-1]) - 1
            total += int(_on(s, i, f"cat /sys/class/net/{ln.intf(end)}/statistics/rx_bytes").strip() or 0)
    return total


def test_a_server_whose_host_key_is_unknown_is_refused_in_one_line(servers, tmp_path, no_leftovers):
    """known_hosts without the servers' keys: the run stops before anything is built, in one line
    naming the server, and leaves nothing here or there."""
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inv = _cluster_file(servers, tmp_path / "cluster.yaml", known_hosts=empty)
    with pytest.raises(bringup.TestbedError) as err, ClusterTestbed(TOPOLOGY, inv):
        pass
    msg = str(err.value)
    assert "\n" not in msg and "server1" in msg and "cannot log in" in msg and str(empty) in msg, msg
    assert _left_on_servers(servers) == []


KILLED = """
import sys
from emulation.cluster_inventory import load_cluster
from emulation.cluster_net import ClusterTestbed
tb = ClusterTestbed(sys.argv[1], load_cluster(sys.argv[2]))
tb.start()
print("up", tb.run_dir, flush=True)
sys.stdin.read()
"""


def test_a_run_killed_mid_flight_is_cleaned_from_its_servers_by_the_next_one(servers, tmp_path, no_leftovers):
    """SIGKILL leaves no teardown at all: the bridges and tunnel devices stay on the servers. The
    next run's clean-up (what `testbed clean` and every bring-up run) logs in with the dead run's
    own ssh_config and removes them."""
    _cluster_file(servers, tmp_path / "cluster.yaml")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(TOPOLOGY), str(tmp_path / "cluster.yaml")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith("up"), line
        assert _left_now(servers), "the run is up: its bridges are on the servers"
    finally:
        proc.kill()
        proc.wait()
    assert any(x.startswith("server") and "bridge" in x for x in _left_now(servers))
    removed = registry.clean()
    assert any(x.startswith("server1: bridge") for x in removed) and any(
        x.startswith("server2: bridge") for x in removed
    ), removed
    assert _left_on_servers(servers) == []


def test_a_ring_job_over_two_servers_sums_exactly_and_is_judged_from_both(servers, tmp_path, no_leftovers):
    """`testbed run EXP --cluster FILE`: the scheme engine's processes start in their hosts on
    their servers (in the checkout there), the ring's sums are exact, every host's NIC moved its
    share of the ring's bytes, and the verdict's windows come from the servers' own counters
    (emulation.cluster_monitor): links on both servers carried traffic, and the datapath drops of
    both were counted. Nothing is left on either server, no engine process either."""
    inv_file = servers.cluster_file(tmp_path / "cluster.yaml")
    exp = tmp_path / "ring.yaml"
    exp.write_text(
        f"topology: {TOPOLOGY}\n"
        "job:\n  model: resnet50\n  scheme: ring\n  compute: calibrated\n  compute_s: 0\n"
        "  iterations: 3\n  warmup: 1\n  check: true\n"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "testbed.cli",
            "run",
            str(exp),
            "--cluster",
            str(inv_file),
            "--no-progress",
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = tmp_path / "results" / "ring"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sums_checked"] and summary["sum_problems"] == []
    # a ring all-reduce sends 2 (n-1)/n of the model from every host, each iteration warm-up included
    ring_bytes = 2 * 7 / 8 * summary["model_bytes_emulated"] * 3
    assert min(v["tx"] for v in summary["nic_bytes"].values()) >= 0.95 * ring_bytes, summary["nic_bytes"]
    v = summary["fidelity"]
    tb = ClusterTestbed(TOPOLOGY, load_cluster(inv_file))  # the same placement the run made (not started)
    server_of = {ln.intf(e): tb.server_of(e) for ln in tb.model.veth_links() for e in (ln.a, ln.b)}
    assert v["samples"] >= 2 and {server_of[i] for i, u in v["links"].items() if u > 0.1} == {"server1", "server2"}, v
    assert "silent" in v["datapath"], v  # both servers' datapaths were compared
    assert set(v["retrans"]) == {h.name for h in tb.model.hosts()}, v  # every host's TCP counters, read in it
    # C followed through both servers' datapaths: every ring direction that carried bytes was traced,
    # the two that change rack across a tunnel too (their far ends are on the other server)
    c = summary["flows_on_busiest_link"]
    assert c["streams"] >= 8 and c["unmapped"] == 0 and c["c"] >= 1, c
    assert {tb.model.nodes[n].is_host for n in c["link"].split("-")} == {False}, c  # a switch-switch cable
    assert _left_on_servers(servers) == []


def test_a_two_module_psnet_tf_job_over_two_servers(servers, tmp_path, no_leftovers):
    """`testbed run EXP --cluster FILE`, a TF PS job (the tiny model) on PSNet with two modules:
    the placement splits it at the SuperNode cables, a module per server (each module's ECS patch
    cables stay whole); its PSs and workers start in their hosts there (each its own interpreter:
    the fork server works on this machine only). Every measured step has a BCT, the PSs' NICs
    carried every push, and the verdict is judged. Nothing is left on either server."""
    inv_file = servers.cluster_file(tmp_path / "cluster.yaml")
    exp = tmp_path / "psnet-tf.yaml"
    exp.write_text(
        f"topology: {REPO / 'topologies' / 'psnet-2modules.yaml'}\n"
        "job:\n  model: tiny\n  batch_size: 1\n  iterations: 3\n  warmup: 1\n  deadline_s: 300\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "run", str(exp), "--cluster", str(inv_file), "--no-progress",
         "--results", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=900, cwd=REPO, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads((tmp_path / "results" / "psnet-tf" / "summary.json").read_text())
    assert summary["bct_s"]["n"] == 3 and summary["bct_s"]["mean"] > 0, summary["bct_s"]
    tb = ClusterTestbed(REPO / "topologies" / "psnet-2modules.yaml", load_cluster(inv_file))
    assert {tb.server_of(h.name) for h in tb.model.hosts()} == {"server1", "server2"}, tb.placement.text()
    assert summary["fidelity"]["samples"] >= 1 and "faithful" in summary["fidelity"], summary["fidelity"]
    rx = sum(i["rx"] for d in summary["ps_nic_bytes"].values() for i in d.values())
    assert rx > 4 * summary["model_bytes_emulated"], summary["ps_nic_bytes"]  # 4 steps of every worker's push
    assert _left_on_servers(servers) == []

"""Placing one network over several servers (emulation/placement.py): the partition keeps patch
cables whole, balances the switch hops, cuts cables that carry little of the job's traffic, and
the cluster file is read with one-line errors (emulation/cluster_inventory.py). Pure: the
models and the routes are the kinds' own; no emulation."""

from __future__ import annotations

import re

import pytest

from emulation.cluster_inventory import ClusterError, load_cluster
from emulation.placement import cable_traffic, hop_traffic, place, servers_needed
from replays.provenance import REPO
from schemes import compile_scheme
from schemes.schedule import pair_bytes
from topologies.build import build_network
from topologies.schema import load_spec


def _net(name: str):
    return build_network(load_spec(REPO / "topologies" / name))


def test_one_server_takes_everything():
    net = _net("fattree-k4.yaml")
    p = place(net, ["only"])
    assert set(p.server_of.values()) == {"only"} and p.cut == [] and p.cut_share == 0.0


def test_a_patch_cable_is_never_cut():
    """PSNet's ECS-ToR slots are OVS patch ports: both ends on one ovs-vswitchd. Two modules
    split between their SuperNodes' cables, each module whole on one server."""
    net = _net("psnet-2modules.yaml")
    p = place(net, ["a", "b"])
    patches = [ln for ln in net.links if net.is_patch(ln)]
    assert patches and all(p.server_of[ln.a] == p.server_of[ln.b] for ln in patches)
    assert {p.server_of[n.name] for n in net.nodes.values() if n.module == 1 and not n.is_host} != {
        p.server_of[n.name] for n in net.nodes.values() if n.module == 2 and not n.is_host
    }
    assert len(p.cut) == 3 and {(ln.a, ln.b) for ln in p.cut} == {("sn1", "sn2")}


def test_switch_hops_balanced_and_a_rings_traffic_mostly_kept_inside():
    """A ring's bytes over FatTree(4): the busiest cable at its rate, every cable's share from the
    routes; two servers take within 25% of each other's switch hops, and the cut cables carry
    under a third of the ring's traffic (a ring crosses between any two halves only twice per
    direction)."""
    net = _net("fattree-k4.yaml")
    hosts = [h.name for h in net.hosts()]
    sched = compile_scheme("ring", hosts, 4 * 1024 * 1024)
    traffic = cable_traffic(net, pair_bytes(sched))
    busiest = max(traffic, key=lambda ln: traffic[ln] / ln.mbps)
    assert traffic[busiest] == pytest.approx(busiest.mbps)
    p = place(net, ["a", "b"], traffic)
    a, b = p.hop_mbps("a"), p.hop_mbps("b")
    assert min(a, b) / max(a, b) > 0.75
    assert p.cut and p.cut_share < 0.33
    # every host sits on its edge switch's server: a host cable is the busiest of all to cut
    for h in net.hosts():
        (ln,) = net.links_of(h.name)
        assert p.server_of[h.name] == p.server_of[ln.other(h.name)]
    assert sum(hop_traffic(net, traffic).values()) == pytest.approx(a + b)


def test_pinned_nodes_go_where_they_are_told():
    net = _net("leafspine-2rack.yaml")
    p = place(net, ["a", "b"], pinned={"l0": "b"})
    assert p.server_of["l0"] == "b"


def test_servers_needed_is_the_hops_over_one_servers_share():
    assert servers_needed(2700.0, 900.0, 3) == 1
    assert servers_needed(2701.0, 900.0, 3) == 2
    assert servers_needed(9000.0, 900.0, 3) == 4


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("servers: []\n", "servers: "),
        ("servers: [{name: a, ssh: {host: x}}]\n", "servers.0.tunnel: x is not an IPv4 address"),
        (
            "servers: [{name: a, ssh: {host: 10.0.0.1}}, {name: a, ssh: {host: 10.0.0.2}}]\n",
            "servers: name a is given twice",
        ),
        ("servers: [{name: ../a, ssh: {host: 10.0.0.1}}]\n", "servers.0.name"),
        ("servers: [{name: a, ssh: {host: 10.0.0.1, key: nokey}}]\nknown_hosts: kh\n", "servers.0.ssh.key:"),
        ("servers: [{name: a, ssh: {host: 10.0.0.1}}]\nknown_hosts: missing\n", "known_hosts: "),
    ],
)
def test_a_bad_cluster_file_is_one_line_naming_the_field(tmp_path, text, says):
    (tmp_path / "kh").write_text("")
    f = tmp_path / "cluster.yaml"
    f.write_text(text)
    with pytest.raises(ClusterError) as err:
        load_cluster(f)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(f)) and says in msg, msg


def test_a_cluster_file_resolves_keys_from_its_folder(tmp_path):
    (tmp_path / "kh").write_text("")
    (tmp_path / "id").write_text("")
    f = tmp_path / "cluster.yaml"
    f.write_text(
        "known_hosts: kh\nservers:\n  - {name: a, ssh: {host: 192.168.1.2, key: id}, tunnel: 10.0.0.1}\n"
        "  - {name: b, ssh: {host: 192.168.1.3, port: 2222}}\n"
    )
    inv = load_cluster(f)
    assert inv.known_hosts == tmp_path / "kh" and inv.servers[0].ssh.key == tmp_path / "id"
    assert [s.tunnel_ip for s in inv.servers] == ["10.0.0.1", "192.168.1.3"]


def test_topo_place_prints_each_servers_share_and_the_tunnelled_cables(tmp_path):
    """`testbed topo place FILE --servers 2`: a line per server (its nodes, its switch hops against
    this machine's ceiling) and the cables the placement tunnels; a bad cluster file is one line
    and exit 2."""
    import subprocess
    import sys

    cli = [sys.executable, "-m", "testbed.cli", "topo", "place"]
    r = subprocess.run([*cli, "topologies/psnet-2modules.yaml", "--servers", "2"], capture_output=True, text=True,
                       cwd=REPO, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:2]] == ["server1", "server2"]
    assert "of this machine's ceiling" in lines[0]
    assert lines[2].startswith("tunnelled: 3 cables (sn1-sn2, sn1-sn2, sn1-sn2)"), lines[2]
    bad = tmp_path / "cluster.yaml"
    bad.write_text("servers: []\n")
    r = subprocess.run([*cli, "topologies/psnet-2modules.yaml", "--cluster", str(bad)], capture_output=True, text=True,
                       cwd=REPO, check=False)  # fmt: skip
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(bad) in r.stderr, r.stderr


def test_a_128_host_fattree_is_refused_on_one_machine_and_accepted_on_two_servers(tmp_path):
    """FatTree(8), 128 hosts at 10 Mbit/s (scale 100), a ring: at a datapath ceiling of 1,200
    Mbit/s (this machine's measured one) the budget refuses it on one machine and names two
    servers; a cluster of two servers, each taken as this machine (testbed.clusterrun), takes it."""
    from testbed.clusterrun import cluster_machine
    from workloads.budget import BudgetError, Machine, check_job
    from workloads.experiment import JobSpec

    f = tmp_path / "fattree-k8.yaml"
    f.write_text(
        f"kind: fattree\nk: 8\noversubscription: 1\nworkers: {[4] * 31 + [3]}\nps: 1\nworker_mbps: 1000\nscale: 100\n"
    )
    spec = load_spec(f)
    job = JobSpec(model="resnet50", scheme="ring", compute="calibrated", compute_s=0)
    here = Machine(24 * 1024, 2, 1200.0, "as measured on this machine")
    with pytest.raises(BudgetError, match=r"needs 2 servers .*--cluster"):
        check_job(spec, str(f), [job], machine=here)
    d = check_job(spec, str(f), [job], machine=cluster_machine(here, 2))  # the count it said is accepted
    assert d.hosts == 128 and d.switches == 80
    fast = load_spec(f).model_copy(update={"scale": 30})  # 3.3x the rate
    with pytest.raises(BudgetError, match=r"needs (\d+) servers") as refused:
        check_job(fast, str(f), [job], machine=here)
    n = int(re.search(r"needs (\d+) servers", str(refused.value)).group(1))
    check_job(fast, str(f), [job], machine=cluster_machine(here, n))
    with pytest.raises(BudgetError, match="over"):
        check_job(fast, str(f), [job], machine=cluster_machine(here, n - 1))


@pytest.mark.parametrize("command", [["replay", "fig1", "--quick"], ["matrix", "--quick"]])
def test_replay_and_matrix_read_the_cluster_file_first(tmp_path, command):
    """`replay` and `matrix --cluster FILE` take the cluster file before any point runs: a bad one
    is one line naming it, exit 2 (within seconds: no network was brought up)."""
    import subprocess
    import sys

    bad = tmp_path / "cluster.yaml"
    bad.write_text("servers: []\n")
    r = subprocess.run([sys.executable, "-m", "testbed.cli", *command, "--cluster", str(bad)],
                       capture_output=True, text=True, cwd=REPO, check=False, timeout=120)  # fmt: skip
    assert r.returncode == 2 and str(bad) in r.stderr, r.stderr
    assert len([ln for ln in r.stderr.splitlines() if "WARNING" not in ln]) == 1, r.stderr

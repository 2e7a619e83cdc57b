"""C measured on the busiest shared link (emulation.flows): parsing `ss` and the datapath's flow
dump, following connections switch by switch, counting (pure); and on real emulations, C under
ECMP agrees with the bytes each link carried, and under `balanced` routing it is the paper's 6."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from controller.routing import compute_paths, link_loads
from controller.tc import initial_circuits
from emulation.flows import (
    DpFlow,
    FlowSampler,
    Stream,
    busiest,
    by_port,
    carrying,
    host_sockets,
    parse_dump,
    parse_ss,
    trace,
)
from emulation.sampler import tx_bytes
from topologies.build import build_network, load_network
from topologies.model import Role

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"

# lines as `ss -tinHO state established` prints them (one IPv4, one dual-stack socket)
SS = (
    "0      0      10.0.0.2:42272 10.1.0.2:5201 cubic wscale:9,9 rto:204 rtt:0.4/0.2 mss:1448 "
    "bytes_sent:3001000 bytes_retrans:0 bytes_acked:3000001 bytes_received:37 segs_out:2100 lastsnd:4\n"
    "0      0      [::ffff:10.1.0.2]:5201 [::ffff:10.0.0.2]:42272 cubic wscale:9,9 rto:204 "
    "bytes_sent:38 bytes_acked:38 bytes_received:3000000 segs_out:700\n"
)
# lines of `ovs-appctl dpctl/dump-flows --names` on the FatTree k=4 with ECMP (from a real run)
DUMP = "\n".join(
    [
        "flow-dump from the main thread:",
        "recirc_id(0),in_port(e0_0-eth1),packet_type(ns=0,id=0),eth(src=02:00:0a:00:00:02,dst=02:00:0a:01:00:02),"
        "eth_type(0x0800),ipv4(src=10.0.0.2,dst=10.1.0.2,proto=6,frag=no),tcp(src=42272,dst=5201), packets:1031, "
        "bytes:1558075, used:0.001s, flags:P., actions:e0_0-eth3",
        "recirc_id(0),in_port(c1_1-eth2),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(src=10.1.0.2,dst=10.0.0.2,"
        "frag=no), packets:6, bytes:400, used:2.920s, flags:P., actions:c1_1-eth1",
        "recirc_id(0),in_port(e0_0-eth1),packet_type(ns=0,id=0),eth_type(0x0806), packets:1, bytes:42, used:5.1s, "
        "actions:e0_0-eth2",
        "recirc_id(0),in_port(a0_2-eth1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(src=10.0.0.0/255.255.0.0,"
        "dst=10.1.0.2,proto=6,frag=no),tcp(dst=0x1400/0xff00), packets:9, bytes:900, used:never, actions:drop",
        "flow-dump from pmd on cpu core: 0",
    ]
)


def test_parse_ss_reads_each_directions_acked_payload():
    got = parse_ss(SS)
    assert got == {
        Stream("10.0.0.2", 42272, "10.1.0.2", 5201): 3000001,
        Stream("10.1.0.2", 5201, "10.0.0.2", 42272): 38,
    }


def test_parse_dump_reads_port_match_and_outputs():
    flows = parse_dump(DUMP)
    assert len(flows) == 4
    ecmp, pair, arp, masked = flows
    fwd = Stream("10.0.0.2", 42272, "10.1.0.2", 5201)
    assert (ecmp.in_port, ecmp.outputs, ecmp.used_s) == ("e0_0-eth1", ("e0_0-eth3",), 0.001)
    assert ecmp.matches(fwd) and not ecmp.matches(Stream("10.0.0.2", 42273, "10.1.0.2", 5201))  # its ports only
    back = Stream("10.1.0.2", 5201, "10.0.0.2", 42272)
    assert pair.matches(back) and pair.matches(Stream("10.1.0.2", 1, "10.0.0.2", 2))  # the pair's every connection
    assert not pair.matches(fwd)
    assert not arp.matches(fwd)  # not IPv4
    assert masked.outputs == () and masked.used_s == math.inf
    assert masked.matches(Stream("10.0.9.9", 7, "10.1.0.2", 0x14AB))  # value/mask fields
    assert not masked.matches(Stream("10.2.0.2", 7, "10.1.0.2", 0x14AB))
    assert not masked.matches(Stream("10.0.9.9", 7, "10.1.0.2", 0x15AB))


def _line(net, node: str, in_port: int, out_port: int, s: Stream, with_ports: bool) -> str:
    """A datapath flow as OVS prints it: pair-level, or (where a switch hashes) the connection's."""
    tcp = f",tcp(src={s.sport},dst={s.dport})" if with_ports else ""
    proto = ",proto=6" if with_ports else ""
    return (
        f"recirc_id(0),in_port({node}-eth{in_port}),packet_type(ns=0,id=0),eth_type(0x0800),"
        f"ipv4(src={s.src_ip},dst={s.dst_ip}{proto},frag=no){tcp}, packets:10, bytes:15000, used:0.010s, "
        f"flags:P., actions:{node}-eth{out_port}"
    )


def _dump(net, routes: dict[Stream, list], hashed_at: set[str] = frozenset()) -> list[DpFlow]:
    """The dump a datapath would hold for these connections on these hop lists."""
    lines = []
    for s, path in routes.items():
        for hop in path[1:-1]:
            lines.append(_line(net, hop.node, hop.in_port, hop.out_port, s, hop.node in hashed_at))
    return parse_dump("\n".join(lines))


def test_connections_of_one_pair_followed_over_their_own_core_paths():
    """Two connections of one host pair, hashed onto different uplinks at the edge switch (so
    onto disjoint shared links): each is followed over its own links, the pair's rules
    elsewhere; measured C is 1 where the controller's one path per pair would say 2."""
    net = load_network(TOPOLOGIES / "fattree-k4.yaml")
    circuits = initial_circuits(net)
    pair = ("h0_0_2", "h1_0_2")
    one = compute_paths(net, circuits)[pair]
    for seed in range(1, 40):  # a seed whose hashed path leaves e0_0 by the other uplink
        alt = compute_paths(build_network(net.spec.model_copy(update={"seed": seed})), circuits)[pair]
        if alt[1].out_port != one[1].out_port:
            break
    else:
        pytest.fail("no seed gives the other uplink")
    paths = {pair: one}
    a, b = Stream("10.0.0.2", 40000, "10.1.0.2", 5201), Stream("10.0.0.2", 40001, "10.1.0.2", 5201)
    flows = by_port(_dump(net, {a: one, b: alt}, hashed_at={"e0_0", "a0_2", "a0_3"}))
    got_a, got_b = trace(net, paths, flows, a), trace(net, paths, flows, b)
    assert got_a == tuple((h.node, h.out_port) for h in one[:-1])
    assert got_b == tuple((h.node, h.out_port) for h in alt[:-1])
    res = busiest(net, {a: got_a, b: got_b}, {a: 5_000_000, b: 4_000_000}, paths)
    assert (res.c, res.streams, res.unmapped, res.from_routes) == (1, 2, 0, 2)
    assert res.link == min(res.per_link)  # ties: the first link by name
    assert set(res.per_link) == {f"{n}-{net.link_at(n, p).other(n)}" for n, p in got_a[1:-1] + got_b[1:-1]}
    assert trace(net, paths, by_port([]), a) is None  # no datapath flow: not followed
    assert trace(net, paths, flows, Stream("192.168.0.1", 1, "10.1.0.2", 5201)) is None  # not an emulated host
    assert busiest(net, {a: got_a}, {a: 5_000_000, b: 4_000_000}, paths).unmapped == 1


def test_balanced_prototype_measures_the_papers_c():
    """fattree-testbed (balanced): 12 worker->PS pushes and 12 PS->worker pulls followed through
    the dump their paths would leave give C = 6, as the routes and the BCT model say."""
    from models.bct_model import predict

    net = load_network(TOPOLOGIES / "fattree-testbed.yaml")
    paths = compute_paths(net, initial_circuits(net))
    streams = {}
    port = 40000
    for w in net.workers():
        for p in net.pss():
            port += 1
            streams[Stream(w.ip, port, p.ip, 7000)] = paths[(w.name, p.name)]
            streams[Stream(p.ip, 7000, w.ip, port)] = paths[(p.name, w.name)]
    flows = by_port(_dump(net, streams))
    crossed = {s: trace(net, paths, flows, s) for s in streams}
    assert all(crossed.values())
    res = busiest(net, crossed, dict.fromkeys(streams, 2_000_000), paths)
    loads = link_loads(net, paths, [(w.name, p.name) for w in net.workers() for p in net.pss()])
    assert res.c == 6 == res.from_routes == predict(net, 1e6, 1, 1.0, 1.0).c == max(loads.values())
    assert res.streams == 24 and res.unmapped == 0
    ps_tor = paths[(net.pss()[0].name, net.workers()[0].name)][1].node
    assert ps_tor in res.link.split("-")  # the PSs' ToR's links to the aggregation switches


def test_only_directions_that_carried_bytes_count():
    big, small, ctl = (Stream("10.0.0.2", i, "10.1.0.2", 5201) for i in (1, 2, 3))
    assert carrying({big: 10_000_000, small: 200_000, ctl: 900}) == {big, small}
    assert carrying({big: 10_000_000, small: 90_000}) == {big}  # under 1% of the busiest
    assert carrying({ctl: 900}) == set()
    assert busiest(load_network(TOPOLOGIES / "fattree-k4.yaml"), {}, {}).as_dict() == {
        "c": 0,
        "link": None,
        "streams": 0,
        "unmapped": 0,
        "from_routes": None,
    }


# --- on real emulations ------------------------------------------------------------------------
@pytest.mark.root
def test_ecmp_c_agrees_with_the_bytes_each_link_carried():
    """8 TCP connections h0_0_2 -> h1_0_2 on FatTree k=4 (ecmp): every one is followed; each of
    pod 0's agg->core links carries bulk bytes exactly when a connection was followed over it,
    the connections' payload on it matches its transmitted bytes (framing aside), and C is at
    least the spread's (8 connections over the core links that carried them)."""
    from emulation.net import Testbed

    with Testbed(TOPOLOGIES / "fattree-k4.yaml") as tb:
        net = tb.model
        uplinks = [ln for ln in net.links if ln.kind == "agg-core" and ln.a.startswith("a0_")]
        cores = {(ln.a, ln.port_a): ln.intf(ln.a) for ln in uplinks}
        assert len(cores) == 4
        ip = net.nodes["h1_0_2"].ip
        tb.host("h1_0_2").cmd("iperf3 -s -D -1 -p 5201")
        time.sleep(0.5)
        tb.host("h0_0_2").cmd(f"iperf3 -c {ip} -p 5201 -P 8 -t 8 > /tmp/h0_0_2-iperf.txt 2>&1 &")
        time.sleep(2)  # sample while the connections are open: their counters go with them
        sampler = FlowSampler.of(tb, period_s=1.0).start()
        pid = tb.host("h0_0_2").pid
        sent0, before = host_sockets(pid), {i: tx_bytes(i) for i in cores.values()}  # read together
        time.sleep(4)
        grew = {link: tx_bytes(i) - before[i] for link, i in cores.items()}
        sent1 = host_sockets(pid)
        res = sampler.stop()
        tb.host("h0_0_2").cmd("wait")
    moved = {s: b - sent0.get(s, 0) for s, b in sent1.items()}  # payload in the same 4 s as `grew`
    data = carrying(moved)
    assert len(data) == 8 and res.streams == 8 and res.unmapped == 0, res  # iperf3's control connection is idle
    assert data == carrying(sampler.moved())
    on = {link: [s for s in data if link in sampler.crossed[s]] for link in cores}
    assert sum(len(v) for v in on.values()) == 8  # each connection crossed exactly one core uplink
    busy = [link for link, ss in on.items() if ss]
    assert busy == [link for link in cores if grew[link] > 1_000_000], (on, grew)
    for link in busy:
        payload = sum(moved[s] for s in on[link])
        # framing adds ~4.6% (66 B per 1448 B segment); the counters are read ~0.1 s apart
        assert payload * 0.98 - 100_000 <= grew[link] <= payload * 1.08 + 200_000, (link, payload, grew[link])
    assert res.c >= math.ceil(8 / len(busy)) and res.from_routes == 8


@pytest.mark.root
def test_balanced_fattree_testbed_measures_c_6_for_a_ps_scheme(tmp_path: Path):
    """`testbed run` of the `ps` scheme (calibrated, no compute) on fattree-testbed: every worker
    pushes to both PSs and pulls back; the summary's measured C is the paper's 6, the routes'."""
    import yaml

    from runs.runner import run_experiment

    exp = tmp_path / "ft-ps-c.yaml"
    job = {"model": "vgg16", "scheme": "ps", "compute": "calibrated", "compute_s": 0.0, "iterations": 3, "warmup": 1}
    topology = str(TOPOLOGIES / "fattree-testbed.yaml")
    exp.write_text(yaml.safe_dump({"name": "ft-ps-c", "topology": topology, "compress": 20, "job": job}))
    s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
    c = s["flows_on_busiest_link"]
    assert s["routing"] == "balanced" and c["unmapped"] == 0 and c["streams"] == 24, c  # 12 pushes, 12 pulls
    assert c["c"] == 6 == c["from_routes"], c
    assert c["link"].split("-")[1] in {"e0_0", "a0_2", "a0_3"}  # the PSs' ToR and its aggregation switches


def test_ecs_circuits_are_not_shared_links():
    """PSNet: a worker's connections cross its ECS and the ECS-ToR cable of its circuit, which no
    other host uses; C counts only switch-switch cables between packet switches."""
    from emulation.flows import shared

    base = load_network(TOPOLOGIES / "psnet-testbed.yaml")
    net = build_network(base.spec.model_copy(update={"patch_cables": False}))  # every cable a veth
    paths = compute_paths(net, initial_circuits(net))
    w, p = net.workers()[0], net.pss()[0]
    s = Stream(w.ip, 40000, p.ip, 2222)
    flows = by_port(_dump(net, {s: paths[(w.name, p.name)]}))
    links = trace(net, paths, flows, s)
    assert links is None  # the dump above lacks the ECS hop (the controller's path skips it) ...
    ecs_hops = []
    for a, b in zip(paths[(w.name, p.name)], paths[(w.name, p.name)][1:], strict=False):
        ln = net.link_at(a.node, a.out_port)
        if ln.other(a.node) != b.node:  # crossed an ECS: its circuit rule outputs to the ToR cable
            ecs, into = ln.other(a.node), ln.port_of(ln.other(a.node))
            out = net.link_at(b.node, b.in_port).port_of(ecs)
            ecs_hops.append(_line(net, ecs, into, out, s, False))
    flows = by_port(parse_dump("\n".join(ecs_hops)) + _dump(net, {s: paths[(w.name, p.name)]}))
    links = trace(net, paths, flows, s)  # ... with it, the connection is followed through the ECS
    assert links and any(net.nodes[n].role == Role.ECS for n, _ in links)
    assert not any(shared(net, ln) for ln in links)
    assert busiest(net, {s: links}, {s: 1_000_000}, paths).c == 0


@pytest.mark.parametrize("direction", ["up", "down"])
def test_a_flow_across_a_patch_cable_is_followed_through_its_circuit_slot(direction):
    """With the ECS-ToR slots as OVS patch ports (the default) the datapath holds one flow for both
    bridges: in at the ECS's worker port (or the ToR's PS port), out at the ToR's PS port (or the
    ECS's worker port). The trace still crosses the ECS, by the slot of the worker's circuit."""
    net = load_network(TOPOLOGIES / "psnet-testbed.yaml")
    assert net.spec.patch_cables and any(net.is_patch(ln) for ln in net.links)
    paths = compute_paths(net, initial_circuits(net))
    w, p = net.workers()[3], net.pss()[1]
    src, dst = (w, p) if direction == "up" else (p, w)
    path = paths[(src.name, dst.name)]
    tor = next(h for h in path if net.nodes[h.node].role == Role.TOR)
    s = Stream(src.ip, 40000, dst.ip, 2222)
    cable = net.link_at(w.name, 1)  # the worker's cable to its ECS
    ecs = cable.other(w.name)
    if direction == "up":  # in at the ECS's worker port, out at the ToR's PS port
        line = _line(net, ecs, cable.port_of(ecs), 0, s, False)
        line = line.replace(f"actions:{ecs}-eth0", f"actions:{tor.node}-eth{tor.out_port}")
    else:  # in at the ToR's PS port, out at the ECS's worker port
        line = _line(net, tor.node, tor.in_port, 0, s, False)
        line = line.replace(f"actions:{tor.node}-eth0", f"actions:{ecs}-eth{cable.port_of(ecs)}")
    links = trace(net, paths, by_port(parse_dump(line)), s)
    assert links is not None
    slot_of_circuit = initial_circuits(net)[w.name]
    crossed = [net.link_at(n, port) for n, port in links]
    assert slot_of_circuit in crossed and net.is_patch(slot_of_circuit)
    assert [net.nodes[n].role for n, _ in links] == (
        [Role.WORKER, Role.ECS, Role.TOR] if direction == "up" else [Role.PS, Role.TOR, Role.ECS]
    )


@pytest.mark.root
def test_ecmp_reroutes_around_a_failed_uplink_and_c_follows():
    """FatTree k=4 (ecmp) with e0_0's uplink to a0_2 down: the controller reprograms e0_0's ECMP
    group to one port, 4 connections h0_0_2 -> h1_0_2 all leave by a0_3, and C = 4 there."""
    from emulation.net import Testbed

    with Testbed(TOPOLOGIES / "fattree-k4.yaml") as tb:
        tb.set_link("e0_0", "a0_2", up=False)
        ip = tb.model.nodes["h1_0_2"].ip
        tb.host("h1_0_2").cmd("iperf3 -s -D -1 -p 5202")
        time.sleep(0.5)
        tb.host("h0_0_2").cmd(f"iperf3 -c {ip} -p 5202 -P 4 -t 5 > /tmp/h0_0_2-iperf.txt 2>&1 &")
        time.sleep(1)
        sampler = FlowSampler.of(tb, period_s=1.0).start()
        time.sleep(2)
        res = sampler.stop()
        tb.host("h0_0_2").cmd("wait")
        net = tb.model
    data = carrying(sampler.moved())
    assert len(data) == 4 and res.unmapped == 0, res
    assert all(not any("a0_2" in (n, net.link_at(n, p).other(n)) for n, p in sampler.crossed[s]) for s in data)
    assert res.c == 4 and res.per_link["e0_0-a0_3"] == 4, res  # (a1_3-e1_0 too: a0_3's cores reach pod 1 by a1_3)
    assert res.link == min(name for name, n in res.per_link.items() if n == 4)

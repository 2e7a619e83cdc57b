"""The benchmarks' judgements on numbers they were given (no emulation): the BCT benchmark's
target and placement diagnostic (benchmarks.bct_measure), the network benchmark's reading of a
reconfiguration from UDP arrivals (benchmarks.reconfig) and its check that each flow has its own
bottleneck (benchmarks.network)."""

from __future__ import annotations

import pytest

from benchmarks.bct_measure import COMM_BOUND_FACTOR, TARGET_HIGH, TARGET_LOW, judge, placed_bytes_bound
from benchmarks.network import flow_pairs, flow_problems
from benchmarks.reconfig import analyze_switch
from controller.routing import compute_paths
from controller.tc import initial_circuits
from topologies.build import load_network

PRED = {"bct_min_s": 1.0, "bct_max_s": 2.0, "t_push_s": 0.5, "t_pull_s": 0.5, "t_compute_s": 0.02}


def summary(mean: float, faithful: bool = True, complete: bool = True, **pred: float) -> dict:
    return {
        "bct_s": {"mean": mean},
        "predicted": {**PRED, **pred},
        "fidelity": {"faithful": faithful},
        "complete": complete,
    }


def test_bct_judge_within_target():
    got = judge(summary(2.1))
    assert got["ratio_min"] == pytest.approx(2.1) and got["ratio_max"] == pytest.approx(1.05)
    assert got["comm_ratio"] == pytest.approx(25.0) and got["comm_bound"]
    assert got["target_applies"] and got["target_not_applied_because"] == ""
    assert got["within_target"] is True
    assert TARGET_LOW <= 1.05 <= TARGET_HIGH and COMM_BOUND_FACTOR == 10.0


def test_bct_judge_outside_target():
    assert judge(summary(2.5))["within_target"] is False  # 1.25 x BCT_max
    assert judge(summary(1.8))["within_target"] is False  # 0.90 x BCT_max


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"complete": False}, "incomplete run"),
        ({"t_compute_s": 0.1}, "not communication-bound"),  # T_push / T_compute = 5 < 10
        ({"faithful": False}, "not faithful"),
    ],
)
def test_bct_judge_says_why_the_target_does_not_apply(kwargs, why):
    pred = {k: v for k, v in kwargs.items() if k.startswith("t_")}
    rest = {k: v for k, v in kwargs.items() if not k.startswith("t_")}
    got = judge(summary(2.1, **rest, **pred))
    assert not got["target_applies"] and got["target_not_applied_because"] == why
    assert got["within_target"] is None
    assert got["ratio_max"] == pytest.approx(1.05)  # the ratios are still reported


def test_bct_judge_without_a_prediction():
    got = judge({"bct_s": {"mean": 2.0}, "predicted": {"equation": None}, "complete": True})
    assert got["ratio_max"] is None and got["comm_bound"] is None
    assert got["target_not_applied_because"] == "not communication-bound" and got["within_target"] is None


def test_placed_bytes_bound_prefers_the_runners_placement_prediction():
    row = {"bct_s": {"mean": 3.0}, "predicted": PRED, "predicted_placement": {"bct_max_s": 2.5}}
    assert placed_bytes_bound(row) == {"bct_max_placed_s": 2.5, "ratio_max_placed": pytest.approx(1.2)}


def test_placed_bytes_bound_stretches_the_transfers_by_the_heaviest_share():
    """Two PSs, the heavier holding 75%: pull and push take 0.75 x 2 = 1.5 times as long."""
    pred = {**PRED, "ps": 2, "t_ps_update_s": 0.01, "t_sync_s": 0.03}
    row = {"bct_s": {"mean": 1.62}, "predicted": pred, "largest_ps_share": 0.75}
    bound = (0.5 + 0.5) * 1.5 + 0.02 + 0.01 + 0.03
    got = placed_bytes_bound(row)
    assert got["bct_max_placed_s"] == pytest.approx(bound)  # 1.56 s
    assert got["ratio_max_placed"] == pytest.approx(1.62 / bound)
    even = placed_bytes_bound({**row, "largest_ps_share": 0.4})  # below 1/P: no stretch below 1
    assert even["bct_max_placed_s"] == pytest.approx(1.0 + 0.06)


def test_placed_bytes_bound_without_data():
    assert placed_bytes_bound({"bct_s": {"mean": 1.0}}) == {"bct_max_placed_s": None, "ratio_max_placed": None}


def arrivals() -> list[tuple[float, str, int]]:
    """A stream every 0.1 s on the old NIC; the request at 1.0 s; 10, 11 still arrive on the old
    NIC, 12 and 13 are lost, 14 on is on the new NIC, 16 also late on the old one."""
    rec = [(i / 10, "old", i) for i in range(10)]
    rec += [(1.05, "old", 10), (1.1, "old", 11), (1.5, "new", 14), (1.55, "new", 15), (1.6, "old", 16)]
    rec += [(1.65, "new", 17), (2.5, "new", 18)]
    return rec


def test_analyze_switch_reads_the_reconfiguration():
    got = analyze_switch(arrivals(), t0=1.0, t_next=2.0, old_if="old", new_if="new")
    assert got["first_new_ms"] == pytest.approx(500.0)  # request -> 14 on the new NIC
    assert got["gap_ms"] == pytest.approx(400.0)  # 11 (1.1 s) -> 14 (1.5 s)
    assert got["lost"] == 2  # 12 and 13 never arrived
    assert got["late_old"] == 1  # 16, on the old NIC after the switch


def test_analyze_switch_when_the_new_nic_sees_nothing_in_the_window():
    got = analyze_switch(arrivals(), t0=1.0, t_next=1.4, old_if="old", new_if="new")
    assert got == {"first_new_ms": None, "gap_ms": None, "lost": None, "late_old": None}


def test_flow_problems_on_the_psnet_prototype():
    """The shaping figure's pairs each have their own bottleneck at the worker rate; two flows
    into one PS NIC, or the wrong rate, are named."""
    net = load_network("topologies/psnet-testbed.yaml")
    circuits = initial_circuits(net)
    paths = compute_paths(net, circuits, ())
    on_tor = {w: ln.b for w, ln in circuits.items()}
    rate = net.spec.emulated(net.spec.worker_mbps)  # 1000 / scale 10
    assert flow_problems(net, paths, on_tor, flow_pairs(6), rate) == []
    assert flow_problems(net, paths, on_tor, flow_pairs(1), 50.0) == [
        f"w1_1_1->ps1_1: bottleneck {rate:g} Mbit/s, not 50"
    ]
    shared = [("w1_1_1", "ps1_1"), ("w1_1_2", "ps1_1")]
    assert flow_problems(net, paths, on_tor, shared, rate) == ["ps1_1's NIC on t1_1 carries 2 flows"]


def test_ceiling_is_the_highest_aggregate_held_with_every_lower_one(tmp_path, monkeypatch):
    from benchmarks.network import ceiling, ceiling_sentence

    # the sentence names the budget in force: the fixed one where this machine's ceiling was never
    # measured (an empty cache here; `testbed doctor` may have cached a measured one on this machine)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def row(agg: float, flows: int, mean: float, low: float) -> dict:
        return {"aggregate_mbps": agg, "flows": flows, "wire_mean": mean, "wire_min": low}

    rows = [row(100, 1, 0.99, 0.99), row(600, 6, 0.97, 0.96), row(900, 6, 0.95, 0.94), row(1200, 6, 0.96, 0.96)]
    assert ceiling(rows) == 600  # 900's slowest flow missed; 1200 holding after it does not count
    assert "**600 Mbit/s**" in ceiling_sentence(rows)
    assert ceiling([row(100, 1, 0.90, 0.90)]) is None
    jumbo = [r | {"mtu": 9000} for r in (row(1200, 6, 0.99, 0.99), row(1800, 6, 0.97, 0.96))]
    assert ceiling(rows + jumbo) == 600 and ceiling(rows + jumbo, mtu=9000) == 1800  # each MTU on its own rows
    lines = ceiling_sentence(rows + jumbo).splitlines()  # rows without a cabling ran before patch cables: veth
    assert lines[0].startswith("- MTU 1500, ECS-ToR cables veth, frames (no TSO): ") and "**600 Mbit/s**" in lines[0]
    assert "budget is 900 Mbit/s" in lines[0]
    assert lines[1].startswith("- MTU 9000, ECS-ToR cables veth, frames") and "**1800 Mbit/s** (the highest" in lines[1]
    patch = [r | {"cabling": "patch"} for r in (row(600, 6, 0.99, 0.98), row(1200, 6, 0.97, 0.96))]
    assert ceiling(rows + patch, cabling="patch") == 1200 and ceiling(rows + patch, cabling="veth") == 600
    first = ceiling_sentence(rows + patch).splitlines()[0]
    assert first.startswith("- MTU 1500, ECS-ToR cables patch, frames") and "**1200 Mbit/s** (the highest" in first
    # rows with userspace TSO have a ceiling of their own, beside the same cabling's without
    tso = [r | {"cabling": "patch", "tso": True} for r in (row(1200, 6, 0.999, 0.999), row(1800, 6, 0.999, 0.998))]
    assert ceiling(rows + patch + tso, cabling="patch", tso=True) == 1800
    assert ceiling(rows + patch + tso, cabling="patch", tso=False) == 1200
    last = ceiling_sentence(rows + patch + tso).splitlines()[-1]
    assert last.startswith("- MTU 1500, ECS-ToR cables patch, userspace TSO: ") and "**1800 Mbit/s**" in last


def test_the_header_factor_follows_the_mtu():
    from emulation.wire import header_factor, mss_bytes

    assert header_factor(1500) == pytest.approx(1448 / 1514) and header_factor(9000) == pytest.approx(8948 / 9014)
    assert header_factor(1500) == mss_bytes(1500) / 1514  # the retransmission counter's segment

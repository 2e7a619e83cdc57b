"""The fidelity verdict as a pure function of what was sampled (emulation.fidelity.judge), and the
monitor's condensing of sampler windows into its inputs (no thread, no network)."""

from __future__ import annotations

import pytest

from emulation.fidelity import IDLE_LIMIT, LINK_FULL, OVS_CPU_LIMIT, PHASE_FULL, FidelityInputs, Monitor, judge
from emulation.phases import Window, phases
from emulation.sampler import Sample
from topologies.build import load_network

RATES = {"t1_1-eth1": 100.0, "t1_1-eth2": 100.0, "t1_2-eth1": 50.0}


def inputs(ovs: float, idle: float, peaks: dict[str, float], n: int = 10) -> FidelityInputs:
    return FidelityInputs(ovs_cpu=[ovs] * n, idle=[idle] * n, peak_mbps=peaks, rate_mbps=RATES)


def test_busy_datapath_with_full_links_is_faithful():
    """ovs-vswitchd near a full core is no verdict while the links still carry their rate."""
    v = judge(inputs(0.98, 0.30, {"t1_1-eth1": 101.0, "t1_1-eth2": 40.0}))
    assert v.faithful
    assert v.busiest_link == "t1_1-eth1" and v.busiest_utilisation == pytest.approx(1.01)
    assert v.reason == "ovs-vswitchd p95 98% of a core, idle p5 30%, busiest link t1_1-eth1 peaked at 101% of its rate"
    assert v.links == {"t1_1-eth1": 1.01, "t1_1-eth2": 0.4}
    assert v.samples == 10


def test_starved_datapath_and_slow_links_is_not_faithful():
    v = judge(inputs(0.97, 0.30, {"t1_1-eth1": 70.0, "t1_2-eth1": 40.0}))
    assert not v.faithful
    assert v.busiest_link == "t1_2-eth1"  # 80% of 50 beats 70% of 100
    assert v.reason == (
        "ovs-vswitchd at 97% of a core while the busiest link peaked at 80% of its rate (< 90%): "
        "the emulator set the pace"
    )


def test_no_idle_cpu_and_slow_links_is_not_faithful():
    v = judge(inputs(0.50, 0.01, {"t1_1-eth1": 60.0}))
    assert not v.faithful
    assert v.reason.startswith("machine idle down to 1% while the busiest link peaked at 60%")


def test_slow_links_on_an_idle_machine_are_faithful():
    """A link under its rate is the job's choice when nothing starved the emulator."""
    v = judge(inputs(0.40, 0.50, {"t1_1-eth1": 30.0}))
    assert v.faithful and v.busiest_utilisation == pytest.approx(0.3)


def test_links_below_five_percent_do_not_count():
    v = judge(inputs(0.95, 0.50, {"t1_1-eth1": 4.0, "t1_2-eth1": 2.0}))
    assert v.busiest_link == "" and v.links == {}
    assert not v.faithful  # starved, and no link was busy at all
    v = judge(inputs(0.10, 0.50, {}))
    assert v.faithful and v.reason.endswith("no link was busy")


def test_percentiles_take_the_windows_not_the_mean():
    """p95 of ovs-vswitchd's CPU and p5 of idle: one bad window in twenty does not decide."""
    ovs = [0.5] * 19 + [1.0]
    idle = [0.0] + [0.5] * 19
    v = judge(FidelityInputs(ovs, idle, {"t1_1-eth1": 50.0}, RATES))
    assert v.ovs_cpu_p95 == 0.5 and v.idle_p5 == 0.0  # index int(0.95 * 19) = 18 and int(0.05 * 19) = 0
    assert not v.faithful and "machine idle down to 0%" in v.reason
    ovs = [0.5] * 18 + [1.0, 1.0]
    assert judge(FidelityInputs(ovs, [0.5] * 20, {}, RATES)).ovs_cpu_p95 == 1.0


def test_no_windows_is_an_idle_machine():
    v = judge(FidelityInputs([], [], {}, RATES))
    assert (v.ovs_cpu_p95, v.idle_p5, v.samples) == (0.0, 1.0, 0)
    assert v.faithful


def test_limits_are_the_documented_ones():
    assert (OVS_CPU_LIMIT, IDLE_LIMIT, LINK_FULL) == (0.90, 0.05, 0.90)


def _sample(t: float, ovs: float | None, idle: float, tx: dict[str, int]) -> Sample:
    return Sample(t=t, dt_s=1.0, idle=idle, busy_s=0.0, ovs_cpu=ovs, procs_cpu_s=0.0, tx_bytes=tx)


def test_inputs_from_sampler_windows():
    """Each interface's busiest window in Mbit/s; a window without ovs-vswitchd counts as 0."""
    windows = [
        _sample(10.0, 0.9, 0.2, {"t1_1-eth1": 10_000_000, "t1_2-eth1": 1_000_000}),  # 80 and 8 Mbit/s
        _sample(11.0, None, 0.4, {"t1_1-eth1": 12_500_000, "t1_2-eth1": 0}),  # 100 Mbit/s
    ]
    got = FidelityInputs.from_samples(windows, {"t1_1-eth1": 100.0, "t1_2-eth1": 50.0})
    assert got.ovs_cpu == [0.9, 0.0] and got.idle == [0.2, 0.4]
    assert got.peak_mbps == pytest.approx({"t1_1-eth1": 100.0, "t1_2-eth1": 8.0})


def test_monitor_judges_only_the_windows_after_since():
    """The windows before the first measured step (TF starting, warm-up) are left out."""
    net = load_network("topologies/psnet-testbed.yaml")
    mon = Monitor(net)  # not started: its sampler's windows are set by hand
    intf = next(iter(mon.intfs))
    rate = mon.intfs[intf]
    full = int(rate * 1e6 / 8)  # one second at the link's rate
    mon.sampler.samples.extend(
        [
            _sample(1.0, 0.99, 0.01, {intf: full}),  # start-up: a burst at the link's rate
            _sample(2.0, 0.99, 0.01, {intf: full // 2}),  # measured: starved, half the rate
            _sample(3.0, 0.99, 0.01, {intf: full // 2}),
        ]
    )
    assert mon.verdict().faithful  # the start-up burst reached the rate
    v = mon.verdict(since=1.5)
    assert not v.faithful and v.samples == 2 and v.busiest_utilisation == pytest.approx(0.5)
    assert mon.verdict(since=99.0).samples == 3  # nothing after since: all windows


def _phase(*utils: float, t0: float = 100.0) -> list:
    """Windows of 0.25 s with these bottleneck utilisations, as transfer phases."""
    return phases([Window(t0 + 0.25 * (i + 1), 0.25, u, "t1_1-eth1") for i, u in enumerate(utils)])


def test_the_verdict_judges_the_transfer_phases_not_only_the_busiest_window():
    """Short transfers (a ResNet50 push) read 48% in their busiest 1-s window but ran the link full
    while they lasted: faithful. One burst at the rate and the rest at 60%: not faithful."""
    short = _phase(0.4, 0.97, 0.99, 0.3, 0.0, 0.5, 0.98, 1.0, 0.96, 0.2)  # two phases, interiors ~98%
    v = judge(FidelityInputs([0.97] * 10, [0.01] * 10, {"t1_1-eth1": 48.0}, RATES, phases=short))
    assert v.faithful and (v.transfer_phases, v.transfer_util) == (2, pytest.approx(0.98, abs=0.005))
    assert "its 2 transfer phases (2 s) kept the busiest link at 98% of its rate on average" in v.reason
    slow = _phase(0.5, 1.0, 0.6, 0.6, 0.6, 0.6, 0.3)  # peaked at 100% once
    v = judge(FidelityInputs([0.97] * 10, [0.01] * 10, {"t1_1-eth1": 100.0}, RATES, phases=slow))
    assert not v.faithful and v.transfer_util == pytest.approx(0.68)
    assert v.reason == (
        "ovs-vswitchd at 97% of a core and machine idle down to 1% while its 1 transfer phases (2 s) kept the "
        f"busiest link at 68% of its rate on average (< {PHASE_FULL:.0%}): the emulator set the pace"
    )
    # the same slow phases on a machine with CPU to spare: the job's own pace, faithful
    assert judge(FidelityInputs([0.5] * 10, [0.5] * 10, {"t1_1-eth1": 100.0}, RATES, phases=slow)).faithful
    # phases too short to have an interior are not judged: the busiest window decides, as without phases
    v = judge(FidelityInputs([0.97] * 10, [0.01] * 10, {"t1_1-eth1": 48.0}, RATES, phases=_phase(0.5, 0.5)))
    assert not v.faithful and v.transfer_util is None and "peaked at 48%" in v.reason


def test_a_window_over_the_rate_counts_as_full():
    """A window read at 104% took bytes its neighbour left at the counter read: the phase's mean
    counts it as 100%, so a full link never reads above its rate on average."""
    assert _phase(0.5, 1.04, 1.04, 1.04, 0.2)[0].util == pytest.approx(1.0)
    assert _phase(0.5, 1.04, 0.96, 0.2)[0].util == pytest.approx(0.98)


def test_a_job_on_one_hosts_loopback_is_judged_on_drops_alone():
    """colocate_ps: no emulated link carried the job, so a starved machine and idle links do not
    make it unfaithful; a datapath drop still does."""
    slow = _phase(0.5, 0.6, 0.6, 0.6, 0.3)
    base = {"ovs_cpu": [0.97] * 10, "idle": [0.01] * 10, "peak_mbps": {"t1_1-eth1": 60.0}, "rate_mbps": RATES}
    assert not judge(FidelityInputs(**base, phases=slow)).faithful
    v = judge(FidelityInputs(**base, phases=slow, loopback_only=True))
    assert v.faithful and v.reason.startswith("colocate_ps: worker and PS talk over one host's loopback")
    from emulation.datapath import Drops, PortLoss

    lost = Drops([PortLoss("s1-eth1", attempted=1_000, sent=995, backlog_change=0, tc_dropped=0, exact=True)])
    v = judge(FidelityInputs(**base, phases=slow, loopback_only=True, drops=lost))
    assert not v.faithful and "dropped 5 packets silently" in v.reason and "the emulator set the pace" not in v.reason


def test_the_monitor_passes_its_transfer_phases_after_since():
    net = load_network("topologies/psnet-testbed.yaml")
    mon = Monitor(net)
    mon.traffic.windows.extend(Window(100.0 + 0.25 * i, 0.25, u, "x") for i, u in enumerate([0.5, 0.5, 0.5, 0.0]))
    mon.traffic.windows.extend(Window(200.0 + 0.25 * i, 0.25, u, "x") for i, u in enumerate([0.9, 1.0, 1.0, 0.9]))
    assert mon.verdict(since=150.0).transfer_util == pytest.approx(1.0)
    assert mon.verdict().transfer_phases == 2


def test_batch_tails_at_a_full_queue_are_tail_drops_not_datapath_losses():
    """OVS frees the rest of a send batch when the queue tail-drops one packet (ENOBUFS, no log
    line): silent drops on a port with tail drops, up to 31 per tail drop, do not make a run
    unfaithful; silent drops on a port without any, or beyond that bound, do."""
    from emulation.datapath import SEND_BATCH, Drops, PortLoss

    # Fig. 13 FatTree r=5 VGG-16: 95 silent beside tail drops on the aggregation port into the PSs' edge
    full = PortLoss("a0_2-eth1", attempted=10_000, sent=9_500, backlog_change=0, tc_dropped=405, exact=True)
    assert (full.silent, full.batch_tails, full.hidden) == (95, 95, 0)
    lone = PortLoss("e0_1-eth3", attempted=5_000, sent=4_990, backlog_change=0, tc_dropped=0, exact=True)
    assert (lone.silent, lone.batch_tails, lone.hidden) == (10, 0, 10)
    beyond = PortLoss("a0_3-eth1", attempted=1_000, sent=900, backlog_change=0, tc_dropped=2, exact=True)
    assert (beyond.batch_tails, beyond.hidden) == (2 * (SEND_BATCH - 1), 98 - 62)

    base = dict(ovs_cpu=[0.9] * 10, idle=[0.3] * 10, peak_mbps={"t1_1-eth1": 100.0}, rate_mbps=RATES)
    v = judge(FidelityInputs(**base, drops=Drops([full])))
    assert v.faithful and v.datapath_drops == 0, v.reason
    assert "95 packets freed with the rest of a send batch at a full queue: tail drops in effect" in v.reason
    v = judge(FidelityInputs(**base, drops=Drops([full, lone])))
    assert not v.faithful and v.datapath_drops == 10
    assert "ovs-vswitchd dropped 10 packets silently (10 on send: e0_1-eth3 10; 0 on receive)" in v.reason
    d = Drops([full, lone]).as_dict()
    assert (d["silent"], d["batch_tails"], d["hidden"]) == (105, 95, 10)

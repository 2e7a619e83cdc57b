"""Scheme jobs from experiment files (root): `testbed run` with `scheme:` checks exact sums, reports
GST and the schedule's facts, and with real TF gradients every scheme trains the same model.
(Own module: tests/test_scheme_runs.py keeps a network up for its whole module, and these runs
bring up their own, which must not wait behind it for the one-emulation lock.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.root


def _experiment(tmp_path: Path, name: str, topology: str, **job) -> Path:
    import yaml

    data = {"name": name, "topology": str(Path("topologies").resolve() / topology), "job": job}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_testbed_run_takes_a_scheme_job(tmp_path: Path):
    """An experiment file's `scheme:` runs the engine: exact sums checked, GST per measured step,
    the schedule's cross-rack bytes and chain in the summary, a fidelity verdict."""
    from runs.runner import run_experiment

    exp = _experiment(tmp_path, "ls-rat", "leafspine-rat.yaml", model="tiny", width=4.0, scheme="rat",
                      compute="calibrated", compute_s=0.01, iterations=3, warmup=1, check=True)  # fmt: skip
    res = run_experiment(exp, results=tmp_path / "results", progress=False)
    s = res.summary
    assert s["scheme"] == "rat" and s["sums_checked"] and s["sum_problems"] == []
    assert s["gst_s"]["n"] == 3 and s["bct_s"]["mean"] >= s["gst_s"]["mean"]
    assert s["chain_length"] == 4  # one oversubscribed level: 2(l + 1)
    assert len(s["cross_region_bytes"]) == 1 and s["cross_region_bytes"][0] > 0
    assert "faithful" in s["fidelity"] and (res.out_dir / "iterations.csv").exists()
    # the cable load beside the verdict, and the slow-down this machine's flow-model calibration expects of it
    from models.flow.simgrid import LOAD_FACTOR, LOAD_POWER, PAIRS_POWER, sim_config

    cfg = sim_config()[0]
    a, q, j = (float(cfg.get(k, d)) for k, d in ((LOAD_FACTOR, 0), (LOAD_POWER, 1), (PAIRS_POWER, 0)))
    assert s["cable_load_gbps"] > 0 and s["connections"] == 32  # RAT on leafspine-rat's 8 hosts: 32 host pairs send
    want = 1 + a * s["cable_load_gbps"] ** q * s["connections"] ** j
    assert s["load_slowdown"] == (pytest.approx(want, abs=1e-3) if a else None)


WORKERS_3 = ["h0_2", "h0_3", "h1_2"]  # two racks of leafspine-2rack


@pytest.mark.tf
def test_every_scheme_trains_the_same_model(tmp_path: Path):
    """Real TF gradients, same seeds: after the same steps the loss is the same whatever the scheme
    (the sums differ only in float order)."""
    from runs.runner import run_experiment

    losses = {}
    for scheme in ("ring", "rat", "halving-doubling"):
        job = {"model": "tiny", "width": 1.0, "scheme": scheme, "compute": "tf", "iterations": 3, "warmup": 1}
        exp = _experiment(tmp_path, f"tf-{scheme}", "leafspine-2rack.yaml", check=True, workers=WORKERS_3, **job)
        s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
        assert s["sum_problems"] == []
        losses[scheme] = s["loss"]
    ring = losses["ring"]
    assert len(set(ring)) > 1  # the model trains: the loss moves from step to step
    for scheme, loss in losses.items():
        assert loss == pytest.approx(ring, rel=1e-4), (scheme, loss, ring)


def test_a_scheme_run_goes_on_across_a_cable_failure(tmp_path: Path):
    """A leaf-spine uplink fails at step 2 and comes back at step 4 of a ring: the CNC moves the
    flows to the other spine, every sum stays exact, both events are applied and costed."""
    import csv

    from runs.runner import run_experiment

    exp = _experiment(tmp_path, "ls-fail", "leafspine-rat.yaml", model="tiny", width=4.0, scheme="ring",
                      compute="calibrated", compute_s=0.01, iterations=6, warmup=1, check=True)  # fmt: skip
    _add(exp, timeline=[{"at_step": 2, "action": "link_down", "link": ["l0", "s1"]},
                        {"at_step": 4, "action": "link_up", "link": ["l0", "s1"]}])  # fmt: skip
    res = run_experiment(exp, results=tmp_path / "results", progress=False)
    s = res.summary
    assert s["sum_problems"] == [] and s["gst_s"]["n"] == 6
    assert [e["action"] for e in s["timeline"]["events"]] == ["link_down", "link_up"]
    assert s["timeline"]["not_applied"] == []
    rows = list(csv.DictReader((res.out_dir / "events.csv").open()))
    assert [r["action"] for r in rows] == ["link_down", "link_up"] and (res.out_dir / "timeline.png").exists()


def test_a_scheme_run_cut_off_ends_with_a_clear_message(tmp_path: Path):
    """A host's only cable fails for good: the run does not hang until its deadline; the stall is
    found after the job's stall_s (no iteration, no link moving bytes; 15 s here, 45 by default)
    and the message says where each host was."""
    from runs.runner import run_experiment
    from workloads.errors import RunError

    exp = _experiment(tmp_path, "ls-cut", "leafspine-rat.yaml", model="tiny", width=4.0, scheme="ring",
                      compute="calibrated", compute_s=0.01, iterations=50, warmup=1, deadline_s=600,
                      stall_s=15)  # fmt: skip
    _add(exp, timeline=[{"at_step": 2, "action": "link_down", "link": ["h0_2", "l0"]}])
    t0 = time.monotonic()
    with pytest.raises(RunError) as err:
        run_experiment(exp, results=tmp_path / "results", progress=False)
    msg = str(err.value)
    assert "stalled: no iteration and no link moving bytes for" in msg and "h0_2: iteration" in msg, msg
    assert "(limit 15 s)" in msg, msg
    assert time.monotonic() - t0 < 300  # found long before the 600 s deadline


def test_paused_senders_are_drawn_and_costed(tmp_path: Path):
    """RAT's paused hosts in a scheme job: the draws are seeded, each host's engine holds its sends
    in its windows, the sums stay exact and every re-draw is an event of the timeline."""
    from runs.runner import run_experiment

    exp = _experiment(tmp_path, "ls-pause", "leafspine-2rack.yaml", model="tiny", width=4.0, scheme="ring",
                      compute="calibrated", compute_s=0.01, iterations=4, warmup=1, check=True)  # fmt: skip
    _add(exp, timeline=[{"at_s": 0, "action": "pause_senders", "k": 2, "every_s": 0.5, "seed": 3}])
    s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
    assert s["sum_problems"] == []
    events = s["timeline"]["events"]
    assert events and all(e["action"] == "pause_senders" and len(e["target"].split(",")) == 2 for e in events[:1])
    windows = s["timeline"]["pauses"]
    assert all(b - a == pytest.approx(0.5) for w in windows.values() for a, b in w)
    # k = 2 of 8 hosts in every 0.5 s draw: GST is at least one paused window for a ring
    assert s["gst_s"]["mean"] > 0.25, s["gst_s"]


def _add(path: Path, **fields) -> None:
    import yaml

    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, **fields}))


def test_a_pf_job_with_dvf_writes_what_it_cut_per_clock(tmp_path: Path):
    """`scheme: pf` with dynamic DVF from an experiment file: nothing lost over the run (check:
    applied + residual = computed), the summary's clocks say what the pushes and broadcasts
    carried against raw float32, and the hosts' interfaces carried about the engine's bytes."""
    from runs.runner import run_experiment

    exp = _experiment(tmp_path, "ft-pf", "fattree-testbed.yaml", model="tiny", width=4.0, scheme="pf",
                      compute="calibrated", compute_s=0.01, iterations=3, warmup=1, check=True, dvf="dynamic",
                      dvf_delta_low=1.5, dvf_delta_up=2.5)  # fmt: skip
    s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
    assert s["scheme"] == "pf" and s["sums_checked"] and s["sum_problems"] == []
    clocks = s["dvf"]["clocks"]
    assert [c["clock"] for c in clocks] == [2, 3, 4]
    # a server's sum of six filtered pushes has fewer small entries than any one push: it holds back less
    assert all(1 > c["push_reduced"] > c["broadcast_reduced"] > 0 for c in clocks), clocks
    assert all(c["push_reduced"] > 0.3 for c in clocks), clocks
    # dynamic: each host's delta is one of the two, by its links' measured rates (the rule itself:
    # tests/test_pf_scheme.py; which one a host picks here depends on this machine's load)
    assert all(c["deltas"] and set(c["deltas"]) <= {1.5, 2.5} for c in clocks), clocks
    wire = sum(c["push_bytes"] + c["broadcast_bytes"] for c in clocks)
    nic_tx = sum(n["tx"] for n in s["nic_bytes"].values())
    assert wire < nic_tx  # the interfaces carried the engine's bytes (warm-up and set-up too)


def test_background_hosts_shuffle_beside_a_scheme_job(tmp_path: Path):
    """Parameter Flow's shared cluster: a `shuffle` event makes three hosts that are not the job's
    send to each other every second from inside their Mininet hosts; their interfaces carry what the
    shuffles' logs say they sent, and the timeline lists each shuffle."""
    import yaml

    from runs.runner import run_experiment

    bg = ["h2_0_2", "h2_1_2", "h3_0_2"]
    data = {
        "name": "ft-shuffle",
        "topology": str(Path("topologies").resolve() / "fattree-k4.yaml"),
        "job": {"model": "tiny", "width": 4.0, "scheme": "pf", "compute": "calibrated", "compute_s": 0.4,
                "iterations": 6, "warmup": 1, "workers": ["h0_0_2", "h0_1_2", "h1_0_2", "h1_1_2"]},
        "timeline": [{"at_s": 0, "action": "shuffle", "hosts": bg, "mb": 20, "every_s": 1}],
    }  # fmt: skip
    exp = tmp_path / "ft-shuffle.yaml"
    exp.write_text(yaml.safe_dump(data))
    s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
    (sh,) = s["timeline"]["shuffles"]
    assert sh["hosts"] == bg and sh["bytes_per_pair"] == 500_000  # 20 MB / scale 40
    assert sh["shuffles"] >= 2 and sh["sent_bytes"] >= 2 * 3 * 2 * 500_000
    for h in bg:  # sent from inside the hosts: their own interfaces carried it
        assert s["nic_bytes"][h]["tx"] >= 2 * 2 * 500_000  # two shuffles or more, two peers each
    assert any(e["action"] == "shuffle" for e in s["timeline"]["events"])

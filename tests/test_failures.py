"""Timelines on real jobs (issue: reconfiguration and failures while a job runs): a PSNet ToR-PS
cable fails under a running TF job and the TC re-circuits its workers; a FatTree aggregation
cable fails and the CNC reroutes; an ECS dark period shows in the BCT timeline; a PS fails with
and without a standby; two jobs share one topology.

Each test runs one real job (VGG-16 shrunk so a step takes about a second) in Mininet hosts;
events are triggered by step (`at_step`) so they land inside the run whatever the machine's speed.
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from runs.runner import run_experiment
from tests.png_helpers import drawn_colours
from workloads.errors import RunError

pytestmark = [pytest.mark.root, pytest.mark.tf]
ROOT = Path(__file__).resolve().parent.parent
JOB = {"model": "vgg16", "iterations": 7, "warmup": 1, "placement": "balanced", "deadline_s": 400}


def experiment(tmp_path: Path, name: str, topology: str, timeline: list[dict], **extra) -> Path:
    body = {
        "name": name,
        "topology": str(ROOT / "topologies" / topology),
        "scale": 40,
        "compress": 16,
        "timeline": timeline,
        **({"job": JOB} if "jobs" not in extra else {}),
        **extra,
    }
    f = tmp_path / f"{name}.yaml"
    f.write_text(json.dumps(body))
    return f


def run(tmp_path: Path, name: str, topology: str, timeline: list[dict], **extra):
    return run_experiment(experiment(tmp_path, name, topology, timeline, **extra), tmp_path / "results", False)


def steps(out: Path, job: str = "job") -> list[tuple[int, int]]:
    """(attempt, global step) of every step the chief ran, in order."""
    with (out / "iterations.csv").open() as f:
        return [(int(r["attempt"]), int(r["step"])) for r in csv.DictReader(f) if r["job"] == job and r["task"] == "0"]


def controller_events(out: Path) -> list[dict]:
    lines = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    return [e for e in lines if e.get("host") == "controller"]


def events_csv(out: Path) -> list[dict]:
    with (out / "events.csv").open() as f:
        return list(csv.DictReader(f))


def no_job_processes() -> list[str]:
    return subprocess.run(["pgrep", "-f", "tfjob.psjob"], capture_output=True, text=True).stdout.split()


def test_psnet_tor_ps_cable_failure_recircuits_and_loses_no_iteration(tmp_path, no_leftovers):
    timeline = [
        {"at_step": 3, "action": "link_down", "link": ["ps1_1", "t1_1"]},
        {"at_step": 5, "action": "link_up", "link": ["ps1_1", "t1_1"]},
    ]
    r = run(tmp_path, "psnet-link", "psnet-testbed.yaml", timeline)
    assert r.complete and r.summary["restarts"] == []
    assert steps(r.out_dir) == [(0, k) for k in range(1, 9)]  # every step once: nothing lost, nothing redone
    ctl = controller_events(r.out_dir)
    recircuits = [e["recircuit"] for e in ctl if e["event"] == "tc" and "recircuit" in e]
    assert len(recircuits) == 2
    down, up = recircuits
    assert [w for w, t in down.items() if t == "t1_1"] == []  # nobody left on the ToR that lost ps1_1
    assert sorted(down.values()).count("t1_2") == 3 and sorted(down.values()).count("t1_3") == 3
    assert sorted(up.values()).count("t1_1") == 2  # repaired: home again
    ev = events_csv(r.out_dir)
    assert [e["action"] for e in ev] == ["link_down", "link_up"]
    assert "re-circuited ecs1" in ev[0]["detail"] and "worker(0,3,3)" in ev[0]["detail"]
    assert drawn_colours(r.out_dir / "timeline.png", min_share=0.0005)  # the job's BCT line


def test_fattree_aggregation_cable_failure_is_rerouted(tmp_path, no_leftovers):
    timeline = [{"at_step": 3, "action": "link_down", "link": ["e0_1", "a0_2"]}]
    r = run(tmp_path, "fattree-link", "fattree-testbed.yaml", timeline)
    assert r.complete and steps(r.out_dir) == [(0, k) for k in range(1, 9)]
    ctl = controller_events(r.out_dir)
    i = next(i for i, e in enumerate(ctl) if e["event"] == "link")
    assert (ctl[i]["a"], ctl[i]["b"], ctl[i]["up"]) == ("e0_1", "a0_2", False)
    cnc = next(e for e in ctl[i:] if e["event"] == "cnc")
    assert cnc["switches"] >= 2  # flows moved off the dead cable on both of its ends' neighbours
    assert "rerouted" in events_csv(r.out_dir)[0]["detail"]


def test_ecs_dark_period_shows_in_the_bct_timeline(tmp_path, no_leftovers):
    dark_ms = 2000
    timeline = [{"at_step": 4, "action": "reconfigure", "worker": "w1_1_1", "tor": "t1_3", "dark_ms": dark_ms}]
    r = run(tmp_path, "psnet-dark", "psnet-testbed.yaml", timeline)
    assert r.complete and steps(r.out_dir) == [(0, k) for k in range(1, 9)]
    (ev,) = events_csv(r.out_dir)
    assert float(ev["took_ms"]) >= dark_ms and "worker(1,2,3)" in ev["detail"]
    baseline = float(ev["baseline_s"])
    assert float(ev["extra_s"]) >= 0.8 * dark_ms / 1000, ev  # the dark circuit stalled the synchronous step
    assert int(ev["slow_steps"]) >= 1
    with (r.out_dir / "timeline.csv").open() as f:
        rows = [x for x in csv.DictReader(f)]
    t = float(ev["t_s"])
    during = [float(x["bct_s"]) for x in rows if float(x["t_start_s"]) <= t + dark_ms / 1000 <= float(x["t_end_s"])]
    assert during and during[0] >= baseline + 0.8 * dark_ms / 1000, rows  # the step the dark period fell in


def test_failed_ps_without_standby_ends_the_run_clearly(tmp_path, no_leftovers, bridges):
    timeline = [{"at_step": 2, "action": "fail_ps", "node": "ps1_2"}]
    with pytest.raises(RunError, match=r"ps1_2 .*no standby PS left: not recoverable; add standby_ps"):
        run(tmp_path, "psnet-ps", "psnet-testbed.yaml", timeline)
    assert no_job_processes() == [] and bridges() == []
    summary = json.loads((tmp_path / "results" / "psnet-ps" / "summary.json").read_text())
    assert summary["complete"] is False and "not recoverable" in summary["error"]


def test_failed_ps_is_replaced_by_the_standby_from_the_last_checkpoint(tmp_path, no_leftovers):
    timeline = [{"at_step": 5, "action": "fail_ps", "node": "ps1_2"}]
    job = {**JOB, "checkpoint_every": 2}
    r = run(tmp_path, "psnet-standby", "psnet-standby.yaml", timeline, job=job)
    assert r.complete
    (restart,) = r.summary["restarts"]
    assert (restart["failed"], restart["standby"]) == ("ps1_2", "ps1_3")
    assert r.summary["ps_hosts"] == ["ps1_1", "ps1_3"]
    ran = steps(r.out_dir)
    first = [k for a, k in ran if a == 0]
    again = [k for a, k in ran if a == 1]
    reached = restart["reached_step"]
    assert first == list(range(1, reached + 1))
    restored = again[0] - 1
    assert restored % 2 == 0 and restored <= reached  # a checkpoint step (every 2), not after the failure
    assert again == list(range(restored + 1, 9))
    (ev,) = events_csv(r.out_dir)
    assert int(ev["steps_lost"]) == reached - restored
    assert no_job_processes() == []


def test_two_jobs_share_the_topology(tmp_path, no_leftovers):
    small = {k: v for k, v in JOB.items() if k != "iterations"} | {"iterations": 4}
    jobs = [
        {**small, "name": "a", "workers": ["w1_1_1", "w1_2_1", "w1_3_1"], "ps": ["ps1_1"]},
        {**small, "name": "b", "workers": ["w1_1_2", "w1_2_2", "w1_3_2"], "ps": ["ps1_2"]},
    ]
    r = run(tmp_path, "two-jobs", "psnet-testbed.yaml", [], jobs=jobs)
    assert r.complete and set(r.summary["jobs"]) == {"a", "b"}
    for name in ("a", "b"):
        s = r.summary["jobs"][name]
        assert s["complete"] and s["bct_s"]["n"] == 4 and s["workers"] == 3
        assert steps(r.out_dir, name) == [(0, k) for k in range(1, 6)]
    # each job's variables live on its own PS only
    assert r.summary["jobs"]["a"]["bytes_per_ps"].keys() == {"/job:ps/task:0"}
    nic = r.summary["ps_nic_bytes"]
    assert set(nic) == {"ps1_1", "ps1_2"} and all(sum(d["rx"] for d in v.values()) > 0 for v in nic.values())


def test_random_failures_are_drawn_applied_and_repaired(tmp_path, no_leftovers):
    rf = {"k": 1, "every_s": 3, "count": 2, "seed": 5, "kinds": ["ps-tor"]}
    job = {**JOB, "iterations": 12}
    r = run(tmp_path, "psnet-random", "psnet-testbed.yaml", [], random_failures=rf, job=job)
    assert r.complete and steps(r.out_dir) == [(0, k) for k in range(1, 14)]
    tl = r.summary["timeline"]
    assert tl["not_applied"] == []
    applied = [(e["action"], e["target"]) for e in tl["events"]]
    assert [a for a, _ in applied] == ["link_down", "link_up", "link_down", "link_up"]
    assert applied[0][1] == applied[1][1] and applied[2][1] == applied[3][1]  # each failure repaired a round later
    starts = [e["t"] - tl["t0"] for e in tl["events"]]
    assert starts[0] == pytest.approx(0, abs=1.0) and starts[2] == pytest.approx(3, abs=1.0)
    ctl = [e for e in controller_events(r.out_dir) if e["event"] == "link"]
    assert [e["up"] for e in ctl] == [False, True, False, True]

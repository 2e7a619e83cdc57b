"""A job whose traffic stops is found within its stall window (the job's stall_s, here 15 s: the
default's 45 s would only make the test wait), with what each process was doing (root, TF).

The stall is real: the only cable of the one PS of a star (psnet-1tor) goes down after a few
steps, so no byte can move and no step can end; nothing in the job fails by itself."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from runs.runner import run_experiment
from runs.stall import Stalled

pytestmark = [pytest.mark.root, pytest.mark.tf]
ROOT = Path(__file__).resolve().parent.parent
STALL_S = 15.0


def test_a_job_whose_only_path_goes_down_is_reported_stalled_after_its_window(tmp_path):
    f = tmp_path / "stall.yaml"
    f.write_text(
        json.dumps(
            {
                "name": "stall",
                "topology": str(ROOT / "topologies" / "psnet-1tor.yaml"),
                "job": {"model": "tiny", "iterations": 40, "warmup": 1, "deadline_s": 400, "stall_s": STALL_S},
                "timeline": [{"at_step": 3, "action": "link_down", "link": ["ps1_1", "t1_1"]}],
            }
        )
    )
    t0 = time.monotonic()
    with pytest.raises(Stalled) as err:
        run_experiment(f, results=tmp_path / "results", progress=False)
    took = time.monotonic() - t0
    msg = str(err.value)
    assert msg.startswith("stalled: no step and no link moving bytes for ")
    # every process is named with its kernel state and its own last lines, not TensorFlow's banner
    for who in ("ps1_1 (job ps 0): S (sleeping)", "w1_1_1 (job worker 0): S (sleeping)", "w1_1_2 (job worker 1): "):
        assert who in msg, msg
    assert "threads:" in msg and "last lines: " in msg and '"event": "iter"' in msg
    assert "oneDNN" not in msg and "absl::InitializeLog" not in msg
    summary = json.loads((tmp_path / "results" / "stall" / "summary.json").read_text())
    assert summary["complete"] is False and summary["error"].startswith("stalled:")
    idle = float(re.search(r"for (\d+) s", msg).group(1))
    assert STALL_S <= idle < STALL_S + 15  # found soon after the window (the watch looks every few seconds)
    assert f"(limit {STALL_S:g} s)" in msg
    assert took < 400  # long before the job's deadline


def test_a_stall_window_below_a_steps_compute_is_refused_in_one_line(tmp_path):
    """stall_s is the job's; one at or below a calibrated step's compute would stop a healthy run."""
    from workloads.experiment import STALL_S as DEFAULT
    from workloads.experiment import ExperimentError, JobSpec, load_experiment

    assert JobSpec(model="tiny").stall_s == DEFAULT == 45.0
    f = tmp_path / "x.yaml"
    job = {"model": "tiny", "scheme": "ring", "compute": "calibrated", "compute_s": 60, "stall_s": 45}
    topo = str(ROOT / "topologies" / "leafspine-rat.yaml")
    f.write_text(json.dumps({"topology": topo, "job": job}))
    with pytest.raises(ExperimentError) as err:
        load_experiment(f)
    assert "stall_s: 45 s is not above compute_s 60 s" in str(err.value) and "\n" not in str(err.value)
    f.write_text(json.dumps({"topology": topo, "job": {**job, "stall_s": 90}}))
    assert load_experiment(f)[0].main.stall_s == 90

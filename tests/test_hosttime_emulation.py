"""A real TF job in real Mininet hosts in both host-time modes: in `full` every step is longer than
in `scaled` by about the pad the run measured (tfjob.hosttime)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.runner import run_experiment

pytestmark = [pytest.mark.root, pytest.mark.tf]
ROOT = Path(__file__).resolve().parent.parent
#: the tiny CNN "at full size" is 120 MB (width ~36): enough compute for a pad well above the steps' noise
#: (at 60 MB a faster machine of this kind measured a pad of 0.19 s, too close to that noise)
FULL_BYTES = 120e6


def run(tmp_path: Path, mode: str):
    f = tmp_path / f"ht-{mode}.yaml"
    job = {"model": "tiny", "model_bytes": FULL_BYTES, "iterations": 4, "warmup": 1, "deadline_s": 300}
    f.write_text(
        json.dumps(
            {
                "name": f"ht-{mode}",
                "topology": str(ROOT / "topologies" / "psnet-1tor.yaml"),
                "scale": 20,
                "job": {**job, "host_time": mode},
            }
        )
    )
    return run_experiment(f, results=tmp_path / "results", progress=False)


def test_full_host_time_lengthens_every_step_by_about_the_pad(tmp_path):
    scaled, full = run(tmp_path, "scaled").summary, run(tmp_path, "full").summary
    assert scaled["complete"] and full["complete"]
    assert (scaled["host_time_mode"], scaled["host_time_pad_s"]) == ("scaled", 0.0)
    assert full["host_time_mode"] == "full"
    ht, pad = full["host_time"], full["host_time_pad_s"]
    assert pad == pytest.approx(ht["full_s"] - ht["scaled_s"]) and pad > 0.2, ht
    # the model speaks of the same host time as the padded run
    assert full["predicted"]["t_compute_s"] == ht["full"]["worker_s"]
    assert full["predicted"]["t_ps_update_s"] == ht["full"]["ps_s"]
    assert full["bct_s"]["min"] >= pad  # every measured step slept the pad
    # the pad lengthens the part of a step outside communication (step_split's rest: the step minus
    # the time its links were busy); the whole BCT's communication varies by more than the pad
    # from run to run (two runs on one machine: 8.02 s and 7.74 s mean, the longer one unpadded)
    longer = full["step_split"]["rest_s"]["mean"] - scaled["step_split"]["rest_s"]["mean"]
    assert 0.5 * pad <= longer <= pad + 1.0, (longer, pad, scaled["step_split"], full["step_split"])

"""A job whose traffic stops is found within a minute, with what each process was doing (root, TF).

The stall is real: the only cable of the one PS of a star (psnet-1tor) goes down after a few
steps, so no byte can move and no step can end; nothing in the job fails by itself."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from runs.runner import run_experiment
from runs.stall import STALL_S, Stalled

pytestmark = [pytest.mark.root, pytest.mark.tf]
ROOT = Path(__file__).resolve().parent.parent


def test_a_job_whose_only_path_goes_down_is_reported_stalled_within_a_minute(tmp_path):
    f = tmp_path / "stall.yaml"
    f.write_text(
        json.dumps(
            {
                "name": "stall",
                "topology": str(ROOT / "topologies" / "psnet-1tor.yaml"),
                "job": {"model": "tiny", "iterations": 40, "warmup": 1, "deadline_s": 400},
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
    assert STALL_S <= idle < 60  # found within a minute of the last progress
    assert took < 400  # long before the job's deadline

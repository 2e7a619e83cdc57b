"""Ctrl-C (or SIGTERM) of a model replay ends it within seconds, its worker processes and their
own (SimGrid's) with it (replays/pool.py); before, the replay went on until every running point
had finished, minutes later. A real replay (fig6, ~1 min of flow-model points on 2 processes)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from replays.provenance import REPO
from testbed.cli import EXIT_INTERRUPTED


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_model_replay_ends_its_workers_at_once(tmp_path, sig):
    cmd = [
        sys.executable,
        "-m",
        "testbed.cli",
        "replay",
        "fig6",
        "--fresh",
        "--no-progress",
        "--results",
        str(tmp_path),
    ]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert p.stdout is not None
        for line in p.stdout:  # wait until the points are being computed
            if "points to compute" in line:
                break
        deadline = time.monotonic() + 30
        workers: list[psutil.Process] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = psutil.Process(p.pid).children(recursive=True)
            time.sleep(0.2)
        assert workers, "no worker process started"
        time.sleep(1.0)
        t0 = time.monotonic()
        p.send_signal(sig)
        code = p.wait(timeout=20)
        took = time.monotonic() - t0
        _, alive = psutil.wait_procs(workers, timeout=5)
        assert alive == [], [w.cmdline()[:4] for w in alive]
        assert code == EXIT_INTERRUPTED and took < 15, (code, took)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

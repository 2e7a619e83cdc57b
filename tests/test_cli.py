"""The `testbed` command as users run it: real processes, real exit codes, real clean-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTBED = [sys.executable, "-m", "testbed.cli"]
ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*TESTBED, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_show_prints_model_and_draws(tmp_path):
    png = tmp_path / "t.png"
    r = run("topo", "show", "topologies/psnet-testbed.yaml", "--png", str(png))
    assert r.returncode == 0, r.stderr
    assert "w1_3_2     worker       10.1.3.2" in r.stdout
    assert "module 1: worker(2,2,2)" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("kind: psnet\ntors: 0\nps: 2\nworkers: 6\nworker_mbps: 100\n", "tors"),
        ("kind: fattree\nk: 5\nworkers: [1]\nworker_mbps: 100\n", "k"),
        ("kind: psnet\ntors: 3\nps: 1\nworkers: 6\nworker_mbsp: 100\n", "worker_mbsp"),
        ("kind: dragonfly\n", "kind"),
        ("kind: [psnet\n", "not valid YAML"),
    ],
)
def test_bad_file_is_one_line_naming_file_and_field(tmp_path, body, field):
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    r = run("topo", "show", str(f), "--png", "")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(f) in r.stderr and field in r.stderr


TOPO_ABS = ROOT / "topologies" / "psnet-testbed.yaml"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (f"topology: {TOPO_ABS}\njob: {{model: nosuch}}\n", "job.model"),
        ("topology: nowhere.yaml\njob: {model: tiny}\n", "topology: nowhere.yaml not found"),
        (f"topology: {TOPO_ABS}\njobs: [{{name: a, model: tiny, workers: [ps1_1]}}]\n", "jobs[a].workers: ps1_1"),
        (
            f"topology: {TOPO_ABS}\njob: {{model: tiny}}\n"
            "timeline: [{at_s: 1, action: link_down, link: [t1_1, t1_2]}]\n",
            "timeline[0].link: no cable between t1_1 and t1_2",
        ),
    ],
)
def test_bad_experiment_or_timeline_is_one_line_before_anything_runs(tmp_path, body, field):
    """Experiment and timeline errors (ExperimentError, TimelineError) print like topology errors."""
    f = tmp_path / "bad-exp.yaml"
    f.write_text(body)
    r = run("run", str(f), "--no-progress")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(f) in r.stderr and field in r.stderr


def test_unknown_figure_is_one_line():
    r = run("replay", "fig99")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "fig99: no such figure; figures: fig1" in r.stderr


@pytest.mark.root
def test_doctor_passes_here():
    r = run("doctor")
    assert r.returncode == 0, r.stdout
    assert "ready to emulate" in r.stdout


@pytest.mark.root
def test_topo_check_passes_on_the_psnet_prototype(no_leftovers):
    r = run("topo", "check", "topologies/psnet-testbed.yaml", "--iperf-seconds", "2", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout
    assert "2 (ECS+ToR)" in r.stdout and "PS NIC" in r.stdout and "shaping" in r.stdout


@pytest.mark.root
def test_sigterm_tears_down(no_leftovers, bridges):
    p = subprocess.Popen(
        [*TESTBED, "topo", "check", "topologies/fattree-testbed.yaml"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not bridges() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "torn down" in err


@pytest.mark.root
def test_clean_removes_what_a_killed_run_left(no_leftovers, bridges):
    code = (
        "from emulation.net import Testbed\nimport time\n"
        "with Testbed('topologies/psnet-testbed.yaml'):\n    print('up', flush=True); time.sleep(600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert "ecs1" in bridges()  # a killed run leaves its network behind...
    r = run("clean")
    assert r.returncode == 0
    assert "bridge ecs1" in r.stdout and "controller process" in r.stdout
    hosts = subprocess.run(["pgrep", "-f", "mininet:"], capture_output=True, text=True).stdout.split()
    assert hosts == []  # ...and clean removes it all (no_leftovers checks bridges and controller)


@pytest.mark.root
def test_mininet_mn_builds_the_model_topology(no_leftovers):
    """Mininet's own `mn` takes the Topo (one model): it builds every node and cable of the file."""
    from emulation import registry

    lock = registry.acquire_emulator(1800)  # `mn` knows nothing of the testbed's lock: take it here
    p = subprocess.Popen(
        [
            sys.executable,
            "/usr/bin/mn",
            "--custom",
            "topologies/mininet_topo.py",
            "--topo",
            "model,topologies/psnet-1tor.yaml",
            "--switch",
            "ovs,datapath=user",
            "--controller",
            "none",
            "--test",
            "none",
        ],  # build, start, stop (no waiting for a controller)
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:  # kill mn and the node shells it started, so the pipes close
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for br in ("ecs1", "sn1", "t1_1"):  # mn cleans up only on success
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], check=False)
        registry.release_emulator(lock)
    assert p.returncode == 0, err
    assert "*** Adding hosts:\nps1_1 w1_1_1 w1_1_2" in err
    assert "(w1_1_1, ecs1) (w1_1_2, ecs1)" in err and "*** Stopping 3 switches" in err

"""After a SIGKILL the next run needs no hand: it removes what the dead run left, saying so.

A run killed with SIGKILL tears nothing down: its bridges, veths, host shells and controller
stay. The next `Testbed` holds the emulator lock and the registry knows the dead owner, so it
cleans up itself (one INFO line naming what it removed) instead of refusing; it still refuses a
bridge that no dead run of this testbed recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from emulation import net, registry
from emulation.net import Testbed
from topologies.build import load_network

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parent.parent
TOPO = "topologies/psnet-testbed.yaml"
MODEL = load_network(ROOT / TOPO)
INTFS = sorted({ln.intf(end) for ln in MODEL.links for end in (ln.a, ln.b)})
CLEANED = "removed what a dead testbed run left behind: "
UP = (
    "from emulation.net import Testbed\nimport time\n"
    f"with Testbed({TOPO!r}):\n    print('up', flush=True); time.sleep(600)\n"
)


def start_run() -> subprocess.Popen:
    """A testbed in another process, as `testbed run` would be (it queues on the emulator lock)."""
    return subprocess.Popen([sys.executable, "-c", UP], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def run_of(pid: int, timeout_s: float = 1800) -> str:
    """The id of the run owned by process `pid`, once its folder records it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for d in registry.RUN_ROOT.iterdir() if registry.RUN_ROOT.exists() else []:
            f = d / "state.json"
            try:
                if d.is_dir() and json.loads(f.read_text()).get("owner_pid") == pid:
                    return d.name
            except (OSError, ValueError):
                continue
        time.sleep(0.01)
    pytest.fail(f"no run folder of pid {pid}")


def processes_of(run_id: str) -> list[int]:
    """Processes that run `run_id` started (they carry its id in their environment)."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get(registry.RUN_ENV) == run_id:
                found.append(p.info["pid"])
        except psutil.Error:
            continue
    return found


def root_intfs() -> list[str]:
    return [i for i in INTFS if Path(f"/sys/class/net/{i}").exists()]


@contextlib.contextmanager
def killed(p: subprocess.Popen) -> Iterator[None]:
    """SIGKILL the run, then hold the emulator lock while the test looks at what it left (another
    run queued on the lock would otherwise find the leftovers first)."""
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    lock = registry.acquire_emulator(1800)
    try:
        yield
    finally:
        registry.release_emulator(lock)


def bring_up_again(caplog) -> str:
    """Bring the same topology up in this process; returns the clean-up log line."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="emulation.bringup"), Testbed(TOPO) as tb:
        assert tb.timings["bring_up_s"] > 0 and tb.circuits()  # up and answering
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(CLEANED)]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    return lines[0]


def test_next_run_cleans_what_a_killed_run_left(caplog, no_leftovers, bridges):
    p = start_run()
    assert p.stdout.readline().strip() == "up"
    dead = run_of(p.pid)
    with killed(p):
        assert "ecs1" in bridges() and processes_of(dead)  # a killed run leaves its network behind...
    line = bring_up_again(caplog)  # ...and the next run, with no `testbed clean`, clears it itself
    # its host shells died with it (their terminal closed), and with them the hosts' interfaces; the
    # switch-to-switch veths stay (ToR-SuperNode: sn1-eth*; the ECS-ToR slots are OVS patch ports)
    assert "5 bridges (ecs1, sn1, t1_1, t1_2, t1_3)" in line and "1 controller process" in line, line
    assert "interfaces (sn1-eth" in line and "ecs1-eth" not in line, line
    assert line.endswith(f"1 run folder ({dead})"), line
    assert processes_of(dead) == [] and root_intfs() == []
    assert not (registry.RUN_ROOT / dead).exists()


def test_next_run_cleans_a_run_killed_during_its_bring_up(caplog, no_leftovers, bridges):
    """Killed while building (some veths made, host shells started, no PID recorded for them,
    bridges not yet tagged): what it recorded up front, and its id in its processes'
    environment, are enough."""
    p = start_run()
    dead = run_of(p.pid)
    deadline = time.monotonic() + 60
    while not root_intfs() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.005)
    with killed(p):
        assert root_intfs() or bridges(), "the run was killed before it built anything"
        assert processes_of(dead)  # at least its controller
    line = bring_up_again(caplog)
    assert "controller process" in line, line
    assert processes_of(dead) == [] and root_intfs() == [] and not (registry.RUN_ROOT / dead).exists()


def test_a_bridge_no_run_recorded_is_still_refused(no_leftovers):
    """Not this testbed's (e.g. Mininet's `mn`): nothing is removed, the refusal names the fix.
    The check runs while this test holds the emulator lock, as Testbed.start would."""
    lock = registry.acquire_emulator(1800)
    try:
        subprocess.run(
            ["ovs-vsctl", "add-br", "ecs1", "--", "set", "bridge", "ecs1", "datapath_type=netdev"], check=True
        )
        refused = r"^bridge ecs1 already exists and no testbed run made it .*del-br ecs1"
        with pytest.raises(net.TestbedError, match=refused):
            Testbed(TOPO).run._take_switch_names()
        assert "ecs1" in registry.existing_bridges()
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "ecs1"], check=True)
        registry.release_emulator(lock)

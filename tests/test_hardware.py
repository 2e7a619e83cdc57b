"""Hardware mode (`testbed run EXP --hosts INV`) against two "servers" made here.

Each server is a network namespace running OpenSSH's sshd (keys made by the test; servers/local.py),
reached from this namespace over its own veth pair (management, 192.168.217.0/30 and .4/30), and
joined to the other by a Linux bridge in a third namespace (the data plane, 192.168.216.0/24): so
the NIC counters the run reports are the job's traffic, not the SSH sessions. The servers' "remote
checkout" is this checkout (same filesystem); TensorFlow runs inside the server namespaces. The
tiny model runs with 1 PS + 2 workers: 3 tasks on 2 servers (capacity 2 on one). The fixtures
kill sshd and delete the namespaces whatever the tests did.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from servers.local import OvsServers
from tests.sshd_helpers import clear_dead_runs_leftovers, sh

pytestmark = [pytest.mark.root, pytest.mark.tf]

ROOT = Path(__file__).resolve().parent.parent
TESTBED = [sys.executable, "-m", "testbed.cli"]


class Servers(OvsServers):
    """Two sshd namespaces (servers/local.py, without their own OVS) on a data-plane bridge: each
    server's `underlay` address is the job's data plane."""

    def __init__(self, base: Path) -> None:
        super().__init__(base, count=2, ovs=False)

    def extra(self) -> dict[str, list[str]]:
        """Per server, the processes other than its sshd listener (sessions, job tasks)."""
        return {ns: self.others(i) for i, ns in enumerate(self.netns)}

    def inventory(self, path: Path) -> Path:
        path.write_text(
            yaml.safe_dump(
                {
                    "known_hosts": str(self.known_hosts),
                    "checkout": str(ROOT),
                    "hosts": [
                        {
                            "name": "server1",
                            "ssh": {"host": self.addresses[0], "user": "root", "key": str(self.key)},
                            "data": self.underlay[0],
                            "role": "any",
                            "capacity": 2,
                        },
                        {
                            "name": "server2",
                            "ssh": {"host": self.addresses[1], "user": "root", "key": str(self.key)},
                            "data": self.underlay[1],
                            "role": "worker",
                        },
                    ],
                }
            )
        )
        return path


@pytest.fixture(scope="module")
def servers(tmp_path_factory, request) -> Servers:
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("OpenSSH's sshd is missing (apt-get install openssh-server; scripts/setup.sh installs it)")
    clear_dead_runs_leftovers()  # a killed earlier run's routes would shadow ours
    s = Servers(tmp_path_factory.mktemp("hardware"))
    request.addfinalizer(s.stop)
    s.start()
    return s


@pytest.fixture
def experiment(tmp_path, request) -> tuple[Path, str]:
    """The tiny job, 1 PS + 2 workers of the PSNet prototype's topology; its results removed after."""
    name = f"hw-test-{os.getpid()}-{request.node.name[-12:].strip('_')}"
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "topology": str(ROOT / "topologies" / "psnet-testbed.yaml"),
                "job": {
                    "model": "tiny",
                    "iterations": 3,
                    "warmup": 1,
                    "deadline_s": 300,
                    "ps": ["ps1_1"],
                    "workers": ["w1_1_1", "w1_2_1"],
                },
            }
        )
    )
    yield exp, name
    shutil.rmtree(ROOT / "results" / name, ignore_errors=True)


def _settle(servers: Servers, timeout_s: float = 15) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout_s
    while any(servers.extra().values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return servers.extra()


def test_a_tiny_job_runs_on_two_servers_and_reports_bct_and_nic_bytes(servers, experiment, tmp_path):
    exp, name = experiment
    inv = servers.inventory(tmp_path / "inventory.yaml")
    r = subprocess.run(
        [*TESTBED, "run", str(exp), "--hosts", str(inv), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    print(r.stdout)  # shown with pytest -rP
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{name}: tiny W=2 P=1" in r.stdout and "BCT measured" in r.stdout
    assert "server server1 (ps1_1, w1_1_1): eth1 rx" in r.stdout
    s = json.loads((ROOT / "results" / name / "summary.json").read_text())
    assert s["complete"] and s["mode"] == "hardware" and s["bct_s"]["n"] == 3
    assert s["hardware"]["placements"] == {
        "ps1_1": {"server": "server1", "address": f"{servers.underlay[0]}:2222"},
        "w1_1_1": {"server": "server1", "address": f"{servers.underlay[0]}:2223"},
        "w1_2_1": {"server": "server2", "address": f"{servers.underlay[1]}:2222"},
    }
    for srv in ("server1", "server2"):  # the job's traffic went over the data-plane bridge
        v = s["hardware"]["servers"][srv]
        assert v["nic"] == "eth1" and v["run_rx_bytes"] > 0 and v["run_tx_bytes"] > 0, v
        assert v["cpus"] >= 1 and v["cpu_mean"] is not None
    # server2's worker exchanged its gradient with the PS on server1: as many bytes each way as
    # TF placed on the PS, at least
    assert s["hardware"]["servers"]["server2"]["run_tx_bytes"] > s["bytes_per_ps"]["/job:ps/task:0"]
    iters = (ROOT / "results" / name / "iterations.csv").read_text()
    assert "w1_2_1" in iters and "w1_1_1" in iters
    assert _settle(servers) == {ns: [] for ns in servers.netns}  # nothing left on either server

    cmp = subprocess.run([*TESTBED, "compare", str(ROOT / "results" / name), name], capture_output=True, text=True)
    assert cmp.returncode == 0, cmp.stderr
    print(cmp.stdout)
    assert "mode" in cmp.stdout and "hardware" in cmp.stdout and "ps1_1:" in cmp.stdout


def test_ctrl_c_of_a_hardware_run_leaves_nothing_on_the_servers(servers, experiment, tmp_path):
    exp, _ = experiment
    data = yaml.safe_load(exp.read_text())
    data["job"]["iterations"] = 500  # still training when the Ctrl-C comes, however fast this machine is
    exp.write_text(yaml.safe_dump(data))
    inv = servers.inventory(tmp_path / "inventory.yaml")
    p = subprocess.Popen(
        [*TESTBED, "run", str(exp), "--hosts", str(inv), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 300
        worker = False
        while not worker and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.5)
            worker = any("--job worker" in c for c in servers.extra()[servers.netns[1]])
        assert worker, "the worker on server2 never started"
        listening = task_listeners(servers, 3, alive=p)  # 1 PS + 2 workers, each serving gRPC
        assert len(listening) == 3, (listening, p.poll() is None or p.communicate())
        hosts = {a.rsplit(":", 1)[0] for a in listening}
        assert hosts == set(servers.underlay), listening  # data plane only: not *, not management
        time.sleep(2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, (p.returncode, out, err)
    assert "interrupted" in err
    assert _settle(servers) == {ns: [] for ns in servers.netns}


def task_listeners(
    servers: Servers, tasks: int, timeout_s: float = 120, alive: subprocess.Popen | None = None
) -> list[str]:
    """The local addresses of the TF tasks' listening sockets (ports 2222 and up) in the servers'
    namespaces (`ss -ltn` there), once `tasks` of them listen (or after `timeout_s`, or once the run
    `alive` has ended, so a failed run shows its own output rather than a two-minute wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = []
        for ns in servers.netns:
            out = sh("ip", "netns", "exec", ns, "ss", "-Hltn", check=False).stdout
            local = [ln.split()[3] for ln in out.splitlines() if ln.strip()]
            found += [a for a in local if int(a.rsplit(":", 1)[1]) >= 2222]
        if len(found) >= tasks or time.monotonic() > deadline or (alive is not None and alive.poll() is not None):
            return found
        time.sleep(0.5)


def test_bad_inventory_and_unreachable_server_are_one_line(servers, experiment, tmp_path):
    exp, _ = experiment
    inv = servers.inventory(tmp_path / "inventory.yaml")
    data = yaml.safe_load(inv.read_text())
    data["hosts"][0]["capacity"] = 1  # 3 tasks, room for 2
    inv.write_text(yaml.safe_dump(data))
    r = subprocess.run([*TESTBED, "run", str(exp), "--hosts", str(inv)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{inv}: hosts: no server left with capacity for" in r.stderr
    data["hosts"][0]["capacity"] = 2
    data["hosts"][1]["ssh"]["port"] = 2  # nothing listens there
    inv.write_text(yaml.safe_dump(data))
    r = subprocess.run([*TESTBED, "run", str(exp), "--hosts", str(inv)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{servers.addresses[1]}:2: unreachable (Connection refused)" in r.stderr
    assert _settle(servers) == {ns: [] for ns in servers.netns}  # server1's connection closed too


def test_a_killed_runs_leftovers_are_cleared_and_a_live_runs_kept():
    """A run SIGKILLed mid-test leaves its namespace and a root-side veth holding the management
    address; the next run's route to its sshd then goes to the dead namespace (the CI saw "sshd 0 did
    not start: Server listening on 192.168.215.2", when the servers were on .215). The fixture clears
    what a dead pid owns, and only that."""
    dead = next(p for p in range(32000, 300, -1) if not psutil.pid_exists(p))
    made = {f"psnet-cs1-{dead}": f"pcsm1{dead}", "psnet-cs9-1": "pcsm91"}  # pid 1 is alive
    try:
        for ns, veth in made.items():
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", "192.168.217.1/30", "dev", f"pcsm1{dead}")
        sh("ip", "link", "set", f"pcsm1{dead}", "up")
        gone = clear_dead_runs_leftovers()
        namespaces = sh("ip", "netns", "list").stdout
        assert f"psnet-cs1-{dead}" in gone and f"psnet-cs1-{dead}" not in namespaces
        assert f"pcsm1{dead}" not in sh("ip", "route").stdout  # its route to 192.168.217.0/30 went with it
        assert "psnet-cs9-1" in namespaces and "pcsm91" in sh("ip", "-o", "link").stdout
    finally:
        for ns, veth in made.items():
            sh("ip", "netns", "del", ns, check=False)
            sh("ip", "link", "del", veth, check=False)

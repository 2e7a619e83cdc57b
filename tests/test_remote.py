"""`testbed remote` against a real OpenSSH sshd with real paramiko.

The "remote machine" is an sshd started here in its own network namespace, reached over a veth
pair (192.168.213.1/30 here, .2 there), with host and user keys made by the test, and a copy of
this checkout in a tmp folder (its .venv a link to this one's) as the remote testbed. Its
scripts/setup.sh is a stand-in that says where it ran and can wait, so `setup` and Ctrl-C are
tested without touching the machine. Every test checks what happened on the remote side; the
fixtures kill sshd and delete the namespace whatever the tests did.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from tests.sshd_helpers import clear_dead_runs_leftovers, keygen, processes, sh

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parent.parent
TESTBED = [sys.executable, "-m", "testbed.cli"]
HOST_IP, PEER_IP, PREFIX = "192.168.213.2", "192.168.213.1", 30
#: the stand-in for scripts/setup.sh in the remote checkout
FAKE_SETUP = """#!/usr/bin/env bash
trap 'echo "setup: interrupted"; touch "$PWD/interrupted"; exit 130' INT
echo "setup: ran in $PWD"
if [ -n "${SETUP_SLEEP:-}" ]; then
  echo "setup: sleeping"
  sleep "$SETUP_SLEEP"
fi
exit "${SETUP_EXIT:-0}"
"""


def make_checkout(dest: Path, venv: bool = True) -> Path:
    """A remote testbed: the code of this checkout, a stand-in setup.sh, this venv."""
    for d in sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"):
        shutil.copytree(ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "scripts").mkdir()
    (dest / "scripts" / "setup.sh").write_text(FAKE_SETUP)
    (dest / "results").mkdir()
    if venv:
        (dest / ".venv").symlink_to((ROOT / ".venv").resolve())
    return dest


class Remote:
    """The sshd in its namespace (or, `port` given, on this namespace's loopback) and what the tests
    need to reach it."""

    def __init__(self, base: Path, port: int | None = None) -> None:
        self.base = base
        tag = f"{os.getpid() % 100000}"
        self.netns = None if port else f"psnet-ssh-{tag}"
        self.veth = f"pssh{tag}"
        self.address, self.port = ("127.0.0.1", port) if port else (HOST_IP, 22)
        self.host_key = keygen(base / "host_key")
        self.key = keygen(base / "user_key")
        self.other_key = keygen(base / "other_key")
        (base / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        self.known_hosts = base / "known_hosts"
        host_pub = Path(f"{self.host_key}.pub").read_text().split()
        entry = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        self.known_hosts.write_text(f"{entry} {host_pub[0]} {host_pub[1]}\n")
        self.fingerprint = sh("ssh-keygen", "-lf", f"{self.host_key}.pub").stdout.split()[1]
        self.checkout = make_checkout(base / "checkout")
        self.ssh_config = base / "ssh_config"
        self.ssh_config.write_text("")
        self.sshd: subprocess.Popen | None = None

    def start(self) -> None:
        if self.netns:
            self._namespace()
        cfg = self.base / "sshd_config"
        cfg.write_text(
            f"ListenAddress {self.address}\nPort {self.port}\nHostKey {self.host_key}\n"
            f"PidFile {self.base / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.base / 'authorized_keys'}\nStrictModes no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\nPrintMotd no\n"
            "LogLevel VERBOSE\nSubsystem sftp internal-sftp\n"
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # OpenSSH's privilege separation folder
        log = (self.base / "sshd.log").open("w")
        netns = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.sshd = subprocess.Popen(
            [*netns, "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((self.address, self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"sshd did not start: {(self.base / 'sshd.log').read_text()[-500:]}")

    def _namespace(self) -> None:
        sh("ip", "netns", "add", self.netns)
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
        sh("ip", "addr", "add", f"{PEER_IP}/{PREFIX}", "dev", self.veth)
        sh("ip", "link", "set", self.veth, "up")
        for argv in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{HOST_IP}/{PREFIX}", "dev", "eth0"]):
            sh("ip", "netns", "exec", self.netns, *argv)
        sh("ip", "netns", "exec", self.netns, "ip", "link", "set", "eth0", "up")

    def pids(self) -> list[int]:
        """Every process in the namespace, or sshd and its descendants (the listener and whatever
        sessions left)."""
        if self.netns:
            return [int(p) for p in sh("ip", "netns", "pids", self.netns, check=False).stdout.split()]
        if self.sshd is None or self.sshd.poll() is not None:
            return []
        try:
            return [self.sshd.pid, *(c.pid for c in psutil.Process(self.sshd.pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        """Kill sshd and anything left in its namespace (only processes this test started there), then
        remove the namespace and the veth pair."""
        left = processes(self.pids())  # psutil refuses to signal a pid that was reused meanwhile
        if self.sshd is not None:
            self.sshd.terminate()
            try:
                self.sshd.wait(5)
            except subprocess.TimeoutExpired:
                self.sshd.kill()
                self.sshd.wait()
        for proc in left + processes(self.pids()):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        if self.netns:
            sh("ip", "netns", "del", self.netns, check=False)
            sh("ip", "link", "del", self.veth, check=False)

    def testbed(self, *args: str, key: Path | None = None, known_hosts: Path | None = None, **kw) -> list[str]:
        """The argv of `testbed remote HOST ... args` with this sshd's keys and checkout."""
        return [
            *TESTBED,
            "remote",
            self.address,
            "--port",
            str(self.port),
            "--user",
            "root",
            "--key",
            str(key or self.key),
            "--known-hosts",
            str(known_hosts or self.known_hosts),
            "--ssh-config",
            str(self.ssh_config),
            "--path",
            str(kw.get("path", self.checkout)),
            "--connect-timeout",
            "5",
            *args,
        ]

    def run(self, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.testbed(*args, **kw), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def remote(tmp_path_factory, request) -> Remote:
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("OpenSSH's sshd is missing (apt-get install openssh-server; scripts/setup.sh installs it)")
    clear_dead_runs_leftovers()  # a killed earlier run's routes would shadow ours
    r = Remote(tmp_path_factory.mktemp("remote"))
    request.addfinalizer(r.stop)  # also when start() fails half-way
    r.start()
    return r


@pytest.fixture(scope="module", autouse=True)
def nothing_left(remote):
    """After the module: sshd is gone, the namespace and the veth pair are deleted."""
    yield
    assert remote.sshd is not None and remote.sshd.poll() is None, "sshd died during the tests"
    remote.stop()
    assert remote.netns not in sh("ip", "netns", "list").stdout
    assert sh("ip", "link", "show", remote.veth, check=False).returncode != 0
    assert remote.sshd is not None and remote.sshd.poll() is not None


@pytest.fixture
def loopback_remote(tmp_path_factory, request) -> Remote:
    """An sshd on this namespace's loopback: a remote `testbed run` builds its network with this
    machine's Open vSwitch, which lives in the root namespace (a run inside the test's namespace
    could not add its ports to the bridges)."""
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("OpenSSH's sshd is missing (apt-get install openssh-server; scripts/setup.sh installs it)")
    from emulation.net import free_port

    r = Remote(tmp_path_factory.mktemp("loopback"), port=free_port())
    request.addfinalizer(r.stop)
    r.start()
    return r


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


def test_topo_show_pushes_its_file_streams_output_and_fetches_the_drawing(remote, tmp_path):
    res = tmp_path / "results"
    r = remote.run("--results", str(res), "topo", "show", "topologies/psnet-testbed.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "w1_3_2     worker       10.1.3.2" in r.stdout  # the remote testbed's output, streamed here
    pushed = remote.checkout / "results" / "remote-inputs" / "topologies" / "psnet-testbed.yaml"
    assert pushed.read_bytes() == (ROOT / "topologies" / "psnet-testbed.yaml").read_bytes()
    drawn = remote.checkout / "results" / "topologies" / "psnet-testbed.png"
    fetched = res / "topologies" / "psnet-testbed.png"
    assert fetched.read_bytes() == drawn.read_bytes()
    assert fetched.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "fetched 1 file(s)" in r.stdout


def test_ssh_config_alias_gives_host_user_and_key(remote, tmp_path):
    remote.ssh_config.write_text(f"Host testvm\n  HostName {HOST_IP}\n  User root\n  IdentityFile {remote.key}\n")
    try:
        argv = [
            *TESTBED,
            *("remote", "testvm", "--ssh-config", str(remote.ssh_config), "--known-hosts", str(remote.known_hosts)),
            *("--path", str(remote.checkout), "--results", str(tmp_path), "topo", "show", "topologies/bcube-4-1.yaml"),
        ]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        remote.ssh_config.write_text("")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "topologies" / "bcube-4-1.png").exists()


def test_setup_runs_the_checkouts_setup_script(remote):
    r = remote.run("setup")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"setup: ran in {remote.checkout}" in r.stdout


def test_remote_exit_status_comes_back(remote):
    r = remote.run("--env", "SETUP_EXIT=3", "setup")
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"setup: ran in {remote.checkout}" in r.stdout


def test_topo_show_without_a_drawing_fetches_nothing(remote, tmp_path):
    r = remote.run("--results", str(tmp_path), "topo", "show", "topologies/fattree-testbed.yaml", "--png", "")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fetched" not in r.stdout and list(tmp_path.iterdir()) == []


def test_unknown_host_key_is_one_line_with_its_fingerprint_then_accepted_on_request(remote, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    err = one_line_error(remote.run("doctor", known_hosts=empty))
    assert f"{HOST_IP}: host key not in {empty}" in err and remote.fingerprint in err
    assert "--accept-new-host-key" in err
    fresh = tmp_path / "new" / "known_hosts"  # not there yet: made, and the key saved in it
    r = remote.run("--accept-new-host-key", "setup", known_hosts=fresh)
    assert r.returncode == 0, r.stdout + r.stderr
    assert Path(f"{remote.host_key}.pub").read_text().split()[1] in fresh.read_text()
    r = remote.run("setup", known_hosts=fresh)  # now known: no option needed
    assert r.returncode == 0, r.stdout + r.stderr


def test_changed_host_key_is_refused_even_when_accepting_new_ones(remote, tmp_path):
    impostor = keygen(tmp_path / "impostor")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{HOST_IP} {' '.join(Path(f'{impostor}.pub').read_text().split()[:2])}\n")
    err = one_line_error(remote.run("--accept-new-host-key", "setup", known_hosts=kh))
    assert "host key CHANGED" in err and remote.fingerprint in err and "ssh-keygen" in err


def test_wrong_key_is_one_line(remote):
    err = one_line_error(remote.run("setup", key=remote.other_key))
    assert f"{HOST_IP}:22: authentication failed for user root with key {remote.other_key}" in err


def test_missing_key_file_and_non_key_file_are_one_line(remote, tmp_path):
    err = one_line_error(remote.run("setup", key=tmp_path / "nope"))
    assert f"{tmp_path / 'nope'}: no such file" in err
    junk = tmp_path / "junk"
    junk.write_text("not a key\n")
    err = one_line_error(remote.run("setup", key=junk))
    assert HOST_IP in err and str(junk) in err


def test_unreachable_host_is_one_line(remote):
    err = one_line_error(remote.run("--port", "2", "setup"))
    assert f"{HOST_IP}:2: unreachable (Connection refused)" in err and "sshd runs there" in err


def test_remote_without_the_testbed_set_up_is_one_line(remote, tmp_path):
    bare = make_checkout(tmp_path / "bare", venv=False)
    err = one_line_error(remote.run("doctor", path=bare))
    assert f"the testbed at {bare} is not set up" in err and f"testbed remote {HOST_IP} setup" in err
    r = remote.run("setup", path=bare)  # setup itself needs no venv: it makes it
    assert r.returncode == 0 and f"setup: ran in {bare}" in r.stdout, r.stdout + r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    err = one_line_error(remote.run("doctor", path=empty))
    assert f"no psnet-testbed checkout at {empty}" in err


def test_bad_experiment_is_refused_here_before_connecting(tmp_path):
    bad = tmp_path / "exp.yaml"
    bad.write_text("topology: nowhere.yaml\njob: {model: tiny}\n")
    r = subprocess.run(
        [*TESTBED, "remote", "192.0.2.254", "--connect-timeout", "1", "run", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    err = one_line_error(r)
    assert str(bad) in err and "topology: nowhere.yaml not found" in err


def test_hardware_mode_is_refused_remotely_before_connecting(tmp_path):
    """`--hosts` would otherwise be dropped and the remote machine would emulate the job instead."""
    r = subprocess.run(
        [
            *TESTBED,
            "remote",
            "192.0.2.254",
            "--connect-timeout",
            "1",
            "run",
            "workloads/experiments/smoke-psnet.yaml",
            "--hosts",
            "inventory.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode != 0
    err = one_line_error(r)
    assert "--hosts inventory.yaml is not run remotely" in err and "testbed run EXPERIMENT --hosts INVENTORY" in err


def test_ctrl_c_stops_the_remote_command_and_leaves_nothing_running(remote):
    before = set(remote.pids())
    p = subprocess.Popen(
        remote.testbed("--env", "SETUP_SLEEP=300", "setup"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        lines = []
        for line in p.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if "setup: sleeping" in line:
                break
        assert any("setup: sleeping" in x for x in lines), lines
        assert len(set(remote.pids()) - before) >= 2  # the session's sshd, bash and sleep are there
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, (p.returncode, out, err)
    assert "setup: interrupted" in out  # the remote script got SIGINT and ran its clean-up
    assert (remote.checkout / "interrupted").exists()
    assert "interrupted; the command on" in err
    deadline = time.monotonic() + 10
    while set(remote.pids()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(remote.pids()) - before == set(), sh("ps", "-o", "pid,cmd", "-p", ",".join(map(str, remote.pids())))
    (remote.checkout / "interrupted").unlink()


def test_run_plan_stages_experiment_and_topology_so_they_load_the_same(tmp_path):
    """What `remote run` pushes, laid out as on the remote side, loads to the same experiment."""
    import argparse

    from testbed.remote import plan
    from workloads.experiment import load_experiment

    (tmp_path / "topos").mkdir()
    shutil.copy(ROOT / "topologies" / "psnet-testbed.yaml", tmp_path / "topos" / "mine.yaml")
    (tmp_path / "exps").mkdir()
    exp = tmp_path / "exps" / "my exp.yaml"
    exp.write_text("topology: ../topos/mine.yaml\nscale: 20\njob: {model: tiny, iterations: 2}\n")
    p = plan(argparse.Namespace(command="run", experiment=str(exp), no_progress=True, verbose=False))
    assert p.argv == ["run", "results/remote-inputs/my-exp/my-exp.yaml", "--no-progress"]
    assert p.fetch == ["my-exp"]
    assert [rel for _, rel in p.push] == [
        "results/remote-inputs/my-exp/my-exp.yaml",
        "results/remote-inputs/my-exp/topology/mine.yaml",
    ]
    remote_root = tmp_path / "remote"
    for data, rel in p.push:
        (remote_root / rel).parent.mkdir(parents=True, exist_ok=True)
        (remote_root / rel).write_bytes(data)
    here, there = load_experiment(exp), load_experiment(remote_root / p.argv[1])
    assert here[0] == there[0].model_copy(update={"topology": "../topos/mine.yaml"})
    assert here[1] == there[1] and there[1].scale == 20
    assert yaml.safe_load(p.push[1][0]) == yaml.safe_load((tmp_path / "topos" / "mine.yaml").read_text())


def _read_until(p: subprocess.Popen, marker: bytes, timeout_s: float) -> bytes:
    """What `p` wrote to stdout until `marker` appeared (progress bars write no newline)."""
    got = b""
    deadline = time.monotonic() + timeout_s
    fd = p.stdout.fileno()  # type: ignore[union-attr]
    while marker not in got and time.monotonic() < deadline and p.poll() is None:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            got += os.read(fd, 65536)
    return got


@pytest.mark.tf
def test_remote_run_of_a_tiny_experiment_fetches_its_results(loopback_remote, tmp_path, no_leftovers):
    res = tmp_path / "results"
    r = loopback_remote.run(
        "--env",
        f"PSNET_LOCK_WAIT_S={os.environ.get('PSNET_LOCK_WAIT_S', '0')}",
        "--results",
        str(res),
        "run",
        "workloads/experiments/smoke-psnet.yaml",
        timeout=2400,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "smoke-psnet: tiny W=6 P=2" in r.stdout and "BCT measured" in r.stdout
    remote_out = loopback_remote.checkout / "results" / "smoke-psnet"
    there = sorted(p.relative_to(remote_out) for p in remote_out.rglob("*") if p.is_file())
    here = sorted(p.relative_to(res / "smoke-psnet") for p in (res / "smoke-psnet").rglob("*") if p.is_file())
    assert here == there and Path("summary.json") in here
    summary = json.loads((res / "smoke-psnet" / "summary.json").read_text())
    assert summary["complete"] and summary["bct_s"]["n"] >= 3
    used = json.loads((res / "smoke-psnet" / "manifest.json").read_text())  # the pushed files ran, not the remote's
    assert used["experiment"] == "results/remote-inputs/smoke-psnet/smoke-psnet.yaml"
    assert used["topology_file"].endswith("results/remote-inputs/smoke-psnet/topology/psnet-testbed.yaml")


@pytest.mark.tf
def test_ctrl_c_of_a_remote_run_tears_it_down(loopback_remote, tmp_path, no_leftovers):
    p = subprocess.Popen(
        loopback_remote.testbed(
            "--env",
            f"PSNET_LOCK_WAIT_S={os.environ.get('PSNET_LOCK_WAIT_S', '0')}",
            "--results",
            str(tmp_path),
            "run",
            "workloads/experiments/smoke-psnet.yaml",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        seen = _read_until(p, b"smoke-psnet steps", 2400)  # the job is stepping: network and TF are up
        assert b"smoke-psnet steps" in seen, seen[-2000:]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    out = seen + out
    assert p.returncode == 130, (p.returncode, out[-2000:], err)
    assert b"interrupted; everything was torn down" in out  # the remote testbed's own teardown line
    assert b"interrupted; the command on 127.0.0.1 ended (exit 130)" in err
    deadline = time.monotonic() + 10
    while len(loopback_remote.pids()) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert loopback_remote.pids() == [loopback_remote.sshd.pid]  # type: ignore[union-attr]
    # no_leftovers: no bridge, no controller once the lock is free


def test_replay_plan_pushes_the_figure_and_the_topologies_of_the_points_it_runs():
    from replays.figure import load_figure
    from replays.sweep import points_to_run
    from testbed.cli import build_parser
    from testbed.remote import plan

    ns = build_parser().parse_args(["replay", "fig10", "--quick", "--no-progress"])
    p = plan(ns)
    quick = {pt.topology for pt in points_to_run(load_figure("fig10"), quick=True)}
    assert [rel for _, rel in p.push] == ["workloads/figures/fig10.yaml", *(f"topologies/{t}" for t in sorted(quick))]
    assert all(data == (ROOT / rel).read_bytes() for data, rel in p.push)
    assert p.argv == ["replay", "fig10", "--quick", "--no-progress"] and p.fetch == ["fig10-quick"]


# --- known_hosts as OpenSSH keeps it; ~/.ssh/config's ProxyJump and ServerAliveInterval ----------


def _pub(path: Path) -> str:
    """'type base64' of a public key file."""
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def test_accepting_a_new_host_key_appends_one_line_and_keeps_every_other_byte(remote, tmp_path):
    """paramiko's save_host_keys rewrote the whole file: comments, @cert-authority and @revoked
    lines and key types it cannot parse were gone (and its loader stopped at the first marker)."""
    ca, old = keygen(tmp_path / "ca"), keygen(tmp_path / "old")
    plain = tmp_path / "hashed_source"
    plain.write_text(f"lab1.example {_pub(old)}\n")
    sh("ssh-keygen", "-q", "-H", "-f", str(plain))
    kh = tmp_path / "known_hosts"
    kh.write_bytes(
        b"# lab machines, kept by hand\n"
        + f"@cert-authority *.lab.example {_pub(ca)} lab CA\n".encode()
        + f"@revoked retired.lab.example {_pub(old)}\n".encode()
        + plain.read_bytes()  # a hashed name
        + b"sk.example sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIHk=\n"
        + b"\n#   trailing comment\n"
    )
    before = kh.read_bytes()
    r = remote.run("--accept-new-host-key", "setup", known_hosts=kh)
    assert r.returncode == 0, r.stdout + r.stderr
    after = kh.read_bytes()
    assert after[: len(before)] == before
    assert after[len(before) :] == f"{HOST_IP} {_pub(remote.host_key)}\n".encode()
    assert f"{HOST_IP}: new host key ssh-ed25519 {remote.fingerprint} added to {kh}" in r.stderr
    r = remote.run("setup", known_hosts=kh)  # the appended line is read back, markers and all
    assert r.returncode == 0, r.stdout + r.stderr
    assert kh.read_bytes() == after


def test_a_host_key_marked_revoked_is_refused_even_when_accepting_new_ones(remote, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@revoked * {_pub(remote.host_key)}\n")
    err = one_line_error(remote.run("--accept-new-host-key", "setup", known_hosts=kh))
    assert f"host key ssh-ed25519 {remote.fingerprint} is marked @revoked in {kh}: refused" in err
    assert kh.read_text() == f"@revoked * {_pub(remote.host_key)}\n"  # nothing appended


@pytest.fixture(scope="module")
def inner(remote, tmp_path_factory):
    """A second sshd inside the remote's namespace, on that namespace's loopback: only a process
    in the namespace (the remote's sshd, as a jump host) can reach it. It logs at DEBUG1, which
    names every global request (the keepalives)."""
    base = tmp_path_factory.mktemp("inner")
    host_key = keygen(base / "host_key")
    port = 20000 + os.getpid() % 10000
    cfg = base / "sshd_config"
    cfg.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {host_key}\nPidFile {base / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {remote.base / 'authorized_keys'}\nStrictModes no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\nPrintMotd no\n"
        "LogLevel DEBUG1\nSubsystem sftp internal-sftp\n"
    )
    log = base / "sshd.log"
    with log.open("w") as out:
        p = subprocess.Popen(
            ["ip", "netns", "exec", remote.netns, "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 10
    while "Server listening on 127.0.0.1" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Server listening on 127.0.0.1" in log.read_text(), log.read_text()[-500:]
    yield {"port": port, "host_key": host_key, "log": log}
    p.terminate()
    p.wait(10)


def test_proxy_jump_and_keepalives_from_the_ssh_config(remote, inner, tmp_path):
    """~/.ssh/config's ProxyJump was ignored (the connection went straight to HostName). Here the
    target listens where only the jump host reaches it; ServerAliveInterval 1 makes the idle
    connection (setup sleeps 3 s) send keepalives, which the target's sshd logs."""
    port = inner["port"]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host inner\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {remote.key}\n"
        "  ProxyJump jump\n  ServerAliveInterval 1\n"
        f"Host jump\n  HostName {HOST_IP}\n  User root\n  IdentityFile {remote.key}\n"
    )
    kh = tmp_path / "known_hosts"
    kh.write_text(remote.known_hosts.read_text() + f"[127.0.0.1]:{port} {_pub(inner['host_key'])}\n")
    argv = [*TESTBED, "remote", "inner", "--ssh-config", str(cfg), "--known-hosts", str(kh)]
    argv += ["--path", str(remote.checkout), "--env", "SETUP_SLEEP=3", "setup"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"setup: ran in {remote.checkout}" in r.stdout and "setup: sleeping" in r.stdout
    log = inner["log"].read_text()
    assert "Accepted publickey for root from 127.0.0.1" in log  # it came from inside the namespace
    assert log.count("rtype keepalive@lag.net") >= 2, log[-2000:]
    chain = tmp_path / "ssh_config_chain"  # the hop as user@address:port
    chain.write_text(
        cfg.read_text().replace("ProxyJump jump", f"ProxyJump root@{HOST_IP}:22")
        + f"Host *\n  IdentityFile {remote.key}\n"
    )
    argv[argv.index(str(cfg))] = str(chain)
    r = subprocess.run(argv[:-3] + ["setup"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_proxy_command_is_refused_in_one_line(remote, tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host viaproxy\n  HostName {HOST_IP}\n  ProxyCommand nc %h %p\n")
    argv = [*TESTBED, "remote", "viaproxy", "--ssh-config", str(cfg), "--known-hosts", str(remote.known_hosts)]
    r = subprocess.run([*argv, "doctor"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    err = one_line_error(r)
    assert f"{cfg}: Host viaproxy: ProxyCommand is not supported; write the hop as ProxyJump" in err

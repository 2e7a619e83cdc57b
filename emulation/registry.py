"""What a run created (controller PID, host shell PIDs, bridges, root-namespace interfaces).

Each live run keeps a folder `/run/psnet-testbed/<run id>/` (tmpfs: gone at reboot, never the
system temp directory that `mn -c` sweeps) with `state.json`; bridges also carry
`external-ids:psnet-testbed=<run id>`. `testbed clean` removes exactly these and nothing else.

A run records its bridges and interfaces before it builds anything, and every process it starts
(controller, host shells, what runs in them) inherits RUN_ENV=<run id>, so a run killed in the
middle of its bring-up (SIGKILL: no teardown at all) can still be cleaned completely. A run is
dead when its owner process is gone (its PID and start time are recorded: a reused PID does not
keep a dead run alive); the next run, holding the emulator lock, removes what dead runs left.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Collection
from pathlib import Path

import psutil

from topologies.files import write_json_atomic

LOG = logging.getLogger(__name__)
RUN_ROOT = Path(os.environ.get("PSNET_RUN_ROOT", "/run/psnet-testbed"))
TAG = "psnet-testbed"
#: environment variable naming the run, inherited by every process the run starts
RUN_ENV = "PSNET_RUN_ID"
#: command-line marks of the processes a run starts (a PID is killed only if its command has one)
CONTROLLER_MARK, SHELL_MARK = "controller.launch", "mininet:"


class Busy(RuntimeError):
    """Another run holds the emulator."""


#: the lock descriptors this process holds: a second acquire here would wait for itself
_HELD: set[int] = set()


def acquire_emulator(wait_s: float) -> int:
    """Exclusive lock on the emulator for this process (released by the kernel if it dies).

    One emulation at a time: switch names are global in OVS, and two runs would share the one
    ovs-vswitchd thread and spoil each other's measurements. A process that already holds it is
    refused at once (flock on a new descriptor would make it queue behind itself).
    """
    if _HELD:
        raise Busy("this process already has a network up (one emulation at a time); stop it before the next")
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    fd = os.open(RUN_ROOT / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            _HELD.add(fd)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode() or "?"
                os.close(fd)
                raise Busy(
                    f"another testbed run (pid {holder}) is using the emulator; wait for it, or set "
                    "PSNET_LOCK_WAIT_S to queue behind it"
                ) from None
            time.sleep(0.5)


def release_emulator(fd: int) -> None:
    _HELD.discard(fd)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


#: runs this process opened (new_run): the CLI's Ctrl-C line says "torn down" only where one was
RUNS_OPENED = 0


def new_run() -> tuple[str, Path]:
    """A fresh run id and its private folder, owned by this process."""
    global RUNS_OPENED
    RUNS_OPENED += 1
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    path = RUN_ROOT / run_id
    path.mkdir(parents=True, exist_ok=True)
    save(path, owner_pid=os.getpid(), owner_started=psutil.Process().create_time())
    return run_id, path


def save(path: Path, **state: object) -> None:
    """Merge fields into the run's state.json (written atomically)."""
    f = path / "state.json"
    data = json.loads(f.read_text()) if f.exists() else {}
    data.update(state)
    write_json_atomic(f, data)


def _ovs(*args: str) -> str:
    return subprocess.run(["ovs-vsctl", "--timeout=5", *args], capture_output=True, text=True, check=False).stdout


def existing_bridges() -> list[str]:
    """Every OVS bridge on the machine (ours or not)."""
    return _ovs("list-br").split()


def delete_bridges(names: set[str]) -> list[str]:
    """Delete those of `names` that exist as bridges; returns the ones deleted."""
    gone = sorted(set(existing_bridges()) & names)
    if gone:
        _ovs(*[arg for b in gone for arg in ("--", "--if-exists", "del-br", b)])
    return gone


def tagged_bridges() -> dict[str, str]:
    """Bridges this testbed created: name -> run id."""
    out = _ovs("--format=json", "--columns=name,external_ids", "list", "Bridge")
    if not out.strip():
        return {}
    rows = json.loads(out)["data"]
    found = {}
    for name, ext in rows:
        ids = dict(ext[1]) if ext and ext[0] == "map" else {}
        if TAG in ids:
            found[name] = ids[TAG]
    return found


def _kill(pid: int, must_contain: str = "") -> bool:
    """Kill a process we started (checked by its command line, so a reused PID is spared)."""
    try:
        p = psutil.Process(pid)
        if must_contain and must_contain not in " ".join(p.cmdline()):
            return False
        for child in p.children(recursive=True):
            child.kill()
        p.send_signal(signal.SIGKILL)
        return True
    except psutil.Error:
        return False


def _state(d: Path) -> dict:
    f = d / "state.json"
    try:
        return json.loads(f.read_text()) if f.exists() else {}
    except ValueError:  # cut short by a kill while written: nothing to trust but the folder
        return {}


def _alive(state: dict) -> bool:
    """Whether the run's owner process still runs (the same process: PID and start time)."""
    pid = state.get("owner_pid")
    if not pid or pid == os.getpid():
        return False
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        return False
    return state.get("owner_started") is None or abs(started - state["owner_started"]) < 1.0


def _run_processes(run_id: str) -> list[int]:
    """Controller and host shells started by run `run_id` (by RUN_ENV), whatever state.json says:
    a run killed mid-build never recorded the PIDs of the shells it had started."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if (CONTROLLER_MARK in cmd or SHELL_MARK in cmd) and p.environ().get(RUN_ENV) == run_id:
                found.append(p.info["pid"])
        except psutil.Error:
            continue
    return sorted(found)


def clean_run(d: Path, spare: Collection[str] = ()) -> list[str]:
    """Remove what one run folder records: its processes, bridges (except `spare`: those of live
    runs) and root interfaces, then the folder."""
    removed: list[str] = []
    state = _state(d)
    if state.get("controller_pid") and _kill(state["controller_pid"], CONTROLLER_MARK):
        removed.append(f"controller process {state['controller_pid']}")
    for pid in state.get("host_pids", []):
        if _kill(pid, SHELL_MARK):
            removed.append(f"host shell {pid}")
    for pid in _run_processes(d.name):
        if _kill(pid):
            removed.append(f"process {pid}")
    for br in delete_bridges(set(state.get("bridges", [])) - set(spare)):
        removed.append(f"bridge {br}")
    for intf in state.get("root_intfs", []):
        if Path(f"/sys/class/net/{intf}").exists():
            subprocess.run(["ip", "link", "del", intf], capture_output=True, check=False)
            removed.append(f"interface {intf}")
    for sub in sorted(d.glob("*")):
        sub.unlink()
    d.rmdir()
    return removed


def clean(include_live: bool = False) -> list[str]:
    """Remove leftovers of dead runs (or of all runs): processes, bridges, interfaces, folders."""
    removed: list[str] = []
    live = set()
    dead = []
    for d in sorted(RUN_ROOT.iterdir()) if RUN_ROOT.exists() else []:
        if not d.is_dir():  # the emulator lock file lives beside the run folders
            continue
        if _alive(_state(d)) and not include_live:
            live.add(d.name)
        else:
            dead.append(d)
    spare = {br for br, run in tagged_bridges().items() if run in live}
    for d in dead:
        removed += clean_run(d, spare) + [f"run folder {d}"]
    for br, run in tagged_bridges().items():
        if run not in live:
            _ovs("--if-exists", "del-br", br)
            removed.append(f"bridge {br}")
    return removed


def summary(removed: list[str], names_shown: int = 5) -> str:
    """clean()'s list in one short line: "2 bridges (ecs1, sn1), 21 interfaces (ecs1-eth7, ...)"."""
    kinds: dict[str, list[str]] = {}
    for item in removed:
        kind, _, name = item.rpartition(" ")
        kinds.setdefault(kind, []).append(Path(name).name)
    parts = []
    for kind, names in kinds.items():
        shown = ", ".join(names[:names_shown]) + (", ..." if len(names) > names_shown else "")
        parts.append(f"{len(names)} {kind}{'' if len(names) == 1 else 'es' if kind.endswith('s') else 's'} ({shown})")
    return ", ".join(parts)


def bridge_owner(name: str) -> str:
    """Which live run holds bridge `name` ("" if none records it), for an error message."""
    for d in sorted(RUN_ROOT.iterdir()) if RUN_ROOT.exists() else []:
        state = _state(d) if d.is_dir() else {}
        if _alive(state) and (name in state.get("bridges", []) or tagged_bridges().get(name) == d.name):
            return f"testbed run {d.name} (pid {state['owner_pid']}, {state.get('topology', '?')})"
    return ""

"""What a run created (controller PID, host shell PIDs, bridges, root-namespace interfaces).

Each live run keeps a folder `/run/psnet-testbed/<run id>/` (tmpfs: gone at reboot, never the
system temp directory that `mn -c` sweeps) with `state.json`; bridges also carry
`external-ids:psnet-testbed=<run id>`. `testbed clean` removes exactly these and nothing else.

A run records its bridges and interfaces before it builds anything. Its processes are found by
what they inherit, never by their command lines: where a cgroup v2 hierarchy is writable (root;
/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system) the owner moves itself into a
cgroup of the run's own, `<cgroup2>/psnet-testbed/<run id>`, before it starts anything, so every
process the run starts and everything that forks (controller, host shells, mnexec, mpirun and
its orted daemons, iperf3, TF tasks, whatever session or process group they make) is in it, and
clean-up kills the cgroup; the owner moves back at the end. Every process also inherits
RUN_ENV=<run id> in its environment, which finds them where there is no cgroup, and the PIDs the
run records are kept with their start times (a reused PID is never killed). So a run killed at
any point (SIGKILL: no teardown at all) can still be cleaned completely. A run is dead when its
owner process is gone (PID and start time again); the next run, holding the emulator lock,
removes what dead runs left, as `testbed clean` does.
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

from emulation.remote_clean import TAG, clean_remote
from topologies.files import write_json_atomic

LOG = logging.getLogger(__name__)
RUN_ROOT = Path(os.environ.get("PSNET_RUN_ROOT", "/run/psnet-testbed"))
#: environment variable naming the run, inherited by every process the run starts
RUN_ENV = "PSNET_RUN_ID"


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
    _open_runs[run_id] = path
    join_run_cgroup(path)
    return run_id, path


def track(path: Path, **pids: int | list[int]) -> None:
    """Record PIDs the run started (controller_pid=..., host_pids=[...]) with their start times, so
    that a clean-up kills them and never a process that got one of their PIDs since."""
    started = dict(_state(path).get("started", {}))
    for value in pids.values():
        for pid in value if isinstance(value, list) else [value]:
            started[str(pid)] = proc_start(pid)
    save(path, **pids, started=started)


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


def proc_start(pid: int) -> float | None:
    """A process's start time (seconds since the epoch), None if it is gone: with its PID it names
    one process, so a PID the kernel gave to another process since is never killed."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _same(pid: int, started: float | None, not_before: float | None = None) -> bool:
    """Whether `pid` is still the process that started at `started`; where that was not recorded
    (a folder of an older testbed), whether it started no earlier than `not_before` (the run's
    owner): a process older than the run is never one of its own."""
    now = proc_start(pid)
    if now is None:
        return False
    if started is not None:
        return abs(now - started) < 1.0
    return not_before is not None and now >= not_before - 1.0


def _kill(pid: int) -> bool:
    try:
        psutil.Process(pid).send_signal(signal.SIGKILL)
        return True
    except psutil.Error:
        return False


def load(d: Path) -> dict:
    """A run folder's state.json ({} if it is missing or cut short)."""
    return _state(d)


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


# --------------------------------------------------------------------------- cgroups
#: a writable cgroup v2 hierarchy holds one cgroup per run under this folder
CGROUP_DIR = "psnet-testbed"
#: environment variable naming the run's cgroup, for processes that are not forked by the run but
#: join it (the fork server's tasks: tfjob.forkserver); unset where the run has none
CGROUP_ENV = "PSNET_RUN_CGROUP"


def _cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a unified system (Debian 12),
    /sys/fs/cgroup/unified on a hybrid one; None without one."""
    mounts = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                mounts.append(Path(fields[1]))
    except OSError:
        return None
    mounts.sort(key=lambda m: m != Path("/sys/fs/cgroup"))
    return mounts[0] if mounts else None


def cgroup_base() -> Path | None:
    """The folder of the runs' cgroups, made if missing; None where no cgroup v2 hierarchy is
    writable here (not root, a read-only container mount): runs are then tracked by the run id in
    their processes' environment alone."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    base = mount / CGROUP_DIR
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return None
    return base if os.access(base / "cgroup.procs", os.W_OK) else None


def cgroup_of(pid: int | str = "self") -> Path | None:
    """The cgroup v2 folder of a process (None if it is gone or there is no v2 hierarchy)."""
    mount = _cgroup2_mount()
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::") and mount is not None:
            return mount / line[3:].lstrip("/")
    return None


def move_to_cgroup(pid: int, cg: Path) -> bool:
    """Move process `pid` (all its threads) into cgroup `cg`; False if that failed."""
    try:
        (cg / "cgroup.procs").write_text(str(pid))
        return True
    except OSError as err:
        LOG.debug("could not move pid %d to %s: %s", pid, cg, err)
        return False


def cgroup_pids(cg: Path) -> list[int]:
    """The processes in cgroup `cg` (none if it is gone)."""
    try:
        return sorted(int(x) for x in (cg / "cgroup.procs").read_text().split())
    except (OSError, ValueError):
        return []


def leave_run_cgroup(pid: int) -> None:
    """Move `pid` out of this process's run cgroup, to where this process was before the run: for
    a helper a run starts that outlives it by design (the TF fork server, tfjob.forkserver)."""
    for d in _open_runs.values():
        home = _state(d).get("home_cgroup")
        if home and Path(home).is_dir():
            move_to_cgroup(pid, Path(home))
            return


def _kill_cgroup(cg: Path, wait_s: float = 5.0) -> list[int]:
    """SIGKILL every process in cgroup `cg` (cgroup.kill where the kernel has it: forks racing
    the kill are caught too), wait until it is empty and remove it; returns the PIDs killed."""
    pids = cgroup_pids(cg)
    deadline = time.monotonic() + wait_s
    while cg.is_dir():
        left = cgroup_pids(cg)
        if left:
            if (cg / "cgroup.kill").exists():
                try:
                    (cg / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            for pid in left:
                _kill(pid)
        try:
            cg.rmdir()
        except FileNotFoundError:
            break
        except OSError:
            if time.monotonic() > deadline:
                LOG.warning("cgroup %s still holds %s after SIGKILL; left in place", cg, cgroup_pids(cg))
                break
            time.sleep(0.02)
    return pids


# --------------------------------------------------------------------------- clean-up
#: run folders this process opened and has not closed: run id -> folder
_open_runs: dict[str, Path] = {}


def join_run_cgroup(path: Path) -> Path | None:
    """Give the run of folder `path` a cgroup of its own and move this process (its owner) into
    it, so that every process the run starts, however it is started (controller, host shells,
    mnexec, mpirun and its orted daemons, iperf3, TF tasks), and whatever it forks, is in it: a
    clean-up then finds them all by the cgroup, not by their command lines. Records the cgroup
    and where this process was, to come back to (leave_cgroup). None where no cgroup v2 is writable."""
    base = cgroup_base()
    home = cgroup_of()
    if base is None or home is None:
        return None
    cg = base / path.name
    try:
        cg.mkdir(exist_ok=True)
    except OSError as err:
        LOG.debug("no cgroup for run %s: %s", path.name, err)
        return None
    save(path, cgroup=str(cg), home_cgroup=str(home))
    if not move_to_cgroup(os.getpid(), cg):
        save(path, cgroup="")
        cg.rmdir()
        return None
    return cg


def leave_cgroup(state: dict) -> None:
    """Bring the run's owner back from its cgroup to where it was before the run, if it still runs
    (this process at the end of its run; a live run's owner under `testbed clean --all`, which
    takes its network, not the process)."""
    cg, pid = state.get("cgroup"), state.get("owner_pid") or os.getpid()
    if not cg or not _same(pid, state.get("owner_started")) or cgroup_of(pid) != Path(cg):
        return
    home = Path(state.get("home_cgroup") or Path(cg).parent.parent)
    if not (home.is_dir() and move_to_cgroup(pid, home)):
        move_to_cgroup(pid, Path(cg).parent.parent)


def _run_processes(run_id: str) -> list[int]:
    """Every process that carries run `run_id` in its environment (RUN_ENV, inherited by what the
    run starts), whatever state.json says: a run killed mid-build never recorded the PIDs of the
    shells it had started, and where there is no cgroup this is what finds the rest."""
    found = []
    for p in psutil.process_iter(["pid"]):
        if p.info["pid"] == os.getpid():
            continue
        try:
            if p.environ().get(RUN_ENV) == run_id:
                found.append(p.info["pid"])
        except psutil.Error:
            continue
    return sorted(found)


def _labels(state: dict) -> dict[int, str]:
    """What each recorded PID of a run was (controller process, host shell), for the summary."""
    labels = {pid: "host shell" for pid in state.get("host_pids", [])}
    if state.get("controller_pid"):
        labels[state["controller_pid"]] = "controller process"
    return labels


def clean_run(d: Path, spare: Collection[str] = ()) -> list[str]:
    """Remove what one run folder records: every process of the run (its cgroup; the recorded
    PIDs with their start times; whatever carries its id in its environment), its bridges (except
    `spare`: those of live runs) and root interfaces, then the folder and the cgroup."""
    removed: list[str] = []
    state = _state(d)
    leave_cgroup(state)
    labels = _labels(state)
    killed: set[int] = set()
    if state.get("cgroup"):
        killed.update(_kill_cgroup(Path(state["cgroup"])))
    started = state.get("started", {})
    for pid in labels:
        if pid not in killed and _same(pid, started.get(str(pid)), state.get("owner_started")) and _kill(pid):
            killed.add(pid)
    for _ in range(3):  # a process forking while it is killed: look again until none is left
        more = [pid for pid in _run_processes(d.name) if pid not in killed and _kill(pid)]
        killed.update(more)
        if not more:
            break
    removed += [f"{labels.get(pid, 'process')} {pid}" for pid in sorted(killed, key=lambda p: (p not in labels, p))]
    for br in delete_bridges(set(state.get("bridges", [])) - set(spare)):
        removed.append(f"bridge {br}")
    for intf in state.get("root_intfs", []):
        if Path(f"/sys/class/net/{intf}").exists():
            subprocess.run(["ip", "link", "del", intf], capture_output=True, check=False)
            removed.append(f"interface {intf}")
    if state.get("cluster") and (d / "ssh_config").exists():  # a run over several servers (emulation.cluster)
        removed += clean_remote(
            d / "ssh_config", state["cluster"], d.name, state.get("cluster_intfs", []), state.get("bridges", [])
        )
    for sub in sorted(d.glob("*")):
        sub.unlink()
    d.rmdir()
    _open_runs.pop(d.name, None)
    if state.get("cgroup"):
        removed.append(f"cgroup {d.name}")
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
    base = cgroup_base()
    for cg in sorted(base.iterdir()) if base is not None else []:
        # a run's cgroup outlives its folder only if a clean-up was cut short: no live run has it
        if cg.is_dir() and cg.name not in live and not (RUN_ROOT / cg.name).exists():
            removed += [f"process {pid}" for pid in _kill_cgroup(cg)] + [f"cgroup {cg.name}"]
    return removed


def own_bridges() -> list[str]:
    """The OVS bridges of this testbed: tagged with a run id, or recorded by a run folder (a run
    killed before it tagged them); a bridge this machine has for anything else is not counted."""
    recorded: set[str] = set()
    for d in sorted(RUN_ROOT.iterdir()) if RUN_ROOT.exists() else []:
        if d.is_dir():
            recorded.update(_state(d).get("bridges", []))
    return sorted(set(tagged_bridges()) | (set(existing_bridges()) & recorded))


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

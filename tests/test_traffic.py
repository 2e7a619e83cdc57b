"""Transfer phases (emulation.phases), the per-step split into measured communication and the rest
(runs.steptime), and the stall watch (runs.stall) on real processes: no network needed."""

from __future__ import annotations

import csv
import json
import queue
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from emulation.phases import (
    MOVING,
    PHASE_S,
    Window,
    busy_s,
    last_moving,
    link_busy_s,
    moved_wire,
    moving_s,
    phases,
    read_counters,
    read_links_csv,
    window,
    write_links_csv,
)
from emulation.tso import wire_bytes
from runs.stall import Stalled, StallWatch
from runs.steptime import resplit, split_step, step_split
from tfjob.procs import JobRun, Proc, own_lines, proc_state
from workloads.experiment import JobSpec

RATES = {"a": 100.0, "b": 50.0}


def w(t: float, util: float, dt: float = 0.25) -> Window:
    return Window(t, dt, util, "a" if util else "")


def test_counters_come_from_one_read_of_proc_net_dev(tmp_path):
    f = tmp_path / "dev"
    f.write_text(
        "Inter-|   Receive  |  Transmit\n"
        " face |bytes packets errs drop fifo frame compressed multicast|bytes packets ...\n"
        "    lo:    1200      10    0    0    0     0          0         0     3400      20    0    0    0     0 0 0\n"
        "t1_1-eth1: 500 5 0 0 0 0 0 0 700 7 0 0 0 0 0 0\n"
    )
    assert read_counters(f) == {"lo": (1200, 10, 3400, 20), "t1_1-eth1": (500, 5, 700, 7)}
    assert "lo" in read_counters()  # this machine's own file parses


def test_a_gso_packets_frames_each_carry_their_headers_on_the_wire():
    # 1000 full frames at MTU 1500 (1514 bytes each, 1448 of payload): counted as they went
    assert wire_bytes(1000 * 1514, 1000, 1500) == 1000 * 1514
    # the same payload as 25 GSO packets of 40 segments: counted with one set of headers each
    # (66 bytes: Ethernet, IPv4, TCP with timestamps), sent as the same 1000 frames
    assert wire_bytes(25 * (66 + 40 * 1448), 25, 1500) == 1000 * 1514
    assert wire_bytes(100 * 66, 100, 1500) == 100 * 66  # bare ACKs: nothing to add
    last = {"x": (0, 0, 0, 0)}
    now = {"x": (25 * (66 + 40 * 1448), 25, 66 * 25, 25)}  # data in, one ACK per GSO packet out
    assert moved_wire(now, last, 1500) == {"x": (1000 * 1514, 66 * 25)}


def test_a_window_keeps_its_bottleneck_link_either_direction():
    # a: 2.5 MB tx in 0.25 s = 80 Mbit/s of 100 (80%); b: 1.5 MB rx = 48 of 50 Mbit/s (96%)
    got = window(10.0, 0.25, {"a": (0, 2_500_000), "b": (1_500_000, 0)}, RATES)
    assert (got.link, got.util) == ("b", pytest.approx(0.96)) and got.t0 == 9.75
    assert window(10.0, 0.25, {"c": (10**9, 0)}, RATES).util == 0.0  # an interface without a rate
    assert MOVING == 0.05 and PHASE_S == 0.25
    assert [i for i, _ in got.links] == ["b", "a"]  # every link that moved bytes, busiest first
    assert window(10.0, 0.25, {"a": (0, 1000), "b": (1_500_000, 0)}, RATES).links == (("b", pytest.approx(0.96)),)


def test_one_link_counts_less_than_the_busiest_per_window_when_parallel_links_take_turns(tmp_path):
    """Two parallel links a and b, each carrying the same bytes, busiest in turn: the step's
    communication (busiest link per window) is 0.95 + 0.95 = 1.9 windows, one link alone 1.6."""
    ws = [
        Window(1.25, 0.25, 0.95, "a", (("a", 0.95), ("b", 0.65))),
        Window(1.5, 0.25, 0.95, "b", (("b", 0.95), ("a", 0.65))),
    ]
    assert busy_s(ws, 1.0, 1.5) == pytest.approx(0.475)
    assert link_busy_s(ws, 1.0, 1.5) == pytest.approx(0.4)
    assert link_busy_s(ws, 1.25, 1.5) == pytest.approx(0.2375)  # clipped to the step
    write_links_csv(tmp_path / "links.csv", ws)
    again = read_links_csv(tmp_path / "links.csv")
    assert [(w.t, w.link, w.util) for w in again] == [(1.25, "a", 0.95), (1.5, "b", 0.95)]
    assert link_busy_s(again, 1.0, 1.5) == pytest.approx(0.4) and busy_s(again, 1.0, 1.5) == pytest.approx(0.475)


def test_a_finished_runs_split_is_recomputed_from_its_files(tmp_path):
    """resplit (testbed replay --report-only) reads iterations.csv and links.csv: the warm-up step
    is left out, the slowest worker's interval is the step's, and the single-link time is added."""
    run = tmp_path / "rep1"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"job": {"name": "job", "warmup": 1}}))
    (run / "summary.json").write_text(json.dumps({"complete": True, "bct_s": {"n": 1, "mean": 1.0}}))
    (run / "iterations.csv").write_text(
        "job,attempt,host,task,step,global_step,t_start,t_end,bct_s\n"
        "job,0,w1,0,1,1,0.0,1.0,1.0\n"
        "job,0,w1,0,2,2,1.0,1.9,0.9\n"
        "job,0,w2,1,2,2,1.0,2.0,1.0\n"
    )
    ws = [
        Window(1.25, 0.25, 0.95, "a", (("a", 0.95), ("b", 0.65))),
        Window(1.5, 0.25, 0.95, "b", (("b", 0.95), ("a", 0.65))),
        Window(0.5, 0.25, 1.0, "a", (("a", 1.0),)),  # in the warm-up step
    ]
    write_links_csv(run / "links.csv", ws)
    before = (run / "summary.json").read_bytes()
    split = resplit(run)["step_split"]
    assert split["comm_s"]["n"] == 1 and split["comm_s"]["mean"] == pytest.approx(0.475)  # 0.475 of 1 s busy
    assert split["rest_s"]["mean"] == pytest.approx(0.525) and split["link_s"]["mean"] == pytest.approx(0.4)
    assert (run / "summary.json").read_bytes() == before  # --report-only redraws from it, never over it
    assert resplit(tmp_path) is None  # no links.csv: nothing to recompute


def test_the_links_csv_has_every_moving_link_of_every_window(tmp_path):
    ws = [
        window(10.0, 0.25, {"a": (0, 2_500_000), "b": (1_500_000, 0)}, RATES),
        window(10.25, 0.25, {"a": (0, 0)}, RATES),
    ]
    write_links_csv(tmp_path / "links.csv", ws)
    rows = list(csv.DictReader((tmp_path / "links.csv").open()))
    assert [(r["t_end"], r["link"], r["util"]) for r in rows] == [("10.000", "b", "0.9600"), ("10.000", "a", "0.8000")]


def test_phases_are_runs_of_windows_moving_bytes_judged_on_their_interior():
    ws = [w(1.0, 0.0), w(1.25, 0.3), w(1.5, 1.0), w(1.75, 0.9), w(2.0, 0.2), w(2.25, 0.01), w(2.5, 0.5)]
    first, second = phases(ws)
    assert (first.t0, first.t1, first.judged) == (1.0, 2.0, True)
    assert first.util == pytest.approx(0.95)  # interior only: the ramp (0.3) and the tail (0.2) are partial
    assert (second.judged, second.util) == (False, 0.5)
    assert last_moving(ws) == 2.5 and last_moving([w(1.0, 0.01)]) is None
    # seconds of [1.1, 2.1] covered by moving windows: 1.1-2.0 (0.9 s), the 2.0-2.25 window is not moving
    assert moving_s(ws, 1.1, 2.1) == pytest.approx(0.9)
    # busy: what the bottleneck link needed for its bytes, 0.3 x 0.15 + 1.0 x 0.25 + 0.9 x 0.25 + 0.2 x 0.25
    assert busy_s(ws, 1.1, 2.1) == pytest.approx(0.045 + 0.25 + 0.225 + 0.05)


def test_each_step_splits_into_measured_communication_and_a_rest_that_add_up():
    ws = [w(10.25 + 0.25 * i, 1.0 if i < 8 else 0.0) for i in range(16)]  # links busy 10.0-12.0, idle to 14.0
    comm, rest = split_step(10.0, 14.0, 4.0, ws)
    assert (comm, rest) == (pytest.approx(2.0), pytest.approx(2.0))
    # a step shorter than the model's communication still has a non-negative rest
    assert split_step(10.0, 11.0, 1.0, ws) == (pytest.approx(1.0), pytest.approx(0.0))
    rows = [
        {"attempt": 0, "step": 1, "t_start": 0.0, "t_end": 1.0, "bct_s": 1.0},  # warm-up: left out
        {"attempt": 0, "step": 2, "t_start": 10.0, "t_end": 14.0, "bct_s": 4.0},  # the slowest worker
        {"attempt": 0, "step": 2, "t_start": 10.0, "t_end": 12.0, "bct_s": 2.0},
    ]
    got = step_split(rows, warmup=1, windows=ws)
    assert got["comm_s"]["n"] == 1 and got["comm_s"]["mean"] + got["rest_s"]["mean"] == pytest.approx(4.0)
    assert got["comm_s"]["mean"] == pytest.approx(2.0) and "busy time" in got["method"]
    assert step_split(rows, 1, []) == {}


def test_failure_lines_leave_out_tensorflows_start_up_banner():
    raw = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795381275.596586   14344 port.cc:153] oneDNN custom operations are on. You may see",
        "I0000 00:00:1795381276.148697   14344 cpu_feature_guard.cc:227] This TensorFlow binary is optimized",
        "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow",
        "I0000 00:00:1795381280.240104   14344 grpc_server_lib.cc:467] Started server with target: grpc://x",
        '{"event": "ready", "job": "ps", "task": 0}',
        "E0000 00:00:1795381290.1 14344 master.cc:1] RecvTensor failed",
    ]
    assert own_lines(raw) == raw[5:]


@pytest.fixture
def sleeper():
    """A real process asleep in the kernel (it prints once it is about to sleep)."""
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; print(1, flush=True); time.sleep(60)"], stdout=subprocess.PIPE
    )
    p.stdout.readline()
    time.sleep(0.2)
    yield p
    p.kill()
    p.wait()


def test_a_process_state_comes_from_proc(sleeper):
    state = proc_state(sleeper.pid)
    assert state.startswith("S (sleeping), 1 threads: ") and "x1" in state
    assert proc_state(2**22 + 1) == "gone"


def test_the_stall_watch_arms_when_workers_are_ready_and_names_what_each_process_does(sleeper):
    job = JobRun(None, SimpleNamespace(name="j"), 1.0, ["ps0"], ["w0"], None)  # type: ignore[arg-type]
    ps = Proc("ps0", "ps", 0, sleeper, job, lines=[{"event": "ready"}], raw=["banner? no", '{"event": "ready"}'])
    job.procs.append(ps)
    windows: list[Window] = []
    watch = StallWatch([job], lambda: windows, limit_s=10)
    now = time.time()
    assert watch.idle_s(now + 100) == 0.0  # no worker ready yet: not armed
    job.procs.append(Proc("w0", "worker", 0, sleeper, job, lines=[{"event": "ready"}], raw=['{"event": "iter"}']))
    assert watch.idle_s(now) == 0.0  # armed now
    windows.append(w(now + 5, 0.9))  # links moved bytes until now + 5
    watch.check(now + 14)  # 9 s idle: fine
    watch.saw({"event": "iter"})
    with pytest.raises(Stalled) as err:
        watch.check(now + 16)  # 11 s after the last window moving bytes
    msg = str(err.value)
    assert msg.startswith("stalled: no step and no link moving bytes for 11 s (limit 10 s); the processes: ")
    assert "ps0 (j ps 0): S (sleeping), 1 threads: " in msg and '; last lines: banner? no | {"event": "ready"}' in msg
    assert "w0 (j worker 0): S (sleeping)" in msg


class SleepingHosts:
    """Hosts (tfjob.hosts) whose tasks are real sleeping processes: JobRun's start logic runs
    as it does on Mininet, without TensorFlow."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[str]]] = []
        self.events: list[str] = []

    def popen(self, host: str, argv: list[str]) -> subprocess.Popen:
        self.started.append((host, argv))
        return subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE, text=True)

    def address(self, host: str) -> str:
        return f"{host}:2222"

    def log(self, event: str, **fields: object) -> None:
        self.events.append(event)


def test_workers_start_once_when_the_pss_are_ready_together():
    """Both PSs' ready lines can be read before either event is handled: each handling then sees
    every PS ready. The workers must still start once (twice, the second set found port 2222 bound
    in each worker's host and the run failed: 'Could not start gRPC server')."""
    hosts = SleepingHosts()
    spec = JobSpec(model="mnist")
    job = JobRun(hosts, spec, 1.0, ["ps0", "ps1"], ["w0", "w1", "w2"], queue.Queue())  # type: ignore[arg-type]
    try:
        job.start()
        pss = job.current()
        for p in pss:
            p.lines.append({"event": "ready"})  # what the reader threads do before queueing the events
        for p in pss:
            job.handle(p, {"event": "ready"})
        workers = [host for host, argv in hosts.started if argv[argv.index("--job") + 1] == "worker"]
        assert workers == ["w0", "w1", "w2"] and hosts.events == ["job-start"]
    finally:
        job.stop()

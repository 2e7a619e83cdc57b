"""Run one iteration's traffic on SimGrid, in a subprocess of its own.

Measured facts this follows (docs/flowmodel.md, "SimGrid facts"; Debian's python3-simgrid 3.32):
- CM02 with cross-traffic off and `network/optim:Full` is exact max-min; the default Lazy
  optimisation lets flows exceed a link's rate when latencies are > 0 (a SimGrid bug), so Full
  is always set. A calibration (`factors`) replaces the model by LV08 with fitted settings.
- LV08 shares a cable in inverse proportion to each flow's *penalty*: its route's latency plus
  `network/weight-S` / rate per cable crossed. It is the RTT unfairness the emulator shows (TCP
  flows crossing more shaped hops get smaller shares: measured on leafspine-2rack, a receiver's
  in-rack senders finish their shards at 0.36-0.42 s, its cross-rack ones at 0.58-0.62 s). SimGrid
  only weights flows whose route has a latency: with every latency 0 all penalties are equal
  (max-min whatever weight-S says; checked on 3.32). The calibration's latencies are this engine's
  settings: `HOP_LATENCY` on every cable (a forwarding hop of the emulator), and `MESSAGE_LATENCY`
  on one extra link per sender that never limits a rate (what TCP's ramp and the engine's
  per-message work cost). Both delay each message's first byte and count in its penalty.
- Every payload byte costs (MTU + 14) / (MTU - 52) on the wire (Ethernet, IP and TCP headers with
  timestamps: 1514 / 1448 = 1.046 at MTU 1500), which the shapers count: `TCP_HEADERS` gives every
  flow that share of its cables' rates (`header_factor`, from the platform's MTU); LV08's
  `network/bandwidth-factor` multiplies on top of it.
- The emulator's incasts: W TCP flows into one receiver take longer than max-min's fair shares
  (a flow that falls behind holds back every sum that waits for it). A calibration may set
  `FAN_IN_FACTOR` k: the simulated times are then multiplied by 1 + k ln F, F the traffic's
  fan-in (the most distinct senders one receiver has; 1 for a ring: no change). A point-level
  term, fitted and judged held out like the others (benchmarks/flowmodel.py).
- The emulator's load: on 2 cores the engine's processes, their TCP stacks and ovs-vswitchd share
  the CPU, and an emulated synchronisation takes longer the more traffic every cable carries at
  once, though each run is judged faithful (benchmarks/flowmodel.py, 2026-11-29: emulated / max-min
  1.01-1.2 below ~0.5 Gbit/s over all cables, 1.3-1.8 at 2-4 Gbit/s). A calibration may set
  `LOAD_FACTOR` a: the simulated times are then multiplied by 1 + a L^q P^j, L the traffic's
  cable load (`cable_load_gbps`: its bytes on every veth cable, over the busiest cable's time at
  its rate; a patch cable joins two bridges inside the datapath and costs it no pass), P its TCP
  connections (host pairs), q and j the calibration's `LOAD_POWER` and `PAIRS_POWER` (1 and 0
  where it has none: 1 + a L). Fitted 2026-11-30 on the engine's points, L^1.6 P^0.5 held out
  better than L alone (benchmarks/flowmodel.py, docs/flowmodel.md): the CPU two cores add grows
  faster than linearly with the datapath's load and about with the root of the connections that
  share it. Like the fan-in term it describes this machine's emulator, not a network:
  `sim_config(calibrated=False)` (the paper's rates) has neither.
- One Engine per process (a second one aborts; an uncaught error in an actor aborts too), so
  each simulation runs in a fresh process that does one task and exits: spawned for one
  simulation (`simulate`), forked from the caller for many (`simulate_many`: a spawned process
  spends ~1 s importing before it simulates; a fork shares the caller's imports).
- Every actor is an OS thread: one driver actor runs the phases; a phase whose messages all go at
  once is one `Comm.sendto_async` each and one wait for all, a phase whose messages wait for each
  other (a schedule's gates, pairs, paused senders) an actor per host over mailboxes (_HostActor),
  so that each wait is over one host's comms, not every comm in flight.
- RAT's paused senders (Traffic.pauses): a paused host's messages in flight are suspended
  (`Comm.suspend`) and those that become ready wait for its pause to end.
- Routes are the controller's, given per host pair as a Full zone (`add_route` per pair): the
  zone's table is hosts^2 pointers (~0.8 GB at 10k hosts), which buys exact per-pair paths;
  SimGrid's own fatTree zone has one fixed d-mod-k path and Floyd's seal is O(n^3).
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path

from emulation.wire import header_factor
from models.flow.demands import Traffic

LOG = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]

#: SimGrid settings: exact max-min (see the module docstring)
BASE_CONFIG: dict[str, str] = {
    "network/model": "CM02",
    "network/crosstraffic": "0",
    "network/optim": "Full",
}
#: where a calibration against the emulator writes its settings: a JSON object whose keys with a
#: "/" are settings (SimGrid `--cfg` keys, e.g. {"network/model": "LV08",
#: "network/bandwidth-factor": "0.97"}, and this engine's own `flowmodel/` keys) and whose other
#: keys (date, machine, points) are a record; PSNET_FLOWMODEL_FACTORS overrides the path
FACTORS_FILE = REPO / "results" / "calibration" / "flowmodel-factors.json"
#: this engine's setting (not SimGrid's): seconds added to every message before its first byte
MESSAGE_LATENCY = "flowmodel/message-latency-s"
#: this engine's setting: k of the fan-in term, times x (1 + k ln fan-in) (see the module docstring)
FAN_IN_FACTOR = "flowmodel/fan-in-factor"
#: this engine's setting: a of the emulator's load term, times x (1 + a L^q P^j), L in Gbit/s (module docstring)
LOAD_FACTOR = "flowmodel/load-factor"
#: this engine's setting: q of the load term (1 where absent)
LOAD_POWER = "flowmodel/load-power"
#: this engine's setting: j of the load term, on the traffic's connections P (0 where absent)
PAIRS_POWER = "flowmodel/pairs-power"
#: this engine's setting: seconds added to every cable's latency (see the module docstring)
HOP_LATENCY = "flowmodel/hop-latency-s"
#: this engine's setting: bytes standing in every cable's queue, i.e. a latency of bytes / rate per
#: cable (a queueing delay: larger on slower cables)
QUEUE_BYTES = "flowmodel/queue-bytes"
#: this engine's setting: bytes per second times cables crossed that the emulator's datapath
#: forwards in all (one shared resource every flow uses once per cable it crosses; see the module docstring)
DATAPATH = "flowmodel/datapath-Bps"
#: this engine's setting: "1" gives every flow the payload's share of its cables' rates (header_factor)
TCP_HEADERS = "flowmodel/tcp-headers"
#: MTU of the shipped topologies (topologies.spec.DEFAULT_MTU, not imported: this module stays
#: free of the topology package, it runs in the simulation's subprocess)
DEFAULT_MTU = 1500


def sim_config(calibrated: bool = True) -> tuple[dict[str, str], str]:
    """The SimGrid settings and where they came from (the factors file when one exists;
    PSNET_FLOWMODEL_FACTORS=none: exact max-min whatever is stored).

    `calibrated=False` is exact max-min too: the calibration describes this machine's emulator
    (its TCP and userspace datapath at emulated rates), not a network at the paper's rates."""
    env = os.environ.get("PSNET_FLOWMODEL_FACTORS")
    path = Path(env or FACTORS_FILE)
    cfg = dict(BASE_CONFIG)
    if not calibrated:
        return cfg, "CM02, exact max-min"
    if env == "none" or not path.is_file():
        return cfg, "CM02, uncalibrated"
    try:
        extra = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a JSON object of SimGrid settings ({err}); fix or remove it") from None
    if not isinstance(extra, dict):
        raise ValueError(f"{path}: expected a JSON object of SimGrid --cfg keys; fix or remove it")
    cfg.update({str(k): str(v) for k, v in extra.items() if "/" in str(k)})
    cfg["network/optim"] = "Full"  # Lazy is wrong with latencies > 0, whatever a file says
    return cfg, f"{cfg['network/model']} with factors from {path}"


@dataclass
class Platform:
    """Links (one split-duplex SimGrid link per cable) and each used pair's route over them."""

    links: list[tuple[str, float, float]]  # (name, bytes/s, latency s)
    routes: dict[tuple[str, str], list[tuple[int, bool]]]  # pair -> [(link index, a->b)]
    mtu: int = DEFAULT_MTU  # the network's MTU (topologies.spec): what TCP_HEADERS charges
    #: links that are OVS patch ports in the emulator (no pass through its datapath: not in the load)
    patch: frozenset[int] = frozenset()


@dataclass
class SimResult:
    iteration_s: float
    phase_s: list[float]
    messages: int
    links: int
    hosts: int
    platform_s: float
    run_s: float
    wall_s: float
    max_rss_mb: float
    config: dict[str, str] = field(default_factory=dict)
    error: str = ""
    #: per message, its arrival time from the iteration's start (s)
    finish_s: list[float] = field(default_factory=list)
    #: the traffic's cable load (cable_load_gbps), what the calibration's load term multiplies
    cable_load_gbps: float = 0.0


def peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM). Not ru_maxrss: Linux carries that across fork and
    exec, so a spawned child would report its parent's peak when that was higher."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _quiet_import():
    """Import simgrid with fd 2 silenced: the binding announces its thread contexts on stderr."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            import simgrid
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return simgrid


def _simulate(platform: Platform, traffic: Traffic, config: dict[str, str]) -> SimResult:
    """Runs inside the subprocess: build the platform, replay the traffic, report."""
    t0 = time.perf_counter()
    sg = _quiet_import()
    sg_cfg = {k: v for k, v in config.items() if not k.startswith("flowmodel/")}
    message_s = float(config.get(MESSAGE_LATENCY, 0.0))
    hop_s = float(config.get(HOP_LATENCY, 0.0))
    queue_b = float(config.get(QUEUE_BYTES, 0.0))
    payload = header_factor(platform.mtu) if config.get(TCP_HEADERS, "0") == "1" else 1.0
    args = ["flowmodel", *(f"--cfg={k}:{v}" for k, v in sg_cfg.items()), "--log=root.thres:warning"]
    e = sg.Engine(args)
    zone = sg.NetZone.create_full_zone("net")
    hosts = {h: zone.create_host(h, 1e9).seal() for h in traffic.hosts()}
    links = [
        zone.create_split_duplex_link(name, rate * payload).set_latency(lat + hop_s + queue_b / rate).seal()
        for name, rate, lat in platform.links
    ]
    up, down = sg.LinkInRoute.Direction.UP, sg.LinkInRoute.Direction.DOWN
    # the per-message latency: one link per sender that never limits a rate (1 PB/s), only delays
    sender = {h: zone.create_link(f"msg-{h}", 1e15).set_latency(message_s).seal() for h in hosts} if message_s else {}
    datapath_bps = float(config.get(DATAPATH, 0.0))
    datapath = zone.create_link("datapath", datapath_bps).seal() if datapath_bps > 0 else None
    for (a, b), route in platform.routes.items():
        if a not in hosts or b not in hosts:  # a platform may route pairs this traffic never uses
            continue
        hops = [sg.LinkInRoute(links[i], up if fwd else down) for i, fwd in route]
        hops = [sg.LinkInRoute(sender[a])] + hops if message_s else hops
        if datapath is not None:  # once per cable: SimGrid adds up a link's repeats in a route (checked on 3.32)
            hops += [sg.LinkInRoute(datapath)] * len(route)
        zone.add_route(hosts[a].netpoint, hosts[b].netpoint, None, None, hops, False)
    zone.seal()
    t1 = time.perf_counter()
    out: dict = {"phase_s": [], "error": ""}
    finish = [math.nan] * len(traffic)

    def driver() -> None:
        try:
            for ph in range(len(traffic.phases)):
                start = e.clock
                _run_phase(sg, hosts, traffic, ph, finish)
                out["phase_s"].append(e.clock - start)
        except Exception as err:  # an escaping exception would abort the process
            out["error"] = f"{type(err).__name__}: {err}"

    sg.Actor.create("driver", next(iter(hosts.values())), driver)
    e.run()
    t2 = time.perf_counter()
    return SimResult(
        iteration_s=sum(out["phase_s"]),
        phase_s=out["phase_s"],
        messages=len(traffic),
        links=len(links),
        hosts=len(hosts),
        platform_s=t1 - t0,
        run_s=t2 - t1,
        wall_s=t2 - t0,
        max_rss_mb=peak_rss_mb(),
        config=config,
        error=out["error"],
        finish_s=finish,
    )


class _PauseClock:
    """One host's paused-sender windows (Traffic.pauses) as boundaries in time: whether it is
    paused, and when that next changes. Windows that touch or overlap keep it paused across them."""

    def __init__(self, windows: list[tuple[float, float]]) -> None:
        events: dict[float, int] = defaultdict(int)
        for a, b in windows:
            if b > a:
                events[a] += 1
                events[b] -= 1
        self.times = sorted(events)
        self.events = events
        self.count = 0
        self.i = 0

    @property
    def paused(self) -> bool:
        return self.count > 0

    def next_s(self) -> float:
        """The next boundary (math.inf when the last window has ended)."""
        return self.times[self.i] if self.i < len(self.times) else math.inf

    def advance(self, now: float) -> None:
        """Pass every boundary up to `now` (plus a rounding slack)."""
        while self.i < len(self.times) and self.times[self.i] <= now + 1e-12:
            self.count += self.events[self.times[self.i]]
            self.i += 1


def _run_phase(sg, hosts: dict, t: Traffic, phase: int, finish: list[float]) -> None:
    """Replay one phase's messages: all at once where nothing waits for anything, else one actor
    per host (_HostActor) keeping its gates, its one-at-a-time pairs and its pauses."""
    ids = [i for i in range(len(t)) if t.phase[i] == phase]
    simple = all(t.gate[i] is None for i in ids) and len({(t.src[i], t.dst[i]) for i in ids}) == len(ids)
    if simple and not t.pauses:  # all at once, nothing waits for anything: one wait for all
        comms = [sg.Comm.sendto_async(hosts[t.src[i]], hosts[t.dst[i]], int(t.nbytes[i])) for i in ids]
        sg.Comm.wait_all(comms)
        for i, c in zip(ids, comms, strict=True):
            finish[i] = c.finish_time
        return
    mailboxes = {h: sg.Mailbox.by_name(f"{t.name}-{phase}-{h}") for h in hosts}
    actors = {h: _HostActor(sg, h, mailboxes, t, finish) for h in hosts}
    for i in ids:
        actors[t.src[i]].sends.append(i)
        actors[t.dst[i]].expect(t.src[i])
    started = [sg.Actor.create(f"host-{h}", hosts[h], a.run) for h, a in actors.items() if a.sends or a.expected]
    for actor in started:
        actor.join()
    errors = [a.error for a in actors.values() if a.error]
    if errors:
        raise RuntimeError(f"{t.name}: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    stuck = sum(a.stuck() for a in actors.values())
    if stuck:
        raise RuntimeError(f"{t.name}: {stuck} messages never became ready (a receive nothing sends?)")


class _HostActor:
    """One host of a phase whose messages wait for each other, as a SimGrid actor on that host.

    Everything that decides when a message starts is its sender's: its gate (the first n receives
    of its chunk at the sender), its pair (one message at a time per (sender, receiver), as one
    connection carries them) and the sender's pauses (Traffic.pauses: its messages in flight are
    suspended, those that become ready wait for the pause's end). So each host waits only for its
    own sends and receives: a message is a put into its receiver's mailbox, and the receiver keeps
    a get posted for each sender that may have one in flight. A wait costs O(comms waited for) per
    event; one driver waiting for every comm in flight made a 128-host mesh (16k comms at once)
    take 515 s of SimGrid (38 s this way), and one that handed each opened send to the actor that
    saw its gate open (any actor may wait for a host-to-host comm) 125 s: those piled up."""

    def __init__(self, sg, host: str, mailboxes: dict, t: Traffic, finish: list[float]) -> None:
        self.sg, self.host, self.mailboxes, self.t, self.finish = sg, host, mailboxes, t, finish
        self.sends: list[int] = []
        self.expected = 0  # receives in this phase
        self.senders: set[str] = set()
        self.error = ""
        self.waiting: dict[int, deque[tuple[int, int]]] = defaultdict(deque)  # chunk -> (n, msg), step order
        self.arrived: dict[int, set[int]] = defaultdict(set)
        self.prefix: dict[int, int] = defaultdict(int)
        self.queued: dict[str, deque[int]] = defaultdict(deque)  # receiver -> messages behind one in flight
        self.busy: set[str] = set()
        self.held: deque[int] = deque()  # became ready while paused
        self.out: list = []  # its sends in flight (or suspended)
        self.out_ids: list[int] = []
        self.gets: list = []  # (comm, data) of its posted receives
        self.received = 0
        self.pauses = _PauseClock(t.pauses[host]) if t.pauses.get(host) else None

    def expect(self, sender: str) -> None:
        self.expected += 1
        self.senders.add(sender)

    def stuck(self) -> int:
        return sum(len(q) for q in self.waiting.values()) + sum(len(q) for q in self.queued.values())

    # --- sends ------------------------------------------------------------------------------
    def _start(self, i: int) -> None:
        self.out.append(self.mailboxes[self.t.dst[i]].put_async(i, int(self.t.nbytes[i])))
        self.out_ids.append(i)

    def _ready(self, i: int) -> None:
        dst = self.t.dst[i]
        if dst in self.busy:
            self.queued[dst].append(i)
            return
        self.busy.add(dst)
        if self.pauses and self.pauses.paused:
            self.held.append(i)
        else:
            self._start(i)

    def _post_gets(self) -> None:
        """A get posted for every sender that may have a message in flight to this host (a put
        moves no byte before a get matches it)."""
        want = min(len(self.senders), self.expected - self.received)
        while len(self.gets) < want:
            self.gets.append(self.mailboxes[self.host].get_async())

    # --- completions ------------------------------------------------------------------------
    def _sent(self, j: int) -> None:
        i = self.out_ids[j]
        self.finish[i] = self.out[j].finish_time
        last = len(self.out) - 1  # swap-remove
        self.out[j], self.out_ids[j] = self.out[last], self.out_ids[last]
        self.out.pop()
        self.out_ids.pop()
        dst = self.t.dst[i]
        self.busy.discard(dst)
        if self.queued[dst]:
            self._ready(self.queued[dst].popleft())

    def _got(self, j: int) -> None:
        _, data = self.gets[j]
        self.gets[j] = self.gets[-1]
        self.gets.pop()
        i = data.get()
        self.received += 1
        slot = self.t.recv_slot[i]
        if slot is not None:
            chunk = slot[1]
            self.arrived[chunk].add(slot[2])
            while self.prefix[chunk] in self.arrived[chunk]:
                self.prefix[chunk] += 1
            q = self.waiting.get(chunk)
            while q and q[0][0] <= self.prefix[chunk]:
                self._ready(q.popleft()[1])
        self._post_gets()

    def _done(self, k: int) -> None:
        if k < len(self.out):
            self._sent(k)
        else:
            self._got(k - len(self.out))

    def _comms(self) -> list:
        return self.out + [c for c, _ in self.gets]

    def _drain(self) -> None:
        """Every comm of this host that has finished by now (one test_any call each)."""
        while True:
            comms = self._comms()
            k = self.sg.Comm.test_any(comms) if comms else -1
            if k < 0:
                return
            self._done(k)

    # --- the actor --------------------------------------------------------------------------
    def run(self) -> None:
        sg = self.sg
        try:
            if self.pauses:
                self.pauses.advance(sg.Engine.clock)
            ungated = []
            for i in self.sends:
                g = self.t.gate[i]
                if g is None:
                    ungated.append(i)
                else:
                    self.waiting[g[1]].append((g[2], i))
            for q in self.waiting.values():  # a host's sends of a chunk open in step order
                ordered = sorted(q)
                q.clear()
                q.extend(ordered)
            self._post_gets()
            for i in ungated:
                self._ready(i)
            while self.out or self.gets or self.held:
                comms = self._comms()
                if self.pauses and self.pauses.next_s() < math.inf:
                    boundary = self.pauses.next_s()
                    if comms:
                        k = sg.Comm.wait_any_for(comms, max(0.0, boundary - sg.Engine.clock))
                    else:
                        sg.this_actor.sleep_until(boundary)
                        k = -1
                    if k < 0:  # a boundary: what finished on it first, then pause or restart
                        self._drain()
                        was = self.pauses.paused
                        self.pauses.advance(sg.Engine.clock)
                        if self.pauses.paused and not was:
                            for c in self.out:
                                c.suspend()
                        elif was and not self.pauses.paused:
                            for c in self.out:
                                c.resume()
                            while self.held:
                                self._start(self.held.popleft())
                        continue
                else:
                    k = sg.Comm.wait_any(comms)
                self._done(k)
                self._drain()
        except Exception as err:  # an escaping exception would abort the process
            self.error = f"{self.host}: {type(err).__name__}: {err}"


def simulate(platform: Platform, traffic: Traffic, config: dict[str, str] | None = None) -> SimResult:
    """One simulation in a fresh spawned process (SimGrid allows one Engine per process)."""
    cfg = config if config is not None else sim_config()[0]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"), max_tasks_per_child=1) as pool:
        res = pool.submit(_simulate, platform, traffic, cfg).result()
    LOG.debug("simulation: %.2f s in the subprocess, %.2f s with its start", res.wall_s, time.perf_counter() - t0)
    return _finish(res, platform, traffic, cfg)


#: seconds one simulation of a batch may take before its process is killed and it counts as
#: failed (the calibration's largest, 128 hosts, take ~20 s here)
SIM_TIMEOUT_S = 600.0


def simulate_many(
    jobs: Sequence[tuple[Platform, Traffic, dict[str, str]]], parallel: int = 2, timeout_s: float = SIM_TIMEOUT_S
) -> list[SimResult | None]:
    """Many simulations, `parallel` at a time, each in a process of its own forked from this one
    (a calibration's grid: thousands of simulations, where a spawned process's ~1 s of imports
    would cost more than the simulation). The caller must not have imported simgrid (a forked
    child would inherit its Engine); it never is outside the simulation's own process. A
    simulation that fails, whose process dies (SimGrid aborts the process on an error in an
    actor) or that runs past `timeout_s` gives None and a log line rather than ending the batch.

    Processes of our own rather than multiprocessing.Pool: a Pool waits forever for the task of
    a worker that died (a CI run hung 88 min in one), and has no per-task timeout;
    concurrent.futures refuses one task per forked process (max_tasks_per_child needs spawn)."""
    from multiprocessing.connection import wait

    ctx = get_context("fork")
    results: list[SimResult | None] = [None] * len(jobs)
    todo = deque(range(len(jobs)))
    running: dict[int, tuple] = {}  # job -> (process, its result's pipe, deadline)
    try:
        while todo or running:
            while todo and len(running) < max(1, parallel):
                i = todo.popleft()
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_simulate_into, args=(send, *jobs[i]), daemon=True)
                proc.start()
                send.close()
                running[i] = (proc, recv, time.monotonic() + timeout_s)
            soonest = min(deadline for _, _, deadline in running.values())
            ready = wait([recv for _, recv, _ in running.values()], max(0.0, soonest - time.monotonic()))
            for i, (proc, recv, deadline) in list(running.items()):
                if recv in ready:
                    try:
                        res = recv.recv()
                    except EOFError:  # it died before it sent its result
                        proc.join()
                        res = _failed(jobs[i], f"its process died (exit code {proc.exitcode})")
                elif time.monotonic() > deadline:
                    proc.kill()
                    res = _failed(jobs[i], f"no result in {timeout_s:g} s: killed")
                else:
                    continue
                recv.close()
                proc.join()
                del running[i]
                results[i] = _finish_or_none(res, *jobs[i])
    finally:
        for proc, recv, _ in running.values():
            proc.kill()
            proc.join()
            recv.close()
    return results


def _finish_or_none(res: SimResult, platform: Platform, traffic: Traffic, config: dict[str, str]) -> SimResult | None:
    if res.error:
        LOG.warning("%s: simulation failed: %s", traffic.name, res.error)
        return None
    return _finish(res, platform, traffic, config)


def _failed(job: tuple[Platform, Traffic, dict[str, str]], why: str) -> SimResult:
    _, traffic, config = job
    return SimResult(math.nan, [], len(traffic), 0, 0, 0.0, 0.0, 0.0, 0.0, config, why)


def _simulate_into(conn, platform: Platform, traffic: Traffic, config: dict[str, str]) -> None:
    """A batch's forked process: one simulation, its result sent back over `conn`."""
    conn.send(_simulate_quietly(platform, traffic, config))
    conn.close()


def _simulate_quietly(platform: Platform, traffic: Traffic, config: dict[str, str]) -> SimResult:
    """`_simulate`, with an error raised before the engine ran reported in the result."""
    try:
        return _simulate(platform, traffic, config)
    except Exception as err:  # reported in the result: the batch goes on
        return _failed((platform, traffic, config), f"{type(err).__name__}: {err}")


def _finish(res: SimResult, platform: Platform, traffic: Traffic, cfg: dict[str, str]) -> SimResult:
    """A simulation's result with the calibration's point-level terms (the fan-in and the load
    factors) applied, and the traffic's cable load."""
    if res.error:
        raise RuntimeError(f"simulation failed: {res.error}")
    load = cable_load_gbps(platform, traffic)
    res = replace(res, cable_load_gbps=load)
    k, (a, q, j) = float(cfg.get(FAN_IN_FACTOR, 0.0)), load_shape(cfg)
    if k or a:
        m = fan_in_multiplier(k, traffic.fan_in()) * load_multiplier(a, load, len(traffic.pairs()), q, j)
        res = replace(
            res,
            iteration_s=res.iteration_s * m,
            phase_s=[t * m for t in res.phase_s],
            finish_s=[t * m for t in res.finish_s],
        )
    return res


def fan_in_multiplier(k: float, fan_in: int) -> float:
    """1 + k ln F: the calibration's flow-count term for a traffic of fan-in F."""
    return 1.0 + k * math.log(max(1, fan_in))


def load_shape(cfg: dict[str, str]) -> tuple[float, float, float]:
    """(a, q, j) of the calibration's load term 1 + a L^q P^j, read from its settings (LOAD_FACTOR,
    LOAD_POWER, PAIRS_POWER; a 0, q 1 and j 0 where they are not set)."""
    a = float(cfg.get(LOAD_FACTOR, 0.0) or 0.0)
    return a, float(cfg.get(LOAD_POWER, 1.0)), float(cfg.get(PAIRS_POWER, 0.0))


def load_multiplier(a: float, load_gbps: float, pairs: int = 1, q: float = 1.0, j: float = 0.0) -> float:
    """1 + a L^q P^j: the calibration's term for the emulator's load, L in Gbit/s (cable_load_gbps),
    P the traffic's connections (`load_shape` reads a, q and j from a calibration)."""
    return 1.0 + a * max(load_gbps, 0.0) ** q * max(pairs, 1) ** j


def cable_load_gbps(platform: Platform, traffic: Traffic) -> float:
    """Gbit/s the traffic puts on the veth cables together while its busiest cable is busy: every
    message's bytes times the veth cables its route crosses (each direction apart; a patch cable
    costs the datapath no pass, `Platform.patch`), over the busiest directed cable's bytes / rate.
    What the emulator's datapath forwards per second at the schedule's bound; 0 for a traffic that
    crosses no cable."""
    per: dict[tuple[int, bool], float] = defaultdict(float)
    for src, dst, n in zip(traffic.src, traffic.dst, traffic.nbytes, strict=True):
        for hop in platform.routes.get((src, dst), []):
            per[hop] += n
    if not per:
        return 0.0
    busiest_s = max(n / platform.links[i][1] for (i, _), n in per.items())
    veth = sum(n for (i, _), n in per.items() if i not in platform.patch)
    return veth * 8 / busiest_s / 1e9 if busiest_s > 0 else 0.0

"""One scheme process inside an emulated host: compute, synchronise, apply, for N iterations.

    python -m engine.host CONFIG.json

Compute modes (all move the same bytes):
- `tf`: the job's Keras model (tfjob.dnn, same widths and seeded synthetic CIFAR data as
  the PS job) computes real gradients with a GradientTape; after synchronisation every worker
  applies SGD with the summed gradient / W, so all replicas stay identical.
- `numpy`: Parameter Flow's LR and MF (engine.npmodels) on seeded synthetic data, real sparse
  updates (what DVF filters), the summed update / W applied as in tf mode.
- `calibrated`: no TensorFlow (a TF process takes ~650 MB): the step sleeps the measured compute
  time and the gradient is seeded random numbers of the model's size, so a run with many hosts
  fits in memory.
Dedicated servers (scheme `ps`) hold no gradient and only synchronise. The config carries this
host's compiled steps (`schedule`: schemes.schedule.host_part, written by engine.processes), so
the process runs whatever scheme the registry compiled and never looks one up by name.

Writes `<run_dir>/<host>.jsonl`: one line per measured iteration (compute, barrier wait (with
the config's `barrier`), synchronisation and apply seconds, payload bytes sent/received, loss in
tf mode), then a `done` line. With `check`, each iteration's input gradient and result go to
`<run_dir>/check/` for `verify_sums`.

Writes a `ready` line first (connected to every peer), and per row the wall-clock start and end
of the iteration, so the runner can follow the run (t0, steps) while it goes.

With `dvf` (Parameter Flow's DVF, engine.dvf) the engine's codec filters and encodes what a host
originates; rows then carry raw and wire bytes and the iteration's DVF, and with `check` each host's
final residual goes to `check/residual-<host>.npy` (engine.dvf.verify_dvf). With `staleness` s > 0 a
worker runs SSP (`run_ssp`): its iterations overlap, at most s clocks ahead of the broadcasts applied.

Paused senders (RAT's failure model): the config's `pauses` list (start, end) windows in seconds
after t0, the start of the first measured iteration (drawn by the runner from its seed); inside
one, this host's sends wait for the window's end.

Schedules that change between iterations (PLink's Autotune; the config's `replan`): the runner
publishes a new plan as every host's part in `<run_dir>/plans/v<k>/` (engine.processes.publish_plan,
written whole, then renamed into place), the rendezvous PLink keeps in Redis. Before iteration i
each host takes the plan iteration i runs from `<run_dir>/plans/at/<i>`: the first host there
writes the newest version it sees (a hard link, which fails if another host made it first), the
others read it, so every host runs iteration i on the same plan whenever the runner publishes.
Such a host connects to every other host at the start (a new plan may have it send to a peer the
first did not), and each row carries, per peer it sends to, what TCP itself measured over the
synchronisation (TCP_INFO of each connection, summed over the `streams`: bytes acknowledged, the
rate while the connection had data in flight, the largest smoothed RTT): the per-connection
bandwidth and RTT the paper's Finetune reads from the OS. A plan changes which host masters what,
not the chunks, so each iteration's sum is still exact (the check mode verifies it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from engine.dvf import Codec, DvfSettings, delivery_mbps
from engine.executor import EngineError, HostEngine
from schemes.schedule import Schedule, from_host_part

LOG = logging.getLogger("scheme-host")


class Compute:
    """Gradients of one worker: real (TensorFlow) or calibrated (sleep + seeded random)."""

    def __init__(self, cfg: dict[str, Any], n_elems: int, index: int) -> None:
        self.cfg = cfg
        self.n_elems = n_elems
        self.index = index
        self.loss: float | None = None
        self.model = None
        self.numpy = None
        if cfg["mode"] == "numpy":  # Parameter Flow's LR and MF (engine.npmodels): real sparse updates
            from engine.npmodels import MODELS

            self.numpy = MODELS[cfg["model"]](n_elems, cfg["batch_size"], cfg["seed"], index, cfg["lr"])
        if cfg["mode"] == "tf":
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            import tensorflow as tf

            from tfjob.dnn import CLASSES, build_model, input_shape

            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            tf.keras.utils.set_random_seed(cfg["seed"])  # same initial weights on every worker
            self.tf = tf
            self.model = build_model(cfg["model"], cfg["width"])
            rng = np.random.default_rng(cfg["seed"] * 1000 + index)  # each worker its own data
            bs = cfg["batch_size"]
            self.x = rng.standard_normal((bs, *input_shape(cfg["model"]))).astype(np.float32)
            self.y = rng.integers(0, CLASSES, bs)
            self.loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            got = sum(int(np.prod(v.shape)) for v in self.model.trainable_variables)
            if got != n_elems:
                raise SystemExit(f"model has {got} parameters, the schedule {n_elems}")

    def gradient(self, iteration: int) -> np.ndarray:
        # with `step_decay` (Parameter Flow's models) what a worker hands out is its update at the
        # paper's SGD step eta / sqrt(t) (t = iteration + 1), over eta: DVF's delta / sqrt(t) then
        # holds back a steady share of it, as in the paper, and apply's lr makes the step eta / sqrt(t)
        decay = 1 / np.sqrt(iteration + 1) if self.cfg.get("step_decay") else 1.0
        if self.numpy is not None:
            g = self.numpy.gradient(iteration)
            self.loss = self.numpy.loss
            return (g * decay).astype(np.float32)
        if self.model is None:  # the step lasts compute_s, the stand-in's own making included
            t0 = time.monotonic()
            g = calibrated_gradient(self.cfg["seed"], iteration, self.index, self.n_elems)
            time.sleep(max(0.0, self.cfg["compute_s"] - (time.monotonic() - t0)))
            return (g * decay).astype(np.float32) if decay != 1.0 else g
        tf = self.tf
        with tf.GradientTape() as tape:
            logits = self.model(self.x, training=True)
            loss = self.loss_fn(self.y, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.loss = float(loss)
        return np.concatenate([g.numpy().ravel() for g in grads]).astype(np.float32)

    def apply(self, total: np.ndarray, workers: int) -> None:
        if self.numpy is not None:
            self.numpy.apply(total, workers)
            return
        if self.model is None:
            return
        step = total * (self.cfg["lr"] / workers)
        at = 0
        for v in self.model.trainable_variables:
            n = int(np.prod(v.shape))
            v.assign_sub(step[at : at + n].reshape(v.shape))
            at += n


def calibrated_gradient(seed: int, iteration: int, index: int, n_elems: int) -> np.ndarray:
    """The seeded stand-in gradient of worker `index` at `iteration` (reproducible anywhere), drawn
    as float32 (a float64 draw and a cast took 0.11 s per 25 MB, 0.08 s so; 8 hosts share 2 cores)."""
    return np.random.default_rng([seed, iteration, index]).standard_normal(n_elems, dtype=np.float32)


class Plans:
    """The plans a host's iterations run (see the module docstring): version 0 is its config's
    schedule, later ones the runner's, read from `<run_dir>/plans/`."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.dir = run_dir / "plans"
        self.name = name
        self.version = 0

    def latest(self) -> int:
        versions = [int(p.name[1:]) for p in self.dir.glob("v*") if p.name[1:].isdigit()]
        return max(versions, default=0)

    def decide(self, iteration: int) -> int:
        """The plan `iteration` runs on every host: the newest one the first host there saw."""
        at = self.dir / "at"
        at.mkdir(parents=True, exist_ok=True)
        target = at / str(iteration)
        mine = at / f".{iteration}.{self.name}"
        mine.write_text(str(self.latest()))
        try:
            os.link(mine, target)  # atomic: only the first host's link is made
        except FileExistsError:
            pass
        finally:
            mine.unlink(missing_ok=True)
        return int(target.read_text())

    def for_iteration(self, iteration: int) -> Schedule | None:
        """This host's schedule for `iteration` where it differs from the last one's, else None."""
        version = self.decide(iteration)
        if version == self.version:
            return None
        self.version = version
        return from_host_part(json.loads((self.dir / f"v{version}" / f"{self.name}.json").read_text()))


def use_schedule(engine: HostEngine, sched: Schedule) -> None:
    """Run the next synchronisations on `sched`: the same chunks, other steps (PLink's masters
    moved). Its peers must be connected already (a replanning host connects to every host)."""
    if sched.chunks != engine.schedule.chunks or sched.hosts != engine.schedule.hosts:
        raise EngineError(f"{engine.name}: a new plan must keep the chunks and hosts of the first")
    engine.schedule = sched
    engine.steps = defaultdict(list)
    for s in sched.steps.get(engine.name, []):
        engine.steps[s.chunk].append(s)


#: struct tcp_info (linux/tcp.h): tcpi_rtt (u32, us) at 68, tcpi_bytes_acked (u64) at 120,
#: tcpi_busy_time (u64, us: time with data in flight or queued) at 168
TCP_INFO_BYTES = 176
_RTT, _ACKED, _BUSY = struct.Struct("I"), struct.Struct("Q"), struct.Struct("Q")


def tcp_counters(engine: HostEngine) -> dict[str, list[tuple[int, int, int]]]:
    """Per peer this host sends to, per connection: (bytes acked, busy us, smoothed RTT us)."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for peer, writers in engine.writers.items():
        rows = []
        for w in writers:
            sock = w.get_extra_info("socket")
            if sock is None:
                continue
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES)
            if len(info) < TCP_INFO_BYTES:
                continue  # a kernel without busy time (< 4.19): nothing measured
            rows.append(
                (_ACKED.unpack_from(info, 120)[0], _BUSY.unpack_from(info, 168)[0], _RTT.unpack_from(info, 68)[0])
            )
        out[peer] = rows
    return out


def peer_rates(before: dict, after: dict) -> dict[str, list[float]]:
    """Per peer over one synchronisation: [bytes acked, bytes/s while busy (summed over the
    peer's connections), the largest RTT in seconds]."""
    out = {}
    for peer, rows in after.items():
        old = before.get(peer, [])
        acked = rate = 0.0
        rtt = 0.0
        for i, (a, b, r) in enumerate(rows):
            a0, b0, _ = old[i] if i < len(old) else (0, 0, 0)
            acked += a - a0
            if b > b0:
                rate += (a - a0) / ((b - b0) / 1e6)
            rtt = max(rtt, r / 1e6)
        out[peer] = [acked, rate, rtt]
    return out


async def run(cfg: dict[str, Any]) -> None:
    name = cfg["name"]
    sched = from_host_part(cfg["schedule"])  # this host's compiled steps (engine.processes)
    addresses = {h: (a[0], int(a[1])) for h, a in cfg["addresses"].items()}
    engine = HostEngine(name, sched, addresses, streams=int(cfg.get("streams", 1)), barrier=bool(cfg.get("barrier")))
    if cfg.get("trace"):  # per-step and per-frame times in every row (where a schedule waits: benchmarks, tests)
        engine.trace, engine.arrivals = [], []
    dvf = DvfSettings.from_config(cfg)
    if dvf.mode != "off":  # PF's DVF: run-time message sizes (engine.dvf)
        engine.codec = Codec(dvf, [c.length for c in sched.chunks])
    plans = Plans(Path(cfg["run_dir"]), name) if cfg.get("replan") else None
    if plans is not None:  # a later plan may send to any host: connect to all of them now
        engine.out_peers = engine.in_peers = sorted(set(sched.hosts) - {name})
    pauses = [(float(a), float(b)) for a, b in cfg.get("pauses", [])]
    is_worker = name in sched.workers
    compute = Compute(cfg, sched.n_elems, sched.workers.index(name)) if is_worker else None
    out_dir = Path(cfg["run_dir"])
    check_dir = out_dir / "check"
    if cfg.get("check"):
        check_dir.mkdir(parents=True, exist_ok=True)
    await engine.listen()
    await engine.connect()
    total = cfg["warmup"] + cfg["iterations"]
    staleness = int(cfg.get("staleness") or 0)
    with (out_dir / f"{name}.jsonl").open("w") as log:
        log.write(json.dumps({"ready": True, "host": name, "t": time.time()}) + "\n")
        log.flush()
        if staleness and compute:  # SSP: this worker's iterations overlap (servers stay in order)
            await run_ssp(cfg, engine, compute, dvf, staleness, total, log)
        for it in range(total if not (staleness and compute) else 0):
            started = time.time()
            if it == cfg["warmup"]:  # t0: the pause windows start counting here
                engine.pauses = sorted((started + a, started + b) for a, b in pauses)
            t0 = time.monotonic()
            buf = compute.gradient(it) if compute else np.zeros(sched.n_elems, dtype=np.float32)
            if cfg.get("check") and compute:
                np.save(check_dir / f"{it}-{name}-in.npy", buf)
            if plans is not None and (new := plans.for_iteration(it)) is not None:
                use_schedule(engine, new)
            tb = time.monotonic()
            await engine.barrier(it)  # with `barrier`: every host starts the synchronisation together
            t1 = time.monotonic()
            if engine.codec is not None:
                engine.codec.begin(it, link_rates(engine, dvf.sufficient_mbps))
            tcp0 = tcp_counters(engine) if plans is not None else None
            cpu0 = time.process_time()
            counters = await engine.synchronise(buf, it)
            t2 = time.monotonic()
            sync_cpu = time.process_time() - cpu0
            peers = peer_rates(tcp0, tcp_counters(engine)) if tcp0 is not None else None
            if compute:
                compute.apply(buf, len(sched.workers))
                if cfg.get("check"):
                    np.save(check_dir / f"{it}-{name}-out.npy", buf)
            t3 = time.monotonic()
            row = {
                "iteration": it,
                "warmup": it < cfg["warmup"],
                "host": name,
                "role": "worker" if compute else "server",
                "compute_s": tb - t0,
                "barrier_s": t1 - tb,
                "sync_s": t2 - t1,
                "sync_cpu_s": sync_cpu,  # this process's CPU (user + system) in the synchronisation
                "apply_s": t3 - t2,
                "sent_bytes": counters.sent,
                "received_bytes": counters.received,
                "first_send_t": counters.first_send_t,
                "last_recv_t": counters.last_recv_t,
                "loss": compute.loss if compute else None,
                "started": started,
                "ended": time.time(),
            }
            if engine.codec is not None:
                row["raw_sent_bytes"] = counters.raw_sent
                row["sent_by_peer"] = dict(counters.per_peer_sent)
                row["dvf"] = engine.codec.done(it)
            if engine.trace is not None:
                row["trace"] = list(engine.trace)
                row["sync_t0"] = engine._t0  # monotonic, shared by the hosts of this machine
                row["arrivals"] = engine.arrivals_of(it)
            if plans is not None:
                row["plan"] = plans.version
                row["peers"] = peers
            log.write(json.dumps(row) + "\n")
            log.flush()
        if engine.codec is not None and cfg.get("check"):
            np.save(check_dir / f"residual-{name}.npy", engine.codec.residual())
        # with `barrier`, one more after the last iteration: a host that ended early would otherwise
        # close its connections and exit (CPU on 2 cores) while the others still synchronise
        await engine.barrier(total)
        log.write(json.dumps({"done": True, "host": name, "t": time.time()}) + "\n")
    await engine.close()


async def run_ssp(
    cfg: dict[str, Any], engine: HostEngine, compute: Compute, dvf: DvfSettings, staleness: int, total: int, log: Any
) -> None:
    """A worker under SSP with staleness s (Parameter Flow's UCC-SSP): it pushes clock t's update
    and goes on computing while the broadcast of t is on its way, but starts computing clock t only
    once it has applied the broadcasts of every clock up to t - s - 1 (the paper's "a worker blocks
    when its clock minus its parameter version exceeds s"); broadcasts are applied in clock order.
    s = 0 is BSP. Compute runs in a thread so the synchronisations in flight keep moving. A server
    finalises and broadcasts U^t once every worker pushed t, as under BSP (it does not fold a fast
    worker's later updates into U^t, the paper's set B: they arrive in their own clock's sum).
    Each row: compute_s, barrier_s (the time blocked by staleness), sync_s (push to the last
    broadcast byte, overlapping later compute), apply_s, and the wall times `started` (compute
    starts), `sync_started`, `sync_done`."""
    name, workers = engine.name, len(engine.schedule.workers)
    check_dir = Path(cfg["run_dir"]) / "check"
    pending: dict[int, asyncio.Task] = {}
    rows: dict[int, dict[str, Any]] = {}

    async def sync(it: int, buf: np.ndarray) -> tuple[np.ndarray, Any, float, float]:
        t1 = time.time()
        counters = await engine.synchronise(buf, it)
        return buf, counters, t1, time.time()

    async def finish(it: int) -> None:
        buf, counters, t1, t2 = await pending.pop(it)
        a = time.monotonic()
        compute.apply(buf, workers)
        if cfg.get("check"):
            np.save(check_dir / f"{it}-{name}-out.npy", buf)
        row = rows.pop(it)
        row.update(
            sync_s=t2 - t1, apply_s=time.monotonic() - a, sent_bytes=counters.sent, received_bytes=counters.received,
            first_send_t=counters.first_send_t, last_recv_t=counters.last_recv_t, sync_started=t1, sync_done=t2,
            ended=time.time(), staleness=staleness,
        )  # fmt: skip
        if engine.codec is not None:
            row["raw_sent_bytes"] = counters.raw_sent
            row["sent_by_peer"] = dict(counters.per_peer_sent)
            row["dvf"] = engine.codec.done(it)
        log.write(json.dumps(row) + "\n")
        log.flush()

    for it in range(total):
        tw = time.monotonic()
        for t in sorted(pending):
            if t <= it - staleness - 1:
                await finish(t)
        waited = time.monotonic() - tw
        started = time.time()
        t0 = time.monotonic()
        buf = await asyncio.to_thread(compute.gradient, it)
        computed = time.monotonic() - t0
        if cfg.get("check"):
            np.save(check_dir / f"{it}-{name}-in.npy", buf)
        rows[it] = {
            "iteration": it, "warmup": it < cfg["warmup"], "host": name, "role": "worker", "compute_s": computed,
            "barrier_s": waited, "loss": compute.loss, "started": started,
        }  # fmt: skip
        if engine.codec is not None:
            engine.codec.begin(it, link_rates(engine, dvf.sufficient_mbps))
        pending[it] = asyncio.create_task(sync(it, buf))
        await asyncio.sleep(0)  # let the push leave before the next compute starts
    for t in sorted(pending):
        await finish(t)


def link_rates(engine: HostEngine, below_mbps: float) -> dict[str, float | None]:
    """Each peer this host sends to: its connections' latest measured delivery rate (the slowest
    of them, Mbit/s; engine.dvf.delivery_mbps), None where nothing says yet."""
    out: dict[str, float | None] = {}
    for peer, writers in engine.writers.items():
        rates = []
        for w in writers:
            sock = w.get_extra_info("socket")
            rates.append(delivery_mbps(sock, below_mbps) if sock is not None else None)
        known = [r for r in rates if r is not None]
        out[peer] = min(known) if known else None
    return out


def verify_sums(run_dir: Path, workers: list[str], tolerance: float = 1e-5) -> list[str]:
    """Problems found: every worker's result must be the float64 sum of all inputs (relative error)."""
    check = run_dir / "check"
    problems = []
    iterations = sorted({int(p.name.split("-")[0]) for p in check.glob("*-in.npy")})
    if not iterations:
        return [f"{check}: no checked iteration"]
    for it in iterations:
        want = sum(np.load(check / f"{it}-{w}-in.npy").astype(np.float64) for w in workers)
        scale = float(np.max(np.abs(want))) or 1.0
        if not np.all(np.isfinite(want)):
            problems.append(f"iteration {it}: the workers' inputs are not all finite (a diverged model)")
        for w in workers:
            got = np.load(check / f"{it}-{w}-out.npy")
            if not np.all(np.isfinite(got)):
                problems.append(f"iteration {it}, {w}: its result is not all finite")
                continue
            err = float(np.max(np.abs(got - want))) / scale
            if err > tolerance:
                problems.append(f"iteration {it}, {w}: relative error {err:.2e} > {tolerance:g}")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    cfg = json.loads(Path(argv[0]).read_text())
    try:
        asyncio.run(run(cfg))
    except Exception as err:
        LOG.error("%s: %s: %s", cfg.get("name"), type(err).__name__, err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.dvf import Codec, DvfSettings, delivery_mbps
from engine.executor import HostEngine
from schemes.schedule import from_host_part

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
        if self.model is None:
            time.sleep(self.cfg["compute_s"])
            g = calibrated_gradient(self.cfg["seed"], iteration, self.index, self.n_elems)
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
    """The seeded stand-in gradient of worker `index` at `iteration` (reproducible anywhere)."""
    return np.random.default_rng([seed, iteration, index]).standard_normal(n_elems).astype(np.float32)


async def run(cfg: dict[str, Any]) -> None:
    name = cfg["name"]
    sched = from_host_part(cfg["schedule"])  # this host's compiled steps (engine.processes)
    addresses = {h: (a[0], int(a[1])) for h, a in cfg["addresses"].items()}
    engine = HostEngine(name, sched, addresses, streams=int(cfg.get("streams", 1)), barrier=bool(cfg.get("barrier")))
    if cfg.get("trace"):  # per-step times in every row (where a schedule waits: benchmarks, tests)
        engine.trace = []
    dvf = DvfSettings.from_config(cfg)
    if dvf.mode != "off":  # PF's DVF: run-time message sizes (engine.dvf)
        engine.codec = Codec(dvf, [c.length for c in sched.chunks])
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
            tb = time.monotonic()
            await engine.barrier(it)  # with `barrier`: every host starts the synchronisation together
            t1 = time.monotonic()
            if engine.codec is not None:
                engine.codec.begin(it, link_rates(engine, dvf.sufficient_mbps))
            counters = await engine.synchronise(buf, it)
            t2 = time.monotonic()
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
            log.write(json.dumps(row) + "\n")
            log.flush()
        if engine.codec is not None and cfg.get("check"):
            np.save(check_dir / f"residual-{name}.npy", engine.codec.residual())
        log.write(json.dumps({"done": True, "host": name}) + "\n")
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

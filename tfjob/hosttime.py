"""Host time at full size: what one step of the FULL-size job costs this machine's CPUs, besides
the network, and the pad that makes a scaled job's step cost that much.

Why: the testbed divides link rates and model bytes by the same factor (scale x compress), which
keeps S/B, hence the communication time, the paper's. But every per-byte CPU cost shrinks with the
bytes (a worker serialising its gradient, a PS deserialising W of them, aggregating and applying
them) and so does the compute of the narrower model, so an emulated step's non-network time is far
below a full-size step's. In `host_time: full` mode (a JobSpec field) every worker sleeps, inside
its step and before it pushes, for

    pad = max(0, (worker_full + ps_full) - (worker_scaled + ps_scaled))

so a step reads as "this machine's CPUs, the paper's links". The pad is a sleep, not work: it
stands for CPUs of the job's own (the paper gave every process its own 6-core server) and does not
take the 2 cores the emulation shares.

Each process's own share, measured here with TensorFlow the way the job runs it (psjob, TF 2.21,
`threads` intra/inter-op threads, as the job's processes):

- **worker**: forward, loss and backward of one batch at the width (an eager `tf.function`, as
  tfjob.calibrate times P_w), then WIRE_COPIES memory copies of its gradient (S bytes).
- **PS**: the busiest PS's variables (tfjob.placement's plan: ~S/P bytes) in a tf.compat.v1
  graph, one `ConditionalAccumulator` per variable as `SyncReplicasOptimizer` creates them; W
  times a gradient copied WIRE_COPIES times and `apply_grad` into the accumulators, then
  `take_grad(W)` (the average) and the SGD apply: what the PS does per step.

The wire's per-byte CPU is counted as memory copies (`tf.raw_ops.DeepCopy`), not run through
gRPC and sockets (there are none here): per byte a push and a pull cost the sender's copy into the
kernel, the receiver's copy out of it and TF's copy of the received bytes into a tensor (large
tensors leave TF's gRPC encoder without a copy). So WIRE_COPIES = 3 for the worker (S out, S in)
and for the PS per worker (S/P in, S/P out). `tf.io.serialize_tensor` was tried and rejected: its
protobuf round trip ran at ~150 MB/s here, ~10x slower than a copy, which TF's transport avoids.

The worker pads for both shares. The PS's share sits on the critical path of a synchronous step
(no worker gets its token before the PS has aggregated all W gradients and applied them), and
the PS is a TF server with no Python step loop of its own, where a sleep could go. This is the
paper's own serial term (Eq. 1: T_compute + T_ps_update), and in full mode the model
(runs.predict) takes T_compute = worker_full and T_ps_update = ps_full, so BCT_min and
BCT_max speak of the same host time as the padded run.

"Full size" is the run's paper-equivalent model: the width whose bytes are the paper's S
(`JobSpec.paper_bytes`; a job with an explicit width: its bytes x scale x compress), which is the
job's own width when nothing is divided. Each share is the median of STEPS timed steps (after a
warm-up step that traces), measured when the machine is idle: the CPUs' busy share over a second
before it is recorded with the share, and a share measured with more than LOADED of them busy
(other processes add to every step) is used for the run but not cached, and the run says so.

Measurements run in a child process (`python -m tfjob.hosttime`), so TensorFlow's thread pools
are set fresh and the full-size model's memory (VGG-16: ~2.5 GB) is returned when it ends. They are
cached as JSON beside tfjob.calibrate's cache (same folder), keyed by model, width, batch
size, W, P, TF version, threads and the machine (host name, CPU model and cores: a home folder
moved to another machine measures again); `force=True` measures again.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import psutil

from tfjob import calibrate, dnn
from topologies.spec import machine_key
from workloads.experiment import JobSpec

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
MODES = ("scaled", "full", "pinned")
#: the modes that pad every step (full: to this machine's full-size host time; pinned: to a given one)
PADDED = ("full", "pinned")
Kind = Literal["worker", "ps"]

#: timed steps per share (after WARMUP_STEPS); fewer when they pass BUDGET_S
STEPS = 5
#: a share measured with more than this share of the CPUs busy just before is not cached
LOADED = 0.25
WARMUP_STEPS = 1
BUDGET_S = 30.0
#: a child process measuring one share is given up after this (VGG-16 full size: ~1 min)
CHILD_TIMEOUT_S = 900.0
LEARNING_RATE = 0.001
#: memory copies per byte of a push plus a pull (see the module docstring)
WIRE_COPIES = 3

METHOD = (
    "sleep in every worker's step before its push: (worker + PS share at full size) - (the same at the run's "
    "size), each the median of a few steps measured here with TF (worker: forward, backward, 3 copies of the "
    "gradient for the wire; PS: W gradients copied 3 times and accumulated, averaged and applied)"
)


PINNED_METHOD = (
    "pinned: the job's host_time seconds per step stand for the full-size host time (given, not measured here; "
    "all of it counted as the worker's share); every worker sleeps that minus the share measured here at the "
    "run's own size"
)


class HostTimeError(RuntimeError):
    """A share could not be measured; the message names the share and the child's last lines."""


# ---------------------------------------------------------------- the arithmetic


def pad_s(full_s: float, scaled_s: float) -> float:
    """Seconds a scaled step sleeps to cost what a full-size step costs: never negative."""
    return max(0.0, full_s - scaled_s)


def full_width(model: str, width: float | None, model_bytes: float | None, paper_bytes: float, factor: float) -> float:
    """Width of the run's paper-equivalent model (see the module docstring).

    `width`/`model_bytes` are the job's explicit fields (None when absent), `paper_bytes` its S,
    `factor` = scale x compress. Mirrors runs.predict.choose_width at factor 1: with no
    model_bytes the real CIFAR architecture (width 1) is the run's model, unscaled.
    """
    if width is not None:
        return width if factor == 1 else dnn.width_for_bytes(model, dnn.param_bytes(model, width) * factor)
    if factor == 1 and model_bytes is None:
        return 1.0
    return dnn.width_for_bytes(model, paper_bytes)


@dataclass(frozen=True)
class Share:
    """One process's host time per step at one size (seconds), as measured and cached."""

    kind: str
    model: str
    width: float
    batch_size: int
    workers: int
    ps: int
    threads: int
    tf_version: str
    seconds: float
    steps_s: tuple[float, ...]
    bytes: int
    measured_unix_s: float
    #: the CPUs' busy share over the second before the measurement (above LOADED: not cached)
    busy_before: float = 0.0


@dataclass(frozen=True)
class HostTime:
    """A job's host time per step at full size and at its own size, and the pad between them."""

    mode: str
    full_width: float
    scaled_width: float
    full_worker_s: float
    full_ps_s: float
    scaled_worker_s: float
    scaled_ps_s: float

    @property
    def full_s(self) -> float:
        return self.full_worker_s + self.full_ps_s

    @property
    def scaled_s(self) -> float:
        return self.scaled_worker_s + self.scaled_ps_s

    @property
    def pad_s(self) -> float:
        """The sleep per step in full and pinned mode, 0 in scaled mode."""
        return pad_s(self.full_s, self.scaled_s) if self.mode in PADDED else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary's `host_time` record."""
        return {
            "mode": self.mode,
            "pad_s": self.pad_s,
            "full": {"width": self.full_width, "worker_s": self.full_worker_s, "ps_s": self.full_ps_s},
            "scaled": {"width": self.scaled_width, "worker_s": self.scaled_worker_s, "ps_s": self.scaled_ps_s},
            "full_s": self.full_s,
            "scaled_s": self.scaled_s,
            "method": PINNED_METHOD if self.mode == "pinned" else METHOD,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostTime:
        """Back from a summary's `host_time` record (as_dict)."""
        f, s = d["full"], d["scaled"]
        return cls(d["mode"], f["width"], s["width"], f["worker_s"], f["ps_s"], s["worker_s"], s["ps_s"])


def scaled_only() -> dict[str, Any]:
    """The summary's `host_time` record of a run in scaled mode (nothing measured, nothing padded)."""
    return {"mode": "scaled", "pad_s": 0.0}


# ---------------------------------------------------------------- cache


def cache_file() -> Path:
    """hosttime.json in tfjob.calibrate's cache folder (~/.cache/psnet-testbed/)."""
    return calibrate.cache_file().parent / "hosttime.json"


def cache_key(
    kind: str, model: str, width: float, batch_size: int, workers: int, ps: int, version: str, threads: int
) -> str:
    """A worker's share depends on the model, width and batch; a PS's on the model, width, W and P."""
    size = f"bs={batch_size}" if kind == "worker" else f"W={workers}|P={ps}"
    return f"{kind}|{model}|w={width:.6g}|{size}|tf={version}|threads={threads}|machine={machine_key()}"


def share(
    kind: Kind,
    model: str,
    width: float,
    batch_size: int,
    workers: int,
    ps: int,
    threads: int = 1,
    force: bool = False,
    cache_path: Path | None = None,
) -> Share:
    """One process's host time per step (cached unless `force`; measured in a child process)."""
    path = cache_path or cache_file()
    version = calibrate.tf_version()
    key = cache_key(kind, model, width, batch_size, workers, ps, version, threads)
    cache = calibrate.read_cache(path, "host-time")
    if not force and key in cache:
        log.debug("host-time cache hit %s", key)
        d = cache[key]
        return Share(**{**d, "steps_s": tuple(d["steps_s"])})
    log.info("measuring host time %s (once; cached in %s)", key, path)
    busy = 1.0 - psutil.cpu_times_percent(interval=1.0).idle / 100
    out = _measure_in_child(kind, model, width, batch_size, workers, ps, threads)
    steps = tuple(out["steps_s"])
    size = (kind, model, width, batch_size, workers, ps, threads, version)
    got = Share(*size, statistics.median(steps), steps, out["bytes"], time.time(), round(busy, 3))
    if busy > LOADED:
        log.warning(
            "host time %s measured with %.0f%% of the CPUs busy (other processes): it may read high; not cached, "
            "measured again next run (run it on an idle machine, or pin job.host_time to a number of seconds)",
            key,
            100 * busy,
        )
        return got
    cache = calibrate.read_cache(path, "host-time")  # again: another run may have added entries meanwhile
    cache[key] = asdict(got)
    calibrate.write_cache(path, cache)
    return got


def for_job(
    mode: str,
    model: str,
    width: float,
    full: float,
    batch_size: int,
    workers: int,
    ps: int,
    threads: int = 1,
    cache_path: Path | None = None,
) -> HostTime:
    """The job's host time at `full` width and at its own `width` (four shares, each cached)."""
    if mode not in MODES:
        raise ValueError(f"host_time must be one of {', '.join(MODES)}, got {mode!r}")

    def both(w: float) -> tuple[float, float]:
        return tuple(
            share(kind, model, w, batch_size, workers, ps, threads, cache_path=cache_path).seconds
            for kind in ("worker", "ps")
        )  # type: ignore[return-value]

    fw, fp = both(full)
    sw, sp = both(width) if width != full else (fw, fp)
    return HostTime(mode, full, width, fw, fp, sw, sp)


def for_spec(
    job: JobSpec, width: float, workers: int, ps: int, factor: float, cache_path: Path | None = None
) -> HostTime | None:
    """A job's host time when it runs in full or pinned mode (None in scaled mode: nothing to
    measure). `width` is the run's, `factor` = scale x compress (what divided the model's bytes).

    Pinned (`host_time` a number of seconds): that number is the full-size host time, so a run on
    any machine pads to the same step; only the run's own size is measured, for the pad. The
    paper's equations add T_compute and T_ps_update in both bounds, so the pinned seconds go to
    the worker's share whole (the split would not change a bound)."""
    if job.host_time == "scaled":
        return None
    full = full_width(job.model, job.width, job.model_bytes, job.paper_bytes, factor)
    if job.host_time_mode == "pinned":
        own = [
            share(k, job.model, width, job.batch_size, workers, ps, job.threads, cache_path=cache_path).seconds
            for k in ("worker", "ps")
        ]
        return HostTime("pinned", full, width, float(job.host_time), 0.0, *own)
    return for_job("full", job.model, width, full, job.batch_size, workers, ps, job.threads, cache_path)


def _measure_in_child(
    kind: str, model: str, width: float, batch_size: int, workers: int, ps: int, threads: int
) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tfjob.hosttime", kind, "--model", model, "--width", f"{width!r}"]
    argv += ["--batch-size", str(batch_size), "--workers", str(workers), "--ps", str(ps), "--threads", str(threads)]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=str(REPO), timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        what = f"measuring the {kind} host time of {model} at width {width:.4g}"
        raise HostTimeError(f"{what} took over {CHILD_TIMEOUT_S:g} s") from None
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = " | ".join((p.stderr.strip().splitlines() or ["(no output)"])[-3:])
        raise HostTimeError(
            f"measuring the {kind} host time of {model} at width {width:.4g} failed (exit {p.returncode}): {tail}"
        )
    return json.loads(lines[-1])


# ---------------------------------------------------------------- the measurements (child process)


def _timed(step: Any) -> list[float]:
    """Seconds of each of up to STEPS calls of `step`, after WARMUP_STEPS (at least one timed)."""
    for _ in range(WARMUP_STEPS):
        step()
    out: list[float] = []
    t_stop = time.perf_counter() + BUDGET_S
    while len(out) < STEPS and (not out or time.perf_counter() < t_stop):
        t0 = time.perf_counter()
        step()
        out.append(time.perf_counter() - t0)
    return out


def _copied(t: Any) -> Any:
    """`t` after WIRE_COPIES memory copies (what a push and a pull cost per byte, besides the network)."""
    import tensorflow as tf

    for _ in range(WIRE_COPIES):
        t = tf.raw_ops.DeepCopy(x=t)
    return t


def measure_worker(model: str, width: float, batch_size: int, threads: int) -> tuple[list[float], int]:
    """A worker's step at `width` without the network: (seconds per step, gradient bytes)."""
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    net = dnn.build_model(model, width)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.random((batch_size, *dnn.input_shape(model)), dtype=np.float32))
    y = tf.constant(rng.integers(0, dnn.CLASSES, size=batch_size, dtype=np.int64))

    @tf.function
    def step() -> Any:
        with tf.GradientTape() as tape:
            logits = net(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, net.trainable_variables)
        wire = [_copied(g) for g in grads]  # the push's and the pull's bytes through the wire
        return loss + tf.add_n([tf.reshape(w, [-1])[0] for w in wire]) * 0.0

    nbytes = int(sum(v.numpy().nbytes for v in net.trainable_variables))
    return _timed(lambda: step().numpy()), nbytes


def measure_ps(model: str, width: float, workers: int, num_ps: int, threads: int) -> tuple[list[float], int]:
    """The busiest PS's step at `width`: W gradients in, aggregated, applied, W copies out."""
    import tensorflow as tf

    from tfjob.placement import plan_placement

    plan = plan_placement(model, width, num_ps)
    held = plan.bytes_per_ps()
    busiest = held.index(max(held))
    shapes = [v.shape for v, t in zip(plan.variables, plan.tasks, strict=True) if t == busiest and v.trainable]
    graph = tf.Graph()
    with graph.as_default():
        # each take_grad advances an accumulator's time step; gradients older than it are dropped
        local_step = tf.compat.v1.placeholder(tf.int64, [])
        variables, pushes, grads = [], [], []
        for i, shape in enumerate(shapes):
            var = tf.compat.v1.get_variable(f"v{i}", shape, initializer=tf.compat.v1.zeros_initializer())
            src = tf.compat.v1.get_variable(f"g{i}", shape, initializer=tf.compat.v1.constant_initializer(1e-3))
            acc = tf.compat.v1.ConditionalAccumulator(tf.float32, shape=shape, shared_name=f"acc{i}")
            received = _copied(src.read_value())  # a push in, a pull out
            pushes.append(acc.apply_grad(received, local_step=local_step))
            grads.append(acc.take_grad(workers))
            variables.append(var)
        push = tf.group(*pushes)
        apply = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE).apply_gradients(
            list(zip(grads, variables, strict=True))
        )
        init = tf.compat.v1.global_variables_initializer()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    config.graph_options.rewrite_options.disable_meta_optimizer = True  # as the job runs (psjob --grappler off)
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        steps = iter(range(1 << 62))

        def step() -> None:
            k = next(steps)
            for _ in range(workers):
                sess.run(push, {local_step: k})
            sess.run(apply)

        return _timed(step), held[busiest]


def main(argv: list[str] | None = None) -> None:
    """Measure one share and print it as one JSON line (what `share` runs in a child process)."""
    p = argparse.ArgumentParser(prog="python -m tfjob.hosttime", description="measure one host-time share")
    p.add_argument("kind", choices=("worker", "ps"))
    p.add_argument("--model", required=True, choices=sorted(dnn.MODELS))
    p.add_argument("--width", type=float, required=True)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--ps", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if a.kind == "worker":
        steps, nbytes = measure_worker(a.model, a.width, a.batch_size, a.threads)
    else:
        steps, nbytes = measure_ps(a.model, a.width, a.workers, a.ps, a.threads)
    print(json.dumps({"kind": a.kind, "steps_s": steps, "bytes": nbytes}), flush=True)


if __name__ == "__main__":
    main()

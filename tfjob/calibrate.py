"""Calibration of the BCT model's processing rates on this machine: P_w and P_s (Table 1).

- P_w (samples/s): one worker's forward + backward pass and gradient computation, timed as a
  `tf.function` train step on synthetic CIFAR-shaped data (32x32x3, 10 classes).
- P_s (bytes/s): a parameter server applying one gradient of the model's size with SGD, timed as
  a `tf.function` around `optimizer.apply` on float32 variables of that many bytes.

TensorFlow runs with `THREADS` intra-op and inter-op threads. On this 2-core machine the W
emulated workers share the cores, so a measure that used every core would credit one worker with
the whole machine; one thread is a fair, repeatable per-worker figure that does not depend on
what else runs. The thread count is part of the cache key. TensorFlow fixes its thread pools when
it first initialises, so a process that already used TF keeps its own setting; that setting is
then what is measured and recorded.

Results are cached as JSON (`cache_file()`), keyed by model name, batch size, TF version and
threads; `force=True` measures again. TensorFlow is imported only on a cache miss, so reading a
calibration costs nothing.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from topologies.files import write_json_atomic
from topologies.spec import cache_dir

log = logging.getLogger(__name__)

#: TF intra-op and inter-op threads while measuring (see the module docstring)
THREADS = 1
#: CIFAR-10 shapes (Table 2: the paper trains on CIFAR-10)
IMAGE_SHAPE = (32, 32, 3)
CLASSES = 10
#: timing budget per measure: stop after this many seconds or steps, whichever comes first
MEASURE_BUDGET_S = 2.0
MAX_STEPS = 50
WARMUP_STEPS = 2
BYTES_PER_FLOAT32 = 4

ModelBuilder = Callable[[], Any]  # returns a keras.Model (typed loosely: keras is imported lazily)


@dataclass(frozen=True)
class Calibration:
    """Measured P_w (samples/s per worker) and P_s (bytes/s per PS) for one model and batch."""

    model_name: str
    batch_size: int
    tf_version: str
    threads: int
    p_w_samples_per_s: float
    p_s_bytes_per_s: float
    model_bytes: int
    measured_unix_s: float


def cache_file() -> Path:
    """calibration.json in topologies.spec.cache_dir()."""
    return cache_dir() / "calibration.json"


def tf_version() -> str:
    """Installed TensorFlow version, read from package metadata so TF is not imported."""
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow_cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    import tensorflow as tf

    return tf.__version__


def cache_key(model_name: str, batch_size: int, version: str, threads: int = THREADS) -> str:
    return f"{model_name}|bs={batch_size}|tf={version}|threads={threads}"


def default_model() -> Any:
    """A tiny CNN (three convolutions, ~25k parameters) for tests and quick checks."""
    import keras

    return keras.Sequential(
        [
            keras.Input(IMAGE_SHAPE),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
            keras.layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES),
        ]
    )


def _limit_threads(threads: int) -> int:
    """Set TF's thread pools before first use; return the intra-op count actually in force."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # TF already initialised in this process: its pools are fixed
        log.warning("TensorFlow already initialised; measuring with its existing thread pools")
    return tf.config.threading.get_intra_op_parallelism_threads() or (os.cpu_count() or 1)


def _rate_per_s(step: Callable[[], Any], units_per_step: float) -> float:
    """Units per second of `step`, after warm-up (tracing), over a bounded number of steps."""
    for _ in range(WARMUP_STEPS):
        step()
    steps, start = 0, time.perf_counter()
    while steps < MAX_STEPS and time.perf_counter() - start < MEASURE_BUDGET_S:
        step()
        steps += 1
    return units_per_step * steps / (time.perf_counter() - start)


def measure_p_w(model: Any, batch_size: int, seed: int = 1) -> float:
    """P_w in samples/s: forward, loss and gradients of one batch (the worker's share of BS)."""
    import keras
    import tensorflow as tf

    rng = tf.random.Generator.from_seed(seed)
    x = rng.uniform((batch_size, *IMAGE_SHAPE))
    y = rng.uniform((batch_size,), maxval=CLASSES, dtype=tf.int32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, grads

    def run() -> None:
        loss, _ = step()
        loss.numpy()  # wait for the result, not just the dispatch

    return _rate_per_s(run, batch_size)


def measure_p_s(update_bytes: int) -> float:
    """P_s in bytes/s: one SGD apply of a float32 gradient of `update_bytes` onto the model."""
    import keras
    import tensorflow as tf

    n = max(1, update_bytes // BYTES_PER_FLOAT32)
    chunk = 1 << 20  # a few variables, as a real model has, rather than one huge tensor
    sizes = [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])
    variables = [tf.Variable(tf.zeros(s)) for s in sizes]
    grads = [tf.fill((s,), 1e-3) for s in sizes]
    opt = keras.optimizers.SGD(learning_rate=0.01)

    @tf.function
    def step() -> None:
        opt.apply(grads, variables)

    def run() -> None:
        step()
        variables[-1][:1].numpy()

    return _rate_per_s(run, n * BYTES_PER_FLOAT32)


def read_cache(path: Path, what: str = "calibration") -> dict[str, Any]:
    """A JSON cache file's entries ({} when absent; a warning and {} when unreadable)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as err:
        log.warning("ignoring unreadable %s cache %s: %s", what, path, err)
        return {}


def write_cache(path: Path, cache: dict[str, Any]) -> None:
    """Replace the cache file atomically: a concurrent reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, cache, indent=2, sort_keys=True)


@contextlib.contextmanager
def native_stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 points at `path` (appended) inside the block. TensorFlow 2.21's C++
    start-up lines (absl's "log messages before absl::InitializeLog()", oneDNN's notice) go to fd 2
    whatever TF_CPP_MIN_LOG_LEVEL says, so a calibration in the testbed's own process would print
    them into a replay's terminal; Python's logging cannot filter a C++ write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with path.open("ab") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def calibrate(
    build_model: ModelBuilder = default_model,
    model_name: str = "tiny-cnn",
    batch_size: int = 1,
    force: bool = False,
    cache_path: Path | None = None,
) -> Calibration:
    """P_w and P_s for `model_name` at `batch_size` (samples per worker), cached unless `force`.

    `build_model` returns a Keras model taking 32x32x3 images and giving 10 logits; it is called
    only when a measure is needed. P_s is measured on the model's own parameter bytes.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    path = cache_path or cache_file()
    version = tf_version()
    key = cache_key(model_name, batch_size, version)
    cache = read_cache(path)
    if not force and key in cache:
        log.debug("calibration cache hit %s", key)
        return Calibration(**cache[key])
    with native_stderr_to(path.with_name("tensorflow.log")):
        threads = _limit_threads(THREADS)
        if threads != THREADS:
            key = cache_key(model_name, batch_size, version, threads)
        model = build_model()
        model_bytes = int(sum(v.numpy().nbytes for v in model.trainable_variables))
        p_w = measure_p_w(model, batch_size)
        p_s = measure_p_s(model_bytes)
    cal = Calibration(model_name, batch_size, version, threads, p_w, p_s, model_bytes, time.time())
    log.info("calibrated %s: P_w %.1f samples/s, P_s %.3g bytes/s", key, p_w, p_s)
    cache[key] = asdict(cal)
    write_cache(path, cache)
    return cal

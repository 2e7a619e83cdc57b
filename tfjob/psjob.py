"""One task of a synchronous parameter-server training job (between-graph replication, TF 2.21).

Run once per PS task and once per worker task, each in its own process (inside a Mininet host,
each on its own emulated host):

    python -m tfjob.psjob --cluster '{"ps": ["10.1.0.1:2222"], "worker": ["10.1.1.1:2222"]}' \\
        --job worker --task 0 --model vgg16 --width 0.32 --batch-size 1 --iterations 10

- A PS starts a `tf.compat.v1.train.Server`, prints a ready line and serves until killed (or until
  its deadline).
- Every task's server listens on the task's own address from --cluster only (TF binds 0.0.0.0;
  tfjob.bindshim turns that into the task's address), never on every address of its machine:
  the server runs any graph it is sent.
- A worker builds the whole model in its own graph under `replica_device_setter` (variables on the
  PSs, computation on itself), trains it with SGD wrapped in `SyncReplicasOptimizer` (every global
  step aggregates exactly one gradient from each of the W workers) on synthetic CIFAR-shaped data
  made locally from `seed + task`, and prints one line per step, then a summary.

Output is JSON lines on stdout, flushed one by one (TF's own logging goes to stderr):

    {"event": "ready", "job": "ps"|"worker", "task": i, "t": unix_s, "startup_s": s[, "global_step": g0,
     "graph": "built"|"shared"]}
    {"event": "iter", "task": i, "step": g, "local_step": k, "global_step": g, "t_start": unix_s,
     "t_end": unix_s, "bct_s": s}
    {"event": "checkpoint", "task": 0, "global_step": g, "path": prefix, "save_s": s}
    {"event": "done", "task": i, "global_step": g, "steps": n, "model": name, "width": w,
     "model_bytes": bytes, "bytes_per_ps": {"/job:ps/task:0": bytes, ...},
     "start_step": g0, "variables_per_ps": {"/job:ps/task:0": count, ...},
     "global_step_device": "/job:ps/task:0",
     "placement": "round-robin"|"balanced", "batch_size": b, "seed": s, "pad_s": s, "t": unix_s}
    {"event": "error", "job": ..., "task": i, "reason": "deadline", "deadline_s": s, "t": unix_s}
    {"event": "error", "job": ..., "task": i, "reason": "Type: message", "trace": [last lines],
     "t": unix_s}

`global_step` in an iter line is the sync token this worker received: the global step after the
update its gradient went into. With the token queue started empty (build_train_graph) the workers
advance in lock step, so every worker reports global steps g0+1, g0+2, ... and the final global
step equals --iterations; g0 is 0, or the step of the checkpoint a restarted job restored
(--checkpoint-dir; the chief saves one every --checkpoint-every steps). `step` is the global
step, `local_step` counts this process's steps. `startup_s` counts from this module's import,
before TensorFlow's (from the fork, for a task forked by tfjob.forkserver). `graph` says
whether the worker built its graph in that time or took the one the fork server had built for
every worker of the job before it forked them (GraphTemplate: that build is not in startup_s).

Exit codes: 0 done, 1 an exception, 2 bad arguments (argparse), 3 deadline expired.

Pitfalls of TF 2.21's tf.compat.v1 PS training handled here (each checked on TF 2.21.0):
- gRPC honours *_proxy environment variables: they are removed before TensorFlow is imported.
- Non-chief workers poll for the chief's initialisation every `recovery_wait_secs` (30 s default):
  their session manager polls every RECOVERY_WAIT_S instead.
- At close the chief joins its sync queue-runner thread, blocked in take_grad for a next step that
  never comes, for `stop_grace_period_secs` (120 s default): STOP_GRACE_S instead, and a finished
  job does not close its session at all (see run_worker).
- `SyncReplicasOptimizer`'s chief hook puts `replicas_to_aggregate` tokens in the queue at start by
  default, which lets a fast worker run ahead and push two gradients into one global step; the
  slower worker's gradient then arrives stale and is dropped. Seen with 2 workers x 5 steps: one
  worker finished its 5 steps at global step 2 and the other hung until its deadline. The hook
  gets 0 tokens instead.
- `tf.contrib.training.GreedyLoadBalancingStrategy` and `byte_size_load_fn` are gone in TF 2, and
  that byte_size_load_fn read the op's output shape, which for a resource variable (VarHandleOp,
  what Keras creates) is a scalar handle: both are re-implemented here, reading the op's
  shape/dtype attributes. Greedy in creation order still left ~73% of VGG-16's bytes on one of
  two PSs, so `--placement balanced` (the default) follows tfjob.placement's plan instead
  (largest first, a layer too big for S/P cut into pieces) and keeps the greedy rule only for
  the few scalars outside the model.
- Keras 3 layers do not create their variables through `tf.compat.v1.get_variable`, so
  variable partitioners (fixed_size_partitioner) do not apply: a layer is cut by building it as
  narrower layers side by side (tfjob.dnn).
- `tf.device` rejects a device function: `tf.compat.v1.device` takes it.
- Grappler (TF's graph optimiser) runs on every new set of fetches: for ResNet110 it took ~3.5 s
  of the chief's session set-up and ~5 s of the first step, with no measurable change in later
  steps (0.19-0.21 s either way at batch 5, 1 thread). It is off unless `--grappler on`.
- `--pad-s` (a job in `host_time: full`, tfjob.hosttime) sleeps in a `py_func` that runs after
  every gradient is computed and before any is pushed (the gradients pass through identities
  that wait for it): a sleep before the forward pass would overlap the pull of the variables.
- A TF server cannot be stopped, and tearing down an interpreter that loaded TF takes ~1.5 s more:
  the process ends with os._exit once its output is flushed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulation.env import scrub_proxy_env
from tfjob import bindshim, dnn
from tfjob.placement import plan_placement
from tfjob.psjob_config import JobConfig, parse_args
from tfjob.tf_placement import PlannedStrategy

log = logging.getLogger(__name__)

IMPORTED_UNIX_S = time.time()

#: seconds between a non-chief worker's checks that the chief initialised the model (TF: 30)
RECOVERY_WAIT_S = 0.25
#: seconds the chief waits for its queue-runner thread at close (TF: 120); it never ends by itself
STOP_GRACE_S = 0.5
#: traceback lines kept in an error line
TRACE_LINES = 12
EXIT_OK, EXIT_EXCEPTION, EXIT_DEADLINE = 0, 1, 3


# ---------------------------------------------------------------- output and process guards


class Emitter:
    """Writes one flushed JSON line per event; thread-safe (the deadline timer writes too)."""

    def __init__(self, stream: Any, job: str, task: int) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.job = job
        self.task = task

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, **fields}
        with self._lock:
            self._stream.write(json.dumps(record) + "\n")
            self._stream.flush()

    def error(self, reason: str, **fields: Any) -> None:
        self.emit("error", job=self.job, task=self.task, reason=reason, **fields, t=time.time())


def start_deadline(emitter: Emitter, deadline_s: float, exit_fn: Callable[[int], None] = os._exit) -> threading.Timer:
    """A daemon timer that prints the deadline error line and ends the process after `deadline_s`.

    os._exit, because the main thread may be blocked inside TensorFlow (e.g. a session waiting for
    a PS nobody runs), where no Python exception can reach it.
    """

    def expire() -> None:
        emitter.error("deadline", deadline_s=deadline_s)
        exit_fn(EXIT_DEADLINE)

    timer = threading.Timer(deadline_s, expire)
    timer.daemon = True
    timer.start()
    return timer


# ---------------------------------------------------------------- TensorFlow parts


def _ps_name(device: str) -> str:
    """Canonical "/job:ps/task:I" of a device string such as "/job:ps/task:1/device:CPU:0"."""
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(device)
    return f"/job:{spec.job}/task:{spec.task}"


def _session_config(cfg: JobConfig) -> Any:
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=cfg.threads,
        inter_op_parallelism_threads=cfg.threads,
    )
    if not cfg.grappler:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
    if cfg.job == "worker":
        # the master would otherwise wait for every worker of the cluster to answer, not just the PSs
        config.device_filters[:] = ["/job:ps", f"/job:worker/task:{cfg.task}"]
    return config


def own_host(cfg: JobConfig) -> str:
    """This task's address in the cluster spec, without its port (an IPv6 one without brackets)."""
    address = cfg.cluster.as_dict()[cfg.job][cfg.task]
    return address.rpartition(":")[0].strip("[]")


def _start_server(cfg: JobConfig) -> Any:
    import tensorflow as tf

    bindshim.bind_to(own_host(cfg))  # TF's wildcard listen becomes this address (tfjob.bindshim)
    return tf.compat.v1.train.Server(
        tf.train.ClusterSpec(cfg.cluster.as_dict()),
        job_name=cfg.job,
        task_index=cfg.task,
        config=_session_config(cfg),
        start=True,
    )


def synthetic_batch(batch_size: int, seed: int, model: str = "tiny") -> tuple[Any, Any]:
    """Images of `model`'s input shape (CIFAR-10's, MNIST's) in [0, 1) and labels in [0, 10),
    from numpy's seeded generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.random((batch_size, *dnn.input_shape(model)), dtype=np.float32)
    y = rng.integers(0, dnn.CLASSES, size=batch_size, dtype=np.int64)
    return x, y


@dataclass
class TrainGraph:
    """The worker's graph pieces and where the trainable variables went."""

    train_op: Any
    global_step: Any
    sync_hook: Any
    bytes_per_ps: dict[str, int]
    variables_per_ps: dict[str, int]
    global_step_device: str
    #: Saver and Scaffold made with the graph (a template's), or None: _make_session makes them
    saver: Any = None
    scaffold: Any = None


@dataclass
class GraphTemplate:
    """A worker's graph built once in the fork server (tfjob.forkserver) for every worker of
    one job: each worker forked after it makes it its own (adopt_template) instead of building it.

    Why: building is Python creating tens of thousands of ops (ResNet110: ~20,700 nodes, ~12 s of
    CPU here), and W workers built theirs at once on two cores: a Fig. 1 run (five ResNet110
    workers) had its workers ready ~33 s after it began, for ~7 s of steps. The workers' graphs
    differ only in their device (/job:worker/task:i) and their synthetic batch (seed + task), and
    both can be set on the built graph before a session exists.

    The template is complete: the saver's and the scaffold's ops are built with it and its graph is
    finalized, so a forked task adds no op but the chief's no_op of no initial tokens. Ops built
    in the child could wait forever: TF's shape inference evaluates constant subgraphs on a
    thread pool of the graph's ("tf_graph_runner"), which the build started in the server, and a
    fork copies the pool without its thread."""

    key: tuple[str, ...]
    task: int
    graph: Any
    optimizer: Any
    pieces: TrainGraph


#: this task's graph, built by the fork server before it forked the task (or None: build it)
TEMPLATE: GraphTemplate | None = None
WORKER_DEVICE = re.compile(r"^/job:worker(/replica:\d+)?/task:(\d+)")
SYNTHETIC_X, SYNTHETIC_Y = "synthetic_x", "synthetic_y"


def template_key(args: list[str]) -> tuple[str, ...]:
    """What makes two workers' graphs the same but for the task: their arguments without --task."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--task":
            skip = True
        elif not a.startswith("--task="):
            out.append(a)
    return tuple(out)


def build_template(args: list[str]) -> GraphTemplate | None:
    """The graph of a worker task given by psjob arguments `args`, built in a fresh default graph,
    or None when they are not a worker's (or do not parse: the task reports that itself)."""
    try:
        cfg = parse_args(args)
    except SystemExit:
        return None
    if cfg.job != "worker":
        return None
    tf = _import_tensorflow(cfg.threads)
    import keras

    # Keras numbers layers per process: without this a second build names its variables conv2d_13
    # where a worker that built its own (and the checkpoint it saved) says conv2d. Also resets
    # the default graph.
    keras.utils.clear_session(free_memory=False)
    tf.compat.v1.reset_default_graph()
    pieces, optimizer = _build(cfg)
    pieces.saver, pieces.scaffold = _saver_and_scaffold()
    pieces.scaffold.finalize()  # builds the rest of the ops, then finalizes the graph
    return GraphTemplate(template_key(args), cfg.task, tf.compat.v1.get_default_graph(), optimizer, pieces)


def adopt_template(template: GraphTemplate, cfg: JobConfig) -> TrainGraph:
    """The template's graph as task cfg.task's own: its ops on this worker's device, its batch from
    seed + task, and the sync hook of a chief or not (the same graph build_train_graph makes)."""
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.framework import tensor_util

    if cfg.task != template.task:
        for op in template.graph.get_operations():
            m = WORKER_DEVICE.match(op.device)
            if m and int(m.group(2)) == template.task:
                op._set_device(f"/job:worker{m.group(1) or ''}/task:{cfg.task}{op.device[m.end() :]}")
        batch = synthetic_batch(cfg.batch_size, cfg.seed + cfg.task, cfg.model)
        for name, value in zip((SYNTHETIC_X, SYNTHETIC_Y), batch, strict=True):
            proto = attr_value_pb2.AttrValue(tensor=tensor_util.make_tensor_proto(value))
            template.graph.get_operation_by_name(name)._set_attr("value", proto)
    template.graph._unsafe_unfinalize()  # for the chief hook's no_op; MonitoredSession finalizes it again
    hook = template.optimizer.make_session_run_hook(is_chief=cfg.task == 0, num_tokens=0)  # see _build
    p = template.pieces
    return TrainGraph(
        p.train_op, p.global_step, hook, p.bytes_per_ps, p.variables_per_ps, p.global_step_device, p.saver, p.scaffold
    )


def build_train_graph(cfg: JobConfig) -> TrainGraph:
    """Model, loss and synchronous SGD in the default graph, variables placed on the PSs."""
    pieces, optimizer = _build(cfg)
    # 0 initial tokens: lock step (see the module docstring)
    pieces.sync_hook = optimizer.make_session_run_hook(is_chief=cfg.task == 0, num_tokens=0)
    return pieces


def _build(cfg: JobConfig) -> tuple[TrainGraph, Any]:
    """The graph without its sync hook (whether the task is the chief decides that), and its
    SyncReplicasOptimizer."""
    import tensorflow as tf

    num_ps, num_workers = len(cfg.cluster.ps), len(cfg.cluster.worker)
    plan = plan_placement(cfg.model, cfg.width, num_ps) if cfg.placement == "balanced" else None
    strategy = PlannedStrategy(plan) if plan else None
    setter = tf.compat.v1.train.replica_device_setter(
        cluster=tf.train.ClusterSpec(cfg.cluster.as_dict()),
        worker_device=f"/job:worker/task:{cfg.task}",
        ps_strategy=strategy,  # None: replica_device_setter's round robin
    )
    with tf.compat.v1.device(setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        x, y = synthetic_batch(cfg.batch_size, cfg.seed + cfg.task, cfg.model)
        model = dnn.build_model(cfg.model, cfg.width, plan.splits if plan else None)
        if strategy:
            strategy.check_complete()
        logits = model(tf.constant(x, name=SYNTHETIC_X), training=True)
        labels = tf.constant(y, name=SYNTHETIC_Y)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        variables = [v.value for v in model.trainable_variables]  # Keras 3 Variable -> tf.Variable
        opt = tf.compat.v1.train.SyncReplicasOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(cfg.learning_rate),
            replicas_to_aggregate=num_workers,
            total_num_replicas=num_workers,
        )
        grads = opt.compute_gradients(loss, var_list=variables)
        if cfg.pad_s > 0:
            grads = padded(grads, cfg.pad_s)
        train_op = opt.apply_gradients(grads, global_step=global_step)

    bytes_per_ps = {f"/job:ps/task:{i}": 0 for i in range(num_ps)}
    variables_per_ps = dict.fromkeys(bytes_per_ps, 0)
    for v in variables:
        ps = _ps_name(v.device)
        bytes_per_ps[ps] += v.shape.num_elements() * v.dtype.base_dtype.size
        variables_per_ps[ps] += 1
    return TrainGraph(train_op, global_step, None, bytes_per_ps, variables_per_ps, _ps_name(global_step.device)), opt


def padded(grads: list[tuple[Any, Any]], pad_s: float) -> list[tuple[Any, Any]]:
    """The (gradient, variable) pairs, each gradient now available only after a `pad_s` sleep that
    starts once every gradient is computed: the step's host time grows by pad_s before the push."""
    import numpy as np
    import tensorflow as tf

    def sleep() -> Any:
        time.sleep(pad_s)
        return np.float32(pad_s)

    with tf.control_dependencies([g for g, _ in grads if g is not None]):
        slept = tf.compat.v1.py_func(sleep, [], tf.float32, stateful=True, name="host_time_pad")
    with tf.control_dependencies([slept]):
        return [(None if g is None else tf.identity(g), v) for g, v in grads]


class FastWorkerSessionCreator:
    """tf.compat.v1.train.WorkerSessionCreator with a short recovery_wait_secs (TF fixes it at 30 s)."""

    def __init__(self, scaffold: Any, master: str, config: Any, max_wait_secs: float) -> None:
        self._scaffold = scaffold
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs

    def create_session(self) -> Any:
        import tensorflow as tf

        self._scaffold.finalize()
        manager = tf.compat.v1.train.SessionManager(
            local_init_op=self._scaffold.local_init_op,
            ready_op=self._scaffold.ready_op,
            ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
            graph=tf.compat.v1.get_default_graph(),
            recovery_wait_secs=RECOVERY_WAIT_S,
        )
        return manager.wait_for_session(self._master, config=self._config, max_wait_secs=self._max_wait_secs)


def _make_session(cfg: JobConfig, server: Any, graph: TrainGraph) -> tuple[Any, Any]:
    """(MonitoredSession, Saver). The chief restores the latest checkpoint of --checkpoint-dir if
    there is one (a restarted job, e.g. with a standby PS in place of a failed one). The saver is
    sharded: each PS writes its own variables into the shared folder, so saving moves no bytes
    over the emulated network."""
    import tensorflow as tf

    saver, scaffold = (graph.saver, graph.scaffold) if graph.scaffold is not None else _saver_and_scaffold()
    config = _session_config(cfg)
    if cfg.task == 0:
        creator = tf.compat.v1.train.ChiefSessionCreator(
            scaffold=scaffold, master=server.target, config=config, checkpoint_dir=cfg.checkpoint_dir or None
        )
    else:
        creator = FastWorkerSessionCreator(scaffold, server.target, config, max_wait_secs=cfg.deadline_s)
    sess = tf.compat.v1.train.MonitoredSession(
        session_creator=creator, hooks=[graph.sync_hook], stop_grace_period_secs=STOP_GRACE_S
    )
    return sess, saver


def _saver_and_scaffold() -> tuple[Any, Any]:
    import tensorflow as tf

    saver = tf.compat.v1.train.Saver(sharded=True, max_to_keep=2)
    return saver, tf.compat.v1.train.Scaffold(saver=saver)


def _import_tensorflow(threads: int) -> Any:
    """TensorFlow in graph mode with `threads` intra/inter-op threads (set before first use)."""
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def _save_step(saver: Any, prefix: str, global_step: int) -> Callable[[Any], str]:
    """A step_fn for MonitoredSession.run_step_fn: saves through the raw session (Saver.save
    takes a tf.Session, not a MonitoredSession). TF requires the argument's name to be step_context."""

    def step_fn(step_context: Any) -> str:
        return saver.save(step_context.session, prefix, global_step)

    return step_fn


def run_ps(cfg: JobConfig, out: Emitter) -> None:
    """Serve variables until killed (server.join never returns)."""
    _import_tensorflow(cfg.threads)
    server = _start_server(cfg)
    now = time.time()
    out.emit("ready", job="ps", task=cfg.task, t=now, startup_s=now - IMPORTED_UNIX_S)
    server.join()


def run_worker(cfg: JobConfig, out: Emitter) -> None:
    """Build, initialise or restore (chief) or wait (others), train to global step --iterations.

    Steps are counted by global step, so a job restarted from a checkpoint at global step g runs
    only the steps after g (the ones since the checkpoint are run again: the iterations lost).
    The session is closed only on an error. After the last step closing would just cancel the
    chief's queue-runner thread (blocked in take_grad for a step that never comes) after
    STOP_GRACE_S, and print that thread's traceback; there is nothing to save, and every worker
    already holds its last token, so the process may simply end (main's os._exit).
    """
    _import_tensorflow(cfg.threads)
    server = _start_server(cfg)
    graph = adopt_template(TEMPLATE, cfg) if TEMPLATE is not None else build_train_graph(cfg)
    sess, saver = _make_session(cfg, server, graph)
    chief_saves = cfg.task == 0 and cfg.checkpoint_every > 0
    if chief_saves:
        os.makedirs(cfg.checkpoint_dir, exist_ok=True)
    try:
        start_step = int(sess.run(graph.global_step))
        now = time.time()
        out.emit(
            "ready",
            job="worker",
            task=cfg.task,
            t=now,
            startup_s=now - IMPORTED_UNIX_S,
            global_step=start_step,
            graph="built" if TEMPLATE is None else "shared",
        )
        step, local = start_step, 0
        while step < cfg.iterations:
            t_start, start = time.time(), time.perf_counter()
            step = int(sess.run(graph.train_op))
            bct_s = time.perf_counter() - start
            local += 1
            out.emit(
                "iter",
                task=cfg.task,
                step=step,
                local_step=local,
                global_step=step,
                t_start=t_start,
                t_end=time.time(),
                bct_s=bct_s,
            )
            if chief_saves and step % cfg.checkpoint_every == 0 and step < cfg.iterations:
                t0 = time.perf_counter()
                path = sess.run_step_fn(_save_step(saver, os.path.join(cfg.checkpoint_dir, "model.ckpt"), step))
                out.emit("checkpoint", task=cfg.task, global_step=step, path=path, save_s=time.perf_counter() - t0)
        final_step = int(sess.run(graph.global_step))
    except BaseException:
        sess.close()
        raise
    out.emit(
        "done",
        task=cfg.task,
        global_step=final_step,
        steps=local,
        start_step=start_step,
        model=cfg.model,
        width=cfg.width,
        model_bytes=sum(graph.bytes_per_ps.values()),
        bytes_per_ps=graph.bytes_per_ps,
        variables_per_ps=graph.variables_per_ps,
        global_step_device=graph.global_step_device,
        placement=cfg.placement,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        pad_s=cfg.pad_s,
        t=time.time(),
    )


def run(cfg: JobConfig, out: Emitter) -> int:
    """Run one task; return the exit code (errors are reported as error lines, not raised)."""
    try:
        (run_ps if cfg.job == "ps" else run_worker)(cfg, out)
    except Exception as err:
        trace = traceback.format_exc().rstrip().splitlines()[-TRACE_LINES:]
        out.error(f"{type(err).__name__}: {err}"[:2000], trace=trace)
        return EXIT_EXCEPTION
    return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """The task. With `argv` None it is a process of its own (`python -m tfjob.psjob`), which
    first re-executes itself with the bind shim preloaded; a task forked by tfjob.forkserver
    passes its arguments and has the shim from the server already."""
    cfg = parse_args(argv)
    out = Emitter(sys.stdout, cfg.job, cfg.task)
    if argv is None:
        try:
            bindshim.ensure_preloaded()
        except bindshim.BindShimError as err:
            out.error(f"BindShimError: {err}")
            os._exit(EXIT_EXCEPTION)
    timer = start_deadline(out, cfg.deadline_s)
    removed = scrub_proxy_env()  # before TensorFlow, hence gRPC, is imported
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if removed:
        log.info("removed proxy variables: %s", ", ".join(removed))
    code = run(cfg, out)
    timer.cancel()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: see the module docstring


if __name__ == "__main__":
    main()

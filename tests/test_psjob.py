"""Real TF parameter-server jobs on loopback (tfjob.psjob) and the model builders (tfjob.dnn).

Each job is one process per PS task and per worker task (`sys.executable -m tfjob.psjob`), all
on 127.0.0.1 with free ports, as the testbed runs them inside Mininet hosts. Every process started
here is killed in a `finally` (the `tasks` context manager) whatever the test's outcome.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tfjob import dnn, psjob, psjob_config, tf_placement
from tfjob.placement import TOLERANCE, lpt, plan_placement
from workloads.experiment import PAPER_BYTES, PAPER_MODEL_BYTES

REPO = Path(__file__).resolve().parents[1]
#: a whole job must finish within this (TF start-up is ~5-8 s a process on 2 cores)
JOB_BUDGET_S = 90.0
#: last iter line -> process exit; the stalls this guards against are 30 s and 120 s
EXIT_AFTER_LAST_ITER_S = 10.0


# ---------------------------------------------------------------- helpers


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 (all bound at once, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def cluster_json(ps: int, workers: int) -> str:
    ports = free_ports(ps + workers)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    return json.dumps({"ps": addresses[:ps], "worker": addresses[ps:]})


@dataclass
class Task:
    """One psjob process, its output files and when it was seen to exit."""

    name: str
    proc: subprocess.Popen
    out: Path
    err: Path
    exited_unix_s: float | None = None

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def stderr_tail(self, lines: int = 15) -> str:
        return "\n".join(self.err.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Launcher:
    """Starts psjob tasks into `out_dir`; `tasks()` kills whatever is still running."""

    out_dir: Path
    started: list[Task] = field(default_factory=list)

    def start(self, name: str, cluster: str, job: str, task: int, *args: str) -> Task:
        out, err = self.out_dir / f"{name}.out", self.out_dir / f"{name}.err"
        cmd = [sys.executable, "-m", "tfjob.psjob", "--cluster", cluster, "--job", job, "--task", str(task)]
        with out.open("w") as fout, err.open("w") as ferr:  # files, not pipes: nothing can block on a full pipe
            proc = subprocess.Popen([*cmd, *args], cwd=REPO, stdout=fout, stderr=ferr, stdin=subprocess.DEVNULL)
        t = Task(name, proc, out, err)
        self.started.append(t)
        return t

    def start_job(self, prefix: str, ps: int, workers: int, *args: str) -> tuple[list[Task], list[Task]]:
        """PS tasks (deadline a bit past the budget) and worker tasks of one job."""
        cluster = cluster_json(ps, workers)
        deadline = ["--deadline-s", str(JOB_BUDGET_S + 30)]
        ps_tasks = [self.start(f"{prefix}ps{i}", cluster, "ps", i, *deadline) for i in range(ps)]
        worker_tasks = [self.start(f"{prefix}worker{i}", cluster, "worker", i, *args) for i in range(workers)]
        return ps_tasks, worker_tasks


@contextlib.contextmanager
def tasks(out_dir: Path) -> Iterator[Launcher]:
    launcher = Launcher(out_dir)
    try:
        yield launcher
    finally:
        for t in launcher.started:
            if t.proc.poll() is None:
                t.proc.kill()
        for t in launcher.started:
            t.proc.wait(timeout=30)


def wait_all(waited: list[Task], timeout_s: float) -> None:
    """Poll until every task exits, recording exit times; fail with their stderr on timeout."""
    end = time.time() + timeout_s
    while any(t.exited_unix_s is None for t in waited):
        for t in waited:
            if t.exited_unix_s is None and t.proc.poll() is not None:
                t.exited_unix_s = time.time()
        if time.time() > end:
            late = [t for t in waited if t.exited_unix_s is None]
            detail = "\n".join(f"--- {t.name} stderr:\n{t.stderr_tail()}" for t in late)
            pytest.fail(f"{[t.name for t in late]} still running after {timeout_s:.0f} s\n{detail}")
        time.sleep(0.05)


def only(events: list[dict], kind: str) -> dict:
    found = [e for e in events if e["event"] == kind]
    assert len(found) == 1, f"expected one {kind!r} line, got {found}"
    return found[0]


def imbalance(bytes_per_ps: dict[str, int]) -> float:
    """max/min bytes over the PSs (inf if a PS holds nothing)."""
    low, high = min(bytes_per_ps.values()), max(bytes_per_ps.values())
    return high / low if low else math.inf


# ---------------------------------------------------------------- jobs (subprocesses)


@pytest.mark.tf
def test_sync_job_tiny_one_ps_two_workers(tmp_path):
    iterations = 5
    started = time.time()
    with tasks(tmp_path) as launch:
        (ps,), workers = launch.start_job(
            "", 1, 2, "--model", "tiny", "--iterations", str(iterations), "--deadline-s", str(JOB_BUDGET_S)
        )
        wait_all(workers, JOB_BUDGET_S + 5)
        assert ps.proc.poll() is None, f"the PS died:\n{ps.stderr_tail()}"
        ps_ready = only(ps.events(), "ready")
    assert time.time() - started < JOB_BUDGET_S
    assert ps_ready["job"] == "ps" and ps_ready["task"] == 0

    expected_bytes = dnn.param_bytes("tiny", 1.0)
    for i, w in enumerate(workers):
        events = w.events()
        assert w.proc.returncode == 0, f"{w.name} exited {w.proc.returncode}: {events}\n{w.stderr_tail()}"
        ready = only(events, "ready")
        assert (ready["job"], ready["task"]) == ("worker", i)
        iters = [e for e in events if e["event"] == "iter"]
        assert [e["step"] for e in iters] == list(range(1, iterations + 1))
        assert all(e["task"] == i and e["bct_s"] > 0 and e["t_end"] >= e["t_start"] for e in iters)
        # lock step: step k of every worker ends global step k (one gradient per worker in each)
        assert [e["global_step"] for e in iters] == list(range(1, iterations + 1))
        done = only(events, "done")
        assert events[-1] is done
        assert done["global_step"] == iterations and done["steps"] == iterations
        assert (done["model"], done["width"], done["batch_size"], done["seed"]) == ("tiny", 1.0, 1, 1)
        assert done["bytes_per_ps"] == {"/job:ps/task:0": expected_bytes}
        assert sum(done["bytes_per_ps"].values()) == done["model_bytes"] == expected_bytes
        assert done["variables_per_ps"] == {"/job:ps/task:0": 8}  # 4 layers x (kernel, bias)
        assert done["global_step_device"] == "/job:ps/task:0"
        # no 30 s (recovery_wait_secs) or 120 s (stop_grace_period_secs) stall at the end
        assert w.exited_unix_s - iters[-1]["t_end"] < EXIT_AFTER_LAST_ITER_S
        assert ready["startup_s"] < JOB_BUDGET_S / 2


@pytest.mark.tf
def test_restart_on_new_ps_addresses_resumes_from_the_last_checkpoint(tmp_path):
    """A standby PS: the job restarted on other PS addresses continues from the chief's last
    checkpoint; the steps after it are run again (iterations lost), nothing before it."""
    ckpt = tmp_path / "ckpt"
    common = ["--model", "tiny", "--checkpoint-dir", str(ckpt), "--deadline-s", str(JOB_BUDGET_S)]
    with tasks(tmp_path) as launch:
        _, first = launch.start_job("a-", 1, 2, *common, "--iterations", "3", "--checkpoint-every", "2")
        wait_all(first, JOB_BUDGET_S)
        saved = [e for e in first[0].events() if e["event"] == "checkpoint"]
        assert [e["global_step"] for e in saved] == [2]  # step 3 is the last: not saved
        assert not any(e["event"] == "checkpoint" for e in first[1].events())  # only the chief saves
        _, second = launch.start_job("b-", 1, 2, *common, "--iterations", "5")
        wait_all(second, JOB_BUDGET_S)
    for w in second:
        events = w.events()
        assert w.proc.returncode == 0, f"{w.name}: {events}\n{w.stderr_tail()}"
        assert only(events, "ready")["global_step"] == 2
        assert [e["step"] for e in events if e["event"] == "iter"] == [3, 4, 5]
        done = only(events, "done")
        assert (done["start_step"], done["global_step"], done["steps"]) == (2, 5, 3)


@pytest.mark.tf
def test_balanced_placement_is_more_even_than_round_robin(tmp_path):
    width = 0.1
    args = ["--model", "vgg16", "--width", str(width), "--iterations", "1", "--deadline-s", str(JOB_BUDGET_S)]
    with tasks(tmp_path) as launch:
        _, rr = launch.start_job("rr-", 2, 1, *args, "--placement", "round-robin")
        _, bal = launch.start_job("bal-", 2, 1, *args, "--placement", "balanced")
        wait_all(rr + bal, JOB_BUDGET_S + 5)
    dones = {}
    for t in rr + bal:
        assert t.proc.returncode == 0, f"{t.name}: {t.events()}\n{t.stderr_tail()}"
        dones[t.name] = only(t.events(), "done")
    rr_bytes, bal_bytes = dones["rr-worker0"]["bytes_per_ps"], dones["bal-worker0"]["bytes_per_ps"]
    assert set(rr_bytes) == set(bal_bytes) == {"/job:ps/task:0", "/job:ps/task:1"}
    total = dnn.param_bytes("vgg16", width)
    assert sum(rr_bytes.values()) == sum(bal_bytes.values()) == total
    assert rr_bytes != bal_bytes
    # round robin alternates kernel/bias after the global step, so PS 1 gets every kernel
    assert imbalance(bal_bytes) <= imbalance(rr_bytes)
    assert dones["bal-worker0"]["placement"] == "balanced"
    # TF put every variable where the plan (computed from shapes alone) said
    assert list(bal_bytes.values()) == plan_placement("vgg16", width, 2).bytes_per_ps()
    assert max(bal_bytes.values()) <= (1 + TOLERANCE) * total / 2 < max(rr_bytes.values())


@pytest.mark.tf
def test_a_cut_layer_trains_and_lands_as_planned(tmp_path):
    """tiny over 3 PSs: its 64-filter convolution is most of the model, so the plan cuts it (and
    the 32-filter one) into pieces; the real job trains through the cut layers and TF places
    each piece where the plan says."""
    plan = plan_placement("tiny", 1.0, 3)
    assert plan.splits, "expected tiny over 3 PSs to need a cut layer"
    args = ["--model", "tiny", "--iterations", "2", "--deadline-s", str(JOB_BUDGET_S)]
    with tasks(tmp_path) as launch:
        _, (w,) = launch.start_job("", 3, 1, *args)  # balanced is the default
        wait_all([w], JOB_BUDGET_S + 5)
    assert w.proc.returncode == 0, f"{w.events()}\n{w.stderr_tail()}"
    done = only(w.events(), "done")
    assert done["placement"] == "balanced" and done["global_step"] == 2
    assert list(done["bytes_per_ps"].values()) == plan.bytes_per_ps()
    assert done["model_bytes"] == dnn.param_bytes("tiny", 1.0)
    # pieces are separate variables: 8 unsplit (4 layers x kernel, bias) plus 2 per extra piece
    extra = sum(pieces - 1 for pieces in plan.splits.values())
    assert sum(done["variables_per_ps"].values()) == 8 + 2 * extra


@pytest.mark.tf
def test_deadline_ends_a_worker_whose_ps_never_answers(tmp_path):
    cluster = cluster_json(1, 1)  # nobody listens on the PS port
    deadline_s = 6
    started = time.time()
    with tasks(tmp_path) as launch:
        w = launch.start("worker0", cluster, "worker", 0, "--deadline-s", str(deadline_s))
        wait_all([w], 60)
    assert w.proc.returncode == psjob.EXIT_DEADLINE != 0
    error = only(w.events(), "error")
    assert error["reason"] == "deadline" and error["deadline_s"] == deadline_s
    assert (error["job"], error["task"]) == ("worker", 0)
    assert time.time() - started < deadline_s + 20


@pytest.mark.tf
def test_exception_prints_an_error_line_with_trace(tmp_path):
    with socket.socket() as busy, tasks(tmp_path) as launch:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ps_port, worker_port = free_ports(1)[0], busy.getsockname()[1]
        cluster = json.dumps({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]})
        w = launch.start("worker0", cluster, "worker", 0, "--deadline-s", "60")
        wait_all([w], 60)
    assert w.proc.returncode == psjob.EXIT_EXCEPTION
    error = only(w.events(), "error")
    assert error["reason"] != "deadline" and error["trace"], error


# ---------------------------------------------------------------- psjob pieces (no TensorFlow)


@pytest.mark.tf
def test_cluster_and_arguments_are_validated():
    c = psjob_config.parse_cluster('{"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}')
    assert c.ps == ("127.0.0.1:1",) and len(c.worker) == 2
    for bad in ('{"ps": ["127.0.0.1:1"]}', '{"ps": [], "worker": ["a:1"]}', '{"ps": ["a"], "worker": ["b:2"]}', "x"):
        with pytest.raises(ValueError):
            psjob_config.parse_cluster(bad)
    with pytest.raises(ValueError, match="out of range"):
        psjob.JobConfig(cluster=c, job="worker", task=2)
    with pytest.raises(SystemExit):
        psjob.parse_args(["--cluster", "{}", "--job", "worker", "--task", "0"])


@pytest.mark.tf
def test_proxy_variables_are_scrubbed():
    env = {"http_proxy": "x", "HTTPS_PROXY": "y", "grpc_proxy": "z", "no_proxy": "w", "PATH": "/bin"}
    assert psjob.scrub_proxy_env(env) == ["HTTPS_PROXY", "grpc_proxy", "http_proxy", "no_proxy"]
    assert env == {"PATH": "/bin"}


@pytest.mark.tf
def test_greedy_strategy_places_on_the_least_loaded_task():
    sizes = {"a": 100, "b": 60, "c": 50, "d": 10}
    strategy = tf_placement.GreedyLoadBalancingStrategy(2, sizes.__getitem__)
    assert [strategy(op) for op in "abcd"] == [0, 1, 1, 0]
    assert strategy.loads == [110, 110]


@pytest.mark.tf
def test_session_config_limits_threads_and_filters_devices():
    cluster = psjob_config.parse_cluster('{"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}')
    config = psjob._session_config(psjob.JobConfig(cluster=cluster, job="worker", task=1, threads=2))
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (2, 2)
    assert list(config.device_filters) == ["/job:ps", "/job:worker/task:1"]
    assert config.graph_options.rewrite_options.disable_meta_optimizer
    with_grappler = psjob._session_config(psjob.JobConfig(cluster=cluster, job="ps", task=0, grappler=True))
    assert not with_grappler.graph_options.rewrite_options.disable_meta_optimizer
    assert list(with_grappler.device_filters) == []


# ---------------------------------------------------------------- placement (shapes only)


def job_widths(name: str) -> list[float]:
    """Width 1 and the widths jobs run at: the paper's S at scale 40, and with compress 8 on top.
    tiny has no paper size (its S is its width-1 size): at 1/320 of it every layer is down to one
    channel (68 parameters in all), nothing a placement can balance, so tiny stops at 1/40."""
    factors = (40,) if name == "tiny" else (40, 40 * 8)
    return [1.0, *(dnn.width_for_bytes(name, PAPER_MODEL_BYTES[name] / f) for f in factors)]


@pytest.mark.parametrize("num_ps", [2, 3])
@pytest.mark.parametrize("name", sorted(dnn.MODELS))
def test_balanced_placement_puts_s_over_p_on_every_ps(name, num_ps):
    for width in job_widths(name):
        plan = plan_placement(name, width, num_ps)
        held = plan.bytes_per_ps()
        total = dnn.param_bytes(name, width)
        assert sum(held) == total  # cutting a layer keeps its bytes
        for b in held:
            assert abs(b - total / num_ps) <= TOLERANCE * total / num_ps, (name, width, held)
        assert plan_placement(name, width, num_ps) == plan  # every worker computes the same plan


def test_vgg16_big_kernel_is_cut_only_where_it_exceeds_s_over_p():
    """The 4096x4096 kernel is just under half of VGG-16: whole on one of two PSs, but over a
    third of the model, so over three PSs it is cut into three pieces."""
    fc2 = max(dnn.get_model("vgg16").variables(1.0), key=lambda v: v.nbytes)
    assert fc2.shape == (4096, 4096)
    assert plan_placement("vgg16", 1.0, 2).splits == {}
    three = plan_placement("vgg16", 1.0, 3)
    assert three.splits == {fc2.layer: 3}
    assert [v.shape for v in three.variables if v.layer == fc2.layer] == [
        (4096, 1366),
        (1366,),
        (4096, 1365),
        (1365,),
        (4096, 1365),
        (1365,),
    ]
    assert sorted(
        t for v, t in zip(three.variables, three.tasks, strict=True) if v.layer == fc2.layer and len(v.shape) == 2
    ) == [0, 1, 2]


def test_cut_layers_keep_the_parameter_count():
    builder = dnn.get_model("resnet50")
    layers = builder.splittable(0.25)
    cuts = {layer: min(3, channels) for layer, channels in list(layers.items())[::7]}
    whole, cut = builder.variables(0.25), builder.variables(0.25, cuts)
    kernels = [v for v in cut if len(v.shape) > 1]  # ResNet's convolutions have no bias
    assert len(kernels) == len([v for v in whole if len(v.shape) > 1]) + sum(c - 1 for c in cuts.values())
    for layer, pieces in cuts.items():
        assert sum(v.shape[-1] for v in kernels if v.layer == layer) == layers[layer]
        assert len([v for v in kernels if v.layer == layer]) == pieces
    assert sum(v.nbytes for v in cut if v.trainable) == sum(v.nbytes for v in whole if v.trainable)
    assert sum(v.nbytes for v in whole if v.trainable) == dnn.param_bytes("resnet50", 0.25)


def test_lpt_fills_the_emptiest_ps_largest_first():
    assert lpt([5, 3, 3, 2, 2, 1], 2) == [0, 1, 1, 0, 1, 0]  # loads 8 and 8
    assert lpt([1, 1, 4], 2) == [1, 1, 0]  # in creation order the 4 would land on a PS holding 1
    assert lpt([], 3) == []


# ---------------------------------------------------------------- models


@pytest.mark.tf
@pytest.mark.parametrize("name", sorted(dnn.MODELS))
def test_param_bytes_grow_with_width(name):
    sizes = [dnn.param_bytes(name, w) for w in (0.125, 0.25, 0.5, 1.0, 2.0)]
    assert sizes == sorted(set(sizes)), sizes
    # roughly quadratic: doubling the width multiplies bytes by 2.5-4.2 from width 0.5 on
    assert 2.5 < sizes[4] / sizes[3] < 4.2 and 2.5 < sizes[3] / sizes[2] < 4.2


@pytest.mark.tf
@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("vgg16", PAPER_BYTES["vgg16"] / 40),  # 13.8 MB: the paper's VGG-16 at scale 40
        ("vgg16", PAPER_BYTES["vgg16"]),  # 553 MB: needs width ~2
        ("resnet50", PAPER_BYTES["resnet50"] / 40),
        ("resnet50", PAPER_BYTES["resnet50"] / 10),
        ("resnet110", 1e6),
        ("tiny", 50e3),
        ("mnist", 4e6 / 800),  # HiPS Table 1's 1 M parameters at scale 800 (hips-table1.yaml)
    ],
)
def test_width_for_bytes_hits_its_target(name, target):
    width = dnn.width_for_bytes(name, target)
    assert dnn.param_bytes(name, width) == pytest.approx(target, rel=0.10)


@pytest.mark.tf
def test_sizes_at_width_1():
    count = {name: dnn.MODELS[name].param_count(1.0) for name in dnn.MODELS}
    # VGG-16 on CIFAR: the 13 convolutions hold 14,714,688 parameters (as Keras' VGG16 without its
    # top), the head 512x4096 + 4096x4096 + 4096x10 (with biases) 18,923,530: 33.6 M, 134.6 MB
    assert count["vgg16"] == 14_714_688 + (512 * 4096 + 4096) + (4096 * 4096 + 4096) + (4096 * 10 + 10)
    # ResNet50: ImageNet's 25,557,032 less its 1000-way classifier (2,049,000) and 7x7 stem
    # (9,408), plus a 3x3 stem (1,728) and a 10-way classifier (20,490): 23.5 M, 94.1 MB
    assert count["resnet50"] == 25_557_032 - 2_049_000 - 9_408 + 1_728 + 20_490
    # ResNet110: He et al. report 1.7 M; 1,730,714 with our two 1x1 projections (+2,752), 6.9 MB
    assert count["resnet110"] == 1_730_714
    assert count["tiny"] == 24_234  # calibrate.default_model's ~25k
    # mnist: 5x5x1x32 + 32, 5x5x32x64 + 64, 7x7x64x300 + 300, 300x10 + 10: HiPS's "1 million"
    assert count["mnist"] == (800 + 32) + (51_200 + 64) + (940_800 + 300) + (3_000 + 10) == 996_206
    assert [math.floor(math.log10(count[n])) for n in ("vgg16", "resnet50", "resnet110")] == [7, 7, 6]


@pytest.mark.tf
def test_unknown_model_lists_the_valid_names():
    with pytest.raises(ValueError, match="resnet110, resnet50, tiny, vgg16"):
        dnn.param_bytes("alexnet")
    with pytest.raises(ValueError, match="width"):
        dnn.param_bytes("tiny", 0)


@pytest.mark.tf
@pytest.mark.parametrize(
    ("name", "width"), [("vgg16", 0.05), ("resnet50", 0.05), ("resnet110", 0.25), ("tiny", 0.5), ("mnist", 0.5)]
)
def test_keras_build_matches_the_count(name, width):
    model = dnn.build_model(name, width)
    assert tuple(model.input_shape) == (None, *dnn.input_shape(name))
    built = sum(math.prod(v.shape) for v in model.trainable_variables)
    assert built * dnn.BYTES_PER_FLOAT32 == dnn.param_bytes(name, width)
    assert tuple(model.output_shape) == (None, dnn.CLASSES)


@pytest.mark.tf
def test_a_task_listens_on_its_own_address_only(tmp_path):
    """TensorFlow's server asks for 0.0.0.0; the task's own address (here 127.0.0.2) is all it
    gets (tfjob.bindshim): another address of the same machine is refused."""
    import psutil

    port = free_ports(1)[0]
    cluster = json.dumps({"ps": [f"127.0.0.2:{port}"], "worker": ["127.0.0.1:1"]})
    with tasks(tmp_path) as launch:
        ps = launch.start("ps0", cluster, "ps", 0, "--deadline-s", "120")
        end = time.time() + 60
        while not any(e["event"] == "ready" for e in ps.events()) and time.time() < end and ps.proc.poll() is None:
            time.sleep(0.1)
        assert any(e["event"] == "ready" for e in ps.events()), ps.stderr_tail()
        listening = {c.laddr for c in psutil.Process(ps.proc.pid).net_connections("tcp") if c.status == "LISTEN"}
        assert listening == {("127.0.0.2", port)}
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)

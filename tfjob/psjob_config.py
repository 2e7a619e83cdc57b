"""The PS job's command line: the cluster, this task, the model and the run's limits.

Apart from tfjob.psjob (the process itself) so that the runner and tests can build and check
a job's arguments without importing the TensorFlow-facing code.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from tfjob import dnn

PLACEMENTS = ("round-robin", "balanced")
JOBS = ("ps", "worker")


@dataclass(frozen=True)
class Cluster:
    """Task addresses ("ip:port") of the ps and worker jobs."""

    ps: tuple[str, ...]
    worker: tuple[str, ...]

    def as_dict(self) -> dict[str, list[str]]:
        return {"ps": list(self.ps), "worker": list(self.worker)}


def parse_cluster(text: str) -> Cluster:
    """Cluster from JSON {"ps": ["ip:port", ...], "worker": [...]}; anything else raises ValueError."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--cluster is not JSON: {err}") from None
    if not isinstance(spec, dict) or set(spec) != set(JOBS):
        raise ValueError(f'--cluster must be an object with exactly the keys "ps" and "worker", got {text!r}')
    for job in JOBS:
        tasks = spec[job]
        if not isinstance(tasks, list) or not tasks:
            raise ValueError(f"--cluster {job!r} must be a non-empty list of 'ip:port'")
        for address in tasks:
            host, sep, port = str(address).rpartition(":")
            if not (isinstance(address, str) and sep and host and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(f"--cluster {job!r}: bad address {address!r} (want 'ip:port')")
    addresses = spec["ps"] + spec["worker"]
    if len(set(addresses)) != len(addresses):
        raise ValueError(f"--cluster: an address is used twice: {addresses}")
    return Cluster(tuple(spec["ps"]), tuple(spec["worker"]))


@dataclass(frozen=True)
class JobConfig:
    """One task's settings, from the command line."""

    cluster: Cluster
    job: str
    task: int
    model: str = "tiny"
    width: float = 1.0
    batch_size: int = 1
    iterations: int = 10
    placement: str = "balanced"
    seed: int = 1
    threads: int = 1
    learning_rate: float = 0.001
    deadline_s: float = 900.0
    grappler: bool = False
    checkpoint_dir: str = ""
    checkpoint_every: int = 0
    pad_s: float = 0.0  # workers: sleep this long in every step before pushing (host_time: full)

    def __post_init__(self) -> None:
        tasks = getattr(self.cluster, self.job, None) if self.job in JOBS else None
        if tasks is None:
            raise ValueError(f"--job must be one of {', '.join(JOBS)}, got {self.job!r}")
        if not 0 <= self.task < len(tasks):
            raise ValueError(f"--task {self.task} out of range: job {self.job!r} has {len(tasks)} task(s)")
        dnn.get_model(self.model)
        if self.placement not in PLACEMENTS:
            raise ValueError(f"--placement must be one of {', '.join(PLACEMENTS)}, got {self.placement!r}")
        for name in ("width", "deadline_s", "learning_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive")
        for name in ("batch_size", "iterations", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if not self.pad_s >= 0:
            raise ValueError("--pad-s must be >= 0")
        if self.checkpoint_every < 0 or (self.checkpoint_every and not self.checkpoint_dir):
            raise ValueError("--checkpoint-every needs --checkpoint-dir and must be >= 0")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tfjob.psjob",
        description="One PS or worker task of a synchronous TF parameter-server job; JSON lines on stdout.",
    )
    p.add_argument("--cluster", required=True, help='JSON {"ps": ["ip:port", ...], "worker": ["ip:port", ...]}')
    p.add_argument("--job", required=True, choices=JOBS)
    p.add_argument("--task", required=True, type=int, help="index of this task in its job")
    p.add_argument("--model", default="tiny", choices=sorted(dnn.MODELS), help="model (workers; default tiny)")
    p.add_argument("--width", type=float, default=1.0, help="channel/FC-width multiplier (default 1)")
    p.add_argument("--batch-size", type=int, default=1, help="samples per worker per step (default 1)")
    p.add_argument(
        "--iterations", type=int, default=10, help="global step the job trains to (default 10; restored steps count)"
    )
    p.add_argument(
        "--placement",
        default="balanced",
        choices=PLACEMENTS,
        help="variables over the PSs: balanced (largest first, big layers cut; default) or TF's round-robin",
    )
    p.add_argument("--seed", type=int, default=1, help="synthetic data seed; worker i uses seed + i (default 1)")
    p.add_argument("--threads", type=int, default=1, help="TF intra-op and inter-op threads each (default 1)")
    p.add_argument("--learning-rate", type=float, default=0.001, help="SGD learning rate (default 0.001)")
    p.add_argument(
        "--deadline-s", type=float, default=900.0, help="exit with an error line after this many seconds (default 900)"
    )
    p.add_argument(
        "--grappler",
        default="off",
        choices=("on", "off"),
        help="TF's graph optimiser (default off: it slows start-up, not the steps; see the module docstring)",
    )
    p.add_argument(
        "--checkpoint-dir",
        default="",
        help="shared folder of the job's checkpoints: the chief restores the latest one at start (standby PS)",
    )
    p.add_argument("--checkpoint-every", type=int, default=0, help="the chief saves every N global steps (0: never)")
    p.add_argument(
        "--pad-s",
        type=float,
        default=0.0,
        help="workers: seconds slept in every step after the gradients, before the push (full-size host time; "
        "default 0)",
    )
    return p


def parse_args(argv: list[str] | None = None) -> JobConfig:
    """JobConfig from the command line; a bad value exits with argparse's usage error (code 2)."""
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        return JobConfig(
            cluster=parse_cluster(a.cluster),
            job=a.job,
            task=a.task,
            model=a.model,
            width=a.width,
            batch_size=a.batch_size,
            iterations=a.iterations,
            placement=a.placement,
            seed=a.seed,
            threads=a.threads,
            learning_rate=a.learning_rate,
            deadline_s=a.deadline_s,
            grappler=a.grappler == "on",
            checkpoint_dir=a.checkpoint_dir,
            checkpoint_every=a.checkpoint_every,
            pad_s=a.pad_s,
        )
    except ValueError as err:
        parser.error(str(err))
        raise  # unreachable: parser.error exits

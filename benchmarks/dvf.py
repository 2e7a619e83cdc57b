"""`python -m benchmarks.dvf`: where Parameter Flow's DVF cut goes, push side and broadcast side.

pf-fig9 (emulated) cuts the bytes on the wire far less than the paper's Fig. 9 (AlexNet 38% at
delta_up against the paper's 80%). The cut is the codec's, not the network's: what DVF holds
back and what the wire form (engine.dvf.encode) makes of the rest depend on the updates' values
alone. So this benchmark replays the figure's jobs without a network, with the engine's own code:
the same models (engine.npmodels for LR and MF, engine.host.calibrated_gradient for AlexNet's
payload), the same sizes (the figure's points through the run pipeline's sizing), the same
per-chunk split and encoding (engine.dvf.Codec), PF-BSP's flow (every worker pushes its update,
the servers sum and filter, every worker receives the filtered sum once down TSB's tree, as a
relay forwards the bytes it got), and counts the bytes of each side per clock.

It runs each group three ways:
- `encode`: the wire form with nothing held back (the figure's baseline point);
- `figure`: the figure's delta on both sides, as the engine does (one delta per job);
- `per side`: the servers' delta set by the paper's rule on what they send ("delta_up roughly
  drops 60% to 80% of updates on average per push or broadcast", §5.1): the share of entries a
  worker's delta holds back of worker 0's clock-1 update, taken as a quantile of the servers'
  clock-1 sums. A sum of W filtered updates is larger and denser than one update, so the workers'
  delta holds little of it back.

Its `figure` rows are checked against the emulated pf-fig9 (results/pf-fig9/summary.csv, the
engine's own count of every host's sends): the same bytes within the engine's framing. Nothing
here runs Mininet; results: OUT/dvf.json, OUT/dvf.md.
"""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.common import TOP, begin, bench_parser, md_table, meta, write_results
from engine.dvf import Codec, DvfSettings
from engine.host import calibrated_gradient
from engine.npmodels import LEARNING_RATES, MODELS
from replays.figure import load_figure
from replays.sweep import point_experiment, point_topology
from runs.predict import choose_width

LOG = logging.getLogger(__name__)
FIGURE = "pf-fig9"
#: the ways each group runs (module docstring)
VARIANTS = ("encode", "figure", "per side")
#: the figure's series for DVF at delta_up / delta_low, and the unfiltered wire form
UP, LOW, ENCODE = "DVF delta_up", "DVF delta_low", "no DVF (wire form)"


@dataclass(frozen=True)
class Job:
    """One group of the figure, as its points run it."""

    group: str
    model: str  # lr, mf (numpy) or alexnet (a payload of seeded standard-normal updates)
    n_elems: int
    workers: int
    batch_size: int
    seed: int
    delta_low: float
    delta_up: float
    chunk_elems: int  # the engine's segment, in float32 entries: DVF splits and encodes per chunk


@dataclass
class Clock:
    """One clock's bytes (engine's wire form, every host's sends) and the zeros in them."""

    push_bytes: int
    bcast_bytes: int
    push_zeros: float  # share of zero entries in what the workers pushed (their own zeros and DVF's)
    bcast_zeros: float  # share of zero entries in what the servers broadcast
    bcast_density: float  # share of nonzero entries in the servers' sums before their filter


@dataclass
class Row:
    group: str
    variant: str  # encode / figure / per side
    delta: str  # up / low / -
    worker_delta: float
    server_delta: float
    raw_bytes: int  # per clock: W pushes and W receives of the dense float32 vector
    clocks: list[Clock] = field(default_factory=list)
    emulated_mb: float | None = None  # pf-fig9's emulated wire MB per clock (figure rows)
    invariant_error: float = 0.0  # |applied + residual - computed| / max|computed|

    def mb(self) -> float:
        return float(np.mean([c.push_bytes + c.bcast_bytes for c in self.clocks])) / 1e6

    def cut(self, i: int) -> float:
        c = self.clocks[i]
        return 1 - (c.push_bytes + c.bcast_bytes) / self.raw_bytes

    def side_cut(self, side: str) -> float:
        """Mean cut of one side against its raw half (W dense vectors)."""
        got = np.mean([c.push_bytes if side == "push" else c.bcast_bytes for c in self.clocks])
        return float(1 - got / (self.raw_bytes / 2))


def jobs(quick: bool) -> list[Job]:
    """The figure's three groups with their points' sizes and deltas (the run pipeline's sizing)."""
    fig = load_figure(FIGURE)
    out = []
    for group in dict.fromkeys(p.group for p in fig.points):
        point = next(p for p in fig.points if p.group == group and p.series == UP)
        exp = point_experiment(fig, point, quick=False)
        spec, _, _ = point_topology(fig, point)
        _, model_bytes = choose_width(exp.job, spec.scale * exp.compress)
        job = exp.job
        out.append(
            Job(
                group, job.model, int(model_bytes) // 4, len(job.workers or []), job.batch_size, job.seed,
                job.dvf_delta_low, job.dvf_delta_up, round(job.segment_kb * 1024) // 4,
            )
        )  # fmt: skip
    return out[-1:] if quick else out


def _gradients(job: Job) -> tuple[Callable[[int, int], np.ndarray], Callable[[np.ndarray], None]]:
    """(gradient(worker, iteration) at eta / sqrt(t), apply(total)) as the engine's workers do."""
    if job.model in MODELS:
        replicas = [MODELS[job.model](job.n_elems, job.batch_size, job.seed, w, LEARNING_RATES[job.model])
                    for w in range(job.workers)]  # fmt: skip

        def grad(w: int, it: int) -> np.ndarray:
            return (replicas[w].gradient(it) / np.sqrt(it + 1)).astype(np.float32)

        def apply(total: np.ndarray) -> None:
            for r in replicas:
                r.apply(total, job.workers)

        return grad, apply

    def payload(w: int, it: int) -> np.ndarray:
        return (calibrated_gradient(job.seed, it, w, job.n_elems) / np.sqrt(it + 1)).astype(np.float32)

    return payload, lambda total: None


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(a, min(n, a + size)) for a in range(0, n, size)]


def _held_share(values: np.ndarray, delta: float) -> float:
    """Share of the nonzero entries with |value| <= delta (the figure's rule for its deltas)."""
    nz = np.abs(values[values != 0])
    return float(np.mean(nz <= delta)) if nz.size else 0.0


def run(job: Job, variant: str, delta_name: str, clocks: int) -> Row:
    """PF-BSP over `clocks` clocks without a network; every worker's and the servers' codec as the engine's."""
    delta = {"up": job.delta_up, "low": job.delta_low}.get(delta_name, 0.0)
    mode = "encode" if variant == "encode" else delta_name
    settings = DvfSettings(mode, job.delta_low, job.delta_up)
    spans = _chunks(job.n_elems, job.chunk_elems)
    lengths = [s.stop - s.start for s in spans]
    workers = [Codec(settings, lengths) for _ in range(job.workers)]
    server = Codec(settings, lengths)  # the servers' shards together: a chunk is one server's
    grad, apply = _gradients(job)
    row = Row(
        job.group, variant, delta_name if variant != "encode" else "-", delta, delta, 2 * job.workers * 4 * job.n_elems
    )
    computed = np.zeros(job.n_elems)
    applied = np.zeros(job.n_elems)
    for it in range(clocks):
        for c in workers:
            c.begin(it)
        push, total = 0, np.zeros(job.n_elems, dtype=np.float32)
        for w, codec in enumerate(workers):
            g = grad(w, it)
            computed += g
            if it == 0 and w == 0 and variant == "per side":
                share = _held_share(g, delta)
            for s, span in enumerate(spans):
                view = g[span].copy()
                push += len(codec.originate(s, view, it))
                total[span] += view
        density = float(np.count_nonzero(total)) / job.n_elems
        if it == 0 and variant == "per side":
            nz = np.abs(total[total != 0])
            row.server_delta = float(np.quantile(nz, share)) if nz.size else delta
            server.settings = DvfSettings("up", 0.0, row.server_delta)
        server.begin(it)
        sent_entries = 0
        bcast = 0
        for s, span in enumerate(spans):
            view = total[span].copy()
            bcast += job.workers * len(server.originate(s, view, it))  # each worker gets it once (TSB)
            total[span] = view
            sent_entries += int(np.count_nonzero(view))
        pushed_entries = sum(c.kept.get(it, 0) for c in workers)
        zeros = 1 - pushed_entries / (job.workers * job.n_elems), 1 - sent_entries / job.n_elems
        row.clocks.append(Clock(push, bcast, *zeros, density))
        for c in [*workers, server]:
            c.done(it)
        applied += total
        apply(total)
    residual = sum(c.residual().astype(np.float64) for c in [*workers, server])
    scale = float(np.max(np.abs(computed))) or 1.0
    row.invariant_error = float(np.max(np.abs(applied + residual - computed))) / scale
    return row


def emulated_mb(out: Path = TOP / "results" / FIGURE / "summary.csv") -> dict[tuple[str, str], float]:
    """pf-fig9's emulated wire MB per clock by (group, series), where it has been run (the figure's
    metric is `wire`: its csv's metric columns carry MB, not seconds)."""
    if not out.exists():
        return {}
    with out.open() as f:
        return {(r["group"], r["series"]): float(r["bct_mean_s"]) for r in csv.DictReader(f) if r["bct_mean_s"]}


def table(rows: list[Row]) -> str:
    head = ["group", "run", "delta (workers / servers)", "MB per clock", "emulated MB", "cut vs raw: first / last",
            "push cut", "broadcast cut", "zeros sent: push / broadcast", "sums' density", "invariant"]  # fmt: skip
    out = []
    for r in rows:
        c0 = r.clocks[0]
        out.append([
            r.group, r.variant + ("" if r.delta == "-" else f" ({r.delta})"),
            "-" if r.delta == "-" else f"{r.worker_delta:.3g} / {r.server_delta:.3g}",
            f"{r.mb():.3f}", "-" if r.emulated_mb is None else f"{r.emulated_mb:.3f}",
            f"{r.cut(0):.0%} / {r.cut(-1):.0%}", f"{r.side_cut('push'):.0%}", f"{r.side_cut('bcast'):.0%}",
            f"{c0.push_zeros:.0%} / {c0.bcast_zeros:.0%}", f"{c0.bcast_density:.0%}", f"{r.invariant_error:.1e}",
        ])  # fmt: skip
    return md_table(head, out)


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench_dvf", __doc__, "AlexNet's group only, 3 clocks (seconds)")
    figure_clocks = load_figure(FIGURE).job["iterations"]
    p.add_argument("--clocks", type=int, default=figure_clocks, help=f"clocks per run (default: {FIGURE}'s)")
    args = p.parse_args(argv)
    out_dir = begin(args)
    m = meta(args)
    t0 = time.monotonic()
    clocks = 3 if args.quick else args.clocks
    emulated = emulated_mb()
    rows = []
    for job in jobs(args.quick):
        for variant in VARIANTS:
            for delta in ("-",) if variant == "encode" else ("up", "low"):
                LOG.info("%s: %s %s (%d entries, %d workers, %d clocks)", job.group, variant, delta, job.n_elems,
                         job.workers, clocks)  # fmt: skip
                row = run(job, variant, delta, clocks)
                series = {"-": ENCODE, "up": UP, "low": LOW}[delta]
                if variant != "per side" and clocks == figure_clocks:  # the emulated runs' clocks
                    row.emulated_mb = emulated.get((job.group, series))
                rows.append(row)
    m["wall_s"] = time.monotonic() - t0
    res = {"meta": m, "clocks": clocks, "rows": [asdict(r) for r in rows]}
    text = (
        f"PF-BSP without a network, {clocks} clocks, the figure's models, sizes and deltas; bytes are the "
        "engine's wire form summed over every host's sends (push: W updates; broadcast: the servers' "
        "filtered sums, received once by each of the W workers). Cuts are against raw float32 (W dense "
        "pushes and W dense receives per clock), the paper's baseline.\n\n" + table(rows) + "\n"
    )
    write_results(out_dir, "dvf-quick" if args.quick else "dvf", "DVF's cut by side, without a network", res, text,
                  args.quick, None)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

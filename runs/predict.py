"""The paper's model (Eqs. 1-7) for one run: the job's size at a scale, its predicted BCT, and the
same prediction again with the PSs' real byte split. The model builds nothing: P_w and P_s are
calibrated on this machine (cached), the network is the topology model.

A job in `host_time: full` (tfjob.hosttime) is padded to the full-size job's host time; its
prediction takes that host time too (T_compute = a full-size worker's share, T_ps_update = the
busiest PS's), so BCT_min and BCT_max describe the step the run actually times."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from runs.summary import RunSummary, read_summary, summary_of
from tfjob.hosttime import PADDED, HostTime
from topologies.build import build_network
from topologies.model import Network, Node
from topologies.schema import parse_spec
from workloads.experiment import JobSpec

if TYPE_CHECKING:
    from models.bct_model import Prediction


def choose_width(job: JobSpec, scale: float) -> tuple[float, float]:
    """Width multiplier giving S / scale bytes; returns (width, emulated bytes).

    An explicit width wins; at scale 1 with no model_bytes the real CIFAR architecture runs
    unchanged (width 1); otherwise the width is solved for the paper's S divided by the scale.
    """
    from tfjob import dnn
    from workloads.experiment import BYTES_ONLY

    if job.model in BYTES_ONLY:  # Parameter Flow's numpy models and payload: sized by bytes alone
        return 1.0, float(max(1, round(job.paper_bytes / scale / 4)) * 4)
    if job.width is not None or (scale == 1 and job.model_bytes is None):
        width = job.width or 1.0
        return width, dnn.param_bytes(job.model, width)
    target = job.paper_bytes / scale
    width = dnn.width_for_bytes(job.model, target)
    return width, dnn.param_bytes(job.model, width)


def job_host_names(net: Network, job: JobSpec) -> tuple[list[str], list[str]]:
    """(PSs, workers) of a TF PS job by host name: the job's own, else every PS and worker of the
    topology. The one place of that default: the run places the job by it (runs.runloop.resolve_jobs,
    which checks the names) and the model predicts on it (job_nodes)."""
    ps = list(job.ps) if job.ps is not None else [n.name for n in net.pss()]
    workers = list(job.workers) if job.workers is not None else [n.name for n in net.workers()]
    return ps, workers


def job_nodes(net: Network, job: JobSpec) -> tuple[list[Node], list[Node]]:
    """(workers, PSs) of a TF PS job as the run places it (job_host_names). A job on two modules
    of an H = 4 PSNet names its PSs and is predicted on those alone (Eq. 6)."""
    ps, workers = job_host_names(net, job)
    return [net.nodes[h] for h in workers], [net.nodes[h] for h in ps]


def prediction(
    net: Network, job: JobSpec, width: float, model_bytes: float, host: HostTime | None = None, jobs: int = 1
) -> dict:
    """The paper's model for this job (Eqs. 1-7), with P_w and P_s calibrated here and cached:
    the job on its own workers and PSs (job_nodes), alone on the network (none for a run of `jobs`
    > 1 jobs: they share cables the equations give to one). With `host` in full mode,
    T_compute and T_ps_update are its full-size shares instead (see the module docstring)."""
    from models import bct_model
    from tfjob import calibrate, dnn

    if jobs > 1:
        return {"equation": None, "note": f"the paper's model covers one job alone on the network; this run has {jobs}"}
    workers, pss = job_nodes(net, job)
    try:
        cal = calibrate.calibrate(
            lambda: dnn.build_model(job.model, width), f"{job.model}@w{width:.6g}", job.batch_size
        )
        pred = bct_model.predict(
            net,
            model_bytes,
            job.batch_size * len(workers),
            cal.p_w_samples_per_s,
            cal.p_s_bytes_per_s,
            workers=workers,
            pss=pss,
        )
    except ValueError as err:  # BCube, or a job over more than two modules
        return {"equation": None, "note": str(err)}
    if host is not None and host.mode in PADDED:
        pred = full_host_time(pred, host)
    return {
        **{k: v for k, v in pred.__dict__.items()},
        "t_comm_s": pred.t_comm_s,
        "p_w_samples_per_s": cal.p_w_samples_per_s,
        "p_s_bytes_per_s": cal.p_s_bytes_per_s,
    }


def full_host_time(pred: Prediction, host: HostTime) -> Prediction:
    """`pred` with the full-size host time: T_compute = the worker's share, T_ps_update = the PS's,
    and both bounds (Eqs. 1, 2) recomputed with them."""
    from models import bct_model

    terms = (pred.t_pull_s, host.full_worker_s, pred.t_push_s, host.full_ps_s, pred.t_sync_s)
    return replace(
        pred,
        t_compute_s=host.full_worker_s,
        t_ps_update_s=host.full_ps_s,
        bct_min_s=bct_model.bct_min_s(*terms),
        bct_max_s=bct_model.bct_max_s(*terms),
    )


def placement_prediction(
    net: Network,
    job: JobSpec,
    width: float,
    model_bytes: float,
    bytes_per_ps: dict | None,
    host: HostTime | None = None,
    jobs: int = 1,
) -> dict:
    """The model again with the PSs' real byte split: the equations take S/P per PS; TF places
    whole variables, so the busiest PS holds more (VGG-16's big FC kernel). Substituting
    P x (largest PS share) for S makes every (S/P)/rate term the busiest PS's transfer."""
    if not bytes_per_ps:
        return {}
    held = [float(b) for b in bytes_per_ps.values()]
    effective = len(job_nodes(net, job)[1]) * max(held)
    pred = prediction(net, job, width, effective, host, jobs)
    return {**pred, "largest_ps_share": max(held) / sum(held), "effective_bytes": effective}


def repredict(run_dir: Path, summary: RunSummary | None = None) -> RunSummary:
    """Recompute a finished run's model predictions with the current model code (no rerun): its
    summary (`summary`, else its summary.json) with the new predictions, returned and never written
    back (`--report-only` redraws the report from it; summary.json stays what the run measured)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = (summary if summary is not None else read_summary(run_dir / "summary.json")).as_dict()
    net = build_network(parse_spec(manifest["topology"], str(run_dir / "manifest.json")))
    job = JobSpec.model_validate(manifest["job"])
    record = summary.get("host_time") or {}
    host = HostTime.from_dict(record) if record.get("mode") in PADDED else None  # as measured for the run
    jobs = len(manifest.get("jobs") or [manifest["job"]])
    summary["predicted"] = prediction(net, job, manifest["width"], manifest["model_bytes_emulated"], host, jobs)
    summary["predicted_placement"] = placement_prediction(
        net, job, manifest["width"], manifest["model_bytes_emulated"], summary.get("bytes_per_ps"), host, jobs
    )
    return summary_of(summary, str(run_dir / "summary.json"))

"""The paper's model (Eqs. 1-7) for one run: the job's size at a scale, its predicted BCT, and the
same prediction again with the PSs' real byte split. The model builds nothing: P_w and P_s are
calibrated on this machine (cached), the network is the topology model."""

from __future__ import annotations

import json
from pathlib import Path

from topologies.build import build_network
from topologies.model import Network
from topologies.schema import parse_spec
from workloads.experiment import JobSpec


def choose_width(job: JobSpec, scale: float) -> tuple[float, float]:
    """Width multiplier giving S / scale bytes; returns (width, emulated bytes).

    An explicit width wins; at scale 1 with no model_bytes the real CIFAR architecture runs
    unchanged (width 1); otherwise the width is solved for the paper's S divided by the scale.
    """
    from workloads import models

    if job.width is not None or (scale == 1 and job.model_bytes is None):
        width = job.width or 1.0
        return width, models.param_bytes(job.model, width)
    target = job.paper_bytes / scale
    width = models.width_for_bytes(job.model, target)
    return width, models.param_bytes(job.model, width)


def prediction(net: Network, job: JobSpec, width: float, model_bytes: float) -> dict:
    """The paper's model for this job (Eqs. 1-7), with P_w and P_s calibrated here and cached.
    The model covers one job on all of the topology's workers and PSs."""
    from workloads import bct_model, calibrate, models

    if job.workers is not None or job.ps is not None:
        return {"equation": None, "note": "the paper's model covers one job on all of the topology's hosts"}
    try:
        cal = calibrate.calibrate(
            lambda: models.build_model(job.model, width), f"{job.model}@w{width:.6g}", job.batch_size
        )
        pred = bct_model.predict(
            net, model_bytes, job.batch_size * len(net.workers()), cal.p_w_samples_per_s, cal.p_s_bytes_per_s
        )
    except ValueError as err:  # BCube, or a job over more than two modules
        return {"equation": None, "note": str(err)}
    return {
        **{k: v for k, v in pred.__dict__.items()},
        "t_comm_s": pred.t_comm_s,
        "p_w_samples_per_s": cal.p_w_samples_per_s,
        "p_s_bytes_per_s": cal.p_s_bytes_per_s,
    }


def placement_prediction(
    net: Network, job: JobSpec, width: float, model_bytes: float, bytes_per_ps: dict | None
) -> dict:
    """The model again with the PSs' real byte split: the equations take S/P per PS; TF places
    whole variables, so the busiest PS holds more (VGG-16's big FC kernel). Substituting
    P x (largest PS share) for S makes every (S/P)/rate term the busiest PS's transfer."""
    if not bytes_per_ps:
        return {}
    held = [float(b) for b in bytes_per_ps.values()]
    effective = len(net.pss()) * max(held)
    pred = prediction(net, job, width, effective)
    return {**pred, "largest_ps_share": max(held) / sum(held), "effective_bytes": effective}


def repredict(run_dir: Path) -> dict:
    """Recompute a finished run's model predictions with the current model code (no rerun)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    net = build_network(parse_spec(manifest["topology"], str(run_dir / "manifest.json")))
    job = JobSpec.model_validate(manifest["job"])
    summary["predicted"] = prediction(net, job, manifest["width"], manifest["model_bytes_emulated"])
    summary["predicted_placement"] = placement_prediction(
        net, job, manifest["width"], manifest["model_bytes_emulated"], summary.get("bytes_per_ps")
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary

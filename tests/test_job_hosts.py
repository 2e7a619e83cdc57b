"""A TF PS job's hosts have one default (runs.predict.job_host_names): the run places the job on
them (runs.runloop.resolve_jobs, which checks every name against the topology) and the paper's
model predicts on the same ones (job_nodes). Pure: no emulation."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.predict import job_nodes
from runs.runloop import resolve_jobs
from topologies.build import build_network
from workloads.experiment import ExperimentError, load_experiment

EXPERIMENTS = Path(__file__).resolve().parent.parent / "workloads" / "experiments"


def _plan(name: str, **job: object):
    exp, topo, _ = load_experiment(EXPERIMENTS / name)
    if job:
        exp = exp.model_copy(update={"job": exp.job.model_copy(update=job)})
    net = build_network(topo)
    return exp, net


def test_named_pss_are_the_runs_and_the_models_hosts():
    exp, net = _plan("psnet-4modules-resnet50.yaml")  # H = 4, the job on modules 1 and 2's PSs
    [(job, ps, workers)] = resolve_jobs(exp, net, "x.yaml")
    assert ps == ["ps1_1", "ps2_1"]
    assert len(net.pss()) > 2  # the default would have given every module's PSs
    model_workers, model_pss = job_nodes(net, job)
    assert [n.name for n in model_pss] == ps and [n.name for n in model_workers] == workers


def test_default_hosts_are_every_ps_and_worker_for_both():
    exp, net = _plan("psnet-vgg16.yaml")
    [(job, ps, workers)] = resolve_jobs(exp, net, "x.yaml")
    assert ps == [n.name for n in net.pss()] and workers == [n.name for n in net.workers()]
    model_workers, model_pss = job_nodes(net, job)
    assert [n.name for n in model_pss] == ps and [n.name for n in model_workers] == workers


def test_a_ps_that_is_a_worker_is_refused_with_the_field_and_the_choices():
    exp, net = _plan("psnet-4modules-resnet50.yaml", ps=["w1_1_1"])
    assert "w1_1_1" in net.nodes  # a host of the topology, but a worker
    with pytest.raises(
        ExperimentError, match=r"x\.yaml: jobs\[.*\]\.ps: w1_1_1 is not a ps of the topology; use one of ps1_1"
    ):
        resolve_jobs(exp, net, "x.yaml")

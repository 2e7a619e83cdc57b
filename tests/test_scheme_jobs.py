"""Scheme jobs from experiment files (root): `testbed run` with `scheme:` checks exact sums, reports
GST and the schedule's facts, and with real TF gradients every scheme trains the same model.
(Own module: tests/test_scheme_runs.py keeps a network up for its whole module, and these runs
bring up their own, which must not wait behind it for the one-emulation lock.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.root


def _experiment(tmp_path: Path, name: str, topology: str, **job) -> Path:
    import yaml

    data = {"name": name, "topology": str(Path("topologies").resolve() / topology), "job": job}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_testbed_run_takes_a_scheme_job(tmp_path: Path):
    """An experiment file's `scheme:` runs the engine: exact sums checked, GST per measured step,
    the schedule's cross-rack bytes and chain in the summary, a fidelity verdict."""
    from workloads.runner import run_experiment

    exp = _experiment(tmp_path, "ls-rat", "leafspine-rat.yaml", model="tiny", width=4.0, scheme="rat",
                      compute="calibrated", compute_s=0.01, iterations=3, warmup=1, check=True)  # fmt: skip
    res = run_experiment(exp, results=tmp_path / "results", progress=False)
    s = res.summary
    assert s["scheme"] == "rat" and s["sums_checked"] and s["sum_problems"] == []
    assert s["gst_s"]["n"] == 3 and s["bct_s"]["mean"] >= s["gst_s"]["mean"]
    assert s["chain_length"] == 4  # one oversubscribed level: 2(l + 1)
    assert len(s["cross_region_bytes"]) == 1 and s["cross_region_bytes"][0] > 0
    assert "faithful" in s["fidelity"] and (res.out_dir / "iterations.csv").exists()


WORKERS_3 = ["h0_2", "h0_3", "h1_2"]  # two racks of leafspine-2rack


@pytest.mark.tf
def test_every_scheme_trains_the_same_model(tmp_path: Path):
    """Real TF gradients, same seeds: after the same steps the loss is the same whatever the scheme
    (the sums differ only in float order)."""
    from workloads.runner import run_experiment

    losses = {}
    for scheme in ("ring", "rat", "halving-doubling"):
        job = {"model": "tiny", "width": 1.0, "scheme": scheme, "compute": "tf", "iterations": 3, "warmup": 1}
        exp = _experiment(tmp_path, f"tf-{scheme}", "leafspine-2rack.yaml", check=True, workers=WORKERS_3, **job)
        s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
        assert s["sum_problems"] == []
        losses[scheme] = s["loss"]
    ring = losses["ring"]
    assert len(set(ring)) > 1  # the model trains: the loss moves from step to step
    for scheme, loss in losses.items():
        assert loss == pytest.approx(ring, rel=1e-4), (scheme, loss, ring)

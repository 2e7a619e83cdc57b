"""Host time at full size (tfjob.hosttime): the pad's arithmetic, the full-size width, the
cache, the model in full mode, and the pad inside a real TF worker's step (loopback)."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict
from pathlib import Path

import pytest

from models import bct_model
from runs.predict import full_host_time
from tests.test_psjob import JOB_BUDGET_S, tasks, wait_all
from tfjob import calibrate, dnn, hosttime
from tfjob.psjob_config import parse_args
from topologies.spec import machine_key
from workloads.experiment import PAPER_MODEL_BYTES, ExperimentError, JobSpec, load_experiment

ROOT = Path(__file__).resolve().parent.parent


def host(mode: str = "full", fw: float = 0.9, fp: float = 0.7, sw: float = 0.05, sp: float = 0.02):
    return hosttime.HostTime(mode, 2.03, 0.32, fw, fp, sw, sp)


# --- the arithmetic -------------------------------------------------------------------------------
def test_the_pad_is_full_minus_scaled_and_never_negative():
    assert hosttime.pad_s(1.6, 0.07) == pytest.approx(1.53)
    assert hosttime.pad_s(0.07, 1.6) == 0.0  # a scaled job slower than full size is not sped up
    assert hosttime.pad_s(1.0, 1.0) == 0.0
    h = host()
    assert h.full_s == pytest.approx(1.6) and h.scaled_s == pytest.approx(0.07)
    assert h.pad_s == pytest.approx(1.53)
    assert host(mode="scaled").pad_s == 0.0  # scaled mode never pads


def test_the_summary_record_round_trips_and_states_the_mode():
    d = host().as_dict()
    assert d["mode"] == "full" and d["pad_s"] == pytest.approx(1.53)
    assert d["full"] == {"width": 2.03, "worker_s": 0.9, "ps_s": 0.7}
    assert hosttime.HostTime.from_dict(json.loads(json.dumps(d))) == host()
    assert hosttime.scaled_only() == {"mode": "scaled", "pad_s": 0.0}


def test_full_width_is_the_papers_size_whatever_the_scale():
    s = PAPER_MODEL_BYTES["vgg16"]
    for factor in (40, 80, 800):  # a sweep's retry at twice the scale measures the same full size
        w = hosttime.full_width("vgg16", None, None, s, factor)
        assert w == hosttime.full_width("vgg16", None, None, s, 40)
        assert dnn.param_bytes("vgg16", w) == pytest.approx(s, rel=0.01)
    # nothing divided, no model_bytes: the run is the CIFAR model at width 1 (predict.choose_width)
    assert hosttime.full_width("vgg16", None, None, s, 1) == 1.0
    # an explicit width: its bytes times what divided them
    w = hosttime.full_width("tiny", 0.5, None, PAPER_MODEL_BYTES["tiny"], 10)
    assert dnn.param_bytes("tiny", w) == pytest.approx(10 * dnn.param_bytes("tiny", 0.5), rel=0.02)
    assert hosttime.full_width("tiny", 0.5, None, PAPER_MODEL_BYTES["tiny"], 1) == 0.5


def test_the_model_in_full_mode_takes_the_full_size_host_time():
    pred = bct_model.Prediction("Eq. 5", 6, 2, 1e6, 10.0, 2, None, True, 0.01, 0.02, 3.0, 3.0, 0.0, 3.0, 6.03)
    full = full_host_time(pred, host())
    assert (full.t_compute_s, full.t_ps_update_s) == (0.9, 0.7)
    assert full.bct_max_s == pytest.approx(3.0 + 0.9 + 3.0 + 0.7)  # Eq. 1
    assert full.bct_min_s == pytest.approx(3.0)  # Eq. 2: the transfer still dominates
    slow = full_host_time(pred, host(fw=3.0, fp=1.0))
    assert slow.bct_min_s == pytest.approx(4.0)  # host time above T_push: it is the bound
    assert (full.t_push_s, full.equation) == (pred.t_push_s, pred.equation)


# --- the cache ------------------------------------------------------------------------------------
def test_a_cached_share_is_read_not_measured(tmp_path):
    cache = tmp_path / "hosttime.json"
    version = calibrate.tf_version()
    key = hosttime.cache_key("ps", "vgg16", 2.0287, 1, 6, 2, version, 1)
    entry = hosttime.Share("ps", "vgg16", 2.0287, 1, 6, 2, 1, version, 0.69, (0.72, 0.69, 0.79), 276_773_448, 1.0)
    cache.write_text(json.dumps({key: asdict(entry)}))
    assert hosttime.share("ps", "vgg16", 2.0287, 1, 6, 2, cache_path=cache) == entry


def test_cache_keys_separate_what_changes_a_share():
    v = "2.21.0"
    k = hosttime.cache_key
    # a worker's share: model, width, batch; W and P do not matter to it
    assert k("worker", "vgg16", 2.0, 1, 6, 2, v, 1) == k("worker", "vgg16", 2.0, 1, 4, 3, v, 1)
    assert k("worker", "vgg16", 2.0, 1, 6, 2, v, 1) != k("worker", "vgg16", 2.0, 2, 6, 2, v, 1)
    # a PS's share: W and P; the batch does not matter to it
    assert k("ps", "vgg16", 2.0, 1, 6, 2, v, 1) == k("ps", "vgg16", 2.0, 2, 6, 2, v, 1)
    assert k("ps", "vgg16", 2.0, 1, 6, 2, v, 1) != k("ps", "vgg16", 2.0, 1, 6, 3, v, 1)
    # the same invalidation as the calibration: another TF or thread count measures again
    assert k("ps", "vgg16", 2.0, 1, 6, 2, v, 1) != k("ps", "vgg16", 2.0, 1, 6, 2, "2.22.0", 1)
    assert k("ps", "vgg16", 2.0, 1, 6, 2, v, 1) != k("ps", "vgg16", 2.0, 1, 6, 2, v, 2)
    assert hosttime.cache_file().parent == calibrate.cache_file().parent
    assert f"machine={machine_key()}" in k("ps", "vgg16", 2.0, 1, 6, 2, v, 1)  # another machine measures again


def test_a_pinned_host_time_pads_to_the_same_step_on_any_machine(tmp_path):
    """`host_time: 2.5`: the full-size host time is the job's number, not this machine's; only the
    run's own size is measured (here: read from the cache), and the pad makes up the difference.
    The paper's model takes the pinned seconds as its host time."""
    job = JobSpec(model="vgg16", host_time=2.5)
    assert job.host_time_mode == "pinned"
    cache = tmp_path / "hosttime.json"
    version = calibrate.tf_version()
    entries = {}
    for kind, secs in (("worker", 0.3), ("ps", 0.2)):
        key = hosttime.cache_key(kind, "vgg16", 0.25, 1, 6, 2, version, 1)
        entries[key] = asdict(hosttime.Share(kind, "vgg16", 0.25, 1, 6, 2, 1, version, secs, (secs,), 1000, 1.0))
    cache.write_text(json.dumps(entries))
    ht = hosttime.for_spec(job, 0.25, 6, 2, 40.0, cache_path=cache)
    assert (ht.mode, ht.full_s, ht.scaled_s) == ("pinned", 2.5, 0.5)
    assert ht.pad_s == pytest.approx(2.0)
    assert hosttime.HostTime.from_dict(ht.as_dict()) == ht and "pinned" in ht.as_dict()["method"]
    pred = bct_model.Prediction("Eq. 5", 6, 2, 1e6, 10.0, 2, None, True, 0.01, 0.02, 3.0, 3.0, 0.0, 3.0, 6.03)
    assert full_host_time(pred, ht).bct_max_s == pytest.approx(3.0 + 2.5 + 3.0)  # Eq. 1 with the pinned host time
    assert hosttime.for_spec(JobSpec(model="vgg16"), 0.25, 6, 2, 40.0, cache_path=cache) is None  # scaled


@pytest.mark.tf
def test_shares_are_measured_once_then_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(hosttime, "LOADED", 1.0)  # cached however busy the machine is (next test: not)
    cache = tmp_path / "hosttime.json"
    first = hosttime.share("worker", "tiny", 1.0, 1, 2, 1, cache_path=cache)
    assert (
        first.seconds > 0
        and first.seconds == statistics.median(first.steps_s)
        and first.bytes == dnn.param_bytes("tiny")
    )
    again = hosttime.share("worker", "tiny", 1.0, 1, 2, 1, cache_path=cache)
    assert again == first  # same measurement time: read back, not measured
    ps = hosttime.share("ps", "tiny", 1.0, 1, 2, 1, cache_path=cache)
    assert ps.bytes == dnn.param_bytes("tiny")  # one PS holds the whole model
    assert len(json.loads(cache.read_text())) == 2
    forced = hosttime.share("worker", "tiny", 1.0, 1, 2, 1, force=True, cache_path=cache)
    assert forced.measured_unix_s > first.measured_unix_s


@pytest.mark.tf
def test_a_share_measured_on_a_loaded_machine_is_not_cached(tmp_path, monkeypatch, caplog):
    """Above LOADED busy CPUs the share is used (and says how busy) but not kept: the next run
    measures again rather than carrying a slow reading for ever."""
    monkeypatch.setattr(hosttime, "LOADED", -1.0)  # any machine counts as loaded
    cache = tmp_path / "hosttime.json"
    got = hosttime.share("worker", "tiny", 1.0, 1, 2, 1, cache_path=cache)
    assert got.seconds > 0 and 0.0 <= got.busy_before <= 1.0
    assert not cache.exists() or json.loads(cache.read_text()) == {}
    assert "not cached" in caplog.text


# --- the job field and the worker's argument ------------------------------------------------------
def test_host_time_is_a_job_field_refused_for_scheme_jobs(tmp_path):
    assert JobSpec(model="tiny").host_time == "scaled"
    f = tmp_path / "x.yaml"
    topo = ROOT / "topologies" / "psnet-1tor.yaml"
    f.write_text(json.dumps({"topology": str(topo), "job": {"model": "tiny", "scheme": "ring", "host_time": "full"}}))
    with pytest.raises(ExperimentError) as err:
        load_experiment(f)
    assert "host_time: full pads the TF PS job" in str(err.value) and "\n" not in str(err.value)
    f.write_text(json.dumps({"topology": str(topo), "job": {"model": "tiny", "host_time": "half"}}))
    with pytest.raises(ExperimentError, match="host_time"):
        load_experiment(f)


def test_pad_s_is_a_worker_argument():
    cluster = '{"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}'
    assert parse_args(["--cluster", cluster, "--job", "worker", "--task", "0", "--pad-s", "0.5"]).pad_s == 0.5
    assert parse_args(["--cluster", cluster, "--job", "worker", "--task", "0"]).pad_s == 0.0
    with pytest.raises(SystemExit):
        parse_args(["--cluster", cluster, "--job", "worker", "--task", "0", "--pad-s", "-1"])


# --- the pad in a real worker's step --------------------------------------------------------------
@pytest.mark.tf
def test_a_padded_worker_step_is_longer_by_the_pad(tmp_path):
    """1 PS + 1 worker on loopback, tiny model, 6 steps, with and without a 0.5 s pad."""
    pad, steps = 0.5, 6
    means = {}
    with tasks(tmp_path) as launch:
        for name, extra in (("plain", []), ("padded", ["--pad-s", str(pad)])):
            _, workers = launch.start_job(f"{name}-", 1, 1, "--model", "tiny", "--iterations", str(steps), *extra)
            wait_all(workers, JOB_BUDGET_S)
            events = workers[0].events()
            iters = [e["bct_s"] for e in events if e["event"] == "iter"][1:]  # the first step warms up
            assert len(iters) == steps - 1, events
            done = next(e for e in events if e["event"] == "done")
            assert done["pad_s"] == (pad if extra else 0.0)
            means[name] = statistics.fmean(iters)
            if extra:
                assert min(iters) >= pad  # every step slept, inside the step the worker times
    assert pad * 0.9 <= means["padded"] - means["plain"] <= pad + 0.3, means

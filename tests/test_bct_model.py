"""The analytic BCT model (Section 4.1) against hand-computed numbers, and the calibration cache."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from models import bct_model as bm
from topologies.build import build_network, load_network
from topologies.model import Network
from topologies.schema import parse_spec

TOPOS = Path(__file__).resolve().parent.parent / "topologies"
GBIT_BYTES = 125e6  # 1 Gbit = 125e6 bytes: S / (1000 Mbit/s) = 1 s


def _net(file: str, **override: object) -> Network:
    data = yaml.safe_load((TOPOS / file).read_text())
    data.update(override)
    return build_network(parse_spec(data, file))


# --- Eqs. 3 and 4 ---------------------------------------------------------------------------
def test_t_compute_eq3() -> None:
    # BS / (W x P_w) = 12 / (6 x 4) = 0.5 s
    assert bm.t_compute_s(batch_size=12, workers=6, p_w=4.0) == pytest.approx(0.5)


def test_t_ps_update_eq4() -> None:
    # W x S / (P x P_s) = 6 x 100e6 / (2 x 300e6) = 1.0 s
    assert bm.t_ps_update_s(workers=6, model_bytes=100e6, ps=2, p_s=300e6) == pytest.approx(1.0)


def test_rates_must_be_positive() -> None:
    with pytest.raises(ValueError, match="p_w"):
        bm.t_compute_s(1, 6, 0.0)


# --- Eq. 5 ------------------------------------------------------------------------------------
def test_eq5_prototype_is_s_over_bw() -> None:
    # R=3, K=1 (B_s = B_w = 1000), W=6, P=2: min(3 x 1000 / 6, 1000 / 2) = 500 Mbit/s = 62.5e6 B/s;
    # (S/P) = 62.5e6 bytes -> 1.0 s = S / B_w; + 2 x latency = 1.0 + 2 x 0.01 = 1.02 s
    t = bm.t_push_one_module_s(GBIT_BYTES, ps=2, workers=6, tors=3, ps_mbps=1000, worker_mbps=1000)
    assert t == pytest.approx(1.0)
    t = bm.t_push_one_module_s(GBIT_BYTES, 2, 6, 3, 1000, 1000, latency_s=0.01)
    assert t == pytest.approx(1.02)


def test_eq5_worker_link_bounds_large_k() -> None:
    # K=2: min(3 x 2000 / 6, 1000 / 2) = min(1000, 500) = 500 -> 1.0 s, as K=1 (Figs. 6(a), 10)
    assert bm.t_push_one_module_s(GBIT_BYTES, 2, 6, 3, 2000, 1000) == pytest.approx(1.0)
    # K=0.5: min(3 x 500 / 6, 500) = 250 Mbit/s = 31.25e6 B/s; 62.5e6 / 31.25e6 = 2.0 s
    assert bm.t_push_one_module_s(GBIT_BYTES, 2, 6, 3, 500, 1000) == pytest.approx(2.0)


def test_predict_psnet_prototype() -> None:
    net = load_network(TOPOS / "psnet-testbed.yaml")
    # paper units: S = 125e6 bytes at B_w = 1000 Mbit/s -> T_push = S / B_w = 1 s, + 2 x 1 ms
    pred = bm.predict(net, GBIT_BYTES, batch_size=6, p_w=3.0, p_s=750e6, latency_s=0.001, scaled=False)
    assert (pred.equation, pred.hops, pred.c, pred.workers, pred.ps) == ("Eq. 5", 2, None, 6, 2)
    assert pred.flow_mbps == pytest.approx(500)
    assert pred.t_push_s == pred.t_pull_s == pytest.approx(1.002)
    # T_compute = 6 / (6 x 3) = 1/3 s; T_ps_update = 6 x 125e6 / (2 x 750e6) = 0.5 s
    assert pred.t_compute_s == pytest.approx(1 / 3)
    assert pred.t_ps_update_s == pytest.approx(0.5)
    # BCT_max = 1.002 + 1/3 + 1.002 + 0.5 = 2.8373...; BCT_min = max(1/3 + 0.5, 1.002) = 1.002
    assert pred.bct_max_s == pytest.approx(2.004 + 1 / 3 + 0.5)
    assert pred.bct_min_s == pytest.approx(1.002)
    assert pred.t_comm_s == pytest.approx(2.004)


# --- Eq. 6 ------------------------------------------------------------------------------------
def test_eq6_hand_computed() -> None:
    # P=4, P1=2, W=8, W1=4, R=3, B_s=1000, B_w=2000:
    #   R B_s / W = 3000 / 8 = 375; B_w / P = 500;
    #   literal  R B_s / (W1 (P-1)) = 3000 / (4 x 3) = 250;  R B_s / ((W-W1) P1) = 3000 / (4 x 2) = 375
    #   min = 250 Mbit/s = 31.25e6 B/s; S/P = 80e6 / 4 = 20e6 -> 0.64 s; + alpha x latency = 5 x 1 ms
    args = dict(model_bytes=80e6, ps=4, workers=8, ps_module1=2, workers_module1=4, tors=3)
    rates = dict(ps_mbps=1000, worker_mbps=2000, alpha=5, latency_s=0.001)
    assert bm.t_push_two_modules_s(**args, **rates) == pytest.approx(0.645)
    # with (P - P1) = 2 instead: 3000 / (4 x 2) = 375 -> min 375 = 46.875e6 B/s -> 20e6 / 46.875e6 s
    corrected = bm.t_push_two_modules_s(**args, **rates, paper_literal=False)
    assert corrected == pytest.approx(20e6 / 46.875e6 + 0.005)


def test_eq6_p1_one_literal_equals_corrected() -> None:
    # P=2, P1=1, W=6, W1=3, R=3, B_s=B_w=1000: min(500, 500, 3000/(3x1), 3000/(3x1)) = 500 -> S/B_w
    for literal in (True, False):
        t = bm.t_push_two_modules_s(GBIT_BYTES, 2, 6, 1, 3, 3, 1000, 1000, alpha=5, paper_literal=literal)
        assert t == pytest.approx(1.0)


def test_eq6_no_inter_module_flows_do_not_constrain() -> None:
    # all in module 1 (W1 = W = 6, P1 = P = 3), R=3, B_s=B_w=1000: no flow crosses modules.
    # Eq. 5: min(3000/6, 1000/3) = 333.3 Mbit/s = 41.67e6 B/s; S/P = 41.67e6 bytes -> 1.0 s
    eq5 = bm.t_push_one_module_s(GBIT_BYTES, 3, 6, 3, 1000, 1000)
    assert eq5 == pytest.approx(1.0)
    # (P - P1) = 0 and (W - W1) = 0: both inter-module terms drop out, Eq. 6 = Eq. 5
    assert bm.t_push_two_modules_s(GBIT_BYTES, 3, 6, 3, 6, 3, 1000, 1000, alpha=5, paper_literal=False) == eq5
    # the printed (P - 1) keeps a term 3000 / (6 x 2) = 250 Mbit/s = 31.25e6 B/s -> 41.67e6 / 31.25e6 = 4/3 s
    literal = bm.t_push_two_modules_s(GBIT_BYTES, 3, 6, 3, 6, 3, 1000, 1000, alpha=5)
    assert literal == pytest.approx(4 / 3)


def test_predict_two_modules() -> None:
    net = load_network(TOPOS / "psnet-2modules.yaml")
    # P=2 (P1=1), W=6 (W1=3), R=3, B_s=B_w: min(500, 500, 1000, 1000) = B_w / 2;
    # alpha = worker, ToR, SuperNode, SuperNode, ToR, PS = 5 links
    pred = bm.predict(net, GBIT_BYTES, 1, 1.0, 1e9, latency_s=0.001, scaled=False)
    assert (pred.equation, pred.hops, pred.workers, pred.ps) == ("Eq. 6", 5, 6, 2)
    assert pred.flow_mbps == pytest.approx(500)
    assert pred.t_push_s == pytest.approx(1.005)


# --- Eq. 7 ------------------------------------------------------------------------------------
def test_eq7_hand_computed() -> None:
    # W=6, P=2, B_s=B_w=1000, C=6, r=2: min(1000/6, 1000/2, (1000/2)/6) = 83.33 Mbit/s
    #   = 10.4167e6 B/s; S/P = 62.5e6 bytes -> 6.0 s; + beta x latency = 6 x 0.5 ms = 3 ms
    t = bm.t_push_fattree_s(GBIT_BYTES, 2, 6, 1000, 1000, oversubscription=2, c=6, beta=6, latency_s=0.0005)
    assert t == pytest.approx(6.003)


@pytest.mark.parametrize(("r", "s_over_bw"), [(1, 3), (2, 6), (5, 15)])
def test_predict_fattree_prototype(r: float, s_over_bw: float) -> None:
    # derived from the PSNet paper's Eq. 7: 12 worker->PS flows leave ToR 1's 2 uplinks, C = 6;
    # min(B/6, B/2, (B/r)/6) -> T_push = 3, 6, 15 x S / B_w for r = 1, 2, 5
    net = _net("fattree-testbed.yaml", routing="balanced", oversubscription=r)
    pred = bm.predict(net, GBIT_BYTES, 1, 1.0, 1e9, scaled=False)
    assert (pred.equation, pred.c) == ("Eq. 7", 6)
    assert pred.hops == 6  # beta: host, ToR, agg, core, agg, ToR, host (the other pod)
    assert pred.t_push_s == pytest.approx(s_over_bw)


# --- Eqs. 1 and 2 ------------------------------------------------------------------------------
def test_bct_bounds_hand_computed() -> None:
    # pull 2, compute 1, push 2, update 0.5, sync 0.25: max = 5.75, min = max(1.75, 2, 2) = 2
    assert bm.bct_max_s(2.0, 1.0, 2.0, 0.5, 0.25) == pytest.approx(5.75)
    assert bm.bct_min_s(2.0, 1.0, 2.0, 0.5, 0.25) == pytest.approx(2.0)
    # compute-bound: min = 3 + 1 + 0 = 4 (T_sync defaults to 0)
    assert bm.bct_min_s(1.0, 3.0, 1.0, 1.0) == pytest.approx(4.0)


def test_bct_min_never_exceeds_max() -> None:
    rng = random.Random(7)
    for _ in range(500):
        parts = [rng.uniform(0, 10) for _ in range(5)]
        assert bm.bct_min_s(*parts) <= bm.bct_max_s(*parts)
    for file in ("psnet-testbed.yaml", "psnet-2modules.yaml", "fattree-testbed.yaml"):
        pred = bm.predict(load_network(TOPOS / file), 1e6, 1, rng.uniform(0.1, 10), rng.uniform(1e6, 1e9))
        assert pred.bct_min_s <= pred.bct_max_s


# --- scale invariance -----------------------------------------------------------------------
@pytest.mark.parametrize("file", ["psnet-testbed.yaml", "psnet-2modules.yaml", "fattree-testbed.yaml"])
def test_scale_invariance(file: str) -> None:
    # the testbed divides rates and model bytes by `scale` together: S / B, and so T_push, is kept
    s_paper, p_s = 528e6, 2e9
    paper = bm.predict(load_network(TOPOS / file), s_paper, 1, 2.0, p_s, latency_s=1e-4, scaled=False)
    for scale in (4, 10, 40):
        net = _net(file, scale=scale)
        emu = bm.predict(net, s_paper / scale, 1, 2.0, p_s / scale, latency_s=1e-4, scaled=True)
        assert emu.flow_mbps == pytest.approx(paper.flow_mbps / scale)
        assert emu.t_push_s == pytest.approx(paper.t_push_s)
        # with every byte rate scaled too (P_s), all of BCT is the same in emulated seconds
        assert emu.bct_min_s == pytest.approx(paper.bct_min_s)
        assert emu.bct_max_s == pytest.approx(paper.bct_max_s)


# --- what the paper does not model -------------------------------------------------------------
def test_bcube_is_refused() -> None:
    with pytest.raises(ValueError, match="no BCT model for BCube"):
        bm.predict(load_network(TOPOS / "bcube-4-1.yaml"), 1e6, 1, 1.0, 1e9)


def test_more_than_two_modules_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("one (Eq. 5) or two (Eq. 6)")):
        bm.predict(load_network(TOPOS / "psnet-4modules.yaml"), 1e6, 1, 1.0, 1e9)


def test_a_job_on_two_modules_of_an_h4_psnet_is_eq6_on_its_own_hosts() -> None:
    """H = 4 (psnet-4modules-pair.yaml) with the job's PSs named: Eq. 6 for those hosts alone (P = 2,
    P1 = 1, W1 = 3, the idle PSs of modules 3 and 4 left out), the same T_push as the two-module
    PSNet at equal rates; all four PSs would span four modules, which the paper does not model."""
    net = load_network(TOPOS / "psnet-4modules-pair.yaml")
    pss = [net.nodes["ps1_1"], net.nodes["ps2_1"]]
    p = bm.predict(net, GBIT_BYTES, 1, 1.0, 1e9, scaled=False, pss=pss)
    assert (p.equation, p.workers, p.ps) == ("Eq. 6", 6, 2)
    terms = bm.two_modules_terms_of(net, scaled=False, pss=pss)
    assert list(terms.values()) == [500, 500, 1000, 1000] and p.flow_mbps == min(terms.values())
    two = bm.predict(load_network(TOPOS / "psnet-2modules.yaml"), GBIT_BYTES, 1, 1.0, 1e9, scaled=False)
    assert p.t_push_s == pytest.approx(two.t_push_s)
    with pytest.raises(ValueError, match=re.escape("one (Eq. 5) or two (Eq. 6)")):
        bm.predict(net, GBIT_BYTES, 1, 1.0, 1e9, scaled=False)


# --- calibration ------------------------------------------------------------------------------
@pytest.mark.tf
def test_calibration_measures_and_caches(tmp_path: Path) -> None:
    from tfjob.calibrate import calibrate

    cache = tmp_path / "calibration.json"
    first = calibrate(batch_size=2, cache_path=cache)
    assert first.p_w_samples_per_s > 0
    assert first.p_s_bytes_per_s > 0
    assert first.model_bytes > 0
    mtime = cache.stat().st_mtime_ns
    start = time.perf_counter()
    again = calibrate(batch_size=2, cache_path=cache)
    assert time.perf_counter() - start < 0.5  # a cache read, no measuring
    assert again == first
    assert cache.stat().st_mtime_ns == mtime
    forced = calibrate(batch_size=2, cache_path=cache, force=True)
    assert forced.measured_unix_s > first.measured_unix_s


@pytest.mark.tf
def test_a_calibration_keeps_tensorflows_start_up_lines_out_of_the_terminal(tmp_path: Path) -> None:
    """A fresh process (TF not yet imported, as `testbed replay` on a new clone): TensorFlow 2.21's
    C++ start-up lines ignore TF_CPP_MIN_LOG_LEVEL and write to fd 2; they go to tensorflow.log
    beside the cache instead of the replay's terminal, and our own stderr works again after."""
    code = (
        "import sys; from pathlib import Path; from tfjob.calibrate import calibrate; "
        f"c = calibrate(batch_size=2, cache_path=Path({str(tmp_path / 'calibration.json')!r})); "
        "print('after', c.p_w_samples_per_s > 0, file=sys.stderr)"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=True)
    assert p.stderr.strip() == "after True", p.stderr
    # what TF prints at start-up depends on the CPU (oneDNN's notice on some, nothing on others):
    # the log is there, whatever it holds; the C-level redirect itself is the next test's
    assert (tmp_path / "tensorflow.log").exists()


def test_native_stderr_to_catches_c_level_writes_and_restores_fd_2(tmp_path: Path) -> None:
    """A write(2) from C (as TF's absl and oneDNN do) inside the block lands in the file, not on
    the terminal; Python's own stderr reaches the terminal again after the block."""
    code = (
        "import ctypes, sys; from pathlib import Path; from tfjob.calibrate import native_stderr_to; "
        "libc = ctypes.CDLL(None); "
        f"cm = native_stderr_to(Path({str(tmp_path / 'tensorflow.log')!r})); cm.__enter__(); "
        "libc.write(2, b'native line from C\\n', 19); cm.__exit__(None, None, None); "
        "print('after', file=sys.stderr)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert p.stderr.strip() == "after", p.stderr
    assert (tmp_path / "tensorflow.log").read_text() == "native line from C\n"


def test_eq5_follows_the_busiest_tor_of_an_unbalanced_deployment() -> None:
    # worker(1,1,4), B_w = 100 Mbit/s emulated, S = 1 MB, P = 2: ToR 3's PS NIC (K x B_w) carries 4
    # flows. K = 1: min(100/4, 100/2) = 25 Mbit/s per flow -> (0.5 MB)/(25 Mbit/s) = 0.16 s;
    # K = 2 and 3: the worker link's 100/2 = 50 Mbit/s limits -> 0.08 s (Fig. 10's flattening).
    from topologies.build import build_network
    from topologies.schema import parse_spec

    def t_push(k: float, workers: list[int]) -> tuple[str, float]:
        spec = parse_spec(
            {"kind": "psnet", "tors": 3, "ps": 2, "workers": workers, "K": k, "worker_mbps": 1000, "scale": 10}, "t"
        )
        p = bm.predict(build_network(spec), 1e6, 6, 100.0, 1e9)
        return p.equation, p.t_push_s

    assert t_push(1, [1, 1, 4]) == ("Eq. 5 (busiest ToR)", pytest.approx(0.16))
    assert t_push(2, [1, 1, 4])[1] == pytest.approx(0.08) == t_push(3, [1, 1, 4])[1]
    # balanced: plain Eq. 5, (0.5 MB) / min(3 x 100 / 6, 100 / 2) = 0.08 s
    assert t_push(1, [2, 2, 2]) == ("Eq. 5", pytest.approx(0.08))


def test_eq6_terms_name_the_binding_link() -> None:
    net = load_network(TOPOS / "psnet-2modules.yaml")
    terms = bm.two_modules_terms_of(net, scaled=False)
    # R B_s / W = 3000 / 6, B_w / P = 1000 / 2, R B_s / (W1 (P - 1)) = 3000 / 3 both ways
    assert list(terms.values()) == [500, 500, 1000, 1000]
    assert min(terms.values()) == bm.predict(net, GBIT_BYTES, 1, 1.0, 1e9, scaled=False).flow_mbps
    with pytest.raises(ValueError, match="exactly two modules"):
        bm.two_modules_terms_of(load_network(TOPOS / "psnet-testbed.yaml"))

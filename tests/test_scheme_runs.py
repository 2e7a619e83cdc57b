"""Schemes inside Mininet (root): exact sums between emulated hosts, and each host's NIC carries
the bytes the schedule counts (payload plus TCP/IP framing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulation import measure
from emulation.net import Testbed
from engine.emulated import run_in_testbed
from engine.host import verify_sums
from schemes import compile_scheme
from schemes.schedule import host_bytes

pytestmark = pytest.mark.root
N_ELEMS = 250_000  # 1 MB of float32
FRAME_BYTES = 1514  # a full TCP segment on the wire


@pytest.fixture(scope="module")
def fattree():
    with Testbed("topologies/fattree-testbed.yaml") as tb:
        yield tb


def _tx(tb: Testbed, host: str) -> int:
    return sum(tx for _, tx in measure.nic_bytes(tb, host).values())


@pytest.mark.parametrize("scheme", ["ps", "ring", "halving-doubling", "rat"])
def test_scheme_sums_exactly_and_moves_the_counted_bytes(fattree: Testbed, tmp_path: Path, scheme: str):
    tb = fattree
    workers = [w.name for w in tb.model.workers()]
    servers = [p.name for p in tb.model.pss()] if scheme == "ps" else []
    hosts = workers + servers
    regions = {w: (f"tor{tb.model.nodes[w].index}",) for w in workers}  # the rack: its ToR
    cfg = {
        "scheme": scheme,
        "workers": workers,
        "servers": servers,
        "regions": regions,
        "n_elems": N_ELEMS,
        "mode": "calibrated",
        "compute_s": 0.0,
        "seed": 1,
        "warmup": 0,
        "iterations": 2,
        "check": True,
    }
    before = {h: (_tx(tb, h), measure.tcp_retrans(tb, [h])) for h in hosts}
    run = run_in_testbed(tb, cfg, hosts, tmp_path, timeout_s=180)
    after = {h: (_tx(tb, h), measure.tcp_retrans(tb, [h])) for h in hosts}
    assert verify_sums(tmp_path, workers) == []
    sched = compile_scheme(scheme, workers, N_ELEMS, servers=servers, regions=regions)
    for h in hosts:
        payload = 2 * host_bytes(sched)[h][0]  # two iterations
        sent = after[h][0] - before[h][0]
        resent = (after[h][1] - before[h][1]) * FRAME_BYTES  # what queues dropped, sent again (incast)
        # framing: ~66 B of Ethernet/IP/TCP headers per 1448 B segment (4.6%), plus ACKs and handshakes
        assert payload * 1.0 <= sent <= payload * 1.08 + resent + 200_000, (h, payload, sent, resent)
    assert run.mean_sync_s() > 0


def test_open_mpi_allreduce_runs_between_the_emulated_hosts(fattree: Testbed, tmp_path: Path):
    """The field's reference: Open MPI's ring allreduce, one rank per host, sums right across the links."""
    from engine.mpi import run_mpi_allreduce

    workers = [w.name for w in fattree.model.workers()]
    before = {h: _tx(fattree, h) for h in workers}
    res = run_mpi_allreduce(fattree, workers, N_ELEMS, "ring", tmp_path, warmup=0, iterations=1)
    assert res["sum_ok"] and res["ranks"] == len(workers)
    ring_bytes = 2 * (len(workers) - 1) / len(workers) * N_ELEMS * 4
    for h in workers:  # every rank's share of the ring crossed its emulated NIC
        assert _tx(fattree, h) - before[h] >= ring_bytes


def test_an_mpi_launch_whose_ranks_never_come_up_is_stopped_at_the_launch_timeout(fattree: Testbed, tmp_path: Path):
    """The launch watchdog: a run that never prints LAUNCHED (here a process that only sleeps, as
    mpirun does waiting for a daemon that never reports) is stopped after `launch_s`, not at the
    run's timeout, and nothing of it is left running."""
    import time

    import psutil

    from emulation.net import clean_env
    from engine.mpi import _mpirun

    hostmap = str(tmp_path / "hostmap")
    env = {**clean_env(), "PSNET_MPI_HOSTMAP": hostmap}
    t0 = time.monotonic()
    out, code = _mpirun(fattree, fattree.model.workers()[0].name, ["sleep", "120"], env, hostmap, 300, launch_s=2)
    assert code == -9 and "not every rank up after 2 s" in out
    assert time.monotonic() - t0 < 60
    envs = [p.info["environ"] or {} for p in psutil.process_iter(["environ"])]
    assert not [e for e in envs if e.get("PSNET_MPI_HOSTMAP") == hostmap]

"""The scheme engine over real TCP on loopback: every scheme sums exactly, bytes are as counted,
paused senders hold a ring back more than RAT. (Inside Mininet: tests/test_scheme_runs.py.)"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from engine.host import verify_sums
from engine.processes import local_starter, run_scheme
from schemes import compile_scheme
from schemes.schedule import host_bytes

N_ELEMS = 50_001


def config(scheme: str, workers: list[str], **over) -> dict:
    return {
        "scheme": scheme,
        "workers": workers,
        "servers": over.pop("servers", []),
        "regions": over.pop("regions", None),
        "n_elems": N_ELEMS,
        "mode": "calibrated",
        "compute_s": 0.0,
        "model": "tiny",
        "width": 1.0,
        "batch_size": 1,
        "lr": 0.01,
        "seed": 3,
        "warmup": 1,
        "iterations": 2,
        "check": True,
        **over,
    }


@pytest.mark.parametrize("scheme", ["ps", "mesh", "ring", "halving-doubling", "rat"])
def test_every_scheme_sums_exactly_over_tcp(tmp_path: Path, scheme: str):
    workers = [f"w{i}" for i in range(5)]
    servers = ["s0", "s1"] if scheme == "ps" else []
    regions = {w: (f"r{i // 3}",) for i, w in enumerate(workers)}
    cfg = config(scheme, workers, servers=servers, regions=regions)
    hosts = workers + servers
    run = run_scheme(cfg, hosts, dict.fromkeys(hosts, "127.0.0.1"), tmp_path, local_starter(tmp_path), timeout_s=120)
    assert verify_sums(tmp_path, workers) == []
    its = run.iterations()
    assert [i["iteration"] for i in its] == [1, 2]  # the warm-up iteration is not measured
    sched = compile_scheme(scheme, workers, N_ELEMS, servers=servers, regions=regions)
    counted = sum(sent for sent, _ in host_bytes(sched).values())
    assert all(i["sent_bytes"] == counted for i in its)  # the bytes the schedule says, no more


def test_with_a_barrier_no_host_leaves_before_every_host_ended_its_last_iteration(tmp_path: Path):
    """The final barrier: a host that ended early would close its connections and exit, on the
    machine's 2 cores, while others still synchronise (at 64 hosts the last iteration stood out).
    A PS's server ends its last iteration once its pulls are in its sockets, before the workers
    have read them: it must still wait."""
    from engine.processes import read_rows

    workers, servers = ["w0", "w1"], ["s0"]
    hosts = workers + servers
    cfg = config("ps", workers, servers=servers, barrier=True, n_elems=2_000_000, check=False)
    run = run_scheme(cfg, hosts, dict.fromkeys(hosts, "127.0.0.1"), tmp_path, local_starter(tmp_path), timeout_s=120)
    assert len(run.iterations()) == 2
    rows = {h: read_rows(tmp_path / f"{h}.jsonl") for h in hosts}
    last_end = max(r["ended"] for rs in rows.values() for r in rs if "iteration" in r)
    done = {h: next(r["t"] for r in rs if r.get("done")) for h, rs in rows.items()}
    assert min(done.values()) >= last_end, (done, last_end)


def test_paused_senders_hold_a_ring_back_more_than_rat(tmp_path: Path):
    """RAT's Fig. 7 in miniature: one of six hosts paused per 0.2 s period. A ring chunk needs every
    host at each of its 2(W-1) steps; a RAT tree needs each host's sends once up and once down."""
    from engine.pauses import pause_plan

    workers = [f"w{i}" for i in range(6)]
    means = {}
    for scheme in ("ring", "rat"):
        plan = pause_plan(workers, k=1, d_s=0.2, seed=7, start=0.0, duration_s=60)  # seconds after t0
        cfg = config(scheme, workers, iterations=3, check=False)
        hosts = workers
        d = tmp_path / scheme
        d.mkdir()
        pauses = {h: {"pauses": plan[h]} for h in hosts}
        run = run_scheme(cfg, hosts, dict.fromkeys(hosts, "127.0.0.1"), d, local_starter(d), 120, pauses)
        means[scheme] = run.mean_sync_s()
    assert means["ring"] > 1.2 * means["rat"], means  # 1.43x on a CI run (2026-11-28), 1.5x asked before


def test_trace_records_every_step_once_in_time_order(tmp_path: Path):
    """With `trace`, each host's row lists every step of its schedule once (when it completed),
    times within the synchronisation: what benchmarks read to see where a stage waited; and every
    frame it received once, when its last byte came, no later than the step that took it."""
    workers = [f"w{i}" for i in range(4)]
    cfg = config("ring", workers, trace=True, check=False)
    run = run_scheme(cfg, workers, dict.fromkeys(workers, "127.0.0.1"), tmp_path, local_starter(tmp_path), 120)
    sched = compile_scheme("ring", workers, N_ELEMS)
    for r in run.rows:
        want = sorted((s.op.value, s.peer, s.chunk) for s in sched.steps[r["host"]])
        assert sorted((op, peer, c) for _, op, peer, c in r["trace"]) == want
        times = [t for t, *_ in r["trace"]]
        assert times == sorted(times) and times[0] >= 0 and times[-1] <= r["sync_s"] + 1e-3
        taken, arrived = defaultdict(list), defaultdict(list)  # a ring takes a chunk from its peer twice
        for t, op, peer, c in r["trace"]:
            if op != "send":
                taken[(peer, c)].append(t)
        for t, peer, c in r["arrivals"]:
            arrived[(peer, c)].append(t)
        assert {k: len(v) for k, v in arrived.items()} == {k: len(v) for k, v in taken.items()}, r["arrivals"]
        assert all(a <= b + 1e-3 for k in taken for a, b in zip(arrived[k], taken[k], strict=True)), (arrived, taken)


def test_iterations_separate_start_skew_from_the_sync():
    """A host that begins early waits for the others inside its own sync time: GST (the slowest
    worker's sync) counts that wait, the last start to the last end does not."""
    from engine.processes import SchemeRun

    def row(host: str, started: float, sync_s: float) -> dict:
        return {"iteration": 1, "host": host, "role": "worker", "started": started, "compute_s": 0.5,
                "sync_s": sync_s, "sent_bytes": 10, "loss": None}  # fmt: skip

    run = SchemeRun(Path("."), [row("a", 100.0, 2.0), row("b", 100.25, 1.75)])  # both end at 102.5
    (it,) = run.iterations()
    assert it["sync_s"] == 2.0
    assert it["start_skew_s"] == pytest.approx(0.25) and it["sync_after_last_start_s"] == pytest.approx(1.75)


def test_a_host_listens_on_its_own_address_only():
    """The engine's listener binds the host's address (its emulated one in Mininet, the
    data-plane one on real servers), never every address: another address of the machine is
    refused."""
    import asyncio
    import socket

    from engine.executor import HostEngine

    sched = compile_scheme("ring", ["a", "b"], N_ELEMS)
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]

    async def listen() -> set[tuple[str, int]]:
        engine = HostEngine("a", sched, {"a": ("127.0.0.2", port), "b": ("127.0.0.3", port)})
        await engine.listen()
        try:
            bound = {tuple(sock.getsockname()[:2]) for sock in engine.server.sockets}  # type: ignore[union-attr]
            socket.create_connection(("127.0.0.2", port), timeout=5).close()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5)
            return bound
        finally:
            await engine.close()

    assert asyncio.run(listen()) == {("127.0.0.2", port)}


def _feed(proto, stream: bytes, cuts: list[int]) -> None:
    """Hand `stream` to an inbound connection as the event loop would: into the buffer it offers,
    in reads that end at `cuts` (or where its buffer is full)."""
    pos = 0
    for end in [*(c for c in cuts if c < len(stream)), len(stream)]:
        while pos < end:
            buf = proto.get_buffer(-1)
            n = min(len(buf), end - pos)
            buf[:n] = stream[pos : pos + n]
            proto.buffer_updated(n)
            pos += n


@pytest.mark.parametrize("cuts", [[], [1, 2, 19, 40], list(range(1, 400, 7)), [70_000, 140_000, 300_001]])
def test_an_inbound_connection_files_every_frame_however_the_reads_fall(cuts):
    """Small frames many to a read, a header cut anywhere, a payload larger than the read buffer:
    each frame is filed whole, in order, under its sender, chunk and iteration."""
    from engine.executor import HEADER, HELLO, ITERATION, SCRATCH, HostEngine, _Inbound

    engine = HostEngine("b", compile_scheme("ring", ["a", "b"], 64), {})
    rng = np.random.default_rng(1)
    frames = [(0, 0, b""), (0, 1, b"x" * 10), (1, 0, rng.bytes(3000)), (1, 1, rng.bytes(3 * SCRATCH + 5))]
    stream = HELLO.pack(1) + b"a" + b"".join(HEADER.pack(it, c, len(p)) + p for it, c, p in frames)
    proto = _Inbound(engine)
    _feed(proto, stream, cuts)
    assert engine.failure is None and proto.peer == "a"
    assert {k: list(q) for k, q in engine.inbox.items()} == {("a", c, it): [bytearray(p)] for it, c, p in frames}
    # a control connection to the coordinator: its barrier messages, however they are cut
    control = _Inbound(engine)
    _feed(control, HELLO.pack(len("a#barrier")) + b"a#barrier" + ITERATION.pack(4) + ITERATION.pack(5), cuts[:2])
    assert [engine._reached.get_nowait() for _ in range(2)] == [("a", 4), ("a", 5)]


def test_an_inbound_connection_asks_the_kernel_for_the_bytes_it_needs_next():
    """SO_RCVLOWAT on a real TCP socket: the rest of the payload being read (at most LOWAT_CAP),
    then between frames a header and the smallest chunk, so a receiver wakes once per frame, not
    per packet; with a codec (sizes known only at run time) just a header."""
    import socket

    from engine.executor import HEADER, HELLO, LOWAT_CAP, HostEngine, _Inbound

    engine = HostEngine("b", compile_scheme("ring", ["a", "b"], 5_000), {})  # 10 KB chunks
    least = min(c.nbytes for c in engine.schedule.chunks)
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        sock, _ = server.accept()
        with client, sock:
            proto = _Inbound(engine)
            proto.sock = sock

            def lowat() -> int:
                return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)

            _feed(proto, HELLO.pack(1) + b"a" + HEADER.pack(0, 0, least)[:5], [])
            assert lowat() == HEADER.size + least - 5  # the header's rest and the least payload
            _feed(proto, HEADER.pack(0, 0, least)[5:] + b"\0" * 1000, [])
            assert lowat() == least - 1000  # the rest of this payload
            _feed(proto, b"\0" * (least - 1000), [])
            assert lowat() == HEADER.size + least and list(engine.inbox) == [("a", 0, 0)]
            _feed(proto, HEADER.pack(0, 1, 3 * LOWAT_CAP) + b"\0" * 100, [])
            assert lowat() == LOWAT_CAP  # never more than the cap
            engine.codec = object()  # type: ignore[assignment]  # any codec: sizes unknown
            _feed(proto, b"\0" * (3 * LOWAT_CAP - 100), [])
            assert lowat() == HEADER.size


def test_a_peer_that_closes_inside_a_frame_fails_the_waiting_chunk_task_at_once():
    """Over real TCP: a peer that closes between frames is done (its frames stay filed); one
    that closes halfway through a payload fails the chunk task waiting for it at once, not at
    the run's timeout."""
    import asyncio

    from engine.executor import HEADER, HELLO, EngineError, HostEngine, _Inbound

    engine = HostEngine("b", compile_scheme("ring", ["a", "b"], 64), {})

    async def send_and_close(port: int, stream: bytes) -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(stream)
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def scenario() -> None:
        server = await asyncio.get_running_loop().create_server(lambda: _Inbound(engine), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        whole = HELLO.pack(1) + b"a" + HEADER.pack(0, 0, 100) + b"x" * 100
        await send_and_close(port, whole)
        assert await asyncio.wait_for(engine._take(("a", 0, 0)), 5) == bytearray(b"x" * 100)
        await asyncio.sleep(0.05)  # its close has been seen: between frames, no failure
        assert engine.failure is None
        waiting = asyncio.ensure_future(engine._take(("a", 0, 1)))
        await send_and_close(port, HELLO.pack(1) + b"a" + HEADER.pack(1, 0, 100) + b"y" * 40)
        with pytest.raises(EngineError, match="a closed its connection inside a frame"):
            await asyncio.wait_for(waiting, 5)
        server.close()

    asyncio.run(scenario())


def test_a_broken_inbound_connection_fails_the_chunk_tasks_waiting_for_a_frame():
    """A frame that cannot be parsed raises in the synchronisation now, not at the run's timeout."""
    import asyncio

    from engine.executor import HELLO, EngineError, HostEngine, _Inbound

    engine = HostEngine("b", compile_scheme("ring", ["a", "b"], 64), {})

    async def wait_then_break() -> None:
        waiting = asyncio.ensure_future(engine._take(("a", 0, 0)))
        await asyncio.sleep(0)
        _feed(_Inbound(engine), HELLO.pack(2) + b"\xff\xfe", [])  # a name that is not UTF-8
        with pytest.raises(EngineError, match="inbound connection failed"):
            await asyncio.wait_for(waiting, 5)
        with pytest.raises(EngineError, match="inbound connection failed"):
            await engine._take(("a", 1, 0))  # and any later wait, at once

    asyncio.run(wait_then_break())

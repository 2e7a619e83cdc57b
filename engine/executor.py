"""Execute one host's part of a schedule over TCP, with real bytes and real numpy sums.

Every host listens on one port; for each peer it sends to, it opens one TCP connection (so a
(sender, receiver) pair is one flow, as RAT and the ring papers count them). A frame is a 16-byte
header (iteration, chunk, payload bytes) and the chunk's float32 values. A reader task per
incoming connection files frames by (sender, chunk) in arrival order; one task per chunk walks
this host's steps for that chunk in order, so chunks proceed concurrently and only same-chunk
order binds, exactly as `schedule.execute` defines it (the in-memory reference).

Plain asyncio streams: no library here ships arbitrary per-host chunk schedules (MPI, gloo and TF
ship fixed collectives), and asyncio keeps a host's many flows in one thread without locks.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from schemes.schedule import Op, Schedule, Step

LOG = logging.getLogger(__name__)
HEADER = struct.Struct("!IIQ")  # iteration, chunk, payload bytes
HELLO = struct.Struct("!H")  # length of the sender's name, then the name
CONNECT_TIMEOUT_S = 30.0


class EngineError(RuntimeError):
    """A peer vanished, sent a frame out of order, or never came up."""


@dataclass
class Counters:
    """Payload bytes (headers excluded) this host moved in one synchronisation."""

    sent: int = 0
    received: int = 0
    per_peer_sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class HostEngine:
    """One host's endpoint: a listener, outgoing connections, and the schedule's steps."""

    def __init__(
        self,
        name: str,
        schedule: Schedule,
        addresses: dict[str, tuple[str, int]],
        pauses: list[tuple[float, float]] | None = None,
    ) -> None:
        self.name = name
        #: wall-clock windows (start, end) in which this host sends nothing (RAT's paused senders)
        self.pauses = sorted(pauses or [])
        self.schedule = schedule
        self.addresses = addresses
        self.steps: dict[int, list[Step]] = defaultdict(list)
        for s in schedule.steps.get(name, []):
            self.steps[s.chunk].append(s)
        self.out_peers = sorted({s.peer for s in schedule.steps.get(name, []) if s.op == Op.SEND})
        self.in_peers = sorted({s.peer for s in schedule.steps.get(name, []) if s.op != Op.SEND})
        self.writers: dict[str, asyncio.StreamWriter] = {}
        self.inbox: dict[tuple[str, int], asyncio.Queue[tuple[int, bytes]]] = defaultdict(asyncio.Queue)
        self.server: asyncio.base_events.Server | None = None
        self.readers: list[asyncio.Task] = []
        self.connected = asyncio.Event()
        self._arrived: set[str] = set()
        self.failure: BaseException | None = None
        #: with tracing on (host config `trace`), each step of the last synchronisation as
        #: (seconds since it began, op, peer, chunk): when a send left for the kernel (its drain
        #: returned) or a receive's frame was taken; where a stage waited, measured not guessed
        self.trace: list[tuple[float, str, str, int]] | None = None

    # --- set-up -----------------------------------------------------------------------------
    async def listen(self) -> None:
        host, port = self.addresses[self.name]
        self.server = await asyncio.start_server(self._accept, host, port)
        if not self.in_peers:
            self.connected.set()

    async def connect(self) -> None:
        """Open one connection to every peer this host sends to (retrying until it listens)."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        for peer in self.out_peers:
            host, port = self.addresses[peer]
            while True:
                try:
                    _, writer = await asyncio.open_connection(host, port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise EngineError(f"{self.name}: {peer} at {host}:{port} never listened") from None
                    await asyncio.sleep(0.1)
            name = self.name.encode()
            writer.write(HELLO.pack(len(name)) + name)
            self.writers[peer] = writer
        try:
            await asyncio.wait_for(self.connected.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            missing = sorted(set(self.in_peers) - self._arrived)
            raise EngineError(f"{self.name}: no connection from {missing}") from None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (n,) = HELLO.unpack(await reader.readexactly(HELLO.size))
        peer = (await reader.readexactly(n)).decode()
        self._arrived.add(peer)
        if self._arrived >= set(self.in_peers):
            self.connected.set()
        self.readers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while True:
                head = await reader.readexactly(HEADER.size)
                it, chunk, nbytes = HEADER.unpack(head)
                payload = await reader.readexactly(nbytes)
                self.inbox[(peer, chunk)].put_nowait((it, payload))
        except asyncio.IncompleteReadError:
            return  # the peer closed: normal at the end of a run
        except Exception as err:  # surfaced by the chunk task waiting on this peer
            self.failure = err

    async def close(self) -> None:
        for w in self.writers.values():
            w.close()
        for w in self.writers.values():
            try:
                await w.wait_closed()
            except OSError:
                pass
        if self.server:
            self.server.close()

    # --- one synchronisation ----------------------------------------------------------------
    async def synchronise(self, buf: np.ndarray, iteration: int) -> Counters:
        """Run this host's steps on `buf` (in place); returns the payload bytes moved."""
        counters = Counters()
        self._t0 = time.monotonic()
        if self.trace is not None:
            self.trace.clear()
        await asyncio.gather(*(self._chunk(c, steps, buf, iteration, counters) for c, steps in self.steps.items()))
        return counters

    async def _unpaused(self) -> None:
        """Wait out a pause window this host is in (the clock is shared: hosts are on one machine)."""
        now = time.time()
        for a, b in self.pauses:
            if a <= now < b:
                await asyncio.sleep(b - now)
                now = time.time()

    async def _chunk(self, c: int, steps: list[Step], buf: np.ndarray, iteration: int, counters: Counters) -> None:
        ch = self.schedule.chunks[c]
        view = buf[ch.offset : ch.offset + ch.length]
        for s in steps:
            if s.op == Op.SEND:
                await self._unpaused()
                w = self.writers[s.peer]
                w.write(HEADER.pack(iteration, c, ch.nbytes) + view.tobytes())
                counters.sent += ch.nbytes
                counters.per_peer_sent[s.peer] += ch.nbytes
                await w.drain()
                self._traced(s, c)
                continue
            it, payload = await self.inbox[(s.peer, c)].get()
            if it != iteration or len(payload) != ch.nbytes:
                raise EngineError(
                    f"{self.name}: from {s.peer} chunk {c}: got iteration {it}, {len(payload)} B; "
                    f"expected iteration {iteration}, {ch.nbytes} B"
                )
            data = np.frombuffer(payload, dtype=np.float32)
            if s.op == Op.REDUCE:
                view += data
            else:
                view[:] = data
            counters.received += ch.nbytes
            self._traced(s, c)

    def _traced(self, s: Step, c: int) -> None:
        if self.trace is not None:
            self.trace.append((round(time.monotonic() - self._t0, 5), s.op.value, s.peer, c))

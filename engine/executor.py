"""Execute one host's part of a schedule over TCP, with real bytes and real numpy sums.

Every host listens on one port; for each peer it sends to, it opens `streams` TCP connections
(1 by default, so a (sender, receiver) pair is one flow, as RAT and the ring papers count them;
more, as PLink's library and NCCL keep, spread a pair's chunks: chunk c always on connection
c mod streams, so one chunk's frames keep their order). With `barrier`, every other host also
opens a control connection to the coordinator (the schedule's first host; its hello name ends in
`#barrier`), and `barrier(it)` holds each synchronisation until all hosts reached it, as MPI
benchmarks time a collective after MPI_Barrier: the GST then counts from one common start, not
from each host's own, which the previous step's uneven ends spread by up to half a GST. A frame is a 16-byte
header (iteration, chunk, payload bytes) and the chunk's float32 values, copied once into the
frame that goes to every peer of a send. Each incoming connection is read by a protocol
(`_Inbound`) straight into each frame's own buffer and files frames by (sender, chunk) in
arrival order; one task per chunk walks this host's steps for that chunk in order, so chunks
proceed concurrently and only same-chunk order binds, exactly as `schedule.execute` defines it
(the in-memory reference). Against streams on both ends (2026-11-29, 8 hosts on loopback,
25 MB, 64-KB segments): mesh's GST 0.63 -> 0.54 s, RAT's 0.74 -> 0.64 s, ring's 0.69 -> 0.66 s.

asyncio: no library here ships arbitrary per-host chunk schedules (MPI, gloo and TF ship fixed
collectives), and asyncio keeps a host's many flows in one thread without locks.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import struct
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from engine.dvf import Codec
from schemes.schedule import Op, Schedule, Step

LOG = logging.getLogger(__name__)
HEADER = struct.Struct("!IIQ")  # iteration, chunk, payload bytes
HELLO = struct.Struct("!H")  # length of the sender's name, then the name
ITERATION = struct.Struct("!I")  # a barrier message: the iteration it is for
BARRIER = "#barrier"  # the suffix of a control connection's hello name
SCRATCH = 64 * 1024  # an inbound connection's read buffer (_Inbound): many small frames per read
#: the most an inbound connection asks the kernel to hold before waking it (SO_RCVLOWAT, _Inbound):
#: above half of TCP's first receive buffer (tcp_rmem[1], 87,380 B here) Linux would also clamp the
#: connection's window to it until autotuning grows the buffer (tcp_set_rcvlowat)
LOWAT_CAP = 32 * 1024
CONNECT_TIMEOUT_S = 30.0


class EngineError(RuntimeError):
    """A peer vanished, sent a frame out of order, or never came up."""


@dataclass
class Counters:
    """Payload bytes (headers excluded) this host moved in one synchronisation."""

    sent: int = 0
    received: int = 0
    per_peer_sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: what the sends would have carried as raw float32 (== sent without a codec)
    raw_sent: int = 0
    #: monotonic times (shared by the hosts of one machine): the first send written, the last
    #: message taken (a broadcast's delivery: the servers' first send to each worker's last receive)
    first_send_t: float | None = None
    last_recv_t: float | None = None


class HostEngine:
    """One host's endpoint: a listener, outgoing connections, and the schedule's steps."""

    def __init__(
        self,
        name: str,
        schedule: Schedule,
        addresses: dict[str, tuple[str, int]],
        pauses: list[tuple[float, float]] | None = None,
        streams: int = 1,
        barrier: bool = False,
    ) -> None:
        self.name = name
        self.streams = streams
        #: the host that releases every barrier (None: no barrier)
        self.coordinator = schedule.hosts[0] if barrier else None
        #: wall-clock windows (start, end) in which this host sends nothing (RAT's paused senders)
        self.pauses = sorted(pauses or [])
        self.schedule = schedule
        self.addresses = addresses
        self.steps: dict[int, list[Step]] = defaultdict(list)
        for s in schedule.steps.get(name, []):
            self.steps[s.chunk].append(s)
        self.out_peers = sorted({s.peer for s in schedule.steps.get(name, []) if s.op == Op.SEND})
        self.in_peers = sorted({s.peer for s in schedule.steps.get(name, []) if s.op != Op.SEND})
        self.writers: dict[str, list[asyncio.StreamWriter]] = defaultdict(list)
        #: frames filed by (sender, chunk, iteration) in arrival order, not yet taken: iterations may
        #: overlap (SSP), each takes its own. A chunk task that finds none waits on a future in
        #: `_waiting` (one per key at most: a key's steps run in one task, in order). Not an
        #: asyncio.Queue per key: building one (three deques and an Event) per frame, then its put's
        #: and get's bookkeeping, was work per frame that a deque and a future do without
        self.inbox: dict[tuple[str, int, int], deque[bytearray]] = {}
        self._waiting: dict[tuple[str, int, int], asyncio.Future[bytearray]] = {}
        #: the smallest chunk's bytes: no raw frame's payload is shorter, whichever peer sends it
        #: under whichever plan (a new plan keeps the chunks: host.use_schedule). See least_payload
        self._least_chunk = min((c.nbytes for c in schedule.chunks), default=0)
        self.server: asyncio.base_events.Server | None = None
        self.connected = asyncio.Event()
        self._arrived: dict[str, int] = defaultdict(int)  # connections accepted per peer
        self._control: dict[str, asyncio.Transport] = {}  # coordinator: every other host's
        self._reached: asyncio.Queue[tuple[str, int]] = asyncio.Queue()  # coordinator: who reached which
        self._release: asyncio.StreamReader | None = None  # the others: the coordinator's answers
        self._ask: asyncio.StreamWriter | None = None  # the others: to the coordinator
        self.failure: BaseException | None = None
        #: with tracing on (host config `trace`), each step of the last synchronisation as
        #: (seconds since it began, op, peer, chunk): when a send left for the kernel (its drain
        #: returned) or a receive's frame was taken; where a stage waited, measured not guessed
        self.trace: list[tuple[float, str, str, int]] | None = None
        #: with tracing on, every frame as its last byte was read: (monotonic time, iteration, sender,
        #: chunk). The trace's receive times are when a chunk's steps took a frame, in schedule
        #: order; these say when the network delivered it, so a flow that came late shows as late
        self.arrivals: list[tuple[float, int, str, int]] | None = None
        #: messages whose size is known only at run time (DVF: engine.dvf.Codec): a send that
        #: originates a chunk's value goes through `codec.originate`, a send of a chunk this host
        #: just copied in forwards the bytes as they came (`_forwarded`), a receive decodes. None:
        #: raw float32 frames of the chunk's fixed size
        self.codec: Codec | None = None
        self._forwarded: dict[tuple[int, int], bytes] = {}  # (iteration, chunk) -> its bytes

    # --- set-up -----------------------------------------------------------------------------
    async def listen(self) -> None:
        host, port = self.addresses[self.name]
        self.server = await asyncio.get_running_loop().create_server(lambda: _Inbound(self), host, port)
        self._check_connected()

    def _check_connected(self) -> None:
        others = set(self.schedule.hosts) - {self.name} if self.coordinator == self.name else set()
        if all(self._arrived[p] >= self.streams for p in self.in_peers) and others <= set(self._control):
            self.connected.set()

    async def connect(self) -> None:
        """Open `streams` connections to every peer this host sends to (retrying until it listens)."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        for peer in [p for p in self.out_peers for _ in range(self.streams)]:
            _, writer = await self._open(peer, self.name, deadline)
            self.writers[peer].append(writer)
        if self.coordinator not in (None, self.name):
            self._release, self._ask = await self._open(self.coordinator, self.name + BARRIER, deadline)
        try:
            await asyncio.wait_for(self.connected.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            missing = sorted(p for p in self.in_peers if self._arrived[p] < self.streams)
            if self.coordinator == self.name:
                missing += sorted(f"{h} (barrier)" for h in set(self.schedule.hosts) - {self.name} - set(self._control))
            raise EngineError(f"{self.name}: no connection from {missing}") from None

    async def _open(self, peer: str, hello: str, deadline: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to `peer` that says who opened it (`hello`), retrying until it listens."""
        host, port = self.addresses[peer]
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise EngineError(f"{self.name}: {peer} at {host}:{port} never listened") from None
                await asyncio.sleep(0.1)
        name = hello.encode()
        writer.write(HELLO.pack(len(name)) + name)
        return reader, writer

    def _hello(self, peer: str, transport: asyncio.Transport) -> None:
        """An inbound connection said who opened it: a peer's data connection, or (`#barrier`) a
        host's control connection to this coordinator."""
        if peer.endswith(BARRIER):
            self._control[peer.removesuffix(BARRIER)] = transport
        else:
            self._arrived[peer] += 1
        self._check_connected()

    def _frame(self, peer: str, it: int, chunk: int, payload: bytearray) -> None:
        """A whole frame came in: handed to the chunk task waiting for it, else filed by (sender,
        chunk, iteration) in arrival order."""
        if self.arrivals is not None:
            self.arrivals.append((time.monotonic(), it, peer, chunk))
        key = (peer, chunk, it)
        waiter = self._waiting.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(payload)
        elif key in self.inbox:
            self.inbox[key].append(payload)
        else:
            self.inbox[key] = deque((payload,))

    def least_payload(self) -> int:
        """The fewest payload bytes the next frame on any inbound connection carries: the smallest
        chunk, or 0 with a codec (its sizes are known only at run time). An inbound connection
        between frames asks the kernel to wake it once a header and that many bytes are in
        (_Inbound): never more than the next frame holds."""
        return 0 if self.codec is not None else self._least_chunk

    async def _take(self, key: tuple[str, int, int]) -> bytearray:
        """The next frame filed under `key`, waiting for it if none came yet."""
        frames = self.inbox.get(key)
        if frames:
            payload = frames.popleft()
            if not frames:
                del self.inbox[key]
            return payload
        if self.failure is not None:
            raise self._broken(self.failure)
        waiter = self._waiting[key] = asyncio.get_running_loop().create_future()
        return await waiter

    def _broken(self, err: BaseException) -> EngineError:
        """The error a chunk task raises once an inbound connection has failed with `err`."""
        return EngineError(f"{self.name}: an inbound connection failed: {err}")

    def _failed(self, err: BaseException) -> None:
        """An inbound connection broke (a bad frame, a peer gone mid-frame): every chunk task
        waiting for a frame learns it now, not at the run's timeout."""
        self.failure = err
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(self._broken(err))
        self._waiting.clear()

    async def barrier(self, iteration: int) -> None:
        """Wait until every host reached this iteration's synchronisation (no-op without a barrier)."""
        if self.coordinator is None:
            return
        if self.coordinator != self.name:
            assert self._ask is not None and self._release is not None
            self._ask.write(ITERATION.pack(iteration))
            await self._ask.drain()
            (it,) = ITERATION.unpack(await self._release.readexactly(ITERATION.size))
            if it != iteration:
                raise EngineError(f"{self.name}: barrier released iteration {it}, expected {iteration}")
            return
        for _ in self._control:
            host, it = await self._reached.get()
            if it != iteration:
                raise EngineError(f"{self.name}: {host} reached the barrier of iteration {it}, expected {iteration}")
        for t in self._control.values():
            t.write(ITERATION.pack(iteration))  # 4 bytes: nothing to wait for

    async def close(self) -> None:
        writers = [w for ws in self.writers.values() for w in ws] + ([self._ask] if self._ask else [])
        for w in writers:
            w.close()
        for w in writers:
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
        try:
            await asyncio.gather(*(self._chunk(c, steps, buf, iteration, counters) for c, steps in self.steps.items()))
        finally:
            for key in [k for k in self._forwarded if k[0] == iteration]:
                del self._forwarded[key]
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
        i = 0
        while i < len(steps):
            if steps[i].op == Op.SEND:
                # a run of sends goes to every peer before any drain is awaited: waiting for one
                # peer's drain before writing to the next made every peer of a PS, a mesh owner
                # or a RAT relay as slow as its slowest connection (head-of-line blocking that the
                # schedule does not have: its sends never block)
                run = list(itertools.takewhile(lambda s: s.op == Op.SEND, steps[i:]))
                i += len(run)
                frame, nbytes = self._frame_of(c, view, iteration)
                written = []
                for s in run:
                    if self.pauses:
                        await self._unpaused()
                    ws = self.writers[s.peer]
                    w = ws[c % len(ws)]
                    w.write(frame)
                    written.append(w)
                    counters.first_send_t = counters.first_send_t or time.monotonic()
                    counters.sent += nbytes
                    counters.raw_sent += ch.nbytes
                    counters.per_peer_sent[s.peer] += nbytes
                for w in dict.fromkeys(written):  # every write is out: waiting in turn waits for the slowest
                    await w.drain()  # (a gather made a task per drain, per frame: ~2 per frame in all)
                for s in run:
                    self._traced(s, c)
                continue
            s = steps[i]
            i += 1
            payload = await self._take((s.peer, c, iteration))
            if self.codec is None and len(payload) != ch.nbytes:
                raise EngineError(
                    f"{self.name}: from {s.peer} chunk {c} of iteration {iteration}: got {len(payload)} B, "
                    f"expected {ch.nbytes} B"
                )
            data = self._taken(s, c, payload, ch.length, iteration)
            if s.op == Op.REDUCE:
                view += data
            else:
                view[:] = data
            counters.received += len(payload)
            counters.last_recv_t = time.monotonic()
            self._traced(s, c)

    def _frame_of(self, c: int, view: np.ndarray, iteration: int) -> tuple[memoryview, int]:
        """The frame a send of chunk c writes to each of its peers, and its payload's size: the
        header and the values copied once into one buffer (not `tobytes` then header + payload:
        two copies). A memoryview, so that the transport keeps an unsent tail with one more copy,
        not two (a bytes slice, then its buffer). Never changed after: `view` may be summed into
        while the kernel still holds the frame."""
        payload = self._payload(c, view, iteration)
        frame = bytearray(HEADER.size + payload.nbytes)
        HEADER.pack_into(frame, 0, iteration, c, payload.nbytes)
        memoryview(frame)[HEADER.size :] = payload.cast("B")
        return memoryview(frame), payload.nbytes

    def _payload(self, c: int, view: np.ndarray, iteration: int) -> memoryview:
        """What a send of chunk c carries: the raw values, or with a codec the bytes c's value last
        came or went as in this synchronisation (a relay forwards what it copied in as it came),
        else the codec's encoding of the value (once: every peer gets the same bytes)."""
        if self.codec is None:
            return memoryview(view)
        key = (iteration, c)
        if key not in self._forwarded:
            self._forwarded[key] = self.codec.originate(c, view, iteration)
        return memoryview(self._forwarded[key])

    def _taken(self, s: Step, c: int, payload: bytearray, length: int, iteration: int) -> np.ndarray:
        """The values a receive of chunk c takes from its payload (decoded with a codec)."""
        if self.codec is None:
            return np.frombuffer(payload, dtype=np.float32)
        try:
            data = self.codec.decode(payload, length)
        except ValueError as err:
            raise EngineError(f"{self.name}: from {s.peer} chunk {c}: {err}") from None
        if s.op == Op.COPY:
            self._forwarded[(iteration, c)] = bytes(payload)
        else:
            self._forwarded.pop((iteration, c), None)
        return data

    def arrivals_of(self, iteration: int) -> list[tuple[float, str, int]]:
        """This iteration's frames as (seconds since its synchronisation began, sender, chunk), and
        forgets them; a frame that came before this host began syncing has a negative time."""
        if self.arrivals is None:
            return []
        mine = [(round(t - self._t0, 5), peer, c) for t, it, peer, c in self.arrivals if it == iteration]
        self.arrivals = [a for a in self.arrivals if a[1] > iteration]
        return mine

    def _traced(self, s: Step, c: int) -> None:
        if self.trace is not None:
            self.trace.append((round(time.monotonic() - self._t0, 5), s.op.value, s.peer, c))


class _Inbound(asyncio.BufferedProtocol):
    """One inbound connection: the hello (`!H` length, then the name), then frames (HEADER,
    payload) or, on a host's control connection to this coordinator, barrier messages (ITERATION).

    Reads go into a scratch buffer (`SCRATCH` bytes) that every whole message in it is parsed
    from, so one read takes a header and a small payload, or many small frames, at once: reading
    each header and each payload on its own took two reads and two event-loop turns per frame
    (HiPS on the 4x4 Torus, 2-5 KB frames, 2026-11-30: 88.5 CPU s per GB in synchronisations so,
    80-85 with the scratch buffer; docs/measurements.md). A payload that runs past the scratch
    buffer gets its own bytearray, the part already read copied in, and the rest is read straight
    into it: a large payload is copied once by the kernel, not three more times as StreamReader
    did (its buffer, `readexactly`'s bytes, the buffer's shift), which cut mesh's and RAT's GST by
    14% on loopback (2026-11-29).

    It asks the kernel to wake it only once the bytes it needs next are in (SO_RCVLOWAT, at most
    LOWAT_CAP): the rest of the payload it is reading, or between frames a header and the smallest
    chunk's payload (`HostEngine.least_payload`). Woken per arriving packet, a receiver on a slow
    cable found one packet per wake: with this, the engine's CPU per GB on shaped cables fell from
    33-89 to 9-30 s in bench_schemes' HiPS rows (ring on the 4x4 Torus at 2.5 Mbit/s: 89 -> 11), and
    HiPS on that Torus at 5 Mbit/s (16-KB frames) went from 1.40-1.41 to 1.30-1.34x Table 3 in runs
    alternated (2026-12-03, results/bench/lowat.json.gz; docs/measurements.md). Never more than is
    coming: no frame is shorter, and the peer's close wakes it whatever it asked.

    A protocol of our own: asyncio's streams are the only reader it ships, and they copy."""

    def __init__(self, engine: HostEngine) -> None:
        self.engine = engine
        self.peer = ""  # who opened it (its hello); "" until the hello is read
        self.barrier = False  # a host's control connection (barrier messages, not frames)
        self.scratch = bytearray(SCRATCH)
        self.start = self.end = 0  # scratch[start:end]: read, not yet parsed (less than one message)
        self.payload: bytearray | None = None  # a frame's payload being read straight into
        self.have = 0  # bytes of `payload` read so far
        self.frame = (0, 0)  # (iteration, chunk) of that payload
        self.transport: asyncio.Transport | None = None
        self.sock: socket.socket | None = None  # None: no kernel socket to ask (fed by hand)
        self.lowat = 1  # what the socket's SO_RCVLOWAT is now

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.sock = transport.get_extra_info("socket")

    def connection_lost(self, exc: Exception | None) -> None:
        """A peer that closes between frames is done (every run ends so); one that closes inside
        a frame, or whose connection breaks, will send nothing more: the chunk tasks waiting for
        it fail now, not at the run's timeout."""
        inside = self.payload is not None or (not self.barrier and self.end > self.start)
        if self.engine.failure is None and (exc is not None or inside):  # the first failure is the cause
            self.engine._failed(exc or EngineError(f"{self.peer or 'a peer'} closed its connection inside a frame"))

    def _need(self, n: int) -> None:
        """Wake this connection once `n` more bytes are in (at most LOWAT_CAP; a syscall only
        when that changes, which between whole frames of one size it does not)."""
        n = max(1, min(n, LOWAT_CAP))
        if n != self.lowat and self.sock is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, n)
            self.lowat = n

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.payload is not None:
            return memoryview(self.payload)[self.have :]
        if self.start:  # keep the unparsed tail (part of one message) at the front
            tail = self.end - self.start
            self.scratch[:tail] = self.scratch[self.start : self.end]
            self.start, self.end = 0, tail
        return memoryview(self.scratch)[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self.payload is None:
                self.end += nbytes
                self._parse()
                return
            self.have += nbytes
            if self.have < len(self.payload):
                self._need(len(self.payload) - self.have)
                return
            payload, self.payload = self.payload, None
            self._need(HEADER.size + self.engine.least_payload())  # scratch is empty here
            self.engine._frame(self.peer, *self.frame, payload)
        except Exception as err:  # raised in every chunk task waiting for a frame
            self.engine._failed(err)
            if self.transport is not None:
                self.transport.close()

    def _parse(self) -> None:
        """Act on every whole message in scratch[start:end]; a payload that runs past it is read
        on into its own buffer (`payload`)."""
        e, buf = self.engine, self.scratch
        while True:
            avail = self.end - self.start
            if not self.peer:
                if avail < HELLO.size:
                    return
                n = HELLO.unpack_from(buf, self.start)[0]
                if avail < HELLO.size + n:
                    return
                name = bytes(buf[self.start + HELLO.size : self.start + HELLO.size + n]).decode()
                self.start += HELLO.size + n
                self.peer, self.barrier = name.removesuffix(BARRIER), name.endswith(BARRIER)
                e._hello(name, self.transport)  # type: ignore[arg-type]
            elif self.barrier:
                if avail < ITERATION.size:
                    return
                e._reached.put_nowait((self.peer, ITERATION.unpack_from(buf, self.start)[0]))
                self.start += ITERATION.size
            else:
                if avail < HEADER.size:
                    self._need(HEADER.size + e.least_payload() - avail)
                    return
                it, chunk, nbytes = HEADER.unpack_from(buf, self.start)
                body = self.start + HEADER.size
                got = min(nbytes, self.end - body)
                payload = bytearray(nbytes)
                payload[:got] = memoryview(buf)[body : body + got]
                self.start = body + got
                if got < nbytes:  # the rest straight into its own buffer
                    self.payload, self.have, self.frame = payload, got, (it, chunk)
                    self._need(nbytes - got)
                    return
                e._frame(self.peer, it, chunk, payload)

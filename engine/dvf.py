"""Parameter Flow's DVF, the dynamic value-bounded filter (issue 31), and PF's wire form.

DVF (the paper's Eqs. 6, 10, 11): before a push (worker) or a broadcast (server), the update plus
what was held back last time is split into what is sent and what is kept: an entry is dropped iff
|U_i| <= delta / sqrt(t) (t: the sender's clock). Nothing is lost: what is dropped is added to the
next update, so sent + kept always equals computed + kept before, exactly (`dvf_split`). Network
awareness picks delta_low where every link the sender uses is "sufficient" (at least a rate; the
paper's 50 Mbit/s at 1 Gbit/s links), delta_up otherwise (`dvf_delta`). The wire form (`encode`)
is the nonzeros and their indices above 80% sparsity, else the dense vector, then compressed with
snappy, as PF does (cramjam's binding: the maintained one; python-snappy now wraps it).
"""

from __future__ import annotations

import math
import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: above this share of zeros the wire form is sparse (nonzeros and their indices)
SPARSE_ABOVE = 0.8

_DENSE, _SPARSE = b"D", b"S"


def dvf_split(update: np.ndarray, held: np.ndarray, delta: float, clock: int) -> tuple[np.ndarray, np.ndarray]:
    """(sent, held back) of `update` plus what `held` back before: entries with |value| <= delta /
    sqrt(clock) are held back (clock >= 1). sent + held back == update + held, element for element."""
    if clock < 1:
        raise ValueError(f"clock counts from 1, got {clock}")
    total = update + held
    keep = np.abs(total) > delta / math.sqrt(clock)
    sent = np.where(keep, total, 0.0).astype(total.dtype)
    return sent, (total - sent).astype(total.dtype)


def dvf_delta(delta_low: float, delta_up: float, link_mbps: Sequence[float], sufficient_mbps: float) -> float:
    """The sender's threshold: delta_low when every link it sends on has at least `sufficient_mbps`
    available, delta_up otherwise (the paper's network-aware DVF)."""
    if not delta_low < delta_up:
        raise ValueError(f"delta_low must be below delta_up, got {delta_low} and {delta_up}")
    return delta_low if all(r >= sufficient_mbps for r in link_mbps) else delta_up


def encode(vec: np.ndarray) -> bytes:
    """The wire form of a float32 vector: sparse above SPARSE_ABOVE zeros, else dense; snappy-compressed."""
    import cramjam

    v = np.ascontiguousarray(vec, dtype=np.float32)
    nz = np.flatnonzero(v)
    if 1 - len(nz) / max(1, len(v)) > SPARSE_ABOVE:
        body = _SPARSE + np.uint64(len(v)).tobytes() + nz.astype(np.uint32).tobytes() + v[nz].tobytes()
    else:
        body = _DENSE + v.tobytes()
    return bytes(cramjam.snappy.compress_raw(body))


def decode(wire: bytes) -> np.ndarray:
    """The float32 vector `encode` sent."""
    import cramjam

    body = bytes(cramjam.snappy.decompress_raw(wire))
    if body[:1] == _DENSE:
        return np.frombuffer(body[1:], dtype=np.float32).copy()
    n = int(np.frombuffer(body[1:9], dtype=np.uint64)[0])
    k = (len(body) - 9) // 8
    idx = np.frombuffer(body[9 : 9 + 4 * k], dtype=np.uint32)
    out = np.zeros(n, dtype=np.float32)
    out[idx] = np.frombuffer(body[9 + 4 * k :], dtype=np.float32)
    return out


# --- DVF in the engine: a codec for a host's sends and receives ---------------------------------
#: DVF's modes (job field `dvf`): off (raw float32 frames), encode (the wire form, nothing held
#: back), low / up (a fixed delta_low or delta_up), dynamic (delta_low where every link the host
#: sends on measured "sufficient", else delta_up: the paper's network-aware DVF)
MODES = ("off", "encode", "low", "up", "dynamic")
#: the paper's "sufficient" link: 50 Mbit/s of available bandwidth on its 1 Gbit/s container links
SUFFICIENT_SHARE = 50.0 / 1000.0


@dataclass
class DvfSettings:
    """A job's DVF, as the engine's config carries it (runs.engine_job writes it)."""

    mode: str = "off"
    delta_low: float = 0.0
    delta_up: float = 0.0
    #: emulated Mbit/s a link must measure to be "sufficient" (dynamic mode)
    sufficient_mbps: float = 0.0

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> DvfSettings:
        d = cfg.get("dvf") or {}
        mode = str(d.get("mode", "off"))
        if mode not in MODES:
            raise ValueError(f"dvf mode {mode!r}; use one of {', '.join(MODES)}")
        return cls(
            mode, float(d.get("delta_low", 0.0)), float(d.get("delta_up", 0.0)), float(d.get("sufficient_mbps", 0))
        )


class Codec:
    """One host's DVF: what goes on the wire for a chunk it originates, and what arrives.

    A send *originates* a chunk's value (a worker's push, a server's broadcast): the value plus what
    this host held back of that chunk before is split by the threshold (`dvf_split`, delta / sqrt(t)
    at clock t = iteration + 1), the held-back part kept for the next iteration, the rest encoded
    (`encode`). A relay's send of a chunk it just received *forwards* the received bytes as they
    came, not decoded and encoded again (the engine decides which: engine.executor). Every receive
    decodes. `held` is the residual: over a run, what the workers applied plus every host's
    residual is what the workers computed (`verify_dvf`).
    """

    def __init__(self, settings: DvfSettings, chunk_lengths: Sequence[int]) -> None:
        self.settings = settings
        self.held = [np.zeros(n, dtype=np.float32) for n in chunk_lengths]
        self.delta = 0.0  # the last iteration's delta (before / sqrt(t)): dynamic mode's verdict so far
        #: per iteration in flight (SSP overlaps them): its delta, the entries originated and sent,
        #: the rates measured (Mbit/s); `done(iteration)` hands them out and forgets them
        self.deltas: dict[int, float] = {}
        self.entries: dict[int, int] = {}
        self.kept: dict[int, int] = {}
        self.rates: dict[int, dict[str, float]] = {}

    def begin(self, iteration: int, rates_mbps: Mapping[str, float | None] | None = None) -> float:
        """Start an iteration (clock t = iteration + 1): its delta (dynamic: from the links'
        measured rates; a link not measured yet, or measured only while the sender had too little
        to send to fill it, keeps the previous iteration's verdict). Returns the delta."""
        s = self.settings
        measured = {p: r for p, r in (rates_mbps or {}).items() if r is not None}
        if s.mode in ("off", "encode"):
            delta = 0.0
        elif s.mode == "low":
            delta = s.delta_low
        elif s.mode == "up":
            delta = s.delta_up
        elif not measured and self.delta:
            delta = self.delta  # nothing measured this time: keep the last verdict
        else:
            delta = dvf_delta(s.delta_low, s.delta_up, list(measured.values()), s.sufficient_mbps)
        self.delta = self.deltas[iteration] = delta
        self.entries[iteration] = self.kept[iteration] = 0
        self.rates[iteration] = measured
        return delta

    def originate(self, chunk: int, view: np.ndarray, iteration: int) -> bytes:
        """The wire form of this chunk's value after DVF at this iteration's delta / sqrt(t); the
        view is left holding what was sent."""
        delta = self.deltas.get(iteration, 0.0)
        if delta > 0:
            sent, self.held[chunk] = dvf_split(view, self.held[chunk], delta, iteration + 1)
            view[:] = sent
        self.entries[iteration] = self.entries.get(iteration, 0) + len(view)
        self.kept[iteration] = self.kept.get(iteration, 0) + int(np.count_nonzero(view))
        return encode(view)

    def done(self, iteration: int) -> dict[str, Any]:
        """What DVF did in an iteration (a row's `dvf`), forgotten here."""
        delta = self.deltas.pop(iteration, 0.0)
        return {
            "delta": delta,
            "threshold": delta / math.sqrt(iteration + 1),
            "originated": self.entries.pop(iteration, 0),
            "sent_entries": self.kept.pop(iteration, 0),
            "rates_mbps": {p: round(r, 3) for p, r in self.rates.pop(iteration, {}).items()},
        }

    def decode(self, payload: bytes, length: int) -> np.ndarray:
        data = decode(payload)
        if len(data) != length:
            raise ValueError(f"a DVF message of {len(data)} values where the chunk has {length}")
        return data

    def residual(self) -> np.ndarray:
        """Everything this host holds back, as one vector over the chunks in order."""
        return np.concatenate(self.held) if self.held else np.zeros(0, dtype=np.float32)


def delivery_mbps(sock: socket.socket, below_mbps: float) -> float | None:
    """The kernel's latest delivery-rate sample of a TCP connection (TCP_INFO's tcpi_delivery_rate,
    Linux >= 4.9) in Mbit/s: the goodput the path gave this flow, measured by the sender, the
    engine's stand-in for the paper's Pathload probes. None where the connection has not sent yet,
    or where the sample was application-limited (the sender had too little to send to fill the
    path) and reads below `below_mbps`: then it says nothing about what the path has."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    if len(info) < _DELIVERY_RATE + 8:
        return None
    (rate,) = struct.unpack_from("=Q", info, _DELIVERY_RATE)
    app_limited = bool(info[_APP_LIMITED] & 1)
    mbps = rate * 8 / 1e6
    if rate == 0 or (app_limited and mbps < below_mbps):
        return None
    return mbps


#: struct tcp_info (linux/tcp.h): the byte holding tcpi_delivery_rate_app_limited (its bit 0),
#: the offset of tcpi_delivery_rate (bytes/s), and how much of the struct to ask for
_APP_LIMITED, _DELIVERY_RATE, _TCP_INFO_LEN = 7, 160, 232


def verify_dvf(run_dir: Path, workers: Sequence[str], hosts: Sequence[str], tolerance: float = 1e-5) -> list[str]:
    """Problems found with DVF's invariant over the whole run (every iteration, warm-up included):
    every worker applied the same updates, and their sum plus every host's final residual is the
    sum of everything the workers computed (float64; relative error to the largest entry, as
    engine.host.verify_sums judges exact sums). An empty list: nothing was lost."""
    check = run_dir / "check"
    iterations = sorted({int(p.name.split("-")[0]) for p in check.glob("*-in.npy")})
    if not iterations:
        return [f"{check}: no checked iteration"]
    computed = sum(np.load(check / f"{it}-{w}-in.npy").astype(np.float64) for it in iterations for w in workers)
    applied = {w: sum(np.load(check / f"{it}-{w}-out.npy").astype(np.float64) for it in iterations) for w in workers}
    problems = []
    first = applied[workers[0]]
    for w in workers[1:]:
        if not np.array_equal(applied[w], first):
            problems.append(f"{w} applied other updates than {workers[0]}")
    residual = sum(np.load(check / f"residual-{h}.npy").astype(np.float64) for h in hosts)
    if not (np.all(np.isfinite(computed)) and np.all(np.isfinite(first)) and np.all(np.isfinite(residual))):
        return [*problems, "computed, applied or residual updates are not all finite (a diverged model)"]
    scale = float(np.max(np.abs(computed))) or 1.0
    err = float(np.max(np.abs(first + residual - computed))) / scale
    if err > tolerance:
        problems.append(f"applied + residual differs from computed by {err:.2e} (relative) > {tolerance:g}")
    return problems

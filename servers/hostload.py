"""What real servers did during a hardware-mode run: their data-plane NIC's bytes and their CPU,
read from /proc over SSH once a second.

On real hardware there is no emulator whose faithfulness could be doubted, so the fidelity
verdict of an emulated run is replaced by these numbers: a NIC that carried the job's bytes,
and CPUs that were (or were not) the bottleneck. The NIC is the one holding the server's
data-plane address (from `ip -o -4 addr`), so the SSH session that reads the counters is not
counted when it uses another network.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import paramiko

from servers.ssh import SSHError, run_text

LOG = logging.getLogger(__name__)
#: one exec per server and sample: CPU jiffies and every interface's counters
SAMPLE_COMMAND = "cat /proc/stat /proc/net/dev"


@dataclass(frozen=True)
class Sample:
    t: float
    busy: int  # jiffies of all CPUs not idle or waiting for I/O
    total: int
    rx: int  # data-plane NIC bytes
    tx: int


def parse_stat(text: str) -> tuple[int, int, int]:
    """(busy jiffies, total jiffies, CPUs) from /proc/stat's aggregate `cpu` line."""
    cpus = 0
    busy = total = -1
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            vals = [int(v) for v in parts[1:9]]  # user nice system idle iowait irq softirq steal
            total = sum(vals)
            busy = total - vals[3] - vals[4]
        elif parts[0].startswith("cpu") and parts[0][3:].isdigit():
            cpus += 1
    if total < 0:
        raise ValueError("no aggregate cpu line in /proc/stat")
    return busy, total, cpus


def parse_net_dev(text: str, iface: str) -> tuple[int, int]:
    """(rx bytes, tx bytes) of `iface` from /proc/net/dev."""
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip() == iface:
            f = rest.split()
            return int(f[0]), int(f[8])
    raise ValueError(f"no interface {iface} in /proc/net/dev")


def iface_with(ip_addr_text: str, address: str) -> str | None:
    """The interface that holds `address`, from `ip -o -4 addr show` output."""
    for line in ip_addr_text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "inet" and f[3].split("/")[0] == address:
            return f[1].split("@")[0]
    return None


@dataclass
class Server:
    """One server being watched: its SSH client, data-plane address and NIC, its samples."""

    name: str
    client: paramiko.SSHClient
    data: str
    plays: list[str]
    nic: str = ""
    cpus: int = 0
    samples: list[Sample] = field(default_factory=list)

    def sample(self) -> Sample:
        text = run_text(self.client, SAMPLE_COMMAND)
        busy, total, self.cpus = parse_stat(text)
        rx, tx = parse_net_dev(text, self.nic)
        s = Sample(time.time(), busy, total, rx, tx)
        self.samples.append(s)
        return s


class HostLoad:
    """Samples every server once a second from `start` to `stop`; `stop` returns the summary."""

    def __init__(self, servers: list[Server], interval_s: float = 1.0) -> None:
        self.servers = servers
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> HostLoad:
        """Find each server's data-plane NIC (SSHError when none holds the inventory's address)."""
        for s in self.servers:
            nic = iface_with(run_text(s.client, "ip -o -4 addr show"), s.data)
            if nic is None:
                raise SSHError(
                    f"{s.name}: no interface holds the data-plane address {s.data}; fix the inventory's data field"
                )
            s.nic = nic
            s.sample()
        self._thread = threading.Thread(target=self._loop, name="hostload", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            for s in self.servers:
                try:
                    s.sample()
                except (SSHError, ValueError) as err:  # a lost connection ends the run elsewhere
                    LOG.warning("%s: load sample failed: %s", s.name, err)

    def stop(self, since: float | None = None) -> dict[str, dict]:
        """Per server: its NIC's bytes and its CPU over the run (from `since`, the first measured
        step, when given and sampled after); CPU as the share of all its cores, mean and p95 of
        the one-second samples."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        for s in self.servers:
            try:
                s.sample()  # the end of the window, also when the run was short
            except (SSHError, ValueError) as err:
                LOG.warning("%s: last load sample failed: %s", s.name, err)
        return {s.name: summarize(s, since) for s in self.servers}


def summarize(s: Server, since: float | None) -> dict:
    """One server's counters over its samples from `since` (all of them when too few are later)."""
    window = [x for x in s.samples if since is None or x.t >= since]
    if len(window) < 2:
        window = s.samples
    first, last = window[0], window[-1]
    whole = (s.samples[-1].rx - s.samples[0].rx, s.samples[-1].tx - s.samples[0].tx)
    shares = [(b.busy - a.busy) / (b.total - a.total) for a, b in pairwise(window) if b.total > a.total]
    return {
        "plays": s.plays,
        "data": s.data,
        "nic": s.nic,
        "seconds": round(last.t - first.t, 3),
        "rx_bytes": last.rx - first.rx,
        "tx_bytes": last.tx - first.tx,
        "run_rx_bytes": whole[0],  # from the start of the run (the job's start-up included)
        "run_tx_bytes": whole[1],
        "cpus": s.cpus,
        "cpu_mean": float(np.mean(shares)) if shares else None,
        "cpu_p95": float(np.percentile(shares, 95)) if shares else None,
        "samples": len(window),
    }

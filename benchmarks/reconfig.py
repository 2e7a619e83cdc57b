"""The network benchmark's second figure: how fast an ECS reconfiguration moves a worker's traffic.

On the PSNet prototype a worker sends a paced UDP stream to a PS (benchmarks/udp_probe.py, run
inside both hosts); the PS records which NIC each datagram arrives on; the worker's circuit is
moved to another ToR and back, `reps` times per dark period. From the arrivals: request -> first
datagram on the PS NIC of the new ToR, the gap between the last datagram on the old NIC and the
first on the new one, and the datagrams lost in between.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import TOP, maximum, median
from emulation import measure
from emulation.net import Testbed
from topologies.files import write_text_atomic

LOG = logging.getLogger(__name__)

RECONFIG_TARGET_MS = 100.0
RECONFIG_TOPOLOGY = "psnet-testbed"
RECONFIG_WORKER, RECONFIG_PS, RECONFIG_OTHER_TOR = "w1_1_1", "ps1_1", "t1_3"
SEND_GAP_S = 0.0005
UDP_PORT = 7777
SETTLE_S = 0.6  # between reconfigurations: the stream runs steadily on one NIC again
#: the paced UDP stream and its receiver (benchmarks/udp_probe.py), run inside the hosts
UDP_PROBE = [sys.executable, "-m", "benchmarks.udp_probe"]


def analyze_switch(rec: list[tuple[float, str, int]], t0: float, t_next: float, old_if: str, new_if: str) -> dict:
    """One reconfiguration seen at the PS: `rec` is (arrival s, interface, seq) in arrival order.

    first_new_ms: request (t0) -> first datagram on the new ToR's NIC; gap_ms: last datagram on
    the old NIC -> that first one; lost: sequence numbers between the last datagram received
    before the request and that first one that never arrived (on any NIC).
    """
    window = [r for r in rec if t0 <= r[0] < t_next]
    first_new = next((r for r in window if r[1] == new_if), None)
    if first_new is None:
        return {"first_new_ms": None, "gap_ms": None, "lost": None, "late_old": None}
    olds = [r for r in rec if r[0] < first_new[0] and r[1] == old_if]
    last_old = olds[-1] if olds else None
    before = [r[2] for r in rec if r[0] < t0]
    seq_lo = max(before) if before else first_new[2] - 1
    got = {r[2] for r in rec}
    return {
        "first_new_ms": (first_new[0] - t0) * 1000,
        "gap_ms": (first_new[0] - last_old[0]) * 1000 if last_old else None,
        "lost": sum(1 for s in range(seq_lo + 1, first_new[2]) if s not in got),
        "late_old": sum(1 for r in window if r[1] == old_if and r[0] > first_new[0]),
    }


def reconfig_session(tb: Testbed, dark_ms: float, reps: int) -> tuple[list[dict], dict]:
    """Move the worker's circuit `reps` times (home ToR <-> other) under one paced UDP stream."""
    worker, ps = RECONFIG_WORKER, RECONFIG_PS
    home = tb.circuits()[worker]
    nic = {tor: tb.model.links_between(ps, tor)[0].intf(ps) for tor in (home, RECONFIG_OTHER_TOR)}
    recv = tb.host(ps).popen(
        [*UDP_PROBE, "receive", str(UDP_PORT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TOP
    )
    events: list[dict] = []
    sent: dict = {}
    try:
        if recv.stdout.readline().strip() != "ready":
            raise RuntimeError(f"UDP receiver in {ps} did not start: {recv.stderr.read()[-400:]}")
        send = tb.host(worker).popen(
            [*UDP_PROBE, "send", tb.model.nodes[ps].ip, str(UDP_PORT), str(SEND_GAP_S)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=TOP,
        )
        try:
            time.sleep(SETTLE_S)
            for _ in range(reps):
                old = tb.circuits()[worker]
                new = RECONFIG_OTHER_TOR if old == home else home
                t0 = time.time()
                reply = tb.reconfigure(worker, new, dark_ms=dark_ms)
                t1 = time.time()
                events.append(
                    {"t0": t0, "old": old, "new": new, "call_ms": (t1 - t0) * 1000, "controller_ms": reply["ms"]}
                )
                time.sleep(SETTLE_S)
        finally:
            send.terminate()
            out, err = send.communicate(timeout=10)
            sent = json.loads(out) if out.strip() else {"error": err[-400:]}
    finally:
        recv.terminate()
        out, err = recv.communicate(timeout=30)
    if tb.circuits()[worker] != home:  # leave the prototype as the file deploys it
        tb.reconfigure(worker, home, dark_ms=0)
    rec = [tuple(r) for r in json.loads(out)["rec"]] if out.strip() else []
    if not rec:
        raise RuntimeError(f"UDP receiver in {ps} recorded nothing: {err[-400:]}")
    for i, ev in enumerate(events):
        t_next = events[i + 1]["t0"] if i + 1 < len(events) else float("inf")
        ev |= analyze_switch(rec, ev["t0"], t_next, nic[ev["old"]], nic[ev["new"]])
    received = len({r[2] for r in rec})
    stream = {
        "dark_ms": dark_ms,
        "sent": sent.get("sent"),
        "send_errors": sent.get("errors"),
        "received": received,
        "lost_total": (sent["sent"] - received) if "sent" in sent else None,
        "nics": nic,
        "arrivals": rec,
    }
    return events, stream


def reconfig_figure(dark_values: list[float], reps: int, raw_dir: Path) -> list[dict]:
    """Medians per dark period; the raw arrivals are written to raw_dir."""
    out = []
    with Testbed(TOP / "topologies" / f"{RECONFIG_TOPOLOGY}.yaml") as tb:
        if not all(measure.reachable(tb, [(RECONFIG_WORKER, RECONFIG_PS)]).values()):
            LOG.warning("%s does not reach %s before the reconfiguration runs", RECONFIG_WORKER, RECONFIG_PS)
        for dark in dark_values:
            LOG.info("reconfiguration, dark %g ms, %d repetitions", dark, reps)
            events, stream = reconfig_session(tb, dark, reps)
            raw_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(raw_dir / f"reconfig-dark{dark:g}ms.json", json.dumps({"events": events, **stream}))
            out.append(
                {
                    "dark_ms": dark,
                    "reps": len(events),
                    "first_new_ms": median([e["first_new_ms"] for e in events]),
                    "first_new_ms_max": maximum([e["first_new_ms"] for e in events]),
                    "gap_ms": median([e["gap_ms"] for e in events]),
                    "lost": median([e["lost"] for e in events]),
                    "lost_max": maximum([e["lost"] for e in events]),
                    "call_ms": median([e["call_ms"] for e in events]),
                    "controller_ms": median([e["controller_ms"] for e in events]),
                    "missed": sum(e["first_new_ms"] is None for e in events),
                    "stream_sent": stream["sent"],
                    "stream_lost": stream["lost_total"],
                    "events": events,
                }
            )
    return out

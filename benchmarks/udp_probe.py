"""A paced UDP stream and its receiver, run inside Mininet hosts by the network benchmark:

    python -m benchmarks.udp_probe receive PORT          (in the PS)
    python -m benchmarks.udp_probe send IP PORT GAP_S    (in the worker)

Both run until SIGTERM, then print one JSON line. The receiver first prints "ready"; at the end
it prints the arrival time (time.time(): CLOCK_REALTIME is shared by all namespaces), the
interface each datagram arrived on (IP_PKTINFO's index, named) and its sequence number. The
sender prints how many datagrams it sent and how many sends failed. Standard library only: the
hosts start a fresh interpreter for each.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import time

#: Linux's value; Python 3.11's socket module does not export it
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)


class _Term:
    """Set by SIGTERM: the loops end at their next turn and print what they measured."""

    def __init__(self) -> None:
        self.done = False
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, *_: object) -> None:
        self.done = True


def receive(port: int) -> dict:
    """Record (arrival s, interface, seq) of every datagram on `port` until SIGTERM."""
    term = _Term()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
    s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.1)
    rec: list[tuple[float, int, int]] = []
    print("ready", flush=True)
    while not term.done:
        try:
            data, anc, _flags, _addr = s.recvmsg(64, socket.CMSG_SPACE(12))
        except (TimeoutError, InterruptedError):
            continue
        t = time.time()
        ifindex = -1
        for level, kind, val in anc:
            if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                ifindex = struct.unpack("I", val[:4])[0]
        rec.append((t, ifindex, struct.unpack("!I", data[:4])[0]))
    names = {}
    for i in {r[1] for r in rec}:
        try:
            names[i] = socket.if_indextoname(i)
        except OSError:
            names[i] = str(i)
    return {"rec": [(t, names[i], q) for t, i, q in rec]}


def send(ip: str, port: int, gap_s: float) -> dict:
    """One datagram (sequence number, send time) every gap_s until SIGTERM.

    Paced against an absolute schedule; after a stall (2 cores, busy) the schedule restarts
    rather than bursting, since the userspace datapath drops part of a burst.
    """
    term = _Term()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    seq, errors = 0, 0
    nxt = time.monotonic()
    while not term.done:
        try:
            s.sendto(struct.pack("!Id", seq, time.time()), (ip, port))
        except OSError:
            errors += 1
        seq += 1
        nxt += gap_s
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        elif d < -10 * gap_s:
            nxt = time.monotonic()
    return {"sent": seq, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="udp_probe", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("receive", help="record arrivals until SIGTERM")
    r.add_argument("port", type=int)
    s = sub.add_parser("send", help="send a paced stream until SIGTERM")
    s.add_argument("ip")
    s.add_argument("port", type=int)
    s.add_argument("gap_s", type=float, help="seconds between datagrams")
    args = p.parse_args(argv)
    out = receive(args.port) if args.role == "receive" else send(args.ip, args.port, args.gap_s)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

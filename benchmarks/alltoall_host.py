"""One host of benchmarks/alltoall.py's plain-TCP all-to-all: `python -m benchmarks.alltoall_host CONFIG`.

Standard library only: nine of these start at once inside the emulated hosts, and the package's
imports would take seconds each on two cores, late for the common start. Plain blocking sockets
and a thread per peer: the least a sender can be.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

PORT = 7700
NAME_BYTES = 32  # the sender's name, padded, first on every connection


def host_main(cfg: dict) -> int:
    """One host: accept a connection from every peer that sends here, connect to every peer this
    host sends to, then per round at `t0 + k * gap_s` send each its bytes (a thread per peer) while
    receiver threads note each flow's end; writes [[round, sender, bytes, seconds after the round's
    start], ...] to cfg["out"]."""
    me, addrs, sends = cfg["name"], cfg["addresses"], cfg["sends"]  # sends: peer -> bytes
    senders = cfg["senders"]  # peer -> bytes it sends here per round
    rounds, gap, t0 = int(cfg["rounds"]), float(cfg["gap_s"]), float(cfg["t0"])
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addrs[me], PORT))
    srv.listen(len(senders) + 1)
    ends: list[list] = []
    lock = threading.Lock()

    def receive(conn: socket.socket) -> None:
        peer = conn.recv(NAME_BYTES, socket.MSG_WAITALL).decode().strip()
        for k in range(rounds):
            left = got = senders[peer]
            while left:
                b = conn.recv(min(left, 1 << 20))
                if not b:
                    return
                left -= len(b)
            with lock:
                ends.append([k, peer, got, time.time() - (t0 + k * gap)])

    def accept() -> None:
        for _ in senders:
            conn, _ = srv.accept()
            threading.Thread(target=receive, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    out: dict[str, socket.socket] = {}
    deadline = time.time() + 20
    for peer in sends:
        while True:
            try:
                out[peer] = socket.create_connection((addrs[peer], PORT), timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        out[peer].sendall(me.ljust(NAME_BYTES).encode())
    payload = bytes(max(sends.values(), default=0))
    for k in range(rounds):
        time.sleep(max(0.0, t0 + k * gap - time.time()))
        threads = [threading.Thread(target=s.sendall, args=(payload[: sends[p]],)) for p, s in out.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    want = rounds * len(senders)
    while time.time() < t0 + rounds * gap + 10 and len(ends) < want:
        time.sleep(0.05)
    Path(cfg["out"]).write_text(json.dumps(ends))
    return 0 if len(ends) == want else 1


if __name__ == "__main__":
    raise SystemExit(host_main(json.loads(Path(sys.argv[1]).read_text())))

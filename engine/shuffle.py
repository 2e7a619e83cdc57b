"""One background host of Parameter Flow's shared cluster: periodic all-to-all shuffles.

    python -m engine.shuffle CONFIG.json

The paper's shared mode runs a Spark cluster beside the training job whose WordCount shuffles
load the network from time to time. Each background host runs this process inside its Mininet
host: it listens on its emulated address and discards what arrives, and every `every_s` seconds
(or, when a shuffle outlasts the period, as soon as it ends) it opens one TCP connection to every
other background host and sends each `bytes` at once (a shuffle's all-to-all), then goes quiet
until the next period: on, off, on. It stops after `for_s` seconds or when terminated. One line per
shuffle goes to `<log>`: its start, end and the bytes this host sent.

Plain asyncio, as the engine (engine/executor.py): no maintained traffic generator sends
all-to-all bursts on a period from inside network namespaces (iperf3 is one pair per server).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

LOG = logging.getLogger("shuffle")
BLOCK = 1 << 20  # bytes written per call
CONNECT_TIMEOUT_S = 10.0


async def _sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while await reader.read(BLOCK):
            pass
    finally:
        writer.close()


async def _send(address: tuple[str, int], nbytes: int) -> int:
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            _, writer = await asyncio.open_connection(*address)
            break
        except OSError:  # the peer's process is still starting
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    block = bytes(BLOCK)
    left = nbytes
    while left > 0:
        writer.write(block[: min(left, BLOCK)])
        left -= min(left, BLOCK)
        await writer.drain()
    writer.close()
    await writer.wait_closed()
    return nbytes


async def run(cfg: dict[str, Any]) -> None:
    name = cfg["name"]
    peers = {h: (a[0], int(a[1])) for h, a in cfg["peers"].items()}
    server = await asyncio.start_server(_sink, *peers[name])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    end = time.time() + float(cfg["for_s"]) if cfg.get("for_s") else None
    every = float(cfg["every_s"])
    others = [h for h in peers if h != name]
    with Path(cfg["log"]).open("w") as log:
        k = 0
        while not stop.is_set() and (end is None or time.time() < end):
            start = time.time()
            sent = sum(await asyncio.gather(*(_send(peers[h], int(cfg["bytes"])) for h in others)))
            log.write(json.dumps({"shuffle": k, "start": start, "end": time.time(), "sent": sent}) + "\n")
            log.flush()
            k += 1
            wait = start + every - time.time()
            if wait > 0:
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except TimeoutError:
                    pass
    server.close()


def read_shuffles(path: Path) -> list[dict]:
    """The shuffles a background host logged (a line being written is skipped)."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    cfg = json.loads(Path(argv[0]).read_text())
    try:
        asyncio.run(run(cfg))
    except Exception as err:
        LOG.error("%s: %s: %s", cfg.get("name"), type(err).__name__, err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Parameter Flow's shared cluster: the background hosts' periodic all-to-all shuffles beside a job.

A timeline's `shuffle` event (workloads.timeline) names background hosts; when it falls due this
starts one engine.shuffle process in each of them (inside its Mininet host, on its emulated
address: traffic only from inside the hosts) and stops them at the end of the run. What they
did (each shuffle's start, end and bytes) is read back from their logs for the timeline's events
and the summary.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from emulation.net import Testbed
from engine.emulated import testbed_starter
from engine.shuffle import read_shuffles
from topologies.model import Network
from workloads.timeline import TimelineError, TimelineEvent

#: background hosts listen on BASE_PORT + i (the engine's hosts on engine.processes.BASE_PORT + i)
BASE_PORT = 46000


def check_hosts(net: Network, e: TimelineEvent, job_hosts: list[str], where: str) -> None:
    """A shuffle's hosts must be hosts of the topology and none of the job's (TimelineError)."""
    for h in e.hosts or []:
        if h not in net.nodes or not net.nodes[h].is_host:
            raise TimelineError(f"{where}.hosts: {h} is not a host of the topology")
        if h in job_hosts:
            raise TimelineError(f"{where}.hosts: {h} runs the job; background hosts must be others")


@dataclass
class Shuffles:
    """One `shuffle` event's processes: started when due, stopped at the end."""

    event: TimelineEvent
    nbytes: int  # emulated bytes each host sends each other host per shuffle
    run_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    started: float | None = None

    def start(self, tb: Testbed, now: float) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        hosts = list(self.event.hosts or [])
        peers = {h: [tb.model.nodes[h].ip, BASE_PORT + i] for i, h in enumerate(hosts)}
        start = testbed_starter(tb, self.run_dir)
        for h in hosts:
            cfg = {
                "name": h,
                "peers": peers,
                "bytes": self.nbytes,
                "every_s": self.event.every_s,
                "for_s": self.event.for_s,
                "log": str(self.run_dir / f"{h}.jsonl"),
            }
            path = self.run_dir / f"{h}.json"
            path.write_text(json.dumps(cfg))
            self.procs[h] = start(h, [sys.executable, "-m", "engine.shuffle", str(path)])
        self.started = now

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def shuffles(self) -> list[dict]:
        """Every shuffle of every host: host, start, end (unix s), sent bytes."""
        return [{"host": h, **r} for h in self.procs for r in read_shuffles(self.run_dir / f"{h}.jsonl")]

    def summary(self) -> dict:
        rows = self.shuffles()
        spans = sorted({(round(r["start"], 1), round(r["end"], 1)) for r in rows})
        return {
            "hosts": list(self.procs),
            "bytes_per_pair": self.nbytes,
            "every_s": self.event.every_s,
            "shuffles": len({r["shuffle"] for r in rows}),
            "sent_bytes": sum(r["sent"] for r in rows),
            "mean_shuffle_s": sum(r["end"] - r["start"] for r in rows) / len(rows) if rows else None,
            "spans": spans[:50],
        }

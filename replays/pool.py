"""The worker processes of a model replay (replays.modelreplay, replays.schemefig_replay): a
`ProcessPoolExecutor` (spawn) that ends its work when the replay is interrupted.

`concurrent.futures` on leaving a `with` waits for the tasks already running, and a flow-model
point runs for minutes (SimGrid, in pools of its own): Ctrl-C or SIGTERM (which the CLI turns into
KeyboardInterrupt) then left the replay running until every running point had finished. Here an
exception out of the block terminates every process the pool started, their own children included
(psutil: the executor has no public way to stop a running task), and returns at once; points
already written stay, and `testbed replay` resumes from them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import psutil

#: seconds a terminated worker gets before it is killed
GRACE_S = 3.0


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@contextlib.contextmanager
def worker_pool(procs: int) -> Iterator[ProcessPoolExecutor]:
    """`procs` spawned workers; on an exception (KeyboardInterrupt included) every process they
    started is ended before the exception goes on (module doc)."""
    before = _children()
    pool = ProcessPoolExecutor(max_workers=procs, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        ours = []
        for pid in _children() - before:
            with contextlib.suppress(psutil.NoSuchProcess):
                ours.append(psutil.Process(pid))
        for p in ours:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.terminate()
        _, alive = psutil.wait_procs(ours, timeout=GRACE_S)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        raise
    else:
        pool.shutdown(wait=True)

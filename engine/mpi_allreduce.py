"""Open MPI's own allreduce on one rank per emulated host: the field's reference for our schemes.

    mpirun ... python -m engine.mpi_allreduce N_ELEMS WARMUP ITERATIONS

Each timed allreduce starts after a barrier; the slowest rank's time counts (as our GST takes the
slowest worker). Rank 0 prints LAUNCHED once every rank is up (engine.mpi's launch watchdog waits
for it), then one JSON line with every iteration's time and a sum check.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

#: rank 0's line once every rank has passed the first barrier: the launch is over
LAUNCHED = "all ranks launched"


def main(argv: list[str]) -> int:
    from mpi4py import MPI  # here, so engine.mpi can read LAUNCHED without MPI

    n, warmup, iterations = (int(a) for a in argv[:3])
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    comm.Barrier()
    if rank == 0:
        print(LAUNCHED, flush=True)
    send = np.full(n, float(rank + 1), dtype=np.float32)
    recv = np.empty_like(send)
    times = []
    for it in range(warmup + iterations):
        comm.Barrier()
        t0 = time.monotonic()
        comm.Allreduce(send, recv, op=MPI.SUM)
        dt = comm.allreduce(time.monotonic() - t0, op=MPI.MAX)
        if it >= warmup:
            times.append(dt)
    ok = bool(np.all(recv == size * (size + 1) / 2))
    ok = comm.allreduce(ok, op=MPI.LAND)
    if rank == 0:
        host = MPI.Get_processor_name()
        print(json.dumps({"ranks": size, "n_elems": n, "times_s": times, "sum_ok": ok, "host": host}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

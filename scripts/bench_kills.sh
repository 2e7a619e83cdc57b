#!/usr/bin/env bash
# Kill benchmark: SIGKILL scheme runs (engine), Open MPI runs and PSNET_FORKSERVER=0 TF runs at
# random (seeded) moments, clear each by the next run's start or by `testbed clean` (in turn), and
# look for anything left: a process of the run, a bridge of the testbed, a root interface of the
# topology, a network namespace, the run folder. Written to $out/kills.json and $out/kills.md. Run
# as root:
#   scripts/bench_kills.sh            (20 kills, ~6 min)
#   scripts/bench_kills.sh --quick    (3 kills, one per kind, each just after its job started)
# Extra arguments go to `python -m benchmarks.kills` (see --help: --kills, --seed, --kinds).
set -euo pipefail

out=${OUT:-results/bench}               # output folder (kills.json, kills.md)
lock_wait_s=${PSNET_LOCK_WAIT_S:-1800}  # queue this long behind another emulation run

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=$lock_wait_s
exec .venv/bin/python -m benchmarks.kills --out "$out" "$@"

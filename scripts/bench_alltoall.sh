#!/usr/bin/env bash
# An all-to-all (the mesh's reduce phase) on an emulated network in plain TCP and in the scheme engine,
# against the busiest cable's bound, at several rates with the bound fixed (issue 29): which part of
# the mesh's lost time is the emulated network's and which the engine's. Writes $out/alltoall.{json,md}.
# Root, Mininet and Open vSwitch; run it on an otherwise idle machine:
#   scripts/bench_alltoall.sh            (Torus-3x3, BCube(4,1), two leaf-spines; 3.125 ... 25 Mbit/s; then
#                                         the 64-host leaf-spine at 4 Mbit/s with two RTO floors; ~13 min)
#   scripts/bench_alltoall.sh --quick    (Torus-3x3 at 3.125 and 12.5 Mbit/s, 2 rounds, ~1 min)
#   scripts/bench_alltoall.sh --topology bcube-4-1.yaml --rates 2.5 5 10
#   scripts/bench_alltoall.sh --topology leafspine-64 --rates 4 --rto-min-ms 1000   (hosts' RTO floor)
# Extra arguments go to `python -m benchmarks.alltoall` (see --help).
set -euo pipefail

out=${OUT:-results/bench}   # output folder (alltoall.json, alltoall.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=${PSNET_LOCK_WAIT_S:-3600}   # queue behind a replay instead of failing
exec .venv/bin/python -m benchmarks.alltoall --out "$out" "$@"

#!/usr/bin/env bash
# Scheme benchmark: measured GST against each schedule's expectation (leaf-spine, 2-rack, FatTree;
# ps, mesh, ring, halving-doubling, rat), the engine's own cost on loopback, our ring and
# halving-doubling beside Open MPI's allreduce at 10/25/50 Mbit/s, a 64-host calibrated run
# with its fidelity verdict, and HiPS Table 3 measured (BCube(4,1), 4 x 4 Torus at 2.5/5/10 Mbit/s). Writes $out/schemes.json and $out/schemes.md. Run as root on an
# otherwise idle machine (2 cores: other work changes every figure):
#   scripts/bench_schemes.sh            (full, ~25 min)
#   scripts/bench_schemes.sh --quick    (one topology, ring and RAT, loopback; ~2 min)
# Extra arguments go to `python -m benchmarks.schemes` (see --help), e.g. --only mpi.
set -euo pipefail

out=${OUT:-results/bench}   # output folder (schemes.json, schemes.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=${PSNET_LOCK_WAIT_S:-1800}
exec .venv/bin/python -m benchmarks.schemes --out "$out" "$@"

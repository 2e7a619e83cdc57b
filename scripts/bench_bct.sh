#!/usr/bin/env bash
# BCT benchmark: real TensorFlow synchronous PS jobs (VGG-16, one fixed width) on the PSNet and
# FatTree prototypes and two adjacent PSNet modules (Eq. 6, its gap explained) at emulated worker
# rates of 25, 50 and 100 Mbit/s; measured BCT beside the paper's model (BCT_min, BCT_max), the fidelity verdict, TF start-up and memory per process,
# written to $out/bct.json and $out/bct.md (run results under $out/bct-runs/). Run as root:
#   scripts/bench_bct.sh            (full: ~10 min for the prototypes, plus the two-module points)
#   scripts/bench_bct.sh --quick    (reduced: 50 Mbit/s only)
# Extra arguments go to `python -m benchmarks.bct` (see --help).
set -euo pipefail

out=${OUT:-results/bench}               # output folder (bct.json, bct.md, bct-runs/)
lock_wait_s=${PSNET_LOCK_WAIT_S:-1800}  # queue this long behind another emulation run

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=$lock_wait_s
exec .venv/bin/python -m benchmarks.bct --out "$out" "$@"

#!/usr/bin/env bash
# Network benchmark: bring-up times of every topology file (and a standalone-STP FatTree beside
# them), ECS reconfiguration latency, and shaping fidelity, each printed beside its target and
# written to $out/network.json and $out/network.md. Run as root:
#   scripts/bench_network.sh            (full, ~10 min)
#   scripts/bench_network.sh --quick    (reduced, < 2 min)
# Extra arguments go to `python -m benchmarks.network` (see --help).
set -euo pipefail

out=${OUT:-results/bench}          # output folder (network.json, network.md, raw/)
lock_wait_s=${PSNET_LOCK_WAIT_S:-1800}  # queue this long behind another emulation run

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=$lock_wait_s
exec .venv/bin/python -m benchmarks.network --out "$out" "$@"

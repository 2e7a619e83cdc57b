#!/usr/bin/env bash
# Flow-model scale benchmark: one simulated iteration (the TF PS job, and a ring where its
# 2 W (W - 1) messages fit) of PSNet, FatTree and BCube at ~100, ~1k and ~10k hosts on SimGrid;
# wall time and max RSS of model building, routing and the SimGrid subprocess, written to
# $out/scale.json and $out/scale.md. No emulation (no lock, no root needed beyond set-up):
#   scripts/bench_scale.sh            (full, ~5 min)
#   scripts/bench_scale.sh --quick    (the ~100-host points, < 1 min)
# Extra arguments go to `python -m benchmarks.scale` (see --help).
set -euo pipefail

out=${OUT:-results/bench}   # output folder (scale.json, scale.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ "$(id -u)" -eq 0 ]; then bash scripts/setup.sh; fi
exec .venv/bin/python -m benchmarks.scale --out "$out" "$@"

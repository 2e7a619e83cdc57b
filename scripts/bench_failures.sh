#!/usr/bin/env bash
# Failure and reconfiguration benchmark: real TF jobs (VGG-16) on the PSNet prototype with a
# standby PS, once per ECS dark period (0, 0.01, 1, 10, 100 ms), and on the FatTree prototype with a
# standby PS; every event type in one timeline per run (cable down/up, switch failure/repair,
# worker re-circuited, rate halved/restored, PS failure). Per event: time to apply, recovery time,
# BCT overhead, steps lost; written to $out/failures.json and $out/failures.md. Run as root:
#   scripts/bench_failures.sh            (full, ~15 min)
#   scripts/bench_failures.sh --quick    (reduced, ~4.5 min: dark 0 only, an event every 3 steps)
# Extra arguments go to `python -m benchmarks.failures` (see --help).
set -euo pipefail

out=${OUT:-results/bench}               # output folder (failures.json, failures.md, failures-runs/)
lock_wait_s=${PSNET_LOCK_WAIT_S:-1800}  # queue this long behind another emulation run

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=$lock_wait_s
exec .venv/bin/python -m benchmarks.failures --out "$out" "$@"

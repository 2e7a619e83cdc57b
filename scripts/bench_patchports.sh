#!/usr/bin/env bash
# Patch-port probe (issue 32): 6 TCP flows across leaf -> spine -> leaf with every cable a shaped
# veth (the testbed today) and with the leaf-spine cables as OVS patch ports, at 600 ... 1,800
# Mbit/s aggregate: wire/configured, ovs-vswitchd's CPU, drops. Writes $out/patchports.{json,md}.
# Root, Mininet and Open vSwitch; run it on an otherwise idle machine:
#   scripts/bench_patchports.sh            (full, 5 rates x 2 cablings, 8 s flows, ~3 min)
#   scripts/bench_patchports.sh --quick    (600 and 1,200 Mbit/s, 3 s flows, ~1 min)
# Extra arguments go to `python -m benchmarks.patchports` (see --help).
set -euo pipefail

out=${OUT:-results/bench}   # output folder (patchports.json, patchports.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=${PSNET_LOCK_WAIT_S:-3600}   # queue behind a replay instead of failing
exec .venv/bin/python -m benchmarks.patchports --out "$out" "$@"

#!/usr/bin/env bash
# One network over two servers (--cluster, docs/cluster.md): the 2-rack leaf-spine on one machine and
# over two "servers" made on this machine (namespaces with their own sshd and Open vSwitch), rack to
# rack: round trip, one TCP flow, four at once. Writes $out/cluster.{json,md}. Root; an idle machine:
#   scripts/bench_cluster.sh            (50, 100 and 200 Mbit/s per host; ~3 min)
#   scripts/bench_cluster.sh --quick    (50 Mbit/s, ~1 min)
# Extra arguments go to `python -m benchmarks.cluster` (see --help).
set -euo pipefail

out=${OUT:-results/bench}   # output folder (cluster.json, cluster.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=${PSNET_LOCK_WAIT_S:-3600}   # queue behind a replay instead of failing
exec .venv/bin/python -m benchmarks.cluster --out "$out" "$@"

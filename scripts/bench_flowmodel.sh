#!/usr/bin/env bash
# Flow-model calibration: every shipped topology x every scheme the engine runs on it, emulated
# (scheme engine GST, compute 0) and simulated on the same file and bytes (models/flow);
# fits LV08's bandwidth factor and a per-message latency, writes the factors the flow model reads
# (results/calibration/flowmodel-factors.json) and the table ($out/flowmodel.json.gz, flowmodel.md).
# Run as root on an otherwise idle machine (2 cores: other work changes every figure):
#   scripts/bench_flowmodel.sh            (full: 11 topologies, 108 points; ~30 min idle, see README)
#   scripts/bench_flowmodel.sh --quick    (leaf-spine, mesh and ring, one size; factors to $out only)
# Extra arguments go to `python -m benchmarks.flowmodel` (see --help), e.g. --topologies psnet-testbed.yaml,
# or --emulated results/bench/flowmodel.json.gz to refit without emulating again.
# A run that emulates first judges the factors it replaces on its new points (never fitted on
# them) and compares its points with the previous emulation; a refit does that with
# --prior-factors FILE and --previous-emulated FILE. Several --emulated files (repeats of the same
# code, the newest first) fit and judge each point's median over its faithful repeats, e.g.
#   scripts/bench_flowmodel.sh --emulated new.json old.json.gz --tf-emulated new-tf.json old-tf.json.gz
# A run that emulates keeps the emulation it replaces as $out/flowmodel-emulated-<commit>.json.gz
# (its TF points likewise), the files to name after the new one.
set -euo pipefail

out=${OUT:-results/bench}   # output folder (flowmodel.json.gz, flowmodel.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=${PSNET_LOCK_WAIT_S:-1800}
exec .venv/bin/python -m benchmarks.flowmodel --out "$out" "$@"

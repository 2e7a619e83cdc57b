#!/usr/bin/env bash
# The main command: set up this machine (idempotent), prove the paper's two testbed prototypes
# (PSNet and the 4-ToR FatTree: reachability, paths, PS NICs, shaping), then replay Fig. 13
# (PSNet vs FatTree r = 1, 2, 5 for VGG-16 and ResNet50) and print the speed-up beside the
# paper's 1.89x / 1.92x. Results: results/fig13/ (report.md, fig13.png, summary.csv).
# Run as root:  scripts/replay.sh   (resumable; --fresh reruns, --quick is a 2-point smoke run)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
for topo in topologies/psnet-testbed.yaml topologies/fattree-testbed.yaml; do
  echo "== testbed topo check $topo"
  .venv/bin/testbed topo check "$topo" --iperf-seconds 2
done
echo "== testbed replay fig13 $*"
exec .venv/bin/testbed replay fig13 "$@"

#!/usr/bin/env bash
# The main command: set up this machine (idempotent), bring up the paper's two testbed
# prototypes (PSNet, Section 5 / Fig. 8, and the 4-ToR FatTree) and prove each with measurements
# (reachability, paths, PS NICs, shaping). Run as root:  sudo scripts/replay.sh
# (The Fig. 13 replay with TensorFlow jobs comes with the workload and replay work.)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
status=0
for topo in topologies/psnet-testbed.yaml topologies/fattree-testbed.yaml; do
  echo "== testbed topo check $topo"
  .venv/bin/testbed topo check "$topo" || status=1
done
exit $status

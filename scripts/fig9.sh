#!/usr/bin/env bash
# Replay the PSNet paper's Fig. 9 into results/fig9/ (raw runs, summary.csv, fig9.png, report.md).
# Resumable: finished points are kept. Options pass through: --quick, --repeat N, --fresh,
# --report-only (redraw from saved results). Run as root:  scripts/fig9.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
exec .venv/bin/testbed replay fig9 "$@"

#!/usr/bin/env bash
# Replay the PSNet paper's Fig. 1 into results/fig1/ (raw runs, summary.csv, fig1.png, report.md).
# Resumable: finished points are kept. Options pass through: --quick, --repeat N, --fresh,
# --report-only (redraw from saved results). Run as root:  scripts/fig1.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
exec .venv/bin/testbed replay fig1 "$@"

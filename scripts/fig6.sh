#!/usr/bin/env bash
# Replay the PSNet paper's Fig. 6 (Section 4.2, at scale) into results/fig6/ (points/, summary.csv,
# fig6.png, report.md, report.json) from the analytic model and the flow model: no emulation, so
# no root and no lock. Resumable: computed points are kept. Options pass through: --quick, --fresh.
# Needs the venv and python3-simgrid, which scripts/setup.sh installs once.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
exec .venv/bin/testbed replay fig6 "$@"

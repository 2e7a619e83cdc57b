#!/usr/bin/env bash
# Set up this machine (idempotent), then run the lint and the whole default test suite:
# unit tests and real Mininet/OVS/os-ken/TensorFlow emulations. Run as root:
#   scripts/test.sh            (extra pytest arguments are passed through, e.g. -k psnet)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
.venv/bin/testbed clean >/dev/null           # leftovers of an interrupted earlier run
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { echo "test: ruff format would change files (run .venv/bin/ruff format .)" >&2; exit 1; }
# queue behind another emulation (a benchmark, a second session) instead of failing on its lock,
# for less than a test's own time limit (pyproject.toml's timeout, 900 s)
export PSNET_LOCK_WAIT_S=${PSNET_LOCK_WAIT_S:-600}
# --durations: the 60 slowest tests end every run's output, so a CI log says where the suite's time goes
exec .venv/bin/pytest -q -p no:cacheprovider --durations=60 --durations-min=3 "$@"

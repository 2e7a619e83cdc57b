#!/usr/bin/env bash
# Replay stability benchmark: the main figure (Fig. 13, PSNet vs FatTree) replayed twice from
# scratch, each into its own folder ($out/replay-run1/fig13, $out/replay-run2/fig13); prints both
# headlines (as run and paper-equivalent), their difference (goal: within 5%), faithful points and
# wall times; written to $out/replay.json and $out/replay.md. Run as root on an idle machine:
#   scripts/bench_replay.sh            (full: two full Fig. 13 replays, about 2 x 40 min)
#   scripts/bench_replay.sh --quick    (Fig. 13's quick path twice, ~5 min: a smoke run)
# Extra arguments go to `python -m benchmarks.replay` (see --help; --keep resumes both runs).
set -euo pipefail

out=${OUT:-results/bench}               # output folder (replay.json, replay.md, replay-run*/)
lock_wait_s=${PSNET_LOCK_WAIT_S:-1800}  # queue this long behind another emulation run

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
export PSNET_LOCK_WAIT_S=$lock_wait_s
exec .venv/bin/python -m benchmarks.replay --out "$out" "$@"

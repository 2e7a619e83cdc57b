#!/usr/bin/env bash
# DVF benchmark: Parameter Flow's Fig. 9 jobs (LR, MF, AlexNet at the figure's sizes and deltas)
# without a network, the engine's codec on every host: bytes per clock on the push side and the
# broadcast side, the figure's one delta beside a servers' delta by the paper's rule, checked
# against the emulated pf-fig9. Writes $out/dvf.json, $out/dvf.md. No root or emulator needed:
#   scripts/bench_dvf.sh            (full, 12 clocks, ~1 min)
#   scripts/bench_dvf.sh --quick    (AlexNet only, 3 clocks; seconds)
# Extra arguments go to `python -m benchmarks.dvf` (see --help).
set -euo pipefail

out=${OUT:-results/bench}   # output folder (dvf.json, dvf.md)

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
exec .venv/bin/python -m benchmarks.dvf --out "$out" "$@"

#!/usr/bin/env bash
# The GPU side of the measured validation (issue 5), as one prepared command for a lent device machine,
# whose image already holds torch, numpy, pandas, matplotlib, typer and pyyaml:
#
#     bash bench/gpu_validation.sh "$OUT" h200        # results in $OUT/quick/, logs beside them
#     DEVICE=cpu bash bench/gpu_validation.sh out/ ''  # the same on this machine's CPU (no --like)
#
# Writes at most 7 files, one folder down: what the device tool brings back.
set -euo pipefail
out="${1:-gpu-validation}"
like="${2-h200}"
root="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$out"
python3 -m perfmodel measure --device "${DEVICE:-cuda}" --quick --out "$out/quick" ${like:+--like "$like"} 2>&1 | tee "$out/measure.log"
python3 -m perfmodel validate "$out/quick" | tee "$out/validate.txt"
python3 -m perfmodel validate "$out/quick" --format json > "$out/validate.json"

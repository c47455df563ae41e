#!/usr/bin/env bash
# Set up .venv, build the embedded sample dataset, run the whole job on it, say where outputs are.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
out="${1:-runs/demo}"
phoenix-keypoints sample --out sample >/dev/null
phoenix-keypoints run --dataset sample/PHOENIX-2014-T --out "$out" --chunk-frames 40
echo
phoenix-keypoints report --out "$out"
echo
phoenix-keypoints status --out "$out"
echo
echo "outputs: $out/keypoints.parquet, $out/tensors/, $out/run.json"
echo "look:    open $out/report/index.html (per split, signer and video: what was found, gaps, swaps)"

#!/usr/bin/env bash
# Set up the venv, build the embedded sample dataset, run the whole job on it, say where outputs are.
# On Python 3.13 (PYTHON=python3.13) there is no Holistic (mediapipe 0.10.21 has no 3.13 wheel), so
# the run is whole-body: rtmlib's balanced models once `phoenix-keypoints models fetch balanced` has
# put them in the cache, else tiny stand-in models built by tests/tiny_onnx.py (onnx, the dev
# extra), whose points mean nothing but take every step a real model's do.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
phoenix-keypoints sample --out sample >/dev/null
estimator=()
if ! python -c 'import sys; from phoenix_keypoints.extract.families.holistic.runner import holistic_available as h; sys.exit(h() is not None)'; then
  if python -c 'import sys; from phoenix_keypoints.jobs.models import resolve; resolve("balanced", None)' 2>/dev/null; then
    echo "no Holistic in this Python: whole-body estimator, rtmlib's balanced models (fetched)"
    estimator=(--estimator wholebody --models balanced)
  elif python -c 'import onnx' 2>/dev/null; then
    echo "no Holistic in this Python: whole-body estimator on TINY STAND-IN models (meaningless points;"
    echo "for real ones: phoenix-keypoints models fetch balanced, then run this again)"
    python -c 'import sys; sys.path.insert(0, "tests"); from tiny_onnx import tiny_models; tiny_models(sys.argv[1])' runs/demo-models
    estimator=(--estimator wholebody --detector runs/demo-models/tiny-yolox-end2end.onnx
               --pose-model runs/demo-models/tiny-rtmpose-simcc.onnx)
  else
    echo "error: no Holistic in this Python (mediapipe 0.10.21 has wheels for 3.10-3.12 only) and no" \
         "whole-body models: run 'phoenix-keypoints models fetch balanced' (needs the network once)," \
         "or install the dev extra (onnx) for tiny stand-in models, then run this again" >&2
    exit 1
  fi
fi
out="${1:-runs/demo${estimator[*]:+-wholebody}}"  # a Holistic run folder is not resumed as whole-body
phoenix-keypoints run --dataset sample/PHOENIX-2014-T --out "$out" --chunk-frames 40 \
  ${estimator[@]+"${estimator[@]}"}
echo
phoenix-keypoints report --out "$out"
echo
phoenix-keypoints status --out "$out"
echo
echo "outputs: $out/keypoints.parquet, $out/tensors/, $out/run.json"
echo "look:    open $out/report/index.html (per split, signer and video: what was found, gaps, swaps)"

#!/usr/bin/env bash
# Create .venv (once) and install phoenix-keypoints with the exact versions in constraints.txt.
# Sourced by demo.sh and test.sh so that both commands work on a fresh machine by themselves.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
pick_python() {
  for py in "${PYTHON:-}" python3.11 python3.12 python3.10 python3; do
    [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 12)))'; then
      echo "$py"; return 0
    fi
  done
  echo "error: need Python 3.10, 3.11 or 3.12 (mediapipe 0.10.21 has wheels for those); set PYTHON=..." >&2
  return 1
}
extras="${PHOENIX_EXTRAS:-dev}"
stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)-${extras//,/_}"
if [ ! -f "$stamp" ]; then
  if [ ! -x .venv/bin/python ]; then
    "$(pick_python)" -m venv .venv
  fi
  echo "setting up .venv (once; log in .venv/install.log) ..." >&2
  {
    .venv/bin/python -m pip install --upgrade pip &&
    .venv/bin/python -m pip install -c constraints.txt -e ".[${extras}]"
  } > .venv/install.log 2>&1 || { tail -40 .venv/install.log >&2; exit 1; }
  .venv/bin/python -m pip check
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# rtmlib is the reference the whole-body tests compare with (tests/tiny_onnx.py). It depends on
# opencv-python, whose cv2 would overwrite mediapipe's opencv-contrib-python: installed without its
# dependencies (numpy, onnxruntime, tqdm and cv2 are here already) into a folder of its own, outside
# pip's view of .venv, so `pip check` stays clean.
rtmlib_version=0.0.16
if [[ ",$extras," == *",dev,"* ]] && [ ! -f ".venv/rtmlib-ref/.installed-$rtmlib_version" ]; then
  rm -rf .venv/rtmlib-ref
  .venv/bin/python -m pip install --no-deps --target .venv/rtmlib-ref "rtmlib==$rtmlib_version" \
    >> .venv/install.log 2>&1 || { tail -20 .venv/install.log >&2; exit 1; }
  touch ".venv/rtmlib-ref/.installed-$rtmlib_version"
fi
export PATH="$here/.venv/bin:$PATH"

#!/usr/bin/env bash
# Create the venv (once) and install phoenix-keypoints with the exact versions pinned for its Python.
# Sourced by demo.sh and test.sh so that both commands work on a fresh machine by themselves.
#
# Which Python serves which estimator: 3.10-3.12 have mediapipe 0.10.21 (Holistic) and numpy 1;
# .venv, pinned by constraints.txt, the default. 3.13 has no mediapipe wheel: numpy 2, pandas 3,
# every step but Holistic extraction; PYTHON=python3.13 makes .venv-py313, pinned by
# constraints-py313.txt. PYTHON may name a pyenv version that is installed but not selected.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
runnable() {  # a command that runs here, or the same name in any installed pyenv version: found
  # in pyenv's versions folder ($PYENV_ROOT, or ~/.pyenv), so without pyenv on PATH too (a fresh
  # machine's own PATH, .ci/run's), the newest first
  local py="$1" path
  if "$py" -c '' >/dev/null 2>&1; then command -v "$py"; return 0; fi
  [[ "$py" == */* ]] && return 1
  while IFS= read -r path; do
    if [ -x "$path" ] && "$path" -c '' >/dev/null 2>&1; then echo "$path"; return 0; fi
  done < <(printf '%s\n' "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/"$py" | sort -rV)
  return 1
}
pick_python() {  # PYTHON, when set, is the one tried; 3.13 (no Holistic) only when named
  local py path newest=12
  local candidates=(python3.11 python3.12 python3.10 python3)
  [ -n "${PYTHON:-}" ] && candidates=("$PYTHON") newest=13
  for py in "${candidates[@]}"; do
    path="$(runnable "$py")" || continue
    if "$path" -c "import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, $newest)))"; then
      echo "$path"; return 0
    fi
  done
  echo "error: ${PYTHON:+PYTHON=$PYTHON does not run or is none of these: }need Python 3.10," \
       "3.11 or 3.12 (mediapipe 0.10.21, Holistic, has wheels for those), or PYTHON=python3.13" \
       "(every step but Holistic)" >&2
  return 1
}
python="$(pick_python)"
if "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))'; then
  venv=.venv-py313 constraints=constraints-py313.txt
else
  venv=.venv constraints=constraints.txt
fi
extras="${PHOENIX_EXTRAS:-dev}"
stamp="$venv/.installed-$(cat pyproject.toml "$constraints" | sha1sum | cut -c1-12)-${extras//,/_}"
if [ ! -f "$stamp" ]; then
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  echo "setting up $venv (once; log in $venv/install.log) ..." >&2
  {
    "$venv/bin/python" -m pip install --upgrade pip &&
    "$venv/bin/python" -m pip install -c "$constraints" -e ".[${extras}]"
  } > "$venv/install.log" 2>&1 || { tail -40 "$venv/install.log" >&2; exit 1; }
  "$venv/bin/python" -m pip check
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
# rtmlib is the reference the whole-body tests compare with (tests/tiny_onnx.py). It depends on
# opencv-python, whose cv2 would overwrite mediapipe's opencv-contrib-python: installed without its
# dependencies (numpy, onnxruntime, tqdm and cv2 are here already) into a folder of its own, outside
# pip's view of .venv, so `pip check` stays clean.
rtmlib_version=0.0.16
if [[ ",$extras," == *",dev,"* ]] && [ ! -f "$venv/rtmlib-ref/.installed-$rtmlib_version" ]; then
  rm -rf "$venv/rtmlib-ref"
  "$venv/bin/python" -m pip install --no-deps --target "$venv/rtmlib-ref" "rtmlib==$rtmlib_version" \
    >> "$venv/install.log" 2>&1 || { tail -20 "$venv/install.log" >&2; exit 1; }
  touch "$venv/rtmlib-ref/.installed-$rtmlib_version"
fi
# The tree's own modules compiled once (pip compiled the rest): the editable install imports them
# from source, and where PYTHONDONTWRITEBYTECODE is set Python never caches them itself, so every
# command and every worker would compile ~0.4 s of source as it starts. A source changed later
# invalidates its .pyc by itself (mtime and size are checked on import).
"$venv/bin/python" -m compileall -q -j 0 extract jobs phoenix_keypoints tests > /dev/null
export PATH="$here/$venv/bin:$PATH"

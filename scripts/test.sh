#!/usr/bin/env bash
# Set up .venv and run the test suite (tests that need ../shared/data skip with a reason without it).
set -euo pipefail
# the pose extra too, so the .pose export is tested rather than skipped
export PHOENIX_EXTRAS="${PHOENIX_EXTRAS:-dev,pose}"
source "$(dirname "$0")/setup.sh"
ruff check .
python -m pytest "$@"

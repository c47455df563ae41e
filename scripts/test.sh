#!/usr/bin/env bash
# Set up .venv and run the test suite (tests that need ../shared/data skip with a reason without it).
set -euo pipefail
# the optional extras too, so the .pose export and the Ray backend are tested, not skipped
export PHOENIX_EXTRAS="${PHOENIX_EXTRAS:-dev,pose,ray}"
source "$(dirname "$0")/setup.sh"
ruff check .
python -m pytest "$@"

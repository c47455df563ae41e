#!/usr/bin/env bash
# Set up .venv and run the test suite (tests that need ../shared/data skip with a reason without it).
set -euo pipefail
# The suite covers the optional Ray backend too, so CI installs that extra (tests/test_ray.py).
export PHOENIX_EXTRAS="${PHOENIX_EXTRAS:-dev,ray}"
source "$(dirname "$0")/setup.sh"
ruff check .
python -m pytest "$@"

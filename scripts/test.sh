#!/usr/bin/env bash
# Set up .venv and run the test suite (tests that need ../shared/data skip with a reason without it).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
ruff check .
python -m pytest "$@"

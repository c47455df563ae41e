#!/usr/bin/env bash
# Set up .venv and run the test suite (tests that need ../shared/data skip with a reason without it).
set -euo pipefail
# the optional extras too, so the .pose export and the Ray backend are tested, not skipped
export PHOENIX_EXTRAS="${PHOENIX_EXTRAS:-dev,pose,ray}"
source "$(dirname "$0")/setup.sh"
ruff check .
# In parallel processes (pytest-xdist): most tests wait on the tool's own processes (runs, kills,
# a cluster), so two per core, at most 8; PHOENIX_TEST_WORKERS overrides, `-n 0` after it turns it
# off. loadgroup keeps together the tests tests/conftest.py groups (a shared costly fixture, the
# SLURM cluster, Ray). The 20 slowest tests are listed at the end of every run.
workers="${PHOENIX_TEST_WORKERS:-$(( $(nproc) * 2 < 8 ? $(nproc) * 2 : 8 ))}"
python -m pytest -n "$workers" --dist loadgroup --durations=20 "$@"

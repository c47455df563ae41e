#!/usr/bin/env bash
# Install the Debian packages a group of tests needs, once per machine: `system-deps.sh slurm chromium`.
# Exit 0 when every package is there (already, or installed now); exit 3 with one line on stderr when
# they cannot be installed here (not root, no apt-get, no network), so a test can skip with that reason.
set -uo pipefail

declare -A GROUPS_=(
  [slurm]="slurmctld slurmd slurm-client munge"
  [chromium]="chromium fonts-dejavu-core"
  [zip]="zip"
  [strace]="strace"
  [gcc]="gcc libc6-dev"
)

want=()
for group in "$@"; do
  pkgs="${GROUPS_[$group]:-}"
  if [ -z "$pkgs" ]; then
    echo "system-deps.sh: unknown group '$group' (known: ${!GROUPS_[*]})" >&2
    exit 2
  fi
  for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || want+=("$p")
  done
done
[ ${#want[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "cannot install ${want[*]}: no apt-get on this machine (Debian/Ubuntu only)" >&2
  exit 3
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "cannot install ${want[*]}: needs root (run: sudo $0 $*)" >&2
  exit 3
fi
log="${TMPDIR:-/tmp}/phoenix-keypoints-system-deps.log"
# One installer at a time: parallel test processes may ask for the same packages.
exec 9>"${TMPDIR:-/tmp}/phoenix-keypoints-system-deps.lock"
flock 9
{
  apt-get update -q &&
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${want[@]}"
} >"$log" 2>&1 || {
  echo "cannot install ${want[*]}: apt-get failed (log: $log): $(tail -1 "$log")" >&2
  exit 3
}

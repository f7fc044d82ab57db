#!/usr/bin/env bash
# Usage: ensure-debian-package.sh <program path> <Debian package>
# Makes sure a program the tests or benchmarks drive exists, installing its Debian package with apt-get
# when it is missing (CI starts from a clean Debian machine): chromium for test/browser (playwright-core
# never downloads browsers), ffmpeg (with ffprobe) for the knowledge tests' recordings, wrk for the
# HTTP benchmarks.
set -euo pipefail

PROGRAM=${1:?program path}
PACKAGE=${2:?Debian package}
NAME="ensure-debian-package($PACKAGE)"

if [ -x "$PROGRAM" ]; then
  echo "$NAME: $PROGRAM already present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "$NAME: $PROGRAM is missing and this is not root; install it with: sudo apt-get install -y --no-install-recommends $PACKAGE" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "$NAME: $PROGRAM is missing and apt-get is not available; install $PACKAGE by hand" >&2
  exit 1
fi

start=$(date +%s)
log=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update && apt-get install -y --no-install-recommends "$PACKAGE"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "$NAME: apt-get install $PACKAGE failed (output above)" >&2
  exit 1
fi
rm -f "$log"

if [ ! -x "$PROGRAM" ]; then
  echo "$NAME: apt-get installed $PACKAGE but $PROGRAM does not exist" >&2
  exit 1
fi
echo "$NAME: installed $PROGRAM with apt-get in $(( $(date +%s) - start ))s"

#!/usr/bin/env bash
# Makes sure the system Chromium that test/browser drives exists (CI starts from a clean Debian machine).
# playwright-core never downloads browsers, so the browser comes from Debian's package.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
  echo "ensure-chromium: $CHROMIUM already present ($("$CHROMIUM" --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-chromium: $CHROMIUM is missing and this is not root; install it with: sudo apt-get install -y --no-install-recommends chromium" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $CHROMIUM is missing and apt-get is not available; install Chromium at $CHROMIUM by hand" >&2
  exit 1
fi

start=$(date +%s)
log=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update && apt-get install -y --no-install-recommends chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "ensure-chromium: apt-get install chromium failed (output above)" >&2
  exit 1
fi
rm -f "$log"

if [ ! -x "$CHROMIUM" ]; then
  echo "ensure-chromium: apt-get installed chromium but $CHROMIUM does not exist" >&2
  exit 1
fi
echo "ensure-chromium: installed $("$CHROMIUM" --version 2>/dev/null || echo chromium) with apt-get in $(( $(date +%s) - start ))s"

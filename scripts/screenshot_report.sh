#!/usr/bin/env bash
# Screenshot an alignment report (report.html from `make align`) in headless Chromium, to check that
# it renders offline. Needs Debian's `chromium` package (apt-get install chromium).
# Usage: scripts/screenshot_report.sh path/to/report.html [out.png]   (WINDOW=W,H: the window, default 1200,2000)
# Also the explorer page: WINDOW=1400,900 scripts/screenshot_report.sh align-test/explorer.html explorer.png
set -euo pipefail
report=${1:?usage: $0 REPORT.html [OUT.png]}
[ -f "$report" ] || { echo "error: $report: no such file" >&2; exit 2; }
out=${2:-${report%.html}.png}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "error: chromium not found (Debian/Ubuntu: apt-get install chromium)" >&2; exit 2; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# No network, no background services: the page must render from the file alone.
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --window-size=${WINDOW:-1200,2000} --hide-scrollbars \
  --screenshot="$(realpath -m "$out")" "file://$(realpath "$report")" 2>/dev/null
[ -s "$out" ] || { echo "error: no screenshot written" >&2; exit 1; }
echo "$out"

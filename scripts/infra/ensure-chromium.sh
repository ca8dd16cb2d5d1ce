#!/usr/bin/env bash
# The browser the dashboard's browser tests drive (playwright-core, headless): Debian's chromium,
# installed from Debian's packages when missing (Playwright's own browser download needs a network
# this project cannot count on). Prints the path and version. STS_CHROMIUM names another binary.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

chromium="${STS_CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$chromium" ]; then
  infra_require_root "chromium not found"
  infra_lock chromium
  infra_apt_install chromium
  chromium=$(command -v chromium)
fi
echo "chromium: $chromium ($("$chromium" --version 2>/dev/null | head -1))"

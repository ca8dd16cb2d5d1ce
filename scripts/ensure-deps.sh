#!/usr/bin/env bash
# Installs the npm dependencies when node_modules is missing or older than package-lock.json.
# Run by scripts/start.sh (`npm start`) and scripts/test.sh (`npm test`).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  printf '==> installing dependencies (npm ci)\n'
  # The lock file cannot list other platforms' optional binaries that this registry lacks, which
  # `npm ci` refuses; `npm install` then installs the same locked versions for this platform.
  npm ci --no-audit --no-fund </dev/null || npm install --no-audit --no-fund </dev/null
fi

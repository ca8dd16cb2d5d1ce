#!/usr/bin/env bash
# Installs the npm dependencies when node_modules is missing or older than package-lock.json.
# Run by scripts/start.sh (`npm start`) and scripts/test.sh (`npm test`).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  printf '==> installing dependencies (npm ci)\n'
  # Exactly the locked tree, or nothing: a lock file that no longer matches package.json must fail here, not be
  # quietly re-resolved into a tree no one reviewed.
  if ! npm ci --no-audit --no-fund </dev/null; then
    echo "npm ci failed: if package-lock.json no longer matches package.json, run \`npm install\` and commit package-lock.json" >&2
    exit 1
  fi
fi

#!/usr/bin/env bash
# What `npm test` runs (and CI, on a fresh clone): dependencies, local infrastructure, then every check.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

bash scripts/ensure-deps.sh

step "infrastructure (PostgreSQL, NATS, ClickHouse)"
bash scripts/infra/ensure-all.sh </dev/null

if [ -f scripts/proto-gen.sh ]; then
  step "generated protobuf code is up to date"
  npm run --silent proto:check </dev/null
fi

step "typecheck"
npx tsc -p tsconfig.json --noEmit

step "formatting (prettier --check)"
npx prettier --check . </dev/null

step "lint"
npx eslint . --max-warnings=0

step "build (every app bundled into dist/apps; the e2e tier runs the production bundles once)"
npx nx run-many -t build --parallel=2 </dev/null

step "tests (unit, integration, e2e)"
mkdir -p tmp
# --forceExit: at times jest's process finishes every test and then spins in Node 20's environment teardown
# (node::Environment::CleanupHandles looping uv_run, no handle left, no JS running) instead of exiting; the
# results are complete by then.
npx jest --ci --forceExit --json --outputFile=tmp/jest-results.json </dev/null
# One plain closing line that any reader of CI logs understands.
node -e "const r = require('./tmp/jest-results.json'); console.log('tests: ' + r.numPassedTests + ' passed, ' + r.numFailedTests + ' failed' + (r.numPendingTests ? ', ' + r.numPendingTests + ' skipped' : ''));"

step "all checks passed"

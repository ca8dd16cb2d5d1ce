#!/usr/bin/env bash
# What `npm test` runs (and CI, on a fresh clone): dependencies, local infrastructure, then every check.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

bash scripts/ensure-deps.sh

step "infrastructure (PostgreSQL, NATS, ClickHouse; the local cluster: ZooKeeper, ClickHouse 2x2, NATS x3)"
bash scripts/infra/ensure-all.sh </dev/null
bash scripts/infra/ensure-cluster.sh </dev/null
# A current ClickHouse in process (chDB, over 500 MB, a test dependency of its own): the analytics SQL is
# compared on it and on Debian's 18.16.
bash scripts/ensure-chdb.sh </dev/null

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

step "tests (unit, integration, the integration specs again on the cluster, e2e)"
mkdir -p tmp
# --forceExit: at times jest's process finishes every test and then spins in Node 20's environment teardown
# (node::Environment::CleanupHandles looping uv_run, no handle left, no JS running) instead of exiting; the
# results are complete by then.
npx jest --ci --forceExit --selectProjects unit integration cluster e2e \
  --json --outputFile=tmp/jest-results.json </dev/null
step "fault tests (the local cluster's nodes killed under load; one file at a time, after the rest)"
npx jest --ci --forceExit --selectProjects cluster-faults --runInBand \
  --json --outputFile=tmp/jest-faults.json </dev/null
# One plain closing line that any reader of CI logs understands.
node -e "
const runs = ['./tmp/jest-results.json', './tmp/jest-faults.json'].map((file) => require(file));
const sum = (key) => runs.reduce((total, run) => total + run[key], 0);
console.log('tests: ' + sum('numPassedTests') + ' passed, ' + sum('numFailedTests') + ' failed' + (sum('numPendingTests') ? ', ' + sum('numPendingTests') + ' skipped' : ''));"

step "all checks passed"

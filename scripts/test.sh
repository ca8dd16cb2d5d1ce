#!/usr/bin/env bash
# What `npm test` runs (and CI, on a fresh clone): dependencies, local infrastructure, then every check.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

bash scripts/ensure-deps.sh
# shellcheck source=scripts/project-node.sh
source scripts/project-node.sh
project_node_use

step "infrastructure (PostgreSQL, NATS, ClickHouse; the local cluster: ZooKeeper, ClickHouse 2x2, NATS x3)"
# The tests' NATS is a server of the project's own on a port of its own, on the release production runs
# (ensure-nats-release.sh), whatever NATS the machine serves on 4222 (docs/decisions.md, "The NATS release
# the tests run"); NATS_URL given to npm test is used as it is. The specs' own servers use the same binary.
NATS_SERVER_BIN="$(bash scripts/infra/ensure-nats-release.sh)"
export NATS_SERVER_BIN
export NATS_URL="${NATS_URL:-nats://127.0.0.1:4250}"
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
npm run --silent typecheck </dev/null

step "formatting (prettier --check)"
npx prettier --check . </dev/null

step "lint"
npx eslint . --max-warnings=0

step "build (every app bundled into dist/apps; the e2e tier runs the production bundles once)"
npx nx run-many -t build --parallel=2 </dev/null

# A run that never ends (a process that does not exit) fails with a plain line instead of waiting out CI's
# own limit: the tiers take about 5 and 4 minutes on this 2-core machine.
within() {
  local limit=$1
  shift
  local code=0
  timeout --kill-after=30s "$limit" "$@" || code=$?
  [ "$code" -eq 124 ] && echo "did not finish within $limit: $*" >&2
  return "$code"
}

step "tests (unit, integration, the integration specs again on the cluster, e2e, the dashboard in a browser)"
mkdir -p tmp
# One worker per core (jest's default leaves one core to itself): the specs mostly wait on servers, so two at
# a time on two cores take half as long as one (docs/testing.md); each file has its own databases, NATS
# namespace and ports, so files never meet.
within 40m npx jest --ci --selectProjects unit integration cluster e2e browser --maxWorkers=100% \
  --json --outputFile=tmp/jest-results.json </dev/null
step "fault tests (the local cluster's nodes killed under load; one file at a time, after the rest)"
within 20m npx jest --ci --selectProjects cluster-faults --runInBand \
  --json --outputFile=tmp/jest-faults.json </dev/null
# One plain closing line that any reader of CI logs understands.
node -e "
const runs = ['./tmp/jest-results.json', './tmp/jest-faults.json'].map((file) => require(file));
const sum = (key) => runs.reduce((total, run) => total + run[key], 0);
console.log('tests: ' + sum('numPassedTests') + ' passed, ' + sum('numFailedTests') + ' failed' + (sum('numPendingTests') ? ', ' + sum('numPendingTests') + ' skipped' : ''));"

step "all checks passed"

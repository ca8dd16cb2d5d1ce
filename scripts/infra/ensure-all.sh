#!/usr/bin/env bash
# Makes the local infrastructure the services and tests need available (DESIGN.md section 6):
# PostgreSQL, NATS with JetStream and ClickHouse, and the offline tools the deploy/ checks use.
# One line per server or tool on success.
set -euo pipefail
dir="$(dirname "$0")"
bash "$dir/ensure-postgres.sh" </dev/null
bash "$dir/ensure-nats.sh" </dev/null
bash "$dir/ensure-clickhouse.sh" </dev/null
bash "$dir/ensure-deploy-tools.sh" </dev/null
bash "$dir/ensure-chromium.sh" </dev/null

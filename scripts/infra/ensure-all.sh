#!/usr/bin/env bash
# Makes the local infrastructure the services and tests need available (DESIGN.md section 6):
# PostgreSQL, NATS with JetStream and ClickHouse. One line per server on success.
set -euo pipefail
dir="$(dirname "$0")"
bash "$dir/ensure-postgres.sh" </dev/null
bash "$dir/ensure-nats.sh" </dev/null
bash "$dir/ensure-clickhouse.sh" </dev/null

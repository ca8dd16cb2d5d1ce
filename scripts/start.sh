#!/usr/bin/env bash
# `npm start`: brings the whole system up on this machine and stays in the foreground.
# Ctrl-C stops every service it started. Honours the variables of DESIGN.md section 5: set
# OIDC_ISSUER, SMTP_URL or DATABASE_URL to use your own identity provider, mail server or database
# (the development identity provider and mailbox then stay off), and STRIPE_SECRET_KEY (or STRIPE_API_BASE) for
# Stripe (the development Stripe then stays off). STS_CLUSTER=1 runs the system on the
# local cluster instead of single servers: ClickHouse 2 shards x 2 replicas with ZooKeeper, and a
# three-node NATS JetStream keeping three copies of every stream and bucket.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEV_DIR="$ROOT/.dev"
LOG_DIR="$DEV_DIR/logs"
mkdir -p "$LOG_DIR"

# infra_wait, infra_tcp_open
# shellcheck source=scripts/infra/lib.sh
source scripts/infra/lib.sh

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

bash scripts/ensure-deps.sh
# shellcheck source=scripts/project-node.sh
source scripts/project-node.sh
project_node_use

say "infrastructure"
bash scripts/infra/ensure-all.sh </dev/null
CLUSTER=false
NATS_NODES=1
if [ "${STS_CLUSTER:-}" = 1 ]; then
  CLUSTER=true
  say "local cluster (ZooKeeper, ClickHouse 2 shards x 2 replicas, NATS)"
  bash scripts/infra/ensure-cluster.sh </dev/null
fi

say "dashboard (built once, again when its sources change)"
npx nx run @sts/app-dashboard:build --output-style=static </dev/null >"$LOG_DIR/dashboard-build.log" 2>&1 ||
  { tail -n 30 "$LOG_DIR/dashboard-build.log" >&2; exit 1; }

# --- configuration ------------------------------------------------------------------------------
export NODE_ENV="${NODE_ENV:-development}"
export LOG_LEVEL="${LOG_LEVEL:-info}"
export DATABASE_URL="${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/sts}"
# Without NATS_URL, the services use a NATS server of the project's own (.dev/nats, port STS_NATS_PORT),
# where each service has a user allowed to publish only its own events (docs/decisions.md "Trust between
# services"). With NATS_URL, every service uses that server as it is.
OWN_NATS=false
if [ -z "${NATS_URL:-}" ]; then OWN_NATS=true; fi
export NATS_URL="${NATS_URL:-nats://127.0.0.1:4222}"
export NATS_NAMESPACE="${NATS_NAMESPACE:-sts}"
if $CLUSTER; then
  # The first replica of the first shard takes the requests; the Distributed tables reach the others.
  export CLICKHOUSE_URL="${CLICKHOUSE_URL:-http://127.0.0.1:8131}"
  export CLICKHOUSE_CLUSTER="${CLICKHOUSE_CLUSTER:-sts_cluster}"
  export NATS_STREAM_REPLICAS="${NATS_STREAM_REPLICAS:-3}"
else
  export CLICKHOUSE_URL="${CLICKHOUSE_URL:-http://127.0.0.1:8123}"
fi
export PORT="${PORT:-8080}"
export PUBLIC_APP_URL="${PUBLIC_APP_URL:-http://localhost:$PORT}"
# dev_key VAR FILE: unless VAR is set, exports it from .dev/FILE, a random 32-byte key (base64)
# generated on first use and kept per checkout.
dev_key() {
  local var=$1 file="$DEV_DIR/$2" key
  if [ -n "${!var:-}" ]; then return 0; fi
  [ -f "$file" ] || node -e "process.stdout.write(require('crypto').randomBytes(32).toString('base64'))" >"$file"
  chmod 600 "$file"
  key=$(cat "$file")
  export "$var=$key"
}
# Kept so that mail in flight survives restarts.
dev_key SECRET_SEALING_KEY sealing-key
# The tokens services present to each other on every gRPC call (docs/decisions.md "Trust between services"):
# each caller signs with a private key of its own (Ed25519, PKCS#8, base64), generated once into
# .dev/service-keys/NAME and given only to that process (start, below); the services hold the public keys.
SERVICE_CALLERS=(gateway notification)
unset SERVICE_SIGNING_KEY
mkdir -p "$DEV_DIR/service-keys"
chmod 700 "$DEV_DIR/service-keys"
for caller in "${SERVICE_CALLERS[@]}"; do
  file="$DEV_DIR/service-keys/$caller"
  [ -s "$file" ] || (umask 077 && node -e "process.stdout.write(require('crypto').generateKeyPairSync('ed25519').privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'))" >"$file")
  chmod 600 "$file"
done
SERVICE_TRUSTED_KEYS=$(node -e '
const { createPrivateKey, createPublicKey } = require("crypto");
const { readFileSync } = require("fs");
const [dir, ...names] = process.argv.slice(1);
process.stdout.write(names.map((name) => {
  const key = createPrivateKey({ key: Buffer.from(readFileSync(dir + "/" + name, "utf8"), "base64"), format: "der", type: "pkcs8" });
  return name + "=" + createPublicKey(key).export({ format: "der", type: "spki" }).toString("base64");
}).join(","));
' "$DEV_DIR/service-keys" "${SERVICE_CALLERS[@]}")
export SERVICE_TRUSTED_KEYS
# The enrollment service's own secrets (enrollment keys at rest, code HMACs).
dev_key ENROLLMENT_KEY_ENCRYPTION_KEY enrollment-key-encryption-key
export PUBLIC_API_URL="${PUBLIC_API_URL:-http://localhost:$PORT}"

START_DEV_IDP=false
if [ -z "${OIDC_ISSUER:-}" ]; then
  START_DEV_IDP=true
  export DEV_IDP_PORT="${DEV_IDP_PORT:-4400}"
  export OIDC_ISSUER="http://127.0.0.1:$DEV_IDP_PORT"
  export DEV_IDP_ISSUER="$OIDC_ISSUER"
  # The dashboard's addresses, registered as its redirect URIs (<origin>/auth/callback).
  export DEV_IDP_DASHBOARD_URLS="${DEV_IDP_DASHBOARD_URLS:-http://localhost:$PORT,http://127.0.0.1:$PORT}"
  export OIDC_AUDIENCE="${OIDC_AUDIENCE:-https://api.security-telemetry.local}"
fi
START_DEV_MAILBOX=false
if [ -z "${SMTP_URL:-}" ]; then
  START_DEV_MAILBOX=true
  export DEV_MAILBOX_SMTP_PORT="${DEV_MAILBOX_SMTP_PORT:-1025}"
  export DEV_MAILBOX_HTTP_PORT="${DEV_MAILBOX_HTTP_PORT:-8025}"
  export SMTP_URL="smtp://127.0.0.1:$DEV_MAILBOX_SMTP_PORT"
fi
# Without Stripe keys, the development Stripe (apps/dev-stripe) plays Stripe: billing's API calls go to it, its
# Checkout and portal pages pay or cancel at once and send the signed events to the gateway's webhook.
START_DEV_STRIPE=false
if [ -z "${STRIPE_SECRET_KEY:-}" ] && [ -z "${STRIPE_API_BASE:-}" ]; then
  START_DEV_STRIPE=true
  export DEV_STRIPE_PORT="${DEV_STRIPE_PORT:-12111}"
  export DEV_STRIPE_WEBHOOK_URL="${DEV_STRIPE_WEBHOOK_URL:-http://127.0.0.1:$PORT/api/billing/webhook}"
  export STRIPE_API_BASE="http://127.0.0.1:$DEV_STRIPE_PORT"
  # dev_stripe_secret VAR FILE PREFIX: as dev_key, in Stripe's shape (PREFIX and 48 hex digits).
  dev_stripe_secret() {
    local var=$1 file="$DEV_DIR/$2" prefix=$3 key
    if [ -n "${!var:-}" ]; then return 0; fi
    [ -s "$file" ] || (umask 077 && node -e "process.stdout.write(process.argv[1] + require('crypto').randomBytes(24).toString('hex'))" "$prefix" >"$file")
    chmod 600 "$file"
    key=$(cat "$file")
    export "$var=$key"
  }
  # The API key billing presents and dev-stripe accepts; the secret dev-stripe signs events with.
  dev_stripe_secret STRIPE_SECRET_KEY stripe-secret-key sk_test_dev_
  dev_stripe_secret STRIPE_WEBHOOK_SECRET stripe-webhook-secret whsec_dev_
fi

# The database named in DATABASE_URL (each service keeps its own schema inside it).
say "database"
node -e "
const { Client } = require('pg');
const url = new URL(process.env.DATABASE_URL);
const name = decodeURIComponent(url.pathname.slice(1));
url.pathname = '/postgres';
const client = new Client({ connectionString: url.toString() });
(async () => {
  await client.connect();
  const { rowCount } = await client.query('select 1 from pg_database where datname = \$1', [name]);
  if (!rowCount) { await client.query('create database \"' + name.replace(/\"/g, '\"\"') + '\"'); console.log('created database ' + name); }
  else console.log('database ' + name + ' exists');
  await client.end();
})().catch((e) => { console.error('cannot prepare database: ' + e.message); process.exit(1); });
"

# --- services ---------------------------------------------------------------------------------
# Every process npm start runs is a child it supervises: one that exits is started again with backoff
# (1 s, doubling to 30 s; reset after a minute up), as Kubernetes restarts a container, and the supervisor
# says so (docs/decisions.md, "npm start supervises"). Ctrl-C stops them all.
NAMES=()  # what each child is
PIDS=()   # its pid, or "waiting" while its restart is due
SPECS=()  # its command line, quoted (printf %q)
RESTARTS=() NEXT_START=() STARTED_AT=()
cleanup() {
  trap - EXIT INT TERM
  say "stopping"
  for pid in "${PIDS[@]}"; do
    [ "$pid" = waiting ] || kill -TERM "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'cleanup; exit 0' INT TERM

# spawn_child INDEX: (re)starts child INDEX with its command line, its output appended to its log.
spawn_child() {
  local i=$1
  # exec: the pid is the process itself, which a TERM then reaches.
  eval "exec ${SPECS[$i]}" >>"$LOG_DIR/${NAMES[$i]}.log" 2>&1 &
  PIDS[i]=$!
  STARTED_AT[i]=$(date +%s)
}

# supervise NAME COMMAND...: starts COMMAND as a supervised child, logging to .dev/logs/NAME.log.
supervise() {
  local name=$1
  shift
  NAMES+=("$name")
  SPECS+=("$(printf '%q ' "$@")")
  RESTARTS+=(0)
  NEXT_START+=(0)
  STARTED_AT+=(0)
  spawn_child $((${#NAMES[@]} - 1))
}

start() {
  local name=$1 entry=$2 own_key=()
  shift 2
  # A caller's own signing key, to that process alone.
  if [ -s "$DEV_DIR/service-keys/$name" ]; then own_key=("SERVICE_SIGNING_KEY=$(cat "$DEV_DIR/service-keys/$name")"); fi
  supervise "$name" env "${own_key[@]}" "$@" node --import tsx "$entry"
  echo "started $name (pid ${PIDS[-1]}, log .dev/logs/$name.log)"
}

wait_for_port() {
  local name=$1 port=$2
  if infra_wait 30 "$name" infra_tcp_open 127.0.0.1 "$port"; then return 0; fi
  echo "$name did not start listening on port $port; last lines of .dev/logs/$name.log:" >&2
  tail -n 20 "$LOG_DIR/$name.log" >&2
  exit 1
}

if $OWN_NATS; then
  # The release production runs, brought into the project (scripts/infra/ensure-nats-release.sh).
  if NATS_BIN=$(bash scripts/infra/ensure-nats-release.sh); then
    if $CLUSTER; then
      # Three nodes of the project's own, each with the per-service users: clients on STS_NATS_PORT and the
      # two ports after it, routes 2000 higher.
      STS_NATS_PORT="${STS_NATS_PORT:-4224}"
      NATS_NODES=3
      NATS_DIR="$DEV_DIR/nats-cluster"
      say "NATS cluster of $NATS_NODES nodes with a user per service (ports $STS_NATS_PORT-$((STS_NATS_PORT + NATS_NODES - 1)))"
      node --import tsx scripts/nats-config.ts "$NATS_DIR" "$STS_NATS_PORT" "$NATS_NAMESPACE" "$NATS_NODES"
      for node in $(seq 1 "$NATS_NODES"); do supervise "nats-n$node" "$NATS_BIN" -c "$NATS_DIR/n$node.conf"; done
      for node in $(seq 1 "$NATS_NODES"); do wait_for_port "nats-n$node" $((STS_NATS_PORT + node - 1)); done
    else
      STS_NATS_PORT="${STS_NATS_PORT:-4223}"
      NATS_NODES=1
      NATS_DIR="$DEV_DIR/nats"
      say "NATS with a user per service (port $STS_NATS_PORT)"
      node --import tsx scripts/nats-config.ts "$NATS_DIR" "$STS_NATS_PORT" "$NATS_NAMESPACE"
      supervise nats "$NATS_BIN" -c "$NATS_DIR/nats.conf"
      wait_for_port nats "$STS_NATS_PORT"
    fi
  else
    echo "nats-server not found: the services share the NATS at $NATS_URL without per-service users" >&2
    OWN_NATS=false
  fi
fi
# nats_url SERVICE: the NATS_URL a service connects with (its own user on the project's servers).
nats_url() {
  if $OWN_NATS; then
    node -e '
      const [file, user, port, nodes] = process.argv.slice(1);
      const password = encodeURIComponent(require(file)[user]);
      const urls = Array.from({ length: Number(nodes) }, (_, i) => `nats://${user}:${password}@127.0.0.1:${Number(port) + i}`);
      process.stdout.write(urls.join(","));' \
      "$NATS_DIR/passwords.json" "$1" "$STS_NATS_PORT" "$NATS_NODES"
  else
    printf '%s' "$NATS_URL"
  fi
}

if $OWN_NATS; then
  # The services' users may not make streams, consumers or buckets: nats-setup makes them as the admin.
  say "NATS streams, consumers and buckets (nats-setup, as the admin user)"
  NATS_URL="$(nats_url admin)" node --import tsx apps/nats-setup/src/main.ts >>"$LOG_DIR/nats-setup.log" 2>&1 || {
    echo "nats-setup failed; last lines of .dev/logs/nats-setup.log:" >&2
    tail -n 20 "$LOG_DIR/nats-setup.log" >&2
    exit 1
  }
fi

say "services"
# GET /metrics of each process: the gateway on METRICS_BASE_PORT, the services on the ports after it.
METRICS_BASE_PORT="${METRICS_BASE_PORT:-9464}"
$START_DEV_MAILBOX && start dev-mailbox apps/dev-mailbox/src/main.ts
$START_DEV_STRIPE && start dev-stripe apps/dev-stripe/src/main.ts
$START_DEV_IDP && start dev-idp apps/dev-idp/src/main.ts
start identity apps/identity/src/main.ts GRPC_PORT=50051 METRICS_PORT=$((METRICS_BASE_PORT + 1)) NATS_URL="$(nats_url identity)"
start notification apps/notification/src/main.ts GRPC_PORT=50052 METRICS_PORT=$((METRICS_BASE_PORT + 2)) NATS_URL="$(nats_url notification)"
start billing apps/billing/src/main.ts GRPC_PORT=50053 METRICS_PORT=$((METRICS_BASE_PORT + 3)) NATS_URL="$(nats_url billing)"
start enrollment apps/enrollment/src/main.ts GRPC_PORT=50054 METRICS_PORT=$((METRICS_BASE_PORT + 4)) NATS_URL="$(nats_url enrollment)"
start analytics apps/analytics/src/main.ts GRPC_PORT=50055 METRICS_PORT=$((METRICS_BASE_PORT + 5)) NATS_URL="$(nats_url analytics)"
$START_DEV_IDP && wait_for_port dev-idp "$DEV_IDP_PORT"
$START_DEV_STRIPE && wait_for_port dev-stripe "$DEV_STRIPE_PORT"
wait_for_port identity 50051
wait_for_port notification 50052
wait_for_port billing 50053
wait_for_port enrollment 50054
wait_for_port analytics 50055
start gateway apps/gateway/src/main.ts METRICS_PORT="$METRICS_BASE_PORT" NATS_URL="$(nats_url gateway)"
wait_for_port gateway "$PORT"

cat <<INFO

  Security telemetry service is up$($CLUSTER && printf ' on the local cluster'; true).

  Dashboard    http://localhost:$PORT/$($START_DEV_IDP && printf '   (sign in with any e-mail and name at the development identity provider)'; true)

  API          http://localhost:$PORT/api
  API docs     http://localhost:$PORT/docs
  Metrics      http://localhost:$METRICS_BASE_PORT/metrics (gateway); identity, notification, billing,
               enrollment, analytics on ports $((METRICS_BASE_PORT + 1))–$((METRICS_BASE_PORT + 5))
INFO
if $CLUSTER; then
  cat <<INFO
  Cluster      ClickHouse $CLICKHOUSE_CLUSTER: 2 shards x 2 replicas, HTTP on 127.0.0.1:8131-8134 (ZooKeeper 127.0.0.1:2181)
               NATS: $($OWN_NATS && echo "$NATS_NODES nodes on 127.0.0.1:$STS_NATS_PORT-$((STS_NATS_PORT + NATS_NODES - 1))" || echo "$NATS_URL" | sed 's#//[^@]*@#//#g'), $NATS_STREAM_REPLICAS copies of every stream and bucket
               Try a fault: bash scripts/infra/cluster-node.sh kill ch-s1-r2   (then: start ch-s1-r2)
INFO
fi
if $START_DEV_MAILBOX; then echo "  Mailbox      http://localhost:$DEV_MAILBOX_HTTP_PORT   (invitation e-mails land here)"; fi
if $START_DEV_IDP; then
  cat <<INFO
  Identity     $OIDC_ISSUER   (development identity provider; JWKS at /.well-known/jwks.json)

  Get a token and call the API:
    TOKEN=\$(npm run --silent token -- admin@example.com --name "Ada Admin")
    curl -s -H "Authorization: Bearer \$TOKEN" http://localhost:$PORT/api/session

  Integrations (client credentials): npm run token -- client add --org <org id from /api/session>

  Enroll this machine:
    KEY=\$(curl -s -X POST -H "Authorization: Bearer \$TOKEN" http://localhost:$PORT/api/enrollment-key | node -pe 'JSON.parse(require("fs").readFileSync(0)).key')
    CODE=\$(curl -s -X POST -H "Authorization: Bearer \$TOKEN" -H 'content-type: application/json' -d '{"count":1}' http://localhost:$PORT/api/enrollment-codes | node -pe 'JSON.parse(require("fs").readFileSync(0)).codes[0].code')
    npm run agent -- enroll --server http://localhost:$PORT --key \$KEY --code \$CODE --config .dev/agent.json

  Report what it analyzed (JSON lines), then read the figures:
    npm run agent -- simulate --events 500 --config .dev/agent.json
    curl -s -H "Authorization: Bearer \$TOKEN" 'http://localhost:$PORT/api/analytics/summary?window=24h'

  Fill the organization with demo traffic (devices enrolled for you; days' worth of traffic, observed since):
    npm run demo -- --token \$TOKEN --devices 20 --days 7
INFO
fi
if $START_DEV_STRIPE; then
  cat <<INFO

  Billing      development Stripe at $STRIPE_API_BASE   (checkout pages pay at once; no card)
INFO
elif [ -n "${STRIPE_SECRET_KEY:-}" ]; then
  cat <<INFO

  Billing      Stripe (${STRIPE_API_BASE:-https://api.stripe.com}); forward its test-mode events here:
    stripe listen --forward-to http://localhost:$PORT/api/billing/webhook
  and start with the whsec_ secret it prints as STRIPE_WEBHOOK_SECRET. Prices are found by lookup key:
  basic_monthly, basic_annual, pro_monthly, pro_annual, enterprise_monthly, enterprise_annual.
INFO
else
  cat <<INFO

  Billing      off: checkout, portal and webhook answer 503 until npm start runs with
               STRIPE_SECRET_KEY=sk_test_… and STRIPE_WEBHOOK_SECRET=whsec_… (from
               stripe listen --forward-to http://localhost:$PORT/api/billing/webhook).
INFO
fi
cat <<INFO

  Logs in .dev/logs/. Press Ctrl-C to stop.

INFO

# The shared cluster's ClickHouse and ZooKeeper nodes are daemons of scripts/infra (not children): a node
# that is down is started again by cluster-node.sh (which repairs a replica that refuses to start), with backoff.
CLUSTER_NODES=()
declare -A NODE_RESTARTS=() NODE_NEXT_CHECK=()
if $CLUSTER; then
  # shellcheck source=scripts/infra/cluster-nodes.sh
  source scripts/infra/cluster-nodes.sh
  CLUSTER_NODES=("${STS_CH_NODES[@]}" zookeeper)
fi
watch_cluster_nodes() {
  local node now=$1
  for node in "${CLUSTER_NODES[@]}"; do
    [ "$now" -ge "${NODE_NEXT_CHECK[$node]:-0}" ] || continue
    NODE_NEXT_CHECK[$node]=$((now + 5))
    local why="is down"
    if sts_node_running "$node"; then
      if [ "$node" = zookeeper ] || ! sts_ch_ddl_worker_stopped "$node"; then
        NODE_RESTARTS[$node]=0
        continue
      fi
      why="runs, but its DDL worker has stopped"
    fi
    local restarts=$((${NODE_RESTARTS[$node]:-0} + 1)) delay
    NODE_RESTARTS[$node]=$restarts
    delay=$((restarts > 5 ? 30 : 1 << restarts))
    NODE_NEXT_CHECK[$node]=$((now + 5 + delay))
    echo "$node $why; starting it again (attempt $restarts; log .dev/logs/cluster-nodes.log)" >&2
    { date "+%F %T $node $why: cluster-node.sh start (attempt $restarts)" && bash scripts/infra/cluster-node.sh start "$node"; } \
      >>"$LOG_DIR/cluster-nodes.log" 2>&1 &
  done
}

# Stay up; a child that exits is started again with backoff, and said so.
while :; do
  now=$(date +%s)
  for i in "${!NAMES[@]}"; do
    pid=${PIDS[$i]}
    if [ "$pid" = waiting ]; then
      if [ "$now" -ge "${NEXT_START[$i]}" ]; then
        spawn_child "$i"
        echo "started ${NAMES[$i]} again (pid ${PIDS[$i]}, restart ${RESTARTS[$i]})" >&2
      fi
      continue
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      code=0
      wait "$pid" 2>/dev/null || code=$?
      RESTARTS[i]=$((RESTARTS[i] + 1))
      delay=$((RESTARTS[i] > 5 ? 30 : 1 << (RESTARTS[i] - 1)))
      PIDS[i]=waiting
      NEXT_START[i]=$((now + delay))
      echo "${NAMES[$i]} exited (status $code); starting it again in ${delay}s; last lines of .dev/logs/${NAMES[$i]}.log:" >&2
      tail -n 10 "$LOG_DIR/${NAMES[$i]}.log" >&2
    elif [ "${RESTARTS[$i]}" -gt 0 ] && [ $((now - STARTED_AT[i])) -ge 60 ]; then
      RESTARTS[i]=0
    fi
  done
  [ ${#CLUSTER_NODES[@]} -eq 0 ] || watch_cluster_nodes "$now"
  sleep 1
done

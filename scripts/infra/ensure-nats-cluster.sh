#!/usr/bin/env bash
# shellcheck disable=SC2016 # single-quoted programs get their values as arguments or environment
# Makes the local NATS cluster `sts` answer: three nats-server processes (the release production runs, as
# ensure-nats-release.sh brings it) on 127.0.0.1 with JetStream, no authorization (like the standalone server on 4222; tests
# isolate by namespace). Nodes, ports and directories: scripts/infra/cluster-nodes.sh. Ready once a
# JetStream client connected to all three can create and delete an R3 stream (a meta leader is elected).
# STS_NATS_CLUSTER_INCLUDE may name a file whose content is appended to each node's config (e.g. an
# authorization block; then give the check's credentials in STS_NATS_CLUSTER_USER/STS_NATS_CLUSTER_PASSWORD).
# Idempotent; fast when the cluster already answers with the current config. Prints one line on success.
set -euo pipefail
dir="$(dirname "$0")"
# shellcheck source=scripts/infra/lib.sh
. "$dir/lib.sh"
# shellcheck source=scripts/infra/cluster-nodes.sh
. "$dir/cluster-nodes.sh"
ROOT="$(cd "$dir/../.." && pwd)"

TIMEOUT="${NATS_START_TIMEOUT:-60}"
INCLUDE="${STS_NATS_CLUSTER_INCLUDE:-}"
[ -z "$INCLUDE" ] || [ -r "$INCLUDE" ] || infra_die "STS_NATS_CLUSTER_INCLUDE=$INCLUDE is not a readable file"

NATS_VERSION="$("$(sts_nats_daemon)" --version)"
URLS="$(for n in "${STS_NATS_NODES[@]}"; do echo "nats://$STS_CLUSTER_HOST:${STS_NATS_CLIENT_PORT[$n]}"; done | paste -sd,)"

node_config() {
  local node="$1" n
  cat <<CONF
# Written by scripts/infra/ensure-nats-cluster.sh: node $node of the local NATS cluster $STS_NATS_CLUSTER,
# run by $NATS_VERSION (scripts/infra/ensure-nats-release.sh; another release restarts the node).
server_name: sts-$node
listen: $STS_CLUSTER_HOST:${STS_NATS_CLIENT_PORT[$node]}
http: $STS_CLUSTER_HOST:${STS_NATS_MONITOR_PORT[$node]}
log_file: "$STS_CLUSTER_LOG_DIR/nats-$node.log"
logtime: true
logfile_size_limit: 100MB

jetstream {
  store_dir: "$STS_NATS_DIR/$node"
}

cluster {
  name: $STS_NATS_CLUSTER
  listen: $STS_CLUSTER_HOST:${STS_NATS_ROUTE_PORT[$node]}
  routes: [
CONF
  for n in "${STS_NATS_NODES[@]}"; do
    [ "$n" = "$node" ] || echo "    nats-route://$STS_CLUSTER_HOST:${STS_NATS_ROUTE_PORT[$n]}"
  done
  echo "  ]"
  echo "}"
  if [ -n "$INCLUDE" ]; then
    echo
    echo "# From STS_NATS_CLUSTER_INCLUDE=$INCLUDE"
    cat "$INCLUDE"
  fi
}

config_current() {
  local node
  for node in "${STS_NATS_NODES[@]}"; do
    cmp -s <(node_config "$node") "$(sts_nats_config "$node")" || return 1
  done
}

all_listening() {
  local node
  for node in "${STS_NATS_NODES[@]}"; do
    infra_tcp_open "$STS_CLUSTER_HOST" "${STS_NATS_CLIENT_PORT[$node]}" || return 1
  done
}

# A JetStream client connected to all three creates an R3 stream, checks it has a leader and two
# replicas, and deletes it. Fails (quietly unless NATS_CHECK_VERBOSE=1) while there is no meta leader yet.
r3_stream() {
  [ -d "$ROOT/node_modules/@nats-io/jetstream" ] ||
    infra_die "the JetStream check needs the project's node_modules (npm ci); $ROOT/node_modules/@nats-io/jetstream is missing"
  (cd "$ROOT" && NATS_CHECK_URLS="$URLS" timeout 20 node -e '
    const { connect } = require("@nats-io/transport-node");
    const { jetstreamManager } = require("@nats-io/jetstream");
    (async () => {
      const nc = await connect({
        servers: process.env.NATS_CHECK_URLS.split(","),
        timeout: 3000,
        user: process.env.STS_NATS_CLUSTER_USER || undefined,
        pass: process.env.STS_NATS_CLUSTER_PASSWORD || undefined,
      });
      const name = `sts_cluster_check_${process.pid}_${Date.now()}`;
      try {
        const jsm = await jetstreamManager(nc, { timeout: 5000 });
        const info = await jsm.streams.add({
          name,
          subjects: [`_sts_cluster_check.${name}`],
          num_replicas: 3,
          storage: "memory",
          max_age: 60_000_000_000,
        });
        try {
          const replicas = info.cluster?.replicas?.length ?? 0;
          if (!info.cluster?.leader || replicas !== 2) {
            throw new Error(`stream has leader ${info.cluster?.leader} and ${replicas} replicas, expected 2`);
          }
        } finally {
          await jsm.streams.delete(name);
        }
      } finally {
        await nc.close();
      }
    })().catch((error) => {
      if (process.env.NATS_CHECK_VERBOSE === "1") process.stderr.write(`  JetStream R3 check: ${error.message}\n`);
      process.exit(1);
    });
  ')
}

done_line() {
  local ports
  ports="$(for n in "${STS_NATS_NODES[@]}"; do echo "${STS_NATS_CLIENT_PORT[$n]}"; done | paste -sd,)"
  echo "nats cluster: ready (${#STS_NATS_NODES[@]} nodes, $STS_CLUSTER_HOST:$ports, JetStream R3)"
}

if config_current && all_listening && r3_stream; then
  done_line
  exit 0
fi

infra_require_root "the NATS cluster does not answer"
infra_lock cluster-nats

sts_cluster_dirs

for node in "${STS_NATS_NODES[@]}"; do
  name="nats-$node"
  mkdir -p "$STS_NATS_DIR/$node"
  if node_config "$node" | sts_write_if_changed "$(sts_nats_config "$node")" && sts_node_running "$name"; then
    infra_log "$name: config changed; restarting it"
    sts_node_signal "$name" TERM 30 || infra_die "$name did not stop within 30s"
  fi
  if ! sts_node_running "$name"; then
    for port in "${STS_NATS_CLIENT_PORT[$node]}" "${STS_NATS_ROUTE_PORT[$node]}" "${STS_NATS_MONITOR_PORT[$node]}"; do
      ! infra_tcp_open "$STS_CLUSTER_HOST" "$port" || infra_die "$name: port $port is taken by another process"
    done
    infra_log "starting $name (client ${STS_NATS_CLIENT_PORT[$node]}, routes ${STS_NATS_ROUTE_PORT[$node]}, monitoring ${STS_NATS_MONITOR_PORT[$node]})"
    sts_node_start "$name"
  fi
done

for node in "${STS_NATS_NODES[@]}"; do
  # Listening, and /healthz ok: JetStream is current, which needs a meta leader (a few seconds after a
  # restart of the whole cluster: an election).
  if ! sts_node_wait_ready "nats-$node" "$TIMEOUT"; then
    tail -n 20 "$(sts_node_log "nats-$node")" >&2 2>/dev/null || true
    infra_die "nats-$node did not answer on $STS_CLUSTER_HOST:${STS_NATS_CLIENT_PORT[$node]} (and JetStream /healthz on ${STS_NATS_MONITOR_PORT[$node]}) within ${TIMEOUT}s; see $(sts_node_log "nats-$node")"
  fi
  infra_log "nats-$node is ready"
done
if ! infra_wait "$TIMEOUT" "JetStream R3" r3_stream; then
  NATS_CHECK_VERBOSE=1 r3_stream || true
  infra_die "the NATS cluster does not create R3 streams within ${TIMEOUT}s; see $STS_CLUSTER_LOG_DIR/nats-n*.log"
fi
done_line

#!/usr/bin/env bash
# Fault injection on the local cluster (scripts/infra/ensure-cluster.sh): kill, stop, start one node, or
# ask whether it runs.
#
#   bash scripts/infra/cluster-node.sh ACTION NODE
#
#   ACTION  kill    SIGKILL, then wait until the process has gone
#           stop    SIGTERM (clean shutdown), then wait until the process has gone
#           start   start it again with the config ensure-cluster.sh wrote; returns once it answers
#                   (ClickHouse `SELECT 1`, ZooKeeper `ruok`, NATS client port + JetStream /healthz,
#                   which needs a majority of the NATS nodes up to elect a meta leader). A ClickHouse
#                   replica that refuses to start after a kill is repaired (force_restore_data), and
#                   what was done and moved aside is printed
#           status  prints `running` (exit 0) or `stopped` (exit 1)
#   NODE    ch-s1-r1 ch-s1-r2 ch-s2-r1 ch-s2-r2 zookeeper nats-n1 nats-n2 nats-n3 (scripts/infra/cluster-nodes.sh)
#
# kill, stop and start print one line on stdout; all of them succeed when the node already is in that state.
set -euo pipefail
dir="$(dirname "$0")"
# shellcheck source=scripts/infra/lib.sh
. "$dir/lib.sh"
# shellcheck source=scripts/infra/cluster-nodes.sh
. "$dir/cluster-nodes.sh"

usage() {
  echo "usage: bash $0 kill|stop|start|status NODE" >&2
  echo "nodes: $(sts_cluster_node_names | tr '\n' ' ')" >&2
  exit 2
}

[ $# = 2 ] || usage
action="$1"
node="$2"
kind="$(sts_node_kind "$node")" || {
  echo "unknown node: $node" >&2
  usage
}

# Seconds to wait for a node to exit after SIGTERM, and to answer after a start.
STOP_TIMEOUT="${STS_CLUSTER_STOP_TIMEOUT:-60}"
START_TIMEOUT="${STS_CLUSTER_START_TIMEOUT:-90}"

where() {
  case "$kind" in
    clickhouse) echo "${STS_CH_HOST[$node]}:${STS_CH_HTTP_PORT[$node]}" ;;
    zookeeper) echo "$STS_CLUSTER_HOST:$STS_ZOOKEEPER_PORT" ;;
    nats) echo "$STS_CLUSTER_HOST:${STS_NATS_CLIENT_PORT[${node#nats-}]}" ;;
  esac
}

case "$action" in
  status)
    if pid="$(sts_node_pid "$node")"; then
      infra_log "$node: pid $pid"
      echo running
      exit 0
    fi
    echo stopped
    exit 1
    ;;
  kill | stop)
    infra_require_root "cannot $action $node"
    # The ensure script of this kind holds the same lock while it (re)starts nodes.
    infra_lock "cluster-$kind"
    if ! sts_node_running "$node"; then
      echo "$node: not running"
      exit 0
    fi
    if [ "$action" = kill ]; then
      sts_node_signal "$node" KILL 30 || infra_die "$node did not exit within 30s of SIGKILL"
      echo "$node: killed"
    else
      sts_node_signal "$node" TERM "$STOP_TIMEOUT" || infra_die "$node did not exit within ${STOP_TIMEOUT}s of SIGTERM"
      echo "$node: stopped"
    fi
    ;;
  start)
    infra_require_root "cannot start $node"
    infra_lock "cluster-$kind"
    if [ "$kind" = clickhouse ]; then
      # Repairs a replica that refuses to start after a kill, and says what it did.
      healed=true
      sts_ch_start_healing "$node" "$START_TIMEOUT" || healed=false
    else
      sts_node_running "$node" || sts_node_start "$node"
      # The wait needs no lock, and a NATS node answers only once a majority is up: the other nodes' starts
      # must not wait behind it.
      exec 9>&-
      healed=true
      sts_node_wait_ready "$node" "$START_TIMEOUT" || healed=false
    fi
    if ! $healed; then
      tail -n 20 "$(sts_node_log "$node")" >&2 2>/dev/null || true
      infra_die "$node did not answer at $(where) within ${START_TIMEOUT}s; see $(sts_node_log "$node")"
    fi
    echo "$node: running at $(where)"
    ;;
  *) usage ;;
esac

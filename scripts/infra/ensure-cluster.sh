#!/usr/bin/env bash
# Makes the local cluster for development and tests available (scripts/infra/cluster-nodes.sh): ZooKeeper,
# the ClickHouse cluster sts_cluster (2 shards x 2 replicas) and the 3-node NATS JetStream cluster, all on
# 127.0.0.1 beside the single servers of ensure-all.sh. One line per part on success.
# Fault injection on single nodes: scripts/infra/cluster-node.sh.
set -euo pipefail
dir="$(dirname "$0")"
bash "$dir/ensure-zookeeper.sh" </dev/null
bash "$dir/ensure-clickhouse-cluster.sh" </dev/null
bash "$dir/ensure-nats-cluster.sh" </dev/null

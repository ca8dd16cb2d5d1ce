#!/usr/bin/env bash
# Makes the local ClickHouse cluster `sts_cluster` answer: 2 shards x 2 replicas, four clickhouse-server
# processes (Debian's 18.16, as ensure-clickhouse.sh installs it) on 127.0.0.1 with ZooKeeper from
# ensure-zookeeper.sh. Nodes, ports and directories: scripts/infra/cluster-nodes.sh. Each node gets its own
# copy of the package's config.xml and users.xml plus config.d/sts-cluster.xml, which moves every path
# under /var/lib/sts-cluster/clickhouse/<node> and /var/log/sts-cluster, so the single-node server
# (8123, /var/lib/clickhouse) keeps running untouched beside it.
# Idempotent; fast when the cluster already answers with the current config. Prints one line on success.
set -euo pipefail
dir="$(dirname "$0")"
# shellcheck source=scripts/infra/lib.sh
. "$dir/lib.sh"
# shellcheck source=scripts/infra/cluster-nodes.sh
. "$dir/cluster-nodes.sh"

TIMEOUT="${CLICKHOUSE_START_TIMEOUT:-90}"
PACKAGE_CONFIG=/etc/clickhouse-server/config.xml
PACKAGE_USERS=/etc/clickhouse-server/users.xml

# config.d/sts-cluster.xml of one node. 18.16 merges config.d into config.xml element by element, so
# <remote_servers> would keep the package's test clusters (test_shard_localhost... on localhost:9000, the
# single-node server); replace="replace" swaps the whole element instead, and drops the package's
# incl="..." attributes (substitutions looked up in include_from, by default /etc/metrika.xml).
override() {
  local node="$1" home="$STS_CH_DIR/$1" shard n
  cat <<XML
<?xml version="1.0"?>
<!-- Written by scripts/infra/ensure-clickhouse-cluster.sh: node $node of the local cluster $STS_CH_CLUSTER. -->
<yandex>
    <logger>
        <log>$STS_CLUSTER_LOG_DIR/clickhouse-$node.log</log>
        <errorlog>$STS_CLUSTER_LOG_DIR/clickhouse-$node.err.log</errorlog>
        <size>100M</size>
        <count>3</count>
    </logger>
    <listen_host>${STS_CH_HOST[$node]}</listen_host>
    <http_port>${STS_CH_HTTP_PORT[$node]}</http_port>
    <tcp_port>${STS_CH_TCP_PORT[$node]}</tcp_port>
    <interserver_http_port>${STS_CH_INTERSERVER_PORT[$node]}</interserver_http_port>
    <interserver_http_host>${STS_CH_HOST[$node]}</interserver_http_host>
    <path>$home/data/</path>
    <tmp_path>$home/tmp/</tmp_path>
    <user_files_path>$home/user_files/</user_files_path>
    <format_schema_path>$home/format_schemas/</format_schema_path>
    <include_from>$home/config/metrika.xml</include_from>
    <timezone>UTC</timezone>
    <mark_cache_size>134217728</mark_cache_size>
    <uncompressed_cache_size>134217728</uncompressed_cache_size>
    <remote_servers replace="replace">
        <$STS_CH_CLUSTER>
XML
  for shard in $(printf '%s\n' "${STS_CH_SHARD[@]}" | sort -u); do
    echo "            <shard>"
    echo "                <internal_replication>true</internal_replication>"
    for n in "${STS_CH_NODES[@]}"; do
      [ "${STS_CH_SHARD[$n]}" = "$shard" ] || continue
      echo "                <replica><host>${STS_CH_HOST[$n]}</host><port>${STS_CH_TCP_PORT[$n]}</port></replica>"
    done
    echo "            </shard>"
  done
  cat <<XML
        </$STS_CH_CLUSTER>
    </remote_servers>
    <zookeeper replace="replace">
        <node><host>$STS_CLUSTER_HOST</host><port>$STS_ZOOKEEPER_PORT</port></node>
        <session_timeout_ms>30000</session_timeout_ms>
    </zookeeper>
    <macros replace="replace">
        <cluster>$STS_CH_CLUSTER</cluster>
        <shard>${STS_CH_SHARD[$node]}</shard>
        <replica>$node</replica>
        <!-- Where this server's HTTP interface is, for the analytics service (@sts/clickhouse/cluster-shards):
             the servers of this cluster share an address, so each has a port of its own. -->
        <http_port>${STS_CH_HTTP_PORT[$node]}</http_port>
    </macros>
    <distributed_ddl replace="replace">
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
    <!-- A replica killed mid-insert may keep a part that it wrote but never registered in ZooKeeper (the insert
         was never acknowledged, so its writer sends it again). At start, 18.16 refuses a table where such
         parts hold over half the rows, which on a small table is one part: it then never starts again. With
         the ratio at 1 it starts, moves such parts aside to detached/ignored_* (and logs each), and fetches
         what ZooKeeper lists from the other replica. docs/decisions.md, "A killed replica comes back". -->
    <merge_tree>
        <replicated_max_ratio_of_wrong_parts>1</replicated_max_ratio_of_wrong_parts>
        <max_suspicious_broken_parts>100</max_suspicious_broken_parts>
    </merge_tree>
</yandex>
XML
}

# Substitutions for the incl="..." attributes left in the copied users.xml: none (an empty file rather
# than whatever /etc/metrika.xml holds).
metrika() {
  printf '<?xml version="1.0"?>\n<!-- Written by scripts/infra/ensure-clickhouse-cluster.sh: no substitutions. -->\n<yandex/>\n'
}

node_config_current() {
  local conf="$STS_CH_DIR/$1/config"
  cmp -s "$PACKAGE_CONFIG" "$conf/config.xml" && cmp -s "$PACKAGE_USERS" "$conf/users.xml" &&
    cmp -s <(metrika) "$conf/metrika.xml" && cmp -s <(override "$1") "$conf/config.d/sts-cluster.xml"
}

# Writes the node's directories and config; succeeds when a config file changed.
write_node_config() {
  local node="$1" home="$STS_CH_DIR/$1" unchanged=1
  mkdir -p "$home/config/config.d" "$home/data" "$home/tmp" "$home/user_files" "$home/format_schemas"
  sts_write_if_changed "$home/config/config.xml" <"$PACKAGE_CONFIG" && unchanged=0
  sts_write_if_changed "$home/config/users.xml" <"$PACKAGE_USERS" && unchanged=0
  metrika | sts_write_if_changed "$home/config/metrika.xml" && unchanged=0
  override "$node" | sts_write_if_changed "$home/config/config.d/sts-cluster.xml" && unchanged=0
  chown -R clickhouse:clickhouse "$home"
  return "$unchanged"
}

zookeeper_reachable() {
  [ -n "$(sts_ch_query "$1" "SELECT count() FROM system.zookeeper WHERE path = '/'" 2>/dev/null | grep -x '[0-9][0-9]*')" ]
}

all_ready() {
  local node
  for node in "${STS_CH_NODES[@]}"; do
    if ! sts_node_ready "$node" || ! zookeeper_reachable "$node" || [ -n "$(sts_ch_unattached_tables "$node")" ]; then
      return 1
    fi
  done
}

all_current() {
  local node
  for node in "${STS_CH_NODES[@]}"; do
    node_config_current "$node" || return 1
  done
}

ready_line() {
  local shards replicas http version
  shards="$(printf '%s\n' "${STS_CH_SHARD[@]}" | sort -u | wc -l)"
  replicas=$((${#STS_CH_NODES[@]} / shards))
  http="$(for n in "${STS_CH_NODES[@]}"; do echo "${STS_CH_HOST[$n]}:${STS_CH_HTTP_PORT[$n]}"; done | paste -sd' ')"
  version="$(sts_ch_query "${STS_CH_NODES[0]}" 'SELECT version()')"
  echo "clickhouse cluster: ready ($STS_CH_CLUSTER, $shards shards x $replicas replicas, http $http, version $version)"
}

# ZooKeeper first: the replicated tables and ON CLUSTER DDL need it. Its progress shows on stderr; its
# result line is left to ensure-cluster.sh, which runs ensure-zookeeper.sh itself.
bash "$dir/ensure-zookeeper.sh" </dev/null >/dev/null

if all_current && all_ready; then
  ready_line
  exit 0
fi

infra_require_root "the ClickHouse cluster does not answer"
infra_lock cluster-clickhouse

if [ ! -x "$STS_CH_DAEMON" ] || [ ! -f "$PACKAGE_CONFIG" ]; then
  # Installs the package (and starts the single-node server, which the tests use too).
  bash "$dir/ensure-clickhouse.sh" </dev/null | sed 's/^/  /' >&2
fi
id clickhouse >/dev/null 2>&1 || infra_die "user clickhouse is missing; reinstall the package: apt-get install --reinstall clickhouse-server"
sts_cluster_dirs

for node in "${STS_CH_NODES[@]}"; do
  touch "$STS_CLUSTER_LOG_DIR/clickhouse-$node.log" "$STS_CLUSTER_LOG_DIR/clickhouse-$node.err.log"
  chown clickhouse:clickhouse "$STS_CLUSTER_LOG_DIR/clickhouse-$node.log" "$STS_CLUSTER_LOG_DIR/clickhouse-$node.err.log"
  if write_node_config "$node" && sts_node_running "$node"; then
    infra_log "$node: config changed; restarting it"
    sts_node_signal "$node" TERM 60 || infra_die "$node did not stop within 60s"
  fi
  if ! sts_node_running "$node"; then
    for port in "${STS_CH_HTTP_PORT[$node]}" "${STS_CH_TCP_PORT[$node]}" "${STS_CH_INTERSERVER_PORT[$node]}"; do
      ! infra_tcp_open "${STS_CH_HOST[$node]}" "$port" || infra_die "$node: port $port is taken by another process"
    done
    infra_log "starting clickhouse $node (http ${STS_CH_HTTP_PORT[$node]}, tcp ${STS_CH_TCP_PORT[$node]})"
    sts_node_start "$node"
  fi
done

for node in "${STS_CH_NODES[@]}"; do
  # A replica killed mid-insert may refuse to start: repaired, with what was done on stderr.
  if ! sts_ch_start_healing "$node" "$TIMEOUT" >&2; then
    tail -n 20 "$STS_CLUSTER_LOG_DIR/clickhouse-$node.out" "$(sts_node_log "$node")" >&2 2>/dev/null || true
    infra_die "clickhouse $node did not answer 'SELECT 1' on port ${STS_CH_HTTP_PORT[$node]} within ${TIMEOUT}s; see $(sts_node_log "$node")"
  fi
  infra_wait "$TIMEOUT" "clickhouse $node (with ZooKeeper)" zookeeper_reachable "$node" ||
    infra_die "clickhouse $node answers but cannot reach ZooKeeper at $STS_CLUSTER_HOST:$STS_ZOOKEEPER_PORT; see $(sts_node_log "$node")"
done
ready_line

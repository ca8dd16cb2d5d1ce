#!/usr/bin/env bash
# Makes a standalone ZooKeeper answer on 127.0.0.1:${STS_ZOOKEEPER_PORT:-2181} for the local ClickHouse
# cluster (ensure-clickhouse-cluster.sh): installs Debian's `zookeeper` package when missing and runs it
# without systemd, with its own config, data and logs (scripts/infra/cluster-nodes.sh), not /etc/zookeeper.
# Idempotent; fast when it already answers. Prints one line on success.
set -euo pipefail
dir="$(dirname "$0")"
# shellcheck source=scripts/infra/lib.sh
. "$dir/lib.sh"
# shellcheck source=scripts/infra/cluster-nodes.sh
. "$dir/cluster-nodes.sh"

TIMEOUT="${ZOOKEEPER_START_TIMEOUT:-60}"
CONF="$STS_ZOOKEEPER_DIR/conf"
DATA="$STS_ZOOKEEPER_DIR/data"

zoo_cfg() {
  cat <<CFG
# Written by scripts/infra/ensure-zookeeper.sh: standalone ZooKeeper for the local development cluster.
tickTime=2000
dataDir=$DATA
clientPort=$STS_ZOOKEEPER_PORT
clientPortAddress=$STS_CLUSTER_HOST
maxClientCnxns=0
# Four-letter words (ruok, srvr, mntr...) answer the readiness checks.
4lw.commands.whitelist=*
# No embedded Jetty admin server (it would take port 8080).
admin.enableServer=false
# Keep the data directory small.
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
# Development and tests only: do not fsync every transaction (faster DDL and replication on slow disks).
forceSync=no
CFG
}

log4j_properties() {
  cat <<'PROPS'
# Written by scripts/infra/ensure-zookeeper.sh. zookeeper.root.logger, zookeeper.log.dir and zookeeper.log.file
# are set on the java command line (scripts/infra/cluster-nodes.sh).
zookeeper.root.logger=INFO,ROLLINGFILE
zookeeper.log.dir=.
zookeeper.log.file=zookeeper.log
log4j.rootLogger=${zookeeper.root.logger}
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Threshold=INFO
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
log4j.appender.ROLLINGFILE=org.apache.log4j.RollingFileAppender
log4j.appender.ROLLINGFILE.Threshold=INFO
log4j.appender.ROLLINGFILE.File=${zookeeper.log.dir}/${zookeeper.log.file}
log4j.appender.ROLLINGFILE.MaxFileSize=10MB
log4j.appender.ROLLINGFILE.MaxBackupIndex=3
log4j.appender.ROLLINGFILE.layout=org.apache.log4j.PatternLayout
log4j.appender.ROLLINGFILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
PROPS
}

config_current() {
  cmp -s <(zoo_cfg) "$CONF/zoo.cfg" && cmp -s <(log4j_properties) "$CONF/log4j.properties"
}

ready_line() {
  local version
  version="$(sts_zookeeper_4lw srvr | sed -n 's/^Zookeeper version: \([0-9][0-9.]*\).*/\1/p')"
  echo "zookeeper: ready at $STS_CLUSTER_HOST:$STS_ZOOKEEPER_PORT (version ${version:-unknown})"
}

if sts_node_ready zookeeper && { config_current || ! sts_node_running zookeeper; }; then
  # Ours with the current config, or another ZooKeeper that answers on the port: use it either way.
  sts_node_running zookeeper || infra_log "a ZooKeeper not started by this script answers on port $STS_ZOOKEEPER_PORT; using it"
  ready_line
  exit 0
fi

infra_require_root "ZooKeeper does not answer on $STS_CLUSTER_HOST:$STS_ZOOKEEPER_PORT"
infra_lock cluster-zookeeper

if [ ! -f "$STS_ZOOKEEPER_JAR" ]; then
  infra_apt_install zookeeper
fi
[ -f "$STS_ZOOKEEPER_JAR" ] || infra_die "$STS_ZOOKEEPER_JAR is missing after installing the zookeeper package"

sts_cluster_dirs
mkdir -p "$CONF" "$DATA"
changed=0
zoo_cfg | sts_write_if_changed "$CONF/zoo.cfg" && changed=1
log4j_properties | sts_write_if_changed "$CONF/log4j.properties" && changed=1
if id zookeeper >/dev/null 2>&1; then
  chown -R zookeeper:zookeeper "$STS_ZOOKEEPER_DIR"
  touch "$STS_CLUSTER_LOG_DIR/zookeeper.log"
  chown zookeeper:zookeeper "$STS_CLUSTER_LOG_DIR/zookeeper.log"
fi

if [ "$changed" = 1 ] && sts_node_running zookeeper; then
  infra_log "zookeeper config changed; restarting it"
  sts_node_signal zookeeper TERM 30 || infra_die "zookeeper did not stop within 30s"
fi

if ! sts_node_ready zookeeper; then
  if ! sts_node_running zookeeper; then
    infra_tcp_open "$STS_CLUSTER_HOST" "$STS_ZOOKEEPER_PORT" &&
      infra_die "port $STS_ZOOKEEPER_PORT is taken by something that does not answer ZooKeeper's ruok; set STS_ZOOKEEPER_PORT or stop it"
    infra_log "starting zookeeper on $STS_CLUSTER_HOST:$STS_ZOOKEEPER_PORT (log: $STS_CLUSTER_LOG_DIR/zookeeper.log)"
    sts_node_start zookeeper
  fi
  if ! sts_node_wait_ready zookeeper "$TIMEOUT"; then
    tail -n 20 "$STS_CLUSTER_LOG_DIR/zookeeper.out" "$STS_CLUSTER_LOG_DIR/zookeeper.log" >&2 2>/dev/null || true
    infra_die "ZooKeeper did not answer on $STS_CLUSTER_HOST:$STS_ZOOKEEPER_PORT within ${TIMEOUT}s; see $STS_CLUSTER_LOG_DIR/zookeeper.log"
  fi
  infra_log "zookeeper is ready"
fi
ready_line

# shellcheck shell=bash disable=SC2034 # the tables are read by the scripts that source this file
# The local cluster for development and tests, all on 127.0.0.1: ZooKeeper, ClickHouse 2 shards x 2 replicas
# and a 3-node NATS JetStream cluster. The ONE place that names the nodes, their ports and directories;
# sourced (after lib.sh) by ensure-zookeeper.sh, ensure-clickhouse-cluster.sh, ensure-nats-cluster.sh and
# cluster-node.sh, which also use the process helpers below. Run it directly with `json` to print the
# table for tests: bash scripts/infra/cluster-nodes.sh json

STS_CLUSTER_HOST=127.0.0.1
STS_CLUSTER_ROOT=/var/lib/sts-cluster
STS_CLUSTER_LOG_DIR=/var/log/sts-cluster
STS_CLUSTER_RUN_DIR=/run/sts-cluster # pid files

# ZooKeeper, standalone.
STS_ZOOKEEPER_PORT="${STS_ZOOKEEPER_PORT:-2181}"
STS_ZOOKEEPER_DIR="$STS_CLUSTER_ROOT/zookeeper" # conf/ and data/
STS_ZOOKEEPER_JAR=/usr/share/java/zookeeper.jar # Debian's `zookeeper` package (libzookeeper-java)

# ClickHouse: cluster name (also the {cluster} macro) and one line per node. All on one address, so each
# its own ports (a server recognises itself in remote_servers by address and native port, so distinct
# loopback addresses with the standard ports would make every server take the others for itself); the
# macro http_port tells the analytics service where a replica's HTTP interface is.
STS_CH_CLUSTER=sts_cluster
STS_CH_DIR="$STS_CLUSTER_ROOT/clickhouse" # <node>/{config,data,tmp,user_files,format_schemas}
STS_CH_DAEMON=/usr/sbin/clickhouse-server
STS_CH_TABLE='
# node     host        shard  http  tcp   interserver_http
ch-s1-r1   127.0.0.1   01     8131  9131  9331
ch-s1-r2   127.0.0.1   01     8132  9132  9332
ch-s2-r1   127.0.0.1   02     8133  9133  9333
ch-s2-r2   127.0.0.1   02     8134  9134  9334
'

# NATS: cluster name, one line per node (server_name is sts-<node>; store /var/lib/sts-cluster/nats/<node>).
STS_NATS_CLUSTER=sts
STS_NATS_DIR="$STS_CLUSTER_ROOT/nats"
# The release production runs, brought into the project (downloaded on first use): scripts/infra/ensure-nats-release.sh.
sts_nats_daemon() { bash "$(dirname "${BASH_SOURCE[0]}")/ensure-nats-release.sh"; }
STS_NATS_TABLE='
# node  client  route  monitoring_http
n1      4241    6241   8241
n2      4242    6242   8242
n3      4243    6243   8243
'

STS_CH_NODES=()
STS_NATS_NODES=()
declare -gA STS_CH_HOST=() STS_CH_SHARD=() STS_CH_HTTP_PORT=() STS_CH_TCP_PORT=() STS_CH_INTERSERVER_PORT=()
declare -gA STS_NATS_CLIENT_PORT=() STS_NATS_ROUTE_PORT=() STS_NATS_MONITOR_PORT=()
while read -r _node _host _shard _http _tcp _inter; do
  case "$_node" in '' | '#'*) continue ;; esac
  STS_CH_NODES+=("$_node")
  STS_CH_HOST[$_node]="$_host"
  STS_CH_SHARD[$_node]="$_shard"
  STS_CH_HTTP_PORT[$_node]="$_http"
  STS_CH_TCP_PORT[$_node]="$_tcp"
  STS_CH_INTERSERVER_PORT[$_node]="$_inter"
done <<<"$STS_CH_TABLE"
while read -r _node _client _route _monitor; do
  case "$_node" in '' | '#'*) continue ;; esac
  STS_NATS_NODES+=("$_node")
  STS_NATS_CLIENT_PORT[$_node]="$_client"
  STS_NATS_ROUTE_PORT[$_node]="$_route"
  STS_NATS_MONITOR_PORT[$_node]="$_monitor"
done <<<"$STS_NATS_TABLE"
unset _node _host _shard _http _tcp _inter _client _route _monitor

# The names cluster-node.sh accepts: ch-s1-r1 ... zookeeper nats-n1 ...
sts_cluster_node_names() {
  local node
  for node in "${STS_CH_NODES[@]}"; do echo "$node"; done
  echo zookeeper
  for node in "${STS_NATS_NODES[@]}"; do echo "nats-$node"; done
}

# sts_node_kind NAME: clickhouse, zookeeper or nats; fails for an unknown name.
sts_node_kind() {
  if [ "$1" = zookeeper ]; then
    echo zookeeper
  elif [ -n "${STS_CH_SHARD[$1]:-}" ]; then
    echo clickhouse
  elif [ "${1#nats-}" != "$1" ] && [ -n "${STS_NATS_CLIENT_PORT[${1#nats-}]:-}" ]; then
    echo nats
  else
    return 1
  fi
}

# Paths of one node (NAME as cluster-node.sh takes it).
sts_ch_config() { echo "$STS_CH_DIR/$1/config/config.xml"; }
sts_nats_config() { echo "$STS_NATS_DIR/$1/nats.conf"; }
sts_zookeeper_config() { echo "$STS_ZOOKEEPER_DIR/conf/zoo.cfg"; }
sts_node_pidfile() { echo "$STS_CLUSTER_RUN_DIR/$1.pid"; }

# The node's config file: each server process has it on its command line, which tells our processes apart
# from one another and from the machine's standalone servers (and from a recycled pid).
sts_node_config() {
  case "$(sts_node_kind "$1")" in
    clickhouse) sts_ch_config "$1" ;;
    nats) sts_nats_config "${1#nats-}" ;;
    zookeeper) sts_zookeeper_config ;;
  esac
}

# _sts_pid_runs_config PID CONFIG: PID is a server (not, say, an editor or `tail` of the file) with CONFIG on its
# command line. A zombie has neither an executable nor a command line: not running.
_sts_pid_runs_config() {
  local pid="$1" config="$2" exe cmdline
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  # A server whose binary has been replaced or removed since (a checkout's .dev/tools) still runs.
  exe="${exe% (deleted)}"
  case "${exe##*/}" in
    clickhouse-server | clickhouse | nats-server | java) ;;
    *) return 1 ;;
  esac
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  case " $cmdline " in
    *" $config "* | *"=$config "*) return 0 ;;
    *) return 1 ;;
  esac
}

# sts_node_pid NAME: prints the pid of the node's server and succeeds when it runs. Uses the pid file,
# and falls back to looking for the config path on command lines (a server started by hand).
sts_node_pid() {
  local config pidfile pid dir
  config="$(sts_node_config "$1")"
  pidfile="$(sts_node_pidfile "$1")"
  if [ -r "$pidfile" ]; then
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [ -n "$pid" ] && _sts_pid_runs_config "$pid" "$config"; then
      echo "$pid"
      return 0
    fi
  fi
  for dir in /proc/[0-9]*; do
    pid="${dir#/proc/}"
    if _sts_pid_runs_config "$pid" "$config"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

sts_node_running() { sts_node_pid "$1" >/dev/null; }

# sts_ch_query NODE SQL: runs SQL over the node's HTTP interface, prints the result; fails on an error.
sts_ch_query() {
  curl -sS --fail-with-body --max-time "${STS_CH_QUERY_TIMEOUT:-5}" --data-binary "$2" \
    "http://${STS_CH_HOST[$1]}:${STS_CH_HTTP_PORT[$1]}/" 2>&1
}

# sts_zookeeper_4lw WORD: sends a ZooKeeper four-letter word (ruok, srvr, mntr...), prints the answer.
sts_zookeeper_4lw() {
  # shellcheck disable=SC2016 # the program gets its values as arguments
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "%s" "$2" >&3 && cat <&3' \
    "$STS_CLUSTER_HOST" "$STS_ZOOKEEPER_PORT" "$1" 2>/dev/null
}

# sts_node_ready NAME: the node's server answers: ClickHouse `SELECT 1` (and its DDL worker runs), ZooKeeper `ruok` and serving
# (`srvr` reports a mode), NATS the client port and JetStream /healthz on its monitoring port (the server and
# its meta leader only: a restarted server's streams and consumers catch up after, however long their backlog).
sts_node_ready() {
  local node
  case "$(sts_node_kind "$1")" in
    clickhouse) [ "$(sts_ch_query "$1" 'SELECT 1' 2>/dev/null)" = 1 ] && ! sts_ch_ddl_worker_stopped "$1" ;;
    zookeeper)
      [ "$(sts_zookeeper_4lw ruok)" = imok ] && sts_zookeeper_4lw srvr | grep '^Mode: ' >/dev/null
      ;;
    nats)
      node="${1#nats-}"
      infra_tcp_open "$STS_CLUSTER_HOST" "${STS_NATS_CLIENT_PORT[$node]}" &&
        curl -sf --max-time 3 "http://$STS_CLUSTER_HOST:${STS_NATS_MONITOR_PORT[$node]}/healthz?js-server-only=true" >/dev/null 2>&1
      ;;
  esac
}

# The log file to point at when a node does not come up.
sts_node_log() {
  case "$(sts_node_kind "$1")" in
    clickhouse) echo "$STS_CLUSTER_LOG_DIR/clickhouse-$1.err.log" ;;
    nats) echo "$STS_CLUSTER_LOG_DIR/$1.log" ;;
    zookeeper) echo "$STS_CLUSTER_LOG_DIR/zookeeper.log" ;;
  esac
}

# Debian's zookeeper.jar names slf4j-api but no binding, so ZooKeeper would log nothing (the package's own
# zkServer.sh has the same problem): add the log4j 1.2 binding when present.
sts_zookeeper_classpath() {
  local cp="$STS_ZOOKEEPER_DIR/conf:$STS_ZOOKEEPER_JAR" jar
  for jar in /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
    [ -f "$jar" ] && cp="$cp:$jar"
  done
  echo "$cp"
}

# sts_node_start NAME: starts the node's server in the background with its existing config (written by the
# ensure script), recording its pid. Does not wait; see sts_node_wait_ready.
sts_node_start() {
  local name="$1" config pidfile
  config="$(sts_node_config "$name")"
  pidfile="$(sts_node_pidfile "$name")"
  [ -f "$config" ] || infra_die "$name has no config at $config; run scripts/infra/ensure-cluster.sh first"
  sts_cluster_dirs
  rm -f "$pidfile"
  case "$(sts_node_kind "$name")" in
    clickhouse)
      # stdout/stderr only catch what the server prints before its logger is set up (a config error).
      start-stop-daemon --start --quiet --background --make-pidfile --pidfile "$pidfile" \
        --chuid clickhouse:clickhouse --chdir "$STS_CH_DIR/$name" \
        --output "$STS_CLUSTER_LOG_DIR/clickhouse-$name.out" \
        --exec "$STS_CH_DAEMON" -- --config-file="$config"
      ;;
    nats)
      local daemon
      daemon="$(sts_nats_daemon)"
      start-stop-daemon --start --quiet --background --make-pidfile --pidfile "$pidfile" \
        --output "$STS_CLUSTER_LOG_DIR/$name.out" \
        --exec "$daemon" -- -c "$config"
      ;;
    zookeeper)
      local user=root java
      java="$(command -v java)" || infra_die "java is missing (the zookeeper package depends on default-jre)"
      id zookeeper >/dev/null 2>&1 && user=zookeeper
      # shellcheck disable=SC2086 # STS_ZOOKEEPER_JVM_OPTS is a list of options
      start-stop-daemon --start --quiet --background --make-pidfile --pidfile "$pidfile" \
        --chuid "$user" --chdir "$STS_ZOOKEEPER_DIR" \
        --output "$STS_CLUSTER_LOG_DIR/zookeeper.out" \
        --exec "$java" -- \
        ${STS_ZOOKEEPER_JVM_OPTS:--Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=32m} \
        -Djava.awt.headless=true \
        -Dzookeeper.log.dir="$STS_CLUSTER_LOG_DIR" -Dzookeeper.log.file=zookeeper.log \
        -Dzookeeper.root.logger=INFO,ROLLINGFILE \
        -Dlog4j.configuration="file:$STS_ZOOKEEPER_DIR/conf/log4j.properties" \
        -cp "$(sts_zookeeper_classpath)" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
      ;;
  esac
}

# sts_node_wait_ready NAME SECONDS: waits for sts_node_ready; fails early when the process has exited.
sts_node_wait_ready() {
  local name="$1" deadline=$(($(date +%s) + $2))
  until sts_node_ready "$name"; do
    if ! sts_node_running "$name"; then
      # Give a process that has just been started a moment to appear under its config path.
      sleep 1
      sts_node_running "$name" || return 1
    fi
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

# What a ClickHouse replica says when it refuses to start because its parts and ZooKeeper's list of them
# disagree too much (18.16 and current releases word it alike).
STS_CH_PARTS_REFUSAL="doesn't look like the set of parts in ZooKeeper"

# sts_ch_ddl_worker_stopped NODE: the running server's DDL worker has ended, so it no longer runs ON CLUSTER
# tasks and every such query waits for it until it times out. 18.16 ends it for good when, after its ZooKeeper
# session was lost, it meets a task it had already done ("Server expects that DDL task ... should be processed,
# but it was already processed according to ZK"). Read from the error log since the process started.
sts_ch_ddl_worker_stopped() {
  local pid started
  pid="$(sts_node_pid "$1")" || return 1
  started="$(date -d "@$(stat -c %Y "/proc/$pid")" '+%Y.%m.%d %H:%M:%S')"
  tail -n 5000 "$(sts_node_log "$1")" 2>/dev/null |
    awk -v since="$started" 'substr($0, 1, 19) >= since && /DDLWorker: Unexpected error, will terminate/ { found = 1 } END { exit !found }'
}

# sts_ch_unattached_tables NODE: the tables the running server has on disk (metadata/<db>/<table>.sql) but did
# not attach: 18.16 may skip a table that fails its parts check at start without a word.
sts_ch_unattached_tables() {
  local metadata="$STS_CH_DIR/$1/data/metadata" attached
  attached="$(sts_ch_query "$1" "SELECT concat(database, '.', name) FROM system.tables")" || return 0
  comm -23 \
    <(cd "$metadata" 2>/dev/null && find . -mindepth 2 -maxdepth 2 -name '*.sql' | sed 's#^\./##; s#\.sql$##; s#/#.#' | sort) \
    <(printf '%s\n' "$attached" | sort)
}

# sts_ch_force_restore NODE: sets ClickHouse's flag for a replica whose parts do not match ZooKeeper's list;
# the server reads it (and removes it) at its next start.
sts_ch_force_restore() {
  local flags="$STS_CH_DIR/$1/data/flags"
  mkdir -p "$flags"
  touch "$flags/force_restore_data"
  chown -R clickhouse:clickhouse "$flags"
}

# sts_ch_start_healing NODE SECONDS: starts a ClickHouse node (unless it runs) and waits until it answers with
# every table it has on disk. A replica killed mid-insert may hold parts that ZooKeeper does not list; 18.16 then
# refuses to start, aborts, or starts without that table, by the look of it at random. Each is repaired with
# ClickHouse's own flag for the case, flags/force_restore_data: the server moves the parts ZooKeeper does not
# list aside to detached/ and fetches the ones it lacks from the other replica. A server that exits otherwise
# while it starts (ZooKeeper away) is started again; three starts at most. Prints what it repaired and every
# part moved aside (ClickHouse logs each too). Fails when the node still does not answer, or runs without
# answering in time.
sts_ch_start_healing() {
  local node="$1" timeout="$2" home="$STS_CH_DIR/$1" marker part attempt forced=false missing
  marker="$(mktemp /tmp/sts-ch-start.XXXXXX)"
  if sts_node_running "$node" && sts_ch_ddl_worker_stopped "$node"; then
    echo "$node: its DDL worker has stopped (ON CLUSTER queries would wait for it; 18.16 ends it after a lost ZooKeeper session); restarting it"
    sts_node_signal "$node" TERM 60 || sts_node_signal "$node" KILL 30 || true
  fi
  for attempt in 1 2 3; do
    sts_node_running "$node" || sts_node_start "$node"
    if sts_node_wait_ready "$node" "$timeout"; then
      missing="$(sts_ch_unattached_tables "$node" | paste -sd' ')"
      [ -n "$missing" ] || break
      if $forced || [ "$attempt" = 3 ]; then
        echo "$node: runs without tables it has on disk: $missing"
        rm -f "$marker"
        return 1
      fi
      echo "$node: started without tables it has on disk ($missing); restarting it with force_restore_data"
      sts_ch_force_restore "$node"
      forced=true
      sts_node_signal "$node" TERM 60 || sts_node_signal "$node" KILL 30 || true
      continue
    fi
    if sts_node_running "$node" || [ "$attempt" = 3 ]; then
      rm -f "$marker"
      return 1
    fi
    # Exited. The refusal among its last errors (the error log holds errors only) is repaired once.
    if ! $forced && tail -n 100 "$(sts_node_log "$node")" 2>/dev/null | grep -qF "$STS_CH_PARTS_REFUSAL"; then
      echo "$node: refused to start: its parts do not match ZooKeeper's (killed mid-insert); starting it with force_restore_data"
      sts_ch_force_restore "$node"
      forced=true
    else
      echo "$node: exited while starting (last errors in $(sts_node_log "$node")); starting it again"
    fi
  done
  # Renaming a directory changes its ctime: the parts moved to detached/ since the start.
  while IFS= read -r part; do
    echo "$node: part moved aside by ClickHouse (not in ZooKeeper's list, or broken): ${part#"$home/data/data/"}"
  done < <(find "$home/data/data" -mindepth 4 -maxdepth 4 -path '*/detached/*' -cnewer "$marker" 2>/dev/null | sort)
  rm -f "$marker"
}

# sts_node_signal NAME SIGNAL SECONDS: sends SIGNAL to the node's server and waits until it has exited.
# Succeeds at once when it does not run.
sts_node_signal() {
  local name="$1" signal="$2" deadline=$(($(date +%s) + $3)) pid
  pid="$(sts_node_pid "$name")" || return 0
  kill -s "$signal" "$pid" 2>/dev/null || true
  while _sts_pid_runs_config "$pid" "$(sts_node_config "$name")"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  rm -f "$(sts_node_pidfile "$name")"
}

# sts_cluster_dirs: the shared log and pid directories. The log directory is sticky and world-writable, like
# /tmp: ClickHouse (user clickhouse) and ZooKeeper (user zookeeper) create and rotate their logs in it.
sts_cluster_dirs() {
  mkdir -p "$STS_CLUSTER_ROOT" "$STS_CLUSTER_LOG_DIR" "$STS_CLUSTER_RUN_DIR"
  chmod 1777 "$STS_CLUSTER_LOG_DIR"
}

# sts_write_if_changed FILE: writes stdin to FILE unless FILE already holds exactly that; succeeds when it
# wrote (so the caller knows to restart the server that reads FILE).
sts_write_if_changed() {
  local tmp
  tmp="$(mktemp "$1.XXXXXX")"
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then
    rm -f "$tmp"
    return 1
  fi
  chmod 644 "$tmp"
  mv -f "$tmp" "$1"
}

# `bash cluster-nodes.sh json`: the table as JSON, for tests.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ "${1:-}" = json ] || {
    echo "usage: bash $0 json" >&2
    exit 2
  }
  sep=''
  printf '{"host":"%s","zookeeper":{"port":%s},"clickhouse":{"cluster":"%s","nodes":[' \
    "$STS_CLUSTER_HOST" "$STS_ZOOKEEPER_PORT" "$STS_CH_CLUSTER"
  for n in "${STS_CH_NODES[@]}"; do
    printf '%s{"name":"%s","host":"%s","shard":"%s","httpPort":%s,"tcpPort":%s,"interserverPort":%s}' "$sep" "$n" \
      "${STS_CH_HOST[$n]}" "${STS_CH_SHARD[$n]}" "${STS_CH_HTTP_PORT[$n]}" "${STS_CH_TCP_PORT[$n]}" "${STS_CH_INTERSERVER_PORT[$n]}"
    sep=,
  done
  printf ']},"nats":{"cluster":"%s","nodes":[' "$STS_NATS_CLUSTER"
  sep=''
  for n in "${STS_NATS_NODES[@]}"; do
    printf '%s{"name":"nats-%s","serverName":"sts-%s","clientPort":%s,"routePort":%s,"monitorPort":%s}' "$sep" \
      "$n" "$n" "${STS_NATS_CLIENT_PORT[$n]}" "${STS_NATS_ROUTE_PORT[$n]}" "${STS_NATS_MONITOR_PORT[$n]}"
    sep=,
  done
  printf ']}}\n'
fi

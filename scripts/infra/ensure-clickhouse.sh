#!/usr/bin/env bash
# Makes ClickHouse answer on ${CLICKHOUSE_URL:-http://127.0.0.1:8123}: uses a server already answering,
# otherwise installs Debian's clickhouse-server (18.16) if missing and starts it without systemd.
# Idempotent; fast when the server already answers. Prints one line on success.
set -euo pipefail
# shellcheck source=scripts/infra/lib.sh
. "$(dirname "$0")/lib.sh"

URL="${CLICKHOUSE_URL:-http://127.0.0.1:8123}"
TIMEOUT="${CLICKHOUSE_START_TIMEOUT:-90}"
CONFIG=/etc/clickhouse-server/config.xml
OVERRIDE=/etc/clickhouse-server/config.d/sts-local-dev.xml
LOG_DIR=/var/log/clickhouse-server
DAEMON=/usr/sbin/clickhouse-server

scheme="${URL%%://*}"
rest="${URL#*://}"
authority="${rest%%/*}"
authority="${authority%%\?*}"
hostport="${authority##*@}"
case "$hostport" in
  \[*\]:*) host="${hostport%%]:*}]" port="${hostport##*]:}" ;;
  \[*\]) host="$hostport" port="" ;;
  *:*) host="${hostport%%:*}" port="${hostport##*:}" ;;
  *) host="$hostport" port="" ;;
esac
if [ -z "$port" ]; then
  if [ "$scheme" = https ]; then port=8443; else port=8123; fi
fi
BASE="$scheme://$authority"

answers() { [ "$(curl -s --max-time 2 "$BASE/ping" 2>/dev/null)" = "Ok." ]; }
queries() { [ "$(curl -s --max-time 5 --data-binary 'SELECT 1' "$BASE/" 2>/dev/null)" = "1" ]; }
version() { curl -s --max-time 5 --data-binary 'SELECT version()' "$BASE/" 2>/dev/null || true; }

ready_line() {
  queries || infra_die "ClickHouse answers /ping at $BASE but 'SELECT 1' fails: check the user and password in CLICKHOUSE_URL"
  echo "clickhouse: ready at $host:$port (version $(version))"
}

if answers; then
  ready_line
  exit 0
fi

infra_is_local "$host" || infra_die "ClickHouse does not answer at $BASE/ping, and $host is not this machine; start it there"
[ "$scheme" = http ] || infra_die "ClickHouse does not answer at $BASE/ping; this script only starts a local plain-HTTP server"
infra_require_root "ClickHouse does not answer at $BASE/ping"

infra_lock clickhouse
if answers; then # started by a concurrent run while this one waited for the lock
  ready_line
  exit 0
fi

# Local development settings, in config.d so that the package's own config.xml stays untouched:
# listen on IPv4 loopback only (the default also binds ::1, which fails where IPv6 is off), the port
# of CLICKHOUSE_URL, UTC as the server time zone, and caches sized for a small machine. Written before
# installing, so that a server the package starts itself (where services may start) uses them too.
mkdir -p "$(dirname "$OVERRIDE")"
cat >"$OVERRIDE" <<XML
<?xml version="1.0"?>
<!-- Written by scripts/infra/ensure-clickhouse.sh for local development and tests. -->
<yandex>
    <listen_host>127.0.0.1</listen_host>
    <http_port>$port</http_port>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
</yandex>
XML

if [ ! -x "$DAEMON" ]; then
  infra_apt_install clickhouse-server clickhouse-client
fi
if answers; then # the package started it
  ready_line
  exit 0
fi

id clickhouse >/dev/null 2>&1 || infra_die "user clickhouse is missing; reinstall the package: apt-get install --reinstall clickhouse-server"
mkdir -p "$LOG_DIR" /var/lib/clickhouse
chown clickhouse:clickhouse "$LOG_DIR" /var/lib/clickhouse

infra_log "starting clickhouse-server on 127.0.0.1:$port"
start-stop-daemon --start --quiet --oknodo --background \
  --chuid clickhouse:clickhouse --chdir /var/lib/clickhouse \
  --exec "$DAEMON" -- --config-file="$CONFIG"

if ! infra_wait "$TIMEOUT" "clickhouse" answers; then
  tail -n 20 "$LOG_DIR/clickhouse-server.err.log" >&2 2>/dev/null || true
  infra_die "ClickHouse did not answer at $BASE/ping within ${TIMEOUT}s; see $LOG_DIR/clickhouse-server.err.log and $LOG_DIR/clickhouse-server.log"
fi
ready_line

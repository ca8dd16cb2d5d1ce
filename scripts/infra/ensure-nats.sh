#!/usr/bin/env bash
# shellcheck disable=SC2016 # single-quoted programs get their values as arguments or environment
# Makes NATS with JetStream answer on ${NATS_URL:-nats://127.0.0.1:4222}: uses a server already listening
# (and checks that JetStream is enabled for its account), otherwise starts the release production runs
# (ensure-nats-release.sh brings it into the project) in the background with JetStream. A server this script
# started before, of another release, is restarted on the project's. Idempotent. Prints one line on success.
set -euo pipefail
# shellcheck source=scripts/infra/lib.sh
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

URL="${NATS_URL:-nats://127.0.0.1:4222}"
TIMEOUT="${NATS_START_TIMEOUT:-30}"

first="${URL%%,*}"
rest="${first#*://}"
hostport="${rest##*@}"
hostport="${hostport%%/*}"
case "$hostport" in
  \[*\]:*) host="${hostport%%]:*}]" port="${hostport##*]:}" ;;
  \[*\]) host="$hostport" port=4222 ;;
  *:*) host="${hostport%%:*}" port="${hostport##*:}" ;;
  *) host="$hostport" port=4222 ;;
esac

# One server per port, each with its own store, log and pid file.
if [ "$port" = 4222 ]; then suffix=""; else suffix="-$port"; fi
STORE="/var/lib/nats-server$suffix"
LOG="/var/log/nats-server$suffix.log"
PIDFILE="/run/nats-server$suffix.pid"

listening() { infra_tcp_open "$host" "$port"; }

# JetStream answers for the account we connect as. Uses the project's own NATS client when installed
# (npm ci has run); otherwise falls back to the server's INFO line, which says whether JetStream is on.
jetstream() {
  if [ -d "$ROOT/node_modules/@nats-io/jetstream" ] && command -v node >/dev/null 2>&1; then
    (cd "$ROOT" && NATS_CHECK_URL="$URL" timeout 15 node -e '
      const { connect } = require("@nats-io/transport-node");
      const { jetstreamManager } = require("@nats-io/jetstream");
      (async () => {
        const nc = await connect({ servers: process.env.NATS_CHECK_URL.split(","), timeout: 3000 });
        try {
          const jsm = await jetstreamManager(nc, { timeout: 3000 });
          await jsm.getAccountInfo();
        } finally {
          await nc.close();
        }
      })().catch((error) => {
        process.stderr.write(`  JetStream check: ${error.message}\n`);
        process.exit(1);
      });
    ')
  else
    local host_="${host#[}"
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"; IFS= read -r line <&3; printf "%s\n" "$line"' "${host_%]}" "$port" 2>/dev/null |
      grep -q '"jetstream":true'
  fi
}

# The version in the server's INFO line.
running_version() {
  local host_="${host#[}"
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"; IFS= read -r line <&3; printf "%s\n" "$line"' "${host_%]}" "$port" 2>/dev/null |
    sed -n 's/.*"version":"\([^"]*\)".*/\1/p'
}

done_line() { echo "nats: ready at $host:$port (JetStream on, nats-server $(running_version))"; }

# A server started by this script (its pid file) of another release than the project's: stopped, to be
# started again on the project's below. A server someone else runs is used as it is.
if listening && [ -r "$PIDFILE" ] && infra_is_local "$host"; then
  DAEMON="$(bash "$(dirname "$0")/ensure-nats-release.sh")"
  wanted="$("$DAEMON" --version | sed 's/^nats-server: v//')"
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  exe="${exe% (deleted)}"
  if [ "$(running_version)" != "$wanted" ] && [ "${exe##*/}" = nats-server ]; then
    infra_require_root "NATS on $host:$port runs $(running_version), not $wanted"
    infra_lock nats
    infra_log "nats-server $(running_version) on $host:$port was started here; restarting it on $wanted"
    kill -TERM "$pid" 2>/dev/null || true
    infra_wait 30 "nats-server $(running_version) stopped" bash -c '! kill -0 "$0" 2>/dev/null' "$pid" ||
      infra_die "nats-server (pid $pid) did not stop within 30s"
    rm -f "$PIDFILE"
  fi
fi

if listening; then
  jetstream || infra_die "NATS answers on $host:$port but JetStream is not enabled for this account; restart it with -js (e.g. nats-server -js -sd $STORE)"
  done_line
  exit 0
fi

infra_is_local "$host" || infra_die "NATS does not answer on $host:$port, and $host is not this machine; start it there"
infra_require_root "NATS does not answer on $host:$port"
infra_lock nats

DAEMON="$(bash "$(dirname "$0")/ensure-nats-release.sh")"
if ! listening; then
  mkdir -p "$STORE" "$(dirname "$LOG")"
  bind="${host#[}"
  bind="${bind%]}"
  [ "$bind" = localhost ] && bind=127.0.0.1
  infra_log "starting nats-server with JetStream on $bind:$port (log: $LOG)"
  start-stop-daemon --start --quiet --oknodo --background --make-pidfile --pidfile "$PIDFILE" \
    --exec "$DAEMON" -- \
    -a "$bind" -p "$port" -js -sd "$STORE" -l "$LOG"
fi
infra_wait "$TIMEOUT" "nats" listening || infra_die "NATS did not answer on $host:$port within ${TIMEOUT}s; see $LOG"
infra_wait "$TIMEOUT" "JetStream" jetstream || infra_die "NATS answers on $host:$port but JetStream does not; see $LOG"
done_line

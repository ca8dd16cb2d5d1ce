#!/usr/bin/env bash
# shellcheck disable=SC2016 # single-quoted programs get their values as arguments or environment
# Makes NATS with JetStream answer on ${NATS_URL:-nats://127.0.0.1:4222}: uses a server already listening
# (and checks that JetStream is enabled for its account), otherwise installs Debian's nats-server if
# missing and starts it in the background with JetStream. Idempotent. Prints one line on success.
set -euo pipefail
# shellcheck source=scripts/infra/lib.sh
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

URL="${NATS_URL:-nats://127.0.0.1:4222}"
TIMEOUT="${NATS_START_TIMEOUT:-30}"
DAEMON=/usr/sbin/nats-server

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

done_line() { echo "nats: ready at $host:$port (JetStream on)"; }

if listening; then
  jetstream || infra_die "NATS answers on $host:$port but JetStream is not enabled for this account; restart it with -js (e.g. nats-server -js -sd $STORE)"
  done_line
  exit 0
fi

infra_is_local "$host" || infra_die "NATS does not answer on $host:$port, and $host is not this machine; start it there"
infra_require_root "NATS does not answer on $host:$port"
infra_lock nats

if ! listening; then
  if [ ! -x "$DAEMON" ]; then
    infra_apt_install nats-server
  fi
fi
# The package may have started its own server on install.
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

#!/usr/bin/env bash
# Makes PostgreSQL accept connections on ${PGHOST:-127.0.0.1}:${PGPORT:-5432} as user postgres without a
# password: uses a server already listening, otherwise starts the Debian clusters (installing the
# `postgresql` package if missing). Idempotent; fast when the server already runs. Prints one line on success.
set -euo pipefail
# shellcheck source=scripts/infra/lib.sh
. "$(dirname "$0")/lib.sh"

HOST="${PGHOST:-127.0.0.1}"
PORT="${PGPORT:-5432}"
TIMEOUT="${POSTGRES_START_TIMEOUT:-60}"
ETC="${POSTGRES_ETC:-/etc/postgresql}" # overridable for testing this script only
MARKER='# sts local development: trust TCP connections from this machine (scripts/infra/ensure-postgres.sh)'

ready() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$HOST" -p "$PORT" -t 2
  else
    infra_tcp_open "$HOST" "$PORT"
  fi
}

# As postgres over TCP, never prompting for a password.
connects() {
  command -v psql >/dev/null 2>&1 || return 0 # no client to check with; the tests will tell
  psql -w -X -q -h "$HOST" -p "$PORT" -U postgres -d postgres -tAc 'SELECT 1' >/dev/null 2>&1
}

clusters() {
  local dir
  for dir in "$ETC"/*/*/; do
    if [ -f "$dir/postgresql.conf" ]; then
      echo "$(basename "$(dirname "$dir")")/$(basename "$dir")"
    fi
  done
}

start_clusters() {
  local cluster out status
  for cluster in $(clusters); do
    status=0
    out="$(pg_ctlcluster --skip-systemctl-redirect "${cluster%/*}" "${cluster#*/}" start 2>&1)" || status=$?
    # Exit status 2 means "already running".
    if [ "$status" -ne 0 ] && [ "$status" -ne 2 ]; then
      printf '%s\n' "$out" >&2
      infra_die "pg_ctlcluster ${cluster%/*} ${cluster#*/} start failed; see /var/log/postgresql/postgresql-${cluster%/*}-${cluster#*/}.log"
    fi
  done
}

# Local development only: trust TCP connections from loopback, ahead of the package's password rules.
trust_loopback() {
  local cluster hba changed=0
  for cluster in $(clusters); do
    hba="$ETC/$cluster/pg_hba.conf"
    grep -qF "$MARKER" "$hba" && continue
    infra_log "trusting loopback TCP connections in $hba (local development)"
    {
      printf '%s\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n\n' "$MARKER"
      cat "$hba"
    } >"$hba.sts-new"
    chown --reference="$hba" "$hba.sts-new"
    chmod --reference="$hba" "$hba.sts-new"
    mv "$hba.sts-new" "$hba"
    pg_ctlcluster --skip-systemctl-redirect "${cluster%/*}" "${cluster#*/}" reload >&2
    changed=1
  done
  [ "$changed" = 1 ]
}

done_line() { echo "postgres: ready at $HOST:$PORT"; }

if ready && connects; then
  done_line
  exit 0
fi

infra_is_local "$HOST" || infra_die "PostgreSQL at $HOST:$PORT is not reachable as postgres, and $HOST is not this machine"
infra_require_root "PostgreSQL at $HOST:$PORT is not reachable as postgres without a password"
infra_lock postgres

if ! ready; then
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    infra_apt_install postgresql
  fi
  if [ -z "$(clusters)" ]; then
    version="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)"
    infra_log "creating cluster $version/main"
    pg_createcluster "$version" main >/dev/null
  fi
  infra_log "starting PostgreSQL clusters: $(clusters | tr '\n' ' ')"
  start_clusters
  infra_wait "$TIMEOUT" "postgres" ready ||
    infra_die "PostgreSQL did not accept connections on $HOST:$PORT within ${TIMEOUT}s; see /var/log/postgresql/"
fi

if ! connects; then
  trust_loopback || true
  infra_wait 10 "postgres login" connects ||
    infra_die "PostgreSQL listens on $HOST:$PORT but 'psql -h $HOST -p $PORT -U postgres' needs a password or fails; check pg_hba.conf"
fi
done_line

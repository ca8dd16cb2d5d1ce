# shellcheck shell=bash disable=SC2016
# Helpers shared by scripts/infra/ensure-*.sh. Sourced, not run.
# Progress goes to stderr; each ensure script prints its one result line to stdout.

infra_log() { printf '  %s\n' "$*" >&2; }

infra_die() {
  printf 'ERROR: %s\n' "$*" >&2
  exit 1
}

# infra_is_local HOST: true for addresses of this machine, where the scripts may install and start servers.
infra_is_local() {
  case "$1" in
    127.* | localhost | ::1 | '[::1]' | 0.0.0.0) return 0 ;;
    *) return 1 ;;
  esac
}

infra_require_root() {
  [ "$(id -u)" = 0 ] || infra_die "$1 (needs root to install or start it; run as root or start it yourself)"
}

# infra_lock NAME: serializes installs and starts across concurrent runs (several test runs at once).
# Holds the lock on fd 9 until the calling script exits.
infra_lock() {
  exec 9>"/var/lock/sts-infra-$1.lock"
  flock -w 600 9 || infra_die "timed out waiting for /var/lock/sts-infra-$1.lock"
}

# infra_apt_install PACKAGE...: non-interactive install, quiet unless it fails. Prints how long it took.
infra_apt_install() {
  local log started
  log="$(mktemp /tmp/sts-apt.XXXXXX.log)"
  started="$(date +%s)"
  infra_log "installing $* from Debian packages (log: $log)"
  if ! {
    apt-get -o DPkg::Lock::Timeout=300 update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
  } </dev/null >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    infra_die "apt-get install $* failed (full log: $log)"
  fi
  infra_log "installed $* in $(($(date +%s) - started))s"
  rm -f "$log"
}

# infra_wait SECONDS DESCRIPTION COMMAND...: polls COMMAND every half second until it succeeds.
infra_wait() {
  local timeout="$1" what="$2" deadline
  shift 2
  deadline=$(($(date +%s) + timeout))
  until "$@"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      return 1
    fi
    sleep 0.5
  done
  infra_log "$what is ready"
}

# infra_tcp_open HOST PORT: true when something accepts TCP connections there.
infra_tcp_open() {
  local host="${1#[}"
  host="${host%]}"
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$2" 2>/dev/null
}

#!/usr/bin/env bash
# Brings the NATS release that production runs (deploy/ pins 2.10) into the project: Debian 13's package
# nats-server, downloaded with a private apt configuration (the machine's own sources, packages and its
# Debian 12 nats-server stay as they are), checked against the pinned SHA-256 and unpacked with dpkg -x into
# .dev/tools/. Prints the binary's path. Fast when it is there already. Used by the tests' NATS servers, the
# local cluster and `npm start`'s own servers (docs/decisions.md, "The NATS release the tests run").
set -euo pipefail
# shellcheck source=scripts/infra/lib.sh
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

VERSION=2.10.27
PACKAGE_VERSION=2.10.27-1+b2
SUITE=trixie
SHA256=6d913ac987b78734c08537c2adeb1526cf735f216173a9170d94b185fcfe6f8a
DEST="${STS_TOOLS_DIR:-$ROOT/.dev/tools}/nats-server-$PACKAGE_VERSION"
BINARY="$DEST/usr/sbin/nats-server"

works() { [ -x "$BINARY" ] && [ "$("$BINARY" --version 2>/dev/null)" = "nats-server: v$VERSION" ]; }

if works; then
  echo "$BINARY"
  exit 0
fi

infra_lock nats-release
works && {
  echo "$BINARY"
  exit 0
}

# The machine's Debian mirror (its first deb822 or one-line source that is not the security archive), with
# Debian 13's suite: the same server the machine's apt already trusts, under Debian's own archive keys.
mirror="${STS_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
fi
if [ -z "$mirror" ]; then
  mirror="$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
fi
[ -n "$mirror" ] || infra_die "no Debian mirror found in /etc/apt/sources.list*; set STS_DEBIAN_MIRROR to one"
keys=""
for key in /usr/share/keyrings/debian-archive-$SUITE-stable.gpg /usr/share/keyrings/debian-archive-$SUITE-automatic.gpg; do
  [ -f "$key" ] && keys="$keys $key"
done
[ -n "$keys" ] || keys=/usr/share/keyrings/debian-archive-keyring.gpg

work="$(mktemp -d /tmp/sts-nats-release.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parts" "$work/preferences" "$work/lists/partial" "$work/archives/partial"
printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By:%s\n' "$mirror" "$SUITE" "$keys" >"$work/parts/$SUITE.sources"
apt_private=(
  -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
  -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$work/preferences"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
  -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "Debug::NoLocking=1"
  -o "APT::Sandbox::User=root"
)
infra_log "downloading nats-server $PACKAGE_VERSION (Debian $SUITE) into $DEST"
if ! (cd "$work" && apt-get "${apt_private[@]}" -qq update && apt-get "${apt_private[@]}" -qq download "nats-server=$PACKAGE_VERSION") \
  </dev/null >"$work/apt.log" 2>&1; then
  tail -n 20 "$work/apt.log" >&2
  infra_die "could not download nats-server $PACKAGE_VERSION from $mirror ($SUITE)"
fi
deb="$(ls "$work"/nats-server_*.deb)"
actual="$(sha256sum "$deb" | cut -d' ' -f1)"
[ "$actual" = "$SHA256" ] || infra_die "nats-server $PACKAGE_VERSION: SHA-256 $actual, expected $SHA256; not installed"
# Unpacked beside, then moved into place: an interrupted run never leaves a half-written release.
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.partial"
dpkg -x "$deb" "$DEST.partial"
rm -rf "$DEST"
mv "$DEST.partial" "$DEST"
works || infra_die "$BINARY does not report v$VERSION: $("$BINARY" --version 2>&1 || true)"
infra_log "nats-server $VERSION is at $BINARY"
echo "$BINARY"

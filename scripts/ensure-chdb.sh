#!/usr/bin/env bash
# Installs chDB (a current ClickHouse, embedded in the test process) into tools/chdb/node_modules, for the spec
# that runs the analytics SQL on it and on ClickHouse 18.16 (libs/analytics-infra/src/current-clickhouse.int-spec.ts).
# It is kept out of the root package.json: its engine is over 500 MB, and production images are built from that.
# Idempotent: skips the install when tools/chdb/node_modules was installed from the current package.json and lock.
# Prints one line on success.
set -euo pipefail
cd "$(dirname "$0")/.."
installed=""

DIR=tools/chdb
STAMP="$DIR/node_modules/.sts-installed-from"
want="$(cat "$DIR/package.json" "$DIR/package-lock.json" | sha256sum | cut -d' ' -f1)"

if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ] || [ ! -d "$DIR/node_modules/chdb" ]; then
  # The engine comes inside the registry package @chdb/lib-<platform> (no download at install); chdb's own
  # install script does nothing, so scripts stay off.
  if ! npm ci --prefix "$DIR" --no-audit --no-fund --ignore-scripts --loglevel=error </dev/null >/dev/null; then
    echo "chdb: npm ci in $DIR failed: if its package-lock.json no longer matches its package.json, see $DIR/README.md (Updating)" >&2
    exit 1
  fi
  echo "$want" >"$STAMP"
  installed=", installed now"
fi

# Loads the engine once: proves it runs here, and names its version.
version="$(cd "$DIR" && node -e 'const v = require("chdb").version(); console.log(`ClickHouse ${String(v.libchdb).replace(/"/g, "")}, chdb ${v.chdb}`)')"
echo "chdb: ready ($version$installed)"

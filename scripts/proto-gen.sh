#!/usr/bin/env bash
# Generates TypeScript from proto/ with buf + ts-proto into libs/proto/src/gen.
#   scripts/proto-gen.sh          regenerate
#   scripts/proto-gen.sh --check  lint, and fail if the committed generated code is stale
set -euo pipefail
cd "$(dirname "$0")/.."
BUF=node_modules/.bin/buf
OUT=libs/proto/src/gen

"$BUF" lint proto

if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  sed "s#out: libs/proto/src/gen#out: $tmp/gen#" proto/buf.gen.yaml >"$tmp/buf.gen.yaml"
  "$BUF" generate proto --template "$tmp/buf.gen.yaml"
  if ! diff -r "$tmp/gen" "$OUT" >/dev/null; then
    diff -r "$tmp/gen" "$OUT" | head -40 || true
    echo "Generated code in $OUT is stale: run 'npm run proto:gen' and commit the result." >&2
    exit 1
  fi
  echo "proto: lint clean, generated code up to date"
else
  rm -rf "$OUT"
  "$BUF" generate proto --template proto/buf.gen.yaml
  echo "proto: generated into $OUT"
fi

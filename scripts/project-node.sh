#!/usr/bin/env bash
# Sourced by scripts/start.sh and scripts/test.sh after scripts/ensure-deps.sh: every command after it runs on
# the Node.js the project pins (the devDependency `node` in package.json, a supported LTS whose binary npm
# installs into node_modules), not on whatever Node.js the machine has. npm scripts already put
# node_modules/.bin first on PATH; this makes `bash scripts/test.sh` run directly behave the same.
# shellcheck shell=bash

project_node_use() {
  local root wanted actual
  root=$(pwd)
  export PATH="$root/node_modules/.bin:$PATH"
  hash -r
  wanted=$(node -p "require('./package.json').devDependencies.node")
  actual=$(node -p 'process.versions.node')
  if [ "$actual" != "$wanted" ]; then
    echo "expected Node.js $wanted (package.json devDependencies.node) but PATH gives $actual from $(command -v node);" \
      "run \`npm ci\` so node_modules/.bin/node is installed" >&2
    return 1
  fi
}

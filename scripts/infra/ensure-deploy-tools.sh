#!/usr/bin/env bash
# The tools the deploy/ checks run offline (no daemon, no cluster): docker-compose validates
# deploy/compose.yaml, kubectl renders deploy/k8s with kustomize. Installed from Debian's packages
# when missing. One line per tool on success.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

missing=()
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v kubectl >/dev/null 2>&1 || missing+=(kubectl)
if [ "${#missing[@]}" -gt 0 ]; then
  infra_require_root "${missing[*]} not found"
  infra_lock deploy-tools
  infra_apt_install "${missing[@]}"
fi
echo "docker-compose: $(docker-compose version --short 2>/dev/null || echo '?')"
echo "kubectl: $(kubectl version --client 2>/dev/null | head -1)"

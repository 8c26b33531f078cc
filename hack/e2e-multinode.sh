#!/usr/bin/env bash
# The multi-node tier (`make test-multinode`): brings up the kind cluster of a control plane and
# two workers if it is not up (hack/kind/up.sh; docs/developer/multinode.md), installs the chart
# from this tree, and runs the Go suite in e2e/multinode against it. A cluster this script brought
# up is deleted at the end (KEEP=1 keeps it); one that was already up is left as it was.
# On failure the pods, events and the operator's and CNI's logs go under $E2E_ARTIFACTS
# (default _output/multinode).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/kind/lib.sh
source "$HERE/kind/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root: kind's nodes are privileged containers, and the suite stops one"
export E2E_ARTIFACTS="${E2E_ARTIFACTS:-$ROOT/_output/multinode}"
mkdir -p "$E2E_ARTIFACTS"
started=no
dump() {
  kk get nodes -o wide || true
  kk get pods -A -o wide || true
  kk get events -A --sort-by=.lastTimestamp || true
  kk -n "${RELEASE_NAMESPACE:-kube-fstack-system}" logs -l "app.kubernetes.io/instance=${RELEASE:-kube-fstack}" --all-containers --prefix --tail=200 || true
} >"$E2E_ARTIFACTS/cluster.txt" 2>&1
finish() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -f "$KUBECONFIG_KIND" ]; then
    dump
    log "multi-node tier failed: diagnostics in $E2E_ARTIFACTS"
  fi
  if [ "$started" = yes ] && [ "${KEEP:-0}" != 1 ]; then
    log "multinode: deleting the cluster this run brought up (KEEP=1 keeps it)"
    "$HERE/kind/down.sh" >"$E2E_ARTIFACTS/down.log" 2>&1 || log "hack/kind/down.sh failed: $E2E_ARTIFACTS/down.log"
  fi
  exit $rc
}
trap finish EXIT

if ! { [ -x "$KIND" ] && command -v "$KIND_PROVIDER" >/dev/null && kind_exists; }; then started=yes; fi
t0=$SECONDS
"$HERE/kind/up.sh" --install >"$E2E_ARTIFACTS/up.log" 2>&1 || { tail -20 "$E2E_ARTIFACTS/up.log" >&2; die "hack/kind/up.sh failed: $E2E_ARTIFACTS/up.log"; }
log "multinode: cluster up and chart installed in $((SECONDS - t0))s"

kind_e2e_env
cd "$ROOT"
go test ./e2e/multinode/ -count=1 -v -timeout 45m "$@"

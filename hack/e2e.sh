#!/usr/bin/env bash
# The end-to-end tier (`make e2e`): brings up the local cluster if it is not up, installs the
# chart from this tree, and runs the Go suite in e2e/ against it. A cluster this script brought
# up is torn down at the end (KEEP=1 keeps it); one that was already up is left as it was.
# On failure the suite writes pod descriptions, events and the operator, CNI and dataplane logs
# under $E2E_ARTIFACTS (default _output/e2e) and this script prints the component logs' place.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/cluster/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root: the suite reads cgroups, kills a pod's process and makes a netns"
started=no
finish() {
  local rc=$?
  if [ "$started" = yes ] && [ "${KEEP:-0}" != 1 ]; then
    log "e2e: tearing down the cluster this run brought up (KEEP=1 keeps it)"
    "$HERE/cluster/down.sh" >"$E2E_ARTIFACTS/down.log" 2>&1 || log "down.sh failed: $E2E_ARTIFACTS/down.log"
  fi
  [ $rc -eq 0 ] || log "e2e failed: diagnostics under ${E2E_ARTIFACTS}, component logs under $LOGS"
  exit $rc
}
export E2E_ARTIFACTS="${E2E_ARTIFACTS:-$ROOT/_output/e2e}"
mkdir -p "$E2E_ARTIFACTS"
trap finish EXIT

if ! "$HERE/cluster/status.sh" >/dev/null 2>&1; then
  started=yes
  t0=$SECONDS
  "$HERE/cluster/up.sh" >"$E2E_ARTIFACTS/up.log" 2>&1 || { tail -20 "$E2E_ARTIFACTS/up.log" >&2; die "cluster up failed: $E2E_ARTIFACTS/up.log"; }
  log "e2e: cluster up in $((SECONDS - t0))s"
fi
"$HERE/cluster/install.sh"

e2e_env
cd "$ROOT"
go test ./e2e/ -count=1 -v -timeout 30m "$@"

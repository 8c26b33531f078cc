#!/usr/bin/env bash
# Pod create -> Ready on the local cluster, injected vs the same pod without injection (and two
# floors: that pod with a do-nothing native sidecar, without and with probes), in one
# run (e2e/bench). Uses a running cluster with the chart installed, or brings both up first
# (hack/e2e.sh's way) and leaves them up. Prints p50s and the ratio.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/cluster/lib.sh"
"$HERE/cluster/status.sh" >/dev/null 2>&1 || "$HERE/cluster/up.sh"
"$HERE/cluster/install.sh"
e2e_env
# The node has one CPU to give exclusively: the demo of `make run` must pause meanwhile.
if kc -n fstack-demo get deployment nginx-fstack >/dev/null 2>&1; then
  log "bench: scaling the fstack-demo Deployment to 0 for the run (back to 1 after)"
  kc -n fstack-demo scale deployment nginx-fstack --replicas=0 >/dev/null
  kc -n fstack-demo wait --for=delete pod -l app=nginx-fstack --timeout=120s >/dev/null || true
  trap 'kc -n fstack-demo scale deployment nginx-fstack --replicas=1 >/dev/null' EXIT
fi
cd "$ROOT"
go run ./e2e/bench "$@"

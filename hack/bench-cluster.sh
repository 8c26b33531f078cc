#!/usr/bin/env bash
# Pod create -> Ready on the local cluster, injected vs the same pod without injection, in one
# run (e2e/bench). Uses a running cluster with the chart installed, or brings both up first
# (hack/e2e.sh's way) and leaves them up. Prints p50s and the ratio.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/cluster/lib.sh"
"$HERE/cluster/status.sh" >/dev/null 2>&1 || "$HERE/cluster/up.sh"
"$HERE/cluster/install.sh"
e2e_env
cd "$ROOT"
go run ./e2e/bench "$@"

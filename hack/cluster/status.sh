#!/usr/bin/env bash
# Prints the local cluster's state: each component's recorded PID and whether it runs, the node's
# Ready condition, and what the node offers pods (allocatable CPU and 2 MiB hugepages).
# Exits non-zero when a component is down or the node is not Ready.
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ -d "$RUN" ] || { echo "cluster: not up (hack/cluster/up.sh or make cluster-up)"; exit 1; }
rc=0
for c in ovsdb-server ovs-vswitchd "${COMPONENTS[@]}"; do
  if alive "$c"; then
    printf '  %-24s running  pid %s\n' "$c" "$(pid_of "$c")"
  else
    printf '  %-24s DOWN     (log %s)\n' "$c" "$LOGS/$c.log"; rc=1
  fi
done
if alive kube-apiserver; then
  ready="$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)"
  alloc="$(kc get node "$NODE_NAME" -o 'jsonpath=cpu={.status.allocatable.cpu} hugepages-2Mi={.status.allocatable.hugepages-2Mi} podCIDR={.spec.podCIDR}' 2>/dev/null || true)"
  echo "  node $NODE_NAME Ready=${ready:-unknown} $alloc"
  [ "$ready" = True ] || rc=1
fi
echo "  ovs: $(vsctl --timeout=5 list-ports "$OVS_BRIDGE" 2>/dev/null | wc -l) port(s) on $OVS_BRIDGE"
echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
exit $rc

#!/usr/bin/env bash
# Deletes the multi-node kind cluster (hack/kind/up.sh) and undoes what up.sh changed on the host,
# only what its marks say it made: the data network's bridge, the routes to the nodes' podCIDRs,
# the containers.conf drop-in, /lib/modules, the hugepages it added, the hugetlb cgroup mount.
# The node image stays in the image store (hack/kind/node-image.sh rebuilds it only on change).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kind/lib.sh
source "$HERE/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root"

if [ -x "$KIND" ] && command -v "$KIND_PROVIDER" >/dev/null && kind_exists; then
  log "kind: delete cluster $KIND_CLUSTER"
  kind_ delete cluster --name "$KIND_CLUSTER" >/dev/null
fi
# The workers' uplinks went with their network namespaces; the bridge is the host's.
ip link del "$DATA_BRIDGE" 2>/dev/null || true
if [ -f "$KIND_STATE/host-routes" ]; then
  while read -r cidr; do ip route del "$cidr" 2>/dev/null || true; done <"$KIND_STATE/host-routes"
fi
if kmarked containers-conf; then rm -f "$CONTAINERS_DROPIN"; fi
if kmarked lib-modules; then rmdir /lib/modules 2>/dev/null || true; fi
if kmarked hugepages-added; then
  added="$(cat "$KIND_MARKS/hugepages-added")"
  [ "${added:-0}" -gt 0 ] && echo $(( $(cat "$NR_HUGEPAGES") - added )) >"$NR_HUGEPAGES"
fi
# The single-node cluster's containerd uses the hugetlb mount too: leave it while that runs.
if kmarked hugetlb-cgroup && ! alive containerd; then umount "$HUGETLB_CGROUP" 2>/dev/null || true; fi
rm -rf "$KIND_STATE"
log "kind cluster $KIND_CLUSTER down"

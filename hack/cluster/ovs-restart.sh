#!/usr/bin/env bash
# Restarts the local cluster's OVS (ovsdb-server and ovs-vswitchd) as a node's would restart:
# the database and its ports stay, every vhost-user client reconnects. The e2e suite calls it
# while pods come and go (E2E_OVS_RESTART), to show that fstack-cni leaks nothing across it.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/up.sh
source "$HERE/up.sh"
[ "$(id -u)" = 0 ] || die "run as root"
alive ovsdb-server || die "the cluster's OVS is not running (make cluster-up)"
ovs_env
stop ovs-vswitchd
stop ovsdb-server
ovs
log "ovs: restarted"

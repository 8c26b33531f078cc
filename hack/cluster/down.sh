#!/usr/bin/env bash
# Tears down what hack/cluster/up.sh created, and nothing else: its processes (by recorded PID),
# pods (through the kubelet first, so every CNI DEL runs), containerd's state, mounts, iptables
# chains, the cni0 bridge and veths, the OVS instance, kubepods cgroups, the hugepages it
# reserved, and the files it wrote under system paths. Safe to run twice, or after a failed up.sh.
# Built binaries and images under .cache/cluster/cache stay, so the next up.sh takes seconds.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"

# Pods first, while the kubelet and containerd still run: their CNI DEL removes the OVS port,
# the vhost directory, the IPAM leases and the portmap/masquerade rules.
# Controllers go first: a Deployment's or DaemonSet's pod deleted here would be recreated, get a
# CNI ADD, and be killed without its DEL once the kubelet stops (its bridge chain and results
# files left behind), after this waited the full timeout for it.
drain_pods() {
  alive kube-apiserver && alive kubelet && alive containerd || return 0
  log "deleting every workload controller, then every pod (so the kubelet runs CNI DEL for each)"
  kc delete deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs,replicationcontrollers \
    --all --all-namespaces --wait=false >/dev/null 2>&1 || log "could not delete the workload controllers; their pods may come back"
  kc delete pods --all --all-namespaces --grace-period=5 --wait=true --timeout=90s >/dev/null 2>&1 \
    || log "pods did not all go within 90s; cleaning up by force"

  for _ in $(seq 60); do
    [ -z "$(ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null)" ] && break
    sleep 1
  done
}

# Whatever the kubelet did not stop: kill the tasks and remove the containers, then containerd.
containers_down() {
  if alive containerd; then
    local c
    for c in $(ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    sleep 1
    for c in $(ctr -a "$CONTAINERD_SOCK" -n k8s.io containers ls -q 2>/dev/null); do
      ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
      ctr -a "$CONTAINERD_SOCK" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # Shims outlive containerd by design; only those serving this cluster's socket are ours.
  local p
  for p in $(pgrep -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $CONTAINERD_SOCK" || true); do
    kill -KILL "$p" 2>/dev/null || true
  done
}

# Every mount below the given roots, deepest first (pod volumes, rootfs overlays, sandbox shm
# and netns files).
unmount_under() {
  local root m
  for root in "$@"; do
    awk -v r="$root" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
    done
  done
}

# KUBE-* chains are kube-proxy's and the kubelet's; CNI-* rules are removed only when their
# comment names this cluster's network, so another CNI user's rules stay.
iptables_down() {
  local ipt t rule chains c
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for t in filter nat mangle raw; do
      "$ipt" -t "$t" -S >/dev/null 2>&1 || continue
      { "$ipt" -t "$t" -S | grep -E -- "^-A .*(-j KUBE-|name: \\\\\"$NET_NAME\\\\\")" || true; } | sed 's/^-A/-D/' | while read -r rule; do
        eval "$ipt -t $t $rule" 2>/dev/null || true
      done
      chains="$("$ipt" -t "$t" -S | awk '/^-N KUBE-/{print $2}')"
      for c in $chains; do "$ipt" -t "$t" -F "$c" 2>/dev/null || true; done
      for c in $chains; do "$ipt" -t "$t" -X "$c" 2>/dev/null || true; done
      for c in $("$ipt" -t "$t" -S | cni_orphan_chains); do
        "$ipt" -t "$t" -F "$c" 2>/dev/null || true; "$ipt" -t "$t" -X "$c" 2>/dev/null || true
      done
    done
  done
}

# cni_orphan_chains: from `iptables -S` of one table on stdin, the bridge plugin's per-pod masquerade
# chains (CNI-<24 hex digits>) that no rule jumps to any more: they were referenced only from the
# rules iptables_down removed. grep -E, not awk: Debian's default awk (mawk) has no {n} interval,
# so an awk pattern never matched and every run leaked its pods' chains.
cni_orphan_chains() {
  local rules c
  rules="$(cat)"
  grep -E '^-N CNI-[0-9a-f]{24}$' <<<"$rules" | cut -d' ' -f2 | while read -r c; do
    grep -qE -- "-j $c( |\$)" <<<"$rules" || printf '%s\n' "$c"
  done
}

links_down() {
  local l
  for l in $(ip -o link show master cni0 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}'); do
    ip link del "$l" 2>/dev/null || true
  done
  if ip link show cni0 >/dev/null 2>&1; then ip link del cni0; fi
  if [ -f "$MARKS/ip-forward" ]; then sysctl -qw "net.ipv4.ip_forward=$(cat "$MARKS/ip-forward")"; fi
}

ovs_down() {
  ovs_env
  if alive ovsdb-server; then vsctl --timeout=10 --if-exists del-br "$OVS_BRIDGE" 2>/dev/null || true; fi
  stop ovs-vswitchd
  stop ovsdb-server
  if ip netns list 2>/dev/null | grep -qw "$OVS_NETNS"; then ip netns del "$OVS_NETNS"; fi
  # Its peer goes with the namespace, but the kernel removes it after `ip netns del` returns: the
  # link seen a moment ago may be gone by the del (measured, it ended a teardown under set -e).
  # Only a link that is still there after a failed del is an error.
  if ip link show "$NODE_SENDER" >/dev/null 2>&1; then
    ip link del "$NODE_SENDER" 2>/dev/null || ! ip link show "$NODE_SENDER" >/dev/null 2>&1 \
      || { echo "down: cannot delete $NODE_SENDER" >&2; return 1; }
  fi
  if mountpoint -q "$HUGE_DIR"; then
    rm -rf "${HUGE_DIR:?}"/*
    umount "$HUGE_DIR"
  fi
}

# cgroups the kubelet and runc made under kubepods, deepest first, in every v1 hierarchy.
cgroups_down() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || log "cgroup $d still has tasks"
  done
  if marked hugetlb-cgroup && mountpoint -q "$HUGETLB_CGROUP"; then
    umount "$HUGETLB_CGROUP" && rmdir "$HUGETLB_CGROUP"
  fi
}

hugepages_down() {
  local added total
  added="$(cat "$MARKS/hugepages-added" 2>/dev/null || echo 0)"
  if [ "${added:-0}" -gt 0 ]; then
    total="$(cat "$NR_HUGEPAGES")"
    echo $(( total > added ? total - added : 0 )) >"$NR_HUGEPAGES"
  fi
}

files_down() {
  local f
  if [ -f "$CNI_CONFLIST" ] && grep -q "\"$NET_NAME\"" "$CNI_CONFLIST"; then rm -f "$CNI_CONFLIST"; fi
  if marked created-etc-cni; then rmdir "$(dirname "$CNI_CONFLIST")" /etc/cni 2>/dev/null || true; fi
  if [ -f "$MARKS/cni-bins" ]; then
    while read -r f; do rm -f "$f"; done <"$MARKS/cni-bins"
  fi
  if marked cni-bin-dir; then rmdir "$CNI_BIN" /opt/cni 2>/dev/null || true; fi
  rm -rf "$CNI_DATA" /var/lib/cni/results/"$NET_NAME"-*
  # containerd's own loopback network caches a result per sandbox; those not there before up.sh
  # are this cluster's.
  if marked cni-results-before; then
    for f in /var/lib/cni/results/cni-loopback-*; do
      [ -e "$f" ] || continue
      grep -qxF "${f##*/}" "$MARKS/cni-results-before" || rm -f "$f"
    done
  fi
  if marked created-var-lib-cni; then rm -rf /var/lib/cni; fi
  rm -f "$CNI_NODE_CONFIG"
  if marked created-etc-kube-fstack; then rmdir "$(dirname "$CNI_NODE_CONFIG")" 2>/dev/null || true; fi
  rm -rf "${SOCKET_ROOT:?}"/* "${DEVINFO_DIR:?}"
  if marked created-var-run-kube-fstack; then rm -rf /var/run/kube-fstack; fi
  rm -rf /var/lib/kubelet
  # containerd's root and state hold only this cluster's k8s.io namespace when up.sh made them.
  if marked created-run-containerd; then rm -rf /run/containerd; fi
  if marked created-lib-containerd; then rm -rf /var/lib/containerd; fi
  rm -rf "$RUN" "$KUBECONFIG_ADMIN"
}

main() {
  if [ ! -d "$RUN" ]; then log "nothing to tear down ($RUN does not exist)"; exit 0; fi
  drain_pods
  stop kube-proxy
  stop kubelet
  containers_down
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-apiserver
  stop etcd
  # One match per netns path of containerd's CRI: /run/netns/cni-<uuid>.
  unmount_under /var/lib/kubelet /run/containerd /var/lib/containerd
  for f in /run/netns/cni-*; do
    if [ -e "$f" ]; then umount "$f" 2>/dev/null || true; rm -f "$f"; fi
  done
  iptables_down
  links_down
  ovs_down
  cgroups_down
  hugepages_down
  files_down
  log "down: nothing of the cluster is left"
}

[ "${BASH_SOURCE[0]}" != "$0" ] || main "$@"

#!/usr/bin/env bash
# Brings up kube-fstack's multi-node kind cluster on this machine (docs/developer/multinode.md):
# kind itself with its podman provider, on a node image built here (hack/kind/node-image.sh), one
# control plane and NODES-1 workers (NODES=3 by default). Each worker runs its own OVS-DPDK with
# br-fstack; the workers' bridges are joined by a data network on the host (DATA_BRIDGE, with the
# router's address DATA_GATEWAY). Pods reach each other across nodes by routes to each node's
# podCIDR. Idempotent: a second run checks each piece and redoes only what is missing (after a
# node container restarts, it puts back the node's uplink and routes).
#   hack/kind/up.sh            cluster, networks and images
#   hack/kind/up.sh --install  that, and the chart (hack/kind/values.yaml) with fstack-cni chained
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kind/lib.sh
source "$HERE/lib.sh"
T0=$SECONDS
INSTALL=false
[ "${1:-}" = --install ] && INSTALL=true

preflight() {
  [ "$(id -u)" = 0 ] || die "run as root: kind's $KIND_PROVIDER provider runs privileged node containers"
  command -v "$KIND_PROVIDER" >/dev/null || die "$KIND_PROVIDER not found: run hack/install-deps.sh --cluster"
  local c missing=()
  for c in buildah containerd ctr ethtool /usr/lib/podman/netavark /usr/lib/podman/aardvark-dns; do command -v "$c" >/dev/null || missing+=("$c"); done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: run hack/install-deps.sh --cluster"
  [ "$NODES" -ge 2 ] || die "NODES=$NODES: a multi-node cluster has a control plane and at least one worker (NODES=3: two workers)"
}

# What the node containers need from the host, each recorded for down.sh when this script made it.
host() {
  if [ "$KIND_PROVIDER" = podman ] && [ ! -f "$CONTAINERS_DROPIN" ]; then
    mkdir -p "$(dirname "$CONTAINERS_DROPIN")"
    printf '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=1024:1024"]\n[network]\nnetwork_backend = "netavark"\n' >"$CONTAINERS_DROPIN"
    kmark containers-conf
  fi
  if [ "$KIND_PROVIDER" = podman ] && [ "$(podman info --format '{{.Host.NetworkBackend}}')" != netavark ]; then
    die "podman uses the $(podman info --format '{{.Host.NetworkBackend}}') network backend despite $CONTAINERS_DROPIN: kind's nodes need netavark with aardvark-dns (hack/install-deps.sh --cluster installs them; podman keeps its backend while containers of the old one exist: podman system reset)"
  fi
  # kind mounts /lib/modules into every node; this kernel has none.
  if [ ! -d /lib/modules ]; then mkdir -p /lib/modules; kmark lib-modules; fi
  # The kubelet and containerd in the nodes enforce hugepage limits through the v1 hugetlb controller.
  if ! mountpoint -q "$HUGETLB_CGROUP"; then
    mkdir -p "$HUGETLB_CGROUP"
    mount -t cgroup -o hugetlb cgroup "$HUGETLB_CGROUP" || die "cannot mount the hugetlb cgroup controller at $HUGETLB_CGROUP"
    kmark hugetlb-cgroup
  fi
  # Each kubelet reads its hugepages capacity once, at start: free pages before the nodes start.
  local need=$(( (NODES - 1) * HUGEPAGES_PER_WORKER )) free total
  free="$(awk '/HugePages_Free/{print $2}' /proc/meminfo)"
  if [ "$free" -lt "$need" ] && ! kind_exists; then
    total="$(cat "$NR_HUGEPAGES")"
    echo $((total + need - free)) >"$NR_HUGEPAGES"
    kmark hugepages-added "$(( $(cat "$NR_HUGEPAGES") - total + $(cat "$KIND_MARKS/hugepages-added" 2>/dev/null || echo 0) ))"
    free="$(awk '/HugePages_Free/{print $2}' /proc/meminfo)"
    [ "$free" -ge "$need" ] || die "only $free free 2 MiB hugepages after asking for $need; free memory first"
  fi
}

kind_binary() {
  [ -x "$KIND" ] && return 0
  log "kind: go install sigs.k8s.io/kind@$KIND_VERSION"
  local tmp; tmp="$(mktemp -d)"
  GOBIN="$tmp" go install "sigs.k8s.io/kind@$KIND_VERSION" && mkdir -p "$(dirname "$KIND")" && mv "$tmp/kind" "$KIND"
  rm -rf "$tmp"
}

cluster() {
  local image config
  image="$("$HERE/node-image.sh")"
  if kind_exists; then
    # A node container stopped (a lost node brought back): start it again.
    local n
    for n in $(kind_nodes); do
      [ "$(engine inspect -f '{{.State.Running}}' "$n")" = true ] || { log "kind: starting stopped node $n"; engine start "$n" >/dev/null; }
    done
  else
    config="$KIND_STATE/cluster.yaml"
    # hack/kind/multinode.yaml with NODES-1 workers.
    awk -v workers=$((NODES - 1)) '/^- role: worker$/ { if (done) next; done = 1; for (i = 0; i < workers; i++) print; next } { print }' \
      "$HERE/multinode.yaml" >"$config"
    log "kind: create cluster $KIND_CLUSTER ($NODES nodes, image $image, provider $KIND_PROVIDER)"
    kind_ create cluster --name "$KIND_CLUSTER" --config "$config" --image "$image" --kubeconfig "$KUBECONFIG_KIND" \
      || die "kind create cluster failed; a node's logs: $KIND_PROVIDER exec $KIND_CLUSTER-control-plane journalctl -u kubelet"
  fi
  kind_ get kubeconfig --name "$KIND_CLUSTER" >"$KUBECONFIG_KIND.tmp" && mv "$KUBECONFIG_KIND.tmp" "$KUBECONFIG_KIND"
}

# pod_network: each node's conflist (the bridge plugin on the node's podCIDR; the chart's
# installer chains fstack-cni into it) and, on every node and on the host, a route to every other
# node's podCIDR through that node's address.
pod_network() {
  local n cidr m
  declare -A cidrs addrs
  for n in $(kind_nodes); do
    wait_for "node $n to get a podCIDR" 120 sh -c "[ -n \"\$(kubectl --kubeconfig $KUBECONFIG_KIND get node $n -o 'jsonpath={.spec.podCIDR}')\" ]"
    cidrs[$n]="$(kk get node "$n" -o 'jsonpath={.spec.podCIDR}')"
    addrs[$n]="$(node_addr "$n")"
  done
  for n in $(kind_nodes); do
    cidr="${cidrs[$n]}"
    # The installer merges its fstack-cni entry into this file: write it only when missing.
    node_exec_in "$n" sh -c "[ -s /etc/cni/net.d/10-kube-fstack.conflist ] || { mkdir -p /etc/cni/net.d && cat >/etc/cni/net.d/10-kube-fstack.conflist; }" <<CONF
{
  "cniVersion": "1.0.0",
  "name": "kube-fstack-mn",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CONF
    for m in $(kind_nodes); do
      [ "$m" = "$n" ] && continue
      node_exec "$n" ip route replace "${cidrs[$m]}" via "${addrs[$m]}"
    done
    ip route replace "$cidr" via "${addrs[$n]}"
    echo "$cidr" >>"$KIND_STATE/host-routes"
  done
  sort -u -o "$KIND_STATE/host-routes" "$KIND_STATE/host-routes"
}

# data_network: the host's bridge with the router's address (tx checksum offload off: see
# hack/lib/kernel-sender.sh), one veth per worker, the node end named uplink in the worker, and
# the worker's OVS-DPDK (kube-fstack-ovs.service) with the uplink as a port of br-fstack.
data_network() {
  local w host_end pid
  if ! ip link show "$DATA_BRIDGE" >/dev/null 2>&1; then
    ip link add "$DATA_BRIDGE" type bridge
    ip addr add "$DATA_GATEWAY/${DATA_SUBNET#*/}" dev "$DATA_BRIDGE"
    ethtool -K "$DATA_BRIDGE" tx off >/dev/null
    ip link set "$DATA_BRIDGE" up
  fi
  for w in $(kind_workers); do
    host_end="$(uplink_name "$w")"
    pid="$(node_pid "$w")"
    if ! node_exec "$w" ip link show uplink >/dev/null 2>&1; then
      ip link del "$host_end" 2>/dev/null || true
      ip link add "$host_end" type veth peer name uplink netns "$pid"
      ethtool -K "$host_end" tx off >/dev/null
      ip link set "$host_end" master "$DATA_BRIDGE" up
      node_exec "$w" ethtool -K uplink tx off >/dev/null
      node_exec "$w" ip link set uplink up
    fi
    node_exec "$w" systemctl enable --now kube-fstack-ovs.service >/dev/null 2>&1 \
      || die "OVS-DPDK did not start on $w: $KIND_PROVIDER exec $w journalctl -u kube-fstack-ovs; $KIND_PROVIDER exec $w cat /var/log/openvswitch/ovs-vswitchd.log"
    node_exec "$w" ovs-vsctl --timeout=30 --may-exist add-port br-fstack uplink
  done
}

# images: the project's images in every node's containerd (nothing can be pulled), each archive
# imported again only when it changed.
images() {
  "$ROOT/hack/cluster/images.sh" build
  local n pair name tar sum
  for pair in "$CACHE/images/nginx.oci.tar:localhost/nginx" "$ROOT/.cache/images/operator.oci.tar:localhost/kube-fstack/operator" \
      "$ROOT/.cache/images/cni.oci.tar:localhost/kube-fstack/cni" \
      "$ROOT/.cache/images/dataplane-standin.oci.tar:localhost/kube-fstack/dataplane-standin" \
      ${EXTRA_IMAGES:-}; do
    tar="${pair%%:*}"; name="${pair#*:}"
    sum="$(stat -c '%s-%Y' "$tar")"
    for n in $(kind_nodes); do
      [ "$(node_exec "$n" cat "/var/lib/kube-fstack-node/imported-$(basename "$tar")" 2>/dev/null)" = "$sum" ] && continue
      # ctr reads an OCI archive only from a file it can seek in, not from a pipe.
      engine cp "$tar" "$n:/tmp/image.tar" || die "copying $tar into $n failed"
      node_exec "$n" ctr -n k8s.io images import --base-name "$name" /tmp/image.tar >/dev/null || die "importing $tar into $n failed"
      node_exec "$n" rm -f /tmp/image.tar
      node_exec "$n" sh -c "mkdir -p /var/lib/kube-fstack-node && echo $sum >/var/lib/kube-fstack-node/imported-$(basename "$tar")"
      log "image: $name in $n"
    done
  done
}

nodes_ready() {
  [ "$(kk get nodes -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -eq "$(kind_nodes | wc -l)" ]
}

install_chart() {
  local ns nss
  read -r -a nss <<<"$DATA_NAMESPACES"
  for ns in "${nss[@]}"; do
    kk get namespace "$ns" >/dev/null 2>&1 || kk create namespace "$ns" >/dev/null
    kk label namespace "$ns" kubefstack.io/injection=enabled pod-security.kubernetes.io/enforce=baseline --overwrite >/dev/null
  done
  # The release namespace runs the CNI installer and node agent (host paths): privileged, as
  # docs/install.md has users label it.
  local rns="${RELEASE_NAMESPACE:-kube-fstack-system}"
  kk get namespace "$rns" >/dev/null 2>&1 || kk create namespace "$rns" >/dev/null
  kk label namespace "$rns" pod-security.kubernetes.io/enforce=privileged --overwrite >/dev/null
  KUBECONFIG="$KUBECONFIG_KIND" "$ROOT/bin/helm-${HELM_VERSION:-v3.22.0}" upgrade --install "${RELEASE:-kube-fstack}" "$ROOT/charts/kube-fstack" \
    -n "$rns" -f "$HERE/multinode-values.yaml" --wait --timeout 5m "${INSTALL_ARGS[@]}" >/dev/null \
    || { kk -n "$rns" get pods -o wide >&2 || true; die "helm install of the chart failed"; }
  restart_on_new_images "$KIND_STATE/installed-images" kk
}

main() {
  preflight
  mkdir -p "$KIND_STATE"
  host
  kind_binary
  cluster
  pod_network
  data_network
  images
  wait_for "every node Ready" 180 nodes_ready
  if $INSTALL; then install_chart; fi
  log "kind cluster $KIND_CLUSTER up in $((SECONDS - T0))s: $(kind_nodes | tr '\n' ' ')"
  echo "export KUBECONFIG=$KUBECONFIG_KIND"
}

INSTALL_ARGS=("${@:2}")
main

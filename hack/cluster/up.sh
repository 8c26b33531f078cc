#!/usr/bin/env bash
# Brings up a single-node Kubernetes cluster on this machine (docs/local-cluster.md): etcd, the
# control plane, containerd, kubelet (static CPU manager), kube-proxy, the CNI reference plugins
# with fstack-cni chained after the default network, a private OVS-DPDK with a netdev bridge, and
# hugepages. Idempotent: a second run checks each piece and starts only what is
# missing. Every thing it creates outside .cache/cluster is recorded for hack/cluster/down.sh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/lib.sh"
# shellcheck source=hack/cluster/pki.sh
source "$HERE/pki.sh"

T0=$(date +%s)

preflight() {
  [ "$(id -u)" = 0 ] || die "run as root: the cluster mounts, creates cgroups and iptables rules"
  local c missing=()
  for c in containerd runc ctr iptables conntrack buildah openssl gcc ovsdb-server ovs-vsctl /usr/bin/etcd "$OVS_VSWITCHD"; do
    command -v "$c" >/dev/null || missing+=("$c")
  done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: run hack/install-deps.sh --cluster"
  NODE_IP="$(node_ip)"
  [ -n "$NODE_IP" ] || die "no global IPv4 address: the API server needs a non-loopback address to advertise"
  # Someone else's containerd would be reconfigured and then stopped by down.sh: refuse.
  if [ -S "$CONTAINERD_SOCK" ] && ! alive containerd; then
    die "$CONTAINERD_SOCK exists but is not this cluster's containerd; stop it first"
  fi
  local port name
  for pair in "$ETCD_CLIENT_PORT:etcd" "$ETCD_PEER_PORT:etcd" "$APISERVER_PORT:kube-apiserver" "10250:kubelet" \
      "10257:kube-controller-manager" "10259:kube-scheduler" "10256:kube-proxy"; do
    port="${pair%%:*}"; name="${pair#*:}"
    if ss -Hltn "sport = :$port" | grep -q . && ! alive "$name"; then
      die "port $port is taken by another process ($(ss -Hltnp "sport = :$port" | awk '{print $NF}' | head -1)); $name needs it"
    fi
  done
}

binaries() {
  "$ROOT/hack/k8s-binaries.sh" -v "$K8S_VERSION" kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
}

# CNI plugins: the reference ones from the module proxy (cached by version), fstack-cni from
# this tree. Installed by rename so a runtime never executes a half-written binary.
cni_plugins() {
  local cache="$CACHE/cni-plugins-$CNI_PLUGINS_VERSION" p
  if [ ! -x "$cache/portmap" ]; then
    log "cni: go install reference plugins $CNI_PLUGINS_VERSION"
    for p in main/bridge ipam/host-local main/loopback meta/portmap; do
      GOBIN="$cache" go install "github.com/containernetworking/plugins/plugins/$p@$CNI_PLUGINS_VERSION"
    done
  fi
  (cd "$ROOT" && go build -o "$CACHE/fstack-cni" ./cni/cmd/fstack-cni)
  if [ ! -d "$CNI_BIN" ]; then mkdir -p "$CNI_BIN"; mark cni-bin-dir; fi
  for p in bridge host-local loopback portmap; do install_bin "$cache/$p" "$CNI_BIN/$p"; done
  install_bin "$CACHE/fstack-cni" "$CNI_BIN/fstack-cni"
}

install_bin() {
  cmp -s "$1" "$2" && return 0
  [ -e "$2" ] || echo "$2" >>"$MARKS/cni-bins"
  cp "$1" "$2.tmp" && mv "$2.tmp" "$2"
}

# Hugepages: free pages for OVS and for pods before the kubelet starts, which reads its
# hugepages-2Mi capacity once. Only what this script adds is given back by down.sh.
hugepages() {
  local need=$((HUGEPAGES_OVS + HUGEPAGES_PODS)) free total
  if ! marked hugepages-added; then
    free="$(awk '/HugePages_Free/{print $2}' /proc/meminfo)"
    if [ "$free" -lt "$need" ]; then
      total="$(cat "$NR_HUGEPAGES")"
      echo $((total + need - free)) >"$NR_HUGEPAGES"
      mark hugepages-added $(( $(cat "$NR_HUGEPAGES") - total ))
      free="$(awk '/HugePages_Free/{print $2}' /proc/meminfo)"
      [ "$free" -ge "$need" ] || die "only $free free 2 MiB hugepages after asking for $need; free memory first"
    else
      mark hugepages-added 0
    fi
  fi
  mkdir -p "$HUGE_DIR"
  mountpoint -q "$HUGE_DIR" || mount -t hugetlbfs -o pagesize=2M nodev "$HUGE_DIR"
  # The kubelet and containerd enforce hugepage limits through the v1 hugetlb controller,
  # which this kernel leaves on the cgroup2 side until mounted.
  if ! mountpoint -q "$HUGETLB_CGROUP"; then
    mkdir -p "$HUGETLB_CGROUP"
    mount -t cgroup -o hugetlb cgroup "$HUGETLB_CGROUP" || die "cannot mount the hugetlb cgroup controller at $HUGETLB_CGROUP"
    mark hugetlb-cgroup
  fi
}

# A private OVS-DPDK as internal/test/nodetest starts one: its own run dir and database, ovs-vswitchd
# in its own network namespace, one netdev bridge. PMD threads go to CPU 0, the shared pool,
# so they never run on a CPU the static CPU manager hands to a pod exclusively.
ovs() {
  ovs_env
  mkdir -p "$OVS_DIR"
  [ -f "$OVS_DIR/conf.db" ] || ovsdb-tool create "$OVS_DIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  start ovsdb-server ovsdb-server "$OVS_DIR/conf.db" "--remote=punix:$OVS_DB_SOCK" \
    "--unixctl=$OVS_DIR/ovsdb-server.ctl" "--log-file=$OVS_DIR/ovsdb-server.log" "--pidfile=$OVS_DIR/ovsdb-server.pid"
  wait_for "ovsdb-server" 30 vsctl --no-wait show
  vsctl --no-wait init -- set Open_vSwitch . other_config:dpdk-init=true \
    other_config:dpdk-socket-mem=256 other_config:dpdk-socket-limit=512 other_config:pmd-cpu-mask=0x1 \
    other_config:pmd-maxsleep=10000 "other_config:dpdk-extra=--no-pci --file-prefix=fskcluster --huge-dir=$HUGE_DIR"
  ip netns list 2>/dev/null | grep -qw "$OVS_NETNS" || ip netns add "$OVS_NETNS"
  EXE="$OVS_VSWITCHD" start ovs-vswitchd ip netns exec "$OVS_NETNS" "$OVS_VSWITCHD" "unix:$OVS_DB_SOCK" \
    "--log-file=$OVS_DIR/ovs-vswitchd.log" "--pidfile=$OVS_DIR/ovs-vswitchd.pid"
  wait_for "DPDK init in ovs-vswitchd" 60 sh -c "[ \"\$(ovs-vsctl --db=unix:$OVS_DB_SOCK --no-wait get Open_vSwitch . dpdk_initialized)\" = true ]"
  vsctl --timeout=30 --may-exist add-br "$OVS_BRIDGE" -- set bridge "$OVS_BRIDGE" datapath_type=netdev
  node_sender
}

# The node on the bridge, as a kernel-stack sender made by hack/lib/kernel-sender.sh: with tx
# checksum offload off, or TCP from the node never reaches F-Stack (the script says why). The
# veth lives as long as OVS's namespace; the port is re-added if the bridge was re-made.
node_sender() {
  if ! ip link show "$NODE_SENDER" >/dev/null 2>&1; then
    "$ROOT/hack/lib/kernel-sender.sh" "$NODE_SENDER-o" "$OVS_NETNS" "$NODE_SENDER" - "$NODE_SENDER_ADDR" \
      || die "cannot make the node's sender $NODE_SENDER on $OVS_BRIDGE"
  fi
  vsctl --timeout=30 --may-exist add-port "$OVS_BRIDGE" "$NODE_SENDER-o"
}

etcd_up() {
  start etcd /usr/bin/etcd --name kube-fstack-cluster --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "kube-fstack-cluster=http://127.0.0.1:$ETCD_PEER_PORT"
  wait_for "etcd" 30 curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
}

control_plane() {
  # The node's hostname resolves to 127.0.0.1 here, where the kubelet does not listen: the API
  # server reaches kubelets (exec, logs) by InternalIP.
  start kube-apiserver "$K8S_BIN/kube-apiserver" --advertise-address="$NODE_IP" --bind-address="$NODE_IP" \
    --secure-port="$APISERVER_PORT" --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --service-cluster-ip-range="$SERVICE_CIDR" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" --profiling=false \
    --admission-control-config-file="$PKI/admission.yaml"
  wait_for "kube-apiserver /readyz" 90 kc get --raw /readyz
  start kube-controller-manager "$K8S_BIN/kube-controller-manager" --kubeconfig="$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --cluster-cidr="$CLUSTER_CIDR" --allocate-node-cidrs=true \
    --node-cidr-mask-size=24 --service-cluster-ip-range="$SERVICE_CIDR" --use-service-account-credentials=true \
    --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key"
  start kube-scheduler "$K8S_BIN/kube-scheduler" --kubeconfig="$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false
}

containerd_up() {
  local dir="$RUN/containerd"
  mkdir -p "$dir"
  for d in /run/containerd /var/lib/containerd; do
    [ -e "$d" ] || mark "created-$(basename "$(dirname "$d")")-containerd" "$d"
  done
  # containerd's CRI creates the CNI conf dir to watch it, and libcni caches results under
  # /var/lib/cni: whichever of them does not exist yet is this cluster's to remove.
  [ -e /etc/cni ] || mark created-etc-cni
  [ -e /var/lib/cni ] || mark created-var-lib-cni
  # The CNI results cached before this cluster (another runtime's): down.sh removes only the others.
  if ! marked cni-results-before; then
    mkdir -p "$MARKS" && { ls -A /var/lib/cni/results 2>/dev/null || true; } >"$MARKS/cni-results-before"
  fi
  write_if_changed "$dir/config.toml" <<EOF
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:3.10"
  # Without it every pod fails: the bounding set lacks CAP_SYS_RESOURCE (docs/local-cluster.md).
  restrict_oom_score_adj = true
  disable_hugetlb_controller = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$(dirname "$CNI_CONFLIST")"
    max_conf_num = 1
EOF
  start containerd containerd --config "$dir/config.toml"
  wait_for "containerd" 30 ctr -a "$CONTAINERD_SOCK" version
  "$HERE/images.sh" import
}

kubelet_up() {
  local dir="$RUN/kubelet" cpu_settings="static kubeReserved-cpu=100m"
  mkdir -p "$dir"
  [ -e /var/lib/kubelet ] || mark created-var-lib-kubelet
  mkdir -p /var/lib/kubelet
  # The CPU manager refuses to start on a state file written under other settings.
  if [ "$(cat /var/lib/kubelet/.kube-fstack-cpu-settings 2>/dev/null)" != "$cpu_settings" ]; then
    rm -f /var/lib/kubelet/cpu_manager_state
    echo "$cpu_settings" >/var/lib/kubelet/.kube-fstack-cpu-settings
  fi
  write_if_changed "$dir/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cpuManagerPolicy: static
kubeReserved: {cpu: 100m}
# Images cannot be pulled back here: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute eviction thresholds: the defaults are percentages of the disk (imagefs.available 15%),
# which on a large shared disk evicted the operator with tens of GiB still free.
evictionHard: {memory.available: 100Mi, nodefs.available: 2Gi, imagefs.available: 2Gi, nodefs.inodesFree: 5%}
clusterDomain: cluster.local
EOF
  start kubelet "$K8S_BIN/kubelet" --config="$dir/config.yaml" --kubeconfig="$PKI/kubelet.kubeconfig" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP"
}

node_cidr() { kc get node "$NODE_NAME" -o 'jsonpath={.spec.podCIDR}'; }

# The node's conflist, written once the controller-manager has given the node its pod CIDR.
# fstack-cni is chained after the default network (Multus cannot be obtained here), for every
# pod: skipUnprepared leaves pods without the emptyDir fstack-vhost (not F-Stack pods) alone.
cni_config() {
  local cidr
  wait_for "node $NODE_NAME to register with a pod CIDR" 90 sh -c "[ -n \"\$(kubectl --kubeconfig $KUBECONFIG_ADMIN get node $NODE_NAME -o 'jsonpath={.spec.podCIDR}')\" ]"
  cidr="$(node_cidr)"
  [ -e /var/run/kube-fstack ] || mark created-var-run-kube-fstack
  mkdir -p "$(dirname "$CNI_CONFLIST")" "$SOCKET_ROOT"
  [ -f "$MARKS/ip-forward" ] || mark ip-forward "$(sysctl -n net.ipv4.ip_forward)"
  # The node's paths are fstack-cni's node config's, root-owned (the plugin refuses any other),
  # never the conflist's.
  [ -e "$(dirname "$CNI_NODE_CONFIG")" ] || mark created-etc-kube-fstack
  mkdir -p "$(dirname "$CNI_NODE_CONFIG")"
  chmod 0755 "$(dirname "$CNI_NODE_CONFIG")"
  local ns nss
  read -r -a nss <<<"$FSTACK_NAMESPACES"
  ns="$(printf '"%s",' "${nss[@]}")"
  write_if_changed "$CNI_NODE_CONFIG" <<EOF
{"ovsdbSocket": "$OVS_DB_SOCK", "socketRoot": "$SOCKET_ROOT", "kubeletRootDir": "/var/lib/kubelet",
 "deviceInfoDir": "$DEVINFO_DIR", "logFile": "$LOGS/fstack-cni.log", "namespaces": [${ns%,}],
 "networks": [{"name": "$FSTACK_NETWORK", "subnets": ["$FSTACK_SUBNET"], "gateways": ["$FSTACK_GATEWAY"],
               "grants": [{"namespaces": [${ns%,}], "ranges": ["$FSTACK_SUBNET"]}]}],
 "defaultNetwork": "$FSTACK_NETWORK"}
EOF
  write_if_changed "$CNI_CONFLIST" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NET_NAME",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
               "dataDir": "$CNI_DATA/pods"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {
      "type": "fstack-cni", "bridge": "$OVS_BRIDGE", "skipUnprepared": true,
      "capabilities": {"io.kubernetes.cri.pod-annotations": true},
      "ipam": {"type": "host-local", "subnet": "$FSTACK_SUBNET", "gateway": "$FSTACK_GATEWAY",
               "rangeStart": "10.99.0.100", "dataDir": "$CNI_DATA/fstack"}
    }
  ]
}
EOF
}

kube_proxy_up() {
  write_if_changed "$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
clusterCIDR: $CLUSTER_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leaves net.ipv4.conf.all.route_localnet alone: nothing here uses NodePorts on 127.0.0.1.
iptables: {localhostNodePorts: false}
# No conntrack sysctl writes (docs/local-cluster.md).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  start kube-proxy "$K8S_BIN/kube-proxy" --config="$RUN/kube-proxy.yaml"
}

node_ready() {
  [ "$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

main() {
  preflight
  mkdir -p "$RUN" "$LOGS" "$PIDS" "$MARKS" "$CACHE"
  binaries
  make_pki
  hugepages
  ovs
  cni_plugins
  "$HERE/images.sh" build
  etcd_up
  control_plane
  containerd_up
  kubelet_up
  cni_config
  kube_proxy_up
  wait_for "node $NODE_NAME Ready" 120 node_ready
  log "up in $(( $(date +%s) - T0 ))s: node $NODE_NAME Ready"
  echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
}

[ "${BASH_SOURCE[0]}" != "$0" ] || main "$@"

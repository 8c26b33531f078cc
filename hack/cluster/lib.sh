# Shared by hack/cluster/*.sh (sourced, not run). Every path and port of the local cluster is
# here, so up.sh, down.sh, status.sh and smoke.sh cannot disagree about what exists.
# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.35.4}"
K8S_BIN="$ROOT/.cache/k8s/$K8S_VERSION"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.9.1}"

# .cache/cluster/cache survives down.sh (built binaries, images, rootfs); everything else
# under .cache/cluster is the running cluster's state and goes with down.sh.
CLUSTER="$ROOT/.cache/cluster"
CACHE="$CLUSTER/cache"
RUN="$CLUSTER/run"
PKI="$RUN/pki"
LOGS="$RUN/logs"
PIDS="$RUN/pids"
MARKS="$RUN/created"   # one file per thing up.sh created that down.sh must undo
KUBECONFIG_ADMIN="$CLUSTER/admin.kubeconfig"

# Fixed ports, chosen clear of envtest's random loopback ports and of each other.
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23800
APISERVER_PORT=6443

SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
CLUSTER_CIDR=10.244.0.0/16
NET_NAME=kube-fstack-cluster
CNI_CONFLIST=/etc/cni/net.d/10-kube-fstack.conflist
CNI_BIN=/opt/cni/bin
CNI_DATA=/var/lib/cni/$NET_NAME
FSTACK_SUBNET=10.99.0.0/24
SOCKET_ROOT=/var/run/kube-fstack/vhost
# fstack-cni's node config (cni/internal/nodeconf), which up.sh writes (the chart's installer
# leaves it alone here: values.yaml), and the namespaces whose pods fstack-cni serves: the smoke
# test's, the e2e suite's and SR-IOV test's, the benchmark's and hack/run.sh's demo.
CNI_NODE_CONFIG=/etc/kube-fstack/cni.json
FSTACK_NAMESPACES="default e2e-fstack e2e-sriov e2e-replicas bench-fstack fstack-demo"
# The local data network (a DataNetwork; values.yaml's dataNetwork is the same, which
# test/chart checks), in the node config as its one network and default: FSTACK_SUBNET, the
# node's address on br-fstack as its router, the subnet granted to FSTACK_NAMESPACES. Untagged
# and with derived MACs: no stack of the e2e suite, the smoke test, the benchmark or the demo
# sets a VLAN, a VIP or a MAC.
FSTACK_NETWORK=fstack-data
FSTACK_GATEWAY=10.99.0.1
DEVINFO_DIR=/var/run/kube-fstack/devinfo

OVS_DIR="$RUN/ovs"
OVS_NETNS=fsk-cluster-ovs
OVS_BRIDGE=br-fstack
OVS_DB_SOCK="$OVS_DIR/db.sock"
# The node's own address on br-fstack (the fstack network's gateway): a veth whose other end
# ($NODE_SENDER-o) is a port of the bridge, so ping and curl from the node reach a pod's F-Stack.
NODE_SENDER=fsk-node
NODE_SENDER_ADDR=10.99.0.1/24
OVS_VSWITCHD=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
HUGE_DIR="$RUN/hugepages"
NR_HUGEPAGES=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
# OVS takes about 450 MiB; pods get 1 GiB on top. The kubelet reads capacity at start.
HUGEPAGES_OVS=260
HUGEPAGES_PODS=512

CONTAINERD_SOCK=/run/containerd/containerd.sock
HUGETLB_CGROUP=/sys/fs/cgroup/hugetlb

NODE_NAME="$(hostname | tr '[:upper:]' '[:lower:]')"

export PATH="$K8S_BIN:/usr/local/go/bin:/usr/sbin:/sbin:$PATH"

log() { printf '%s cluster: %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'cluster: ERROR: %s\n' "$*" >&2; exit 1; }

# node_ip is the first global IPv4 address: the API server must advertise a non-loopback
# address or the `kubernetes` Service gets no endpoints.
node_ip() {
  ip -4 -o addr show scope global | awk '{sub(/\/.*/, "", $4); print $4; exit}'
}

mark() { mkdir -p "$MARKS"; printf '%s\n' "${2:-}" >"$MARKS/$1"; }
marked() { [ -f "$MARKS/$1" ]; }

pid_of() { cat "$PIDS/$1.pid" 2>/dev/null || true; }

# alive NAME: the recorded PID runs the recorded binary. The binary check keeps a recycled
# PID from making a dead component look alive (or, in down.sh, from killing a stranger).
alive() {
  local pid exe
  pid="$(pid_of "$1")"
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  [ "${exe% (deleted)}" = "$(cat "$PIDS/$1.exe" 2>/dev/null)" ]
}

# start NAME CMD...: a daemon in its own session (PID 1 is not systemd), output to its log.
# EXE=path overrides the binary to expect when CMD execs another (ip netns exec).
start() {
  local name="$1"; shift
  if alive "$name"; then
    log "$name: running (pid $(pid_of "$name"))"
    return 0
  fi
  mkdir -p "$LOGS" "$PIDS"
  setsid nohup "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$name.pid"
  readlink -f "${EXE:-$(command -v "$1")}" >"$PIDS/$name.exe"
  log "$name: started (pid $!, log $LOGS/$name.log)"
}

# running PID: not gone and not a zombie (PID 1 here may be slow to reap the daemons it inherits).
running() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
  [ -n "$state" ] && [ "$state" != Z ]
}

# write_if_changed FILE: stdin to FILE only when it differs. kube-proxy exits when its config
# file is rewritten, even with the same content, so a second up.sh must not touch it.
write_if_changed() {
  local tmp="$1.tmp.$$"
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

# stop NAME: TERM, then KILL after 15 s; only the process up.sh recorded.
stop() {
  local name="$1" pid i
  if alive "$name"; then
    pid="$(pid_of "$name")"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 150); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      log "$name: still running after 15 s, killing"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "$name: stopped"
  fi
  rm -f "$PIDS/$name.pid" "$PIDS/$name.exe"
}

# wait_for WHAT SECONDS CMD...: poll CMD; on timeout say where to look.
wait_for() {
  local what="$1" secs="$2"; shift 2
  for _ in $(seq $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "timed out after ${secs}s waiting for $what (logs: $LOGS)"
}

kc() { kubectl --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# restart_on_new_images STATE KUBECTL...: helm sees no change in the manifests when an image is
# rebuilt under the same tag, so the release's operator and CNI installer are restarted when the
# image archives changed since the install STATE records (not on the first install).
restart_on_new_images() {
  local state="$1" now r ns="${RELEASE_NAMESPACE:-kube-fstack-system}" sel="app.kubernetes.io/instance=${RELEASE:-kube-fstack}"
  shift
  now="$(stat -c %Y "$ROOT/.cache/images/operator.oci.tar" "$ROOT/.cache/images/cni.oci.tar" | xargs)"
  [ "$(cat "$state" 2>/dev/null)" != "$now" ] || return 0
  if [ -f "$state" ]; then
    log "images changed: restarting the operator and the CNI installer"
    "$@" -n "$ns" rollout restart deployment,daemonset -l "$sel" >/dev/null
    for r in $("$@" -n "$ns" get deployment,daemonset -l "$sel" -o name); do
      "$@" -n "$ns" rollout status "$r" --timeout=180s >/dev/null
    done
  fi
  echo "$now" >"$state"
}

# show CMD...: print the command as a user would type it, run it, indent its output; fail the run
# when it fails (each one is a claim make run makes: hack/run.sh, hack/kind/run.sh).
show() {
  printf '\n  $ %s\n' "$*"
  local out
  out="$(eval "$*" 2>&1)" || { printf '%s\n' "$out" | sed 's/^/    /'; die "that command failed: the data path this run claims does not work"; }
  printf '%s\n' "$out" | sed 's/^/    /'
}

# RUNTIME_DIRECTORY keeps ovs-vswitchd's DPDK runtime dir (telemetry and multi-process sockets)
# in OVS_DIR too; by default it is /var/run/dpdk/<prefix>, which DPDK never removes.
ovs_env() {
  export OVS_RUNDIR="$OVS_DIR" OVS_DBDIR="$OVS_DIR" OVS_LOGDIR="$OVS_DIR" OVS_SYSCONFDIR="$OVS_DIR" RUNTIME_DIRECTORY="$OVS_DIR"
}
vsctl() { ovs-vsctl --db="unix:$OVS_DB_SOCK" "$@"; }

# The daemons in start order; down.sh stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

# e2e_env: what the Go e2e suite and the cluster benchmark read to find this cluster (e2e/framework).
e2e_env() {
  export E2E_KUBECONFIG="$KUBECONFIG_ADMIN" E2E_KUBECTL="$K8S_BIN/kubectl" E2E_OVSDB_SOCK="$OVS_DB_SOCK" \
    E2E_OVS_NETNS="$OVS_NETNS" E2E_OVS_BRIDGE="$OVS_BRIDGE" E2E_SOCKET_ROOT="$SOCKET_ROOT" E2E_LOG_DIR="$LOGS" \
    E2E_OPERATOR_NAMESPACE="${RELEASE_NAMESPACE:-kube-fstack-system}" E2E_RELEASE="${RELEASE:-kube-fstack}" \
    E2E_DATAPLANE_IMAGE=localhost/kube-fstack/dataplane-standin:dev E2E_NODE="$NODE_NAME" \
    E2E_OVS_RESTART="$ROOT/hack/cluster/ovs-restart.sh" E2E_IPAM_DIR="$CNI_DATA/fstack/$NET_NAME" \
    E2E_OPERATOR_ARCHIVE="$ROOT/.cache/images/operator.oci.tar" E2E_CNI_ARCHIVE="$ROOT/.cache/images/cni.oci.tar"
}
